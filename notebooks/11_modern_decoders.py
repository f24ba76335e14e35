# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#       jupytext_version: 1.19.6
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 11 — From GPT-2 to today's decoders: rotary positions, RMSNorm, SwiGLU and grouped queries
#
# [![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.research.google.com/github/transformer-course/transformer-course/blob/v0.1.0/release/11_modern_decoders.ipynb)
#
# **Run time:** full profile about 36 min on a 2-core CPU, smoke profile about 35 s (recorded runs). The profile comes from the environment variable `COURSE_PROFILE` (`full` or `smoke`): set it before starting Jupyter, or in Colab run `%env COURSE_PROFILE=smoke` before the first code cell. On Colab, a GPU runtime (Runtime, Change runtime type) trains on the GPU; the recorded times are CPU times. The outputs shown come from the recorded full-profile run; running a cell replaces its output with yours. In the smoke profile, run the exercises and their checks, and the cells whose output does not depend on the profile (shapes, worked examples, equalities with Keras): the accuracies, losses, curves, timings and samples it prints come from tiny data and a few steps and mean nothing; read the recorded ones.
#
# **What you will learn**
# - **rotary position embedding** (RoPE): positions as rotations of the queries and keys, so a
#   score sees the offset between two tokens and never their absolute positions;
# - **RMSNorm** and the **SwiGLU** feed-forward network: what each drops or adds against
#   LayerNorm and GPT-2's GELU network, parameter by parameter;
# - **grouped-query attention**: N query heads sharing G key/value heads, what it saves in the
#   key/value cache of notebook 09, and what that saves in a decoding step's time, measured; the
#   sliding window and DeepSeek's latent cache beside it;
# - **FlashAttention's idea**: attention over tiles of keys with an online softmax, equal to the
#   whole softmax, in memory that grows with the text's length instead of its square (exercise 11.4);
# - **one change at a time**: rotary against learned positions inside the Llama-style block, at
#   equal updates, three seeds, each arm its own learning rate, with a 95% interval, beside the
#   floors a table of token counts sets;
# - **longer than trained**: rotary positions, no positions at all (NoPE) and Position
#   Interpolation, on texts twice as long as the models trained on, with intervals over seeds and
#   over the test text.
#
# Notebook 12 takes the rotary model further: a classifier from it (its head alone, LoRA and full
# fine-tuning), the model in int8, and its training on several devices.
#
# **Prerequisites:** notebook 09 (the language model, its data and bits per character).
#
# Every layer here is the course's own, in `transformer_course`, and each is checked against the
# library's: `keras_hub.layers.RotaryEmbedding`, `keras.layers.RMSNormalization`,
# `keras.layers.GroupQueryAttention` and keras-hub's `LlamaTransformerDecoder` (the test suite).
# Four graded exercises put each new idea in your hands: the rotation, RMSNorm, grouped queries
# and tiled attention.
#
# Data: the IMDB Large Movie Review Dataset — Maas et al., 2011, *Learning Word Vectors for
# Sentiment Analysis*, ACL-HLT, pp. 142–150 (no explicit license; cite the paper): 09's running
# text (training and unlabelled reviews, labels unused).

# %%
import subprocess
import sys

if "google.colab" in sys.modules:  # Colab only: install the course package, keep Colab's TensorFlow/Keras
    subprocess.run([sys.executable, "-m", "pip", "install", "-q",
                    "transformer-course @ git+https://github.com/transformer-course/transformer-course@v0.1.0"],
                   check=True)

import transformer_course as tc

settings = tc.start_notebook("11", seed=42)
stages = tc.RunStages("11", settings)  # section 6's models are kept as they train: a stopped run resumes them

# %%
import keras
import matplotlib.pyplot as plt
import numpy as np
import tensorflow as tf  # section 3's decoding step, compiled (XLA)

from transformer_course import epoch_progress, report_metric
from transformer_course.attention import GroupedQueryAttention
from transformer_course.bpe import BytePairEncoding
from transformer_course.datasets import distinct_texts, load_imdb, load_imdb_unlabelled
from transformer_course.language_model import build_language_model
from transformer_course.metrics import (
    MaskedCrossEntropy,
    bits_per_character,
    bootstrap_interval,
    mean_interval,
    token_log_probabilities,
)
from transformer_course.ngram import BigramModel
from transformer_course.positional import sinusoidal_encoding
from transformer_course.rotary import rotary_embedding
from transformer_course.training import (
    RowBatches,
    WarmupCosineDecay,
    best_on_validation,
    encode_running_text,
    fit_best,
    interleaved_timings,
)
from transformer_course.transformer import LlamaDecoder, RMSNorm, SwiGLUFeedForward

# %% [markdown]
# ## 1. Rotary position embedding
#
# Notebook 04 added a learned vector per position to each token's embedding (GPT-2 does the
# same), and set beside it a learned bias per offset between a query and a key. **Rotary
# position embedding** (Su et al., 2021, *RoFormer*, §3.4) adds nothing to the embeddings.
# Inside attention, it reads each head's H features as H/2 pairs and turns pair $i$ of a vector
# at position $p$ by the angle $p\,\theta_i$, with $\theta_i = 10000^{-2i/H}$: fast turns for the
# first pairs, slow ones for the last. A rotation keeps lengths and turns dot products by the
# *difference* of the two angles, so for a query at position $m$ and a key at position $n$
#
# $$\langle R_m q,\; R_n k \rangle = \langle q,\; R_{n-m} k \rangle :$$
#
# the score depends on the offset $n - m$ and not on where the pair sits. The course's
# `rotary_embedding(x, start_index)` takes queries or keys split into heads, `(B, T, N, H)`, and
# pairs feature $i$ with feature $i + H/2$ (the "rotate half" layout of Hugging Face's Llama and of
# keras-hub). RoFormer and Meta's own Llama code pair neighbours, $2i$ and $2i + 1$, instead: the
# two layouts differ by one fixed permutation of each head's query and key features, which
# changes no score when queries and keys are permuted alike, so a checkpoint moves from one to
# the other by permuting its query and key projection rows. First the property, on random
# vectors: the same query and key, moved together along the text.

# %%
rng = np.random.default_rng(0)
query, key = rng.normal(size=(1, 1, 1, 64)).astype("float32"), rng.normal(size=(1, 1, 1, 64)).astype("float32")


def rotated_score(query_position, key_position):
    """The dot product of the query at one position and the key at another, both rotated."""
    rotated_query = keras.ops.convert_to_numpy(rotary_embedding(query, query_position))
    rotated_key = keras.ops.convert_to_numpy(rotary_embedding(key, key_position))
    return float(np.sum(rotated_query * rotated_key))


for query_position, key_position in ((5, 2), (105, 102), (1005, 1002), (5, 3), (5, 5)):
    print(f"query at {query_position:>4}, key at {key_position:>4} (offset {query_position - key_position}): "
          f"score {rotated_score(query_position, key_position):8.4f}")

# %% [markdown]
# The first three pairs sit 3 apart and score the same, whether at the start of the text or a
# thousand tokens in; another offset gives another score. The same function is keras-hub's
# `RotaryEmbedding` (its default layout, sequence on axis 1):

# %%
import keras_hub  # the reference implementation

heads = rng.normal(size=(2, 12, 4, 16)).astype("float32")  # (B, T, N, H)
reference = keras_hub.layers.RotaryEmbedding(max_wavelength=10_000, sequence_axis=1, feature_axis=-1)
for start in (0, 7):
    ours, theirs = (keras.ops.convert_to_numpy(value) for value in (rotary_embedding(heads, start),
                                                                     reference(heads, start_index=start)))
    print(f"start_index {start}: largest difference from keras-hub {np.abs(ours - theirs).max():.1e}")

# %% [markdown]
# Drawn: on the left, pair 0 (the fastest, one radian a position) and pair 15 (of 32; about 0.013
# radian a position) of one vector, at positions 0 to 40: each pair turns on its own circle (its
# radius is the pair's length in that vector), at its own speed: pair 0 jumps nearly a sixth of a
# turn each position, pair 15 covers a twelfth of a turn in all forty. On the right, the score of a query and a key that are the same vector, against
# the offset between them: it oscillates and, on average, decays as the offset grows (Su et al.,
# §3.4.3, bound this decay), so by default a rotary model leans toward nearby tokens.

# %%
vector = rng.normal(size=(1, 1, 1, 64)).astype("float32")
turned = np.stack([keras.ops.convert_to_numpy(rotary_embedding(vector, position))[0, 0, 0] for position in range(41)])
offsets = np.unique(np.round(np.geomspace(1, 2000, 200)).astype(int))
ones = np.ones((1, 1, 1, 64), "float32")


def relative_scores(query_vector):
    """The score of `query_vector` against itself rotated by each offset, over the score at offset 0."""
    rotated = [keras.ops.convert_to_numpy(rotary_embedding(query_vector, int(offset))) for offset in offsets]
    return np.array([np.sum(value * query_vector) for value in rotated]) / np.sum(query_vector * query_vector)

# %%
figure, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
for pair, color in ((0, "C3"), (15, "C0")):
    left.plot(turned[:, pair], turned[:, pair + 32], "o-", color=color, markersize=3,
              label=f"pair {pair}: features {pair} and {pair + 32}")
    left.annotate("position 0", (turned[0, pair], turned[0, pair + 32]), fontsize="small")
left.set(aspect="equal", xlabel="first feature of the pair", ylabel="second feature of the pair",
         title="one vector at positions 0 to 40")
left.legend(fontsize="small")
for query_vector, name in ((ones, "q = k = all ones"), (vector, "q = k = one random vector")):
    right.plot(offsets, relative_scores(query_vector), label=name)
right.set(xscale="log", xlabel="offset between query and key (positions)",
          ylabel="score / score at offset 0", title="the score against the offset")
right.legend(fontsize="small")
plt.show()

# %% [markdown]
# **Only queries and keys are rotated, never the values.** The scores, which decide how much of
# each value a position takes, see the offset; the values themselves, which are added up into the
# output, carry no position. Rotating them too would write each token's absolute position into
# the output, which is what rotary positions exist to avoid.
#
# **The same rotation is in notebook 04's sinusoidal table.** Its columns 2i and 2i + 1 hold
# sin(tω_i) and cos(tω_i), one point of a circle per frequency ω_i; moving k positions on turns
# every such pair by the angle kω_i, whatever t is. So PE(t + k) is PE(t) multiplied by one fixed
# rotation matrix per offset k (the answer to the lecture notes' question of how sines and
# cosines can represent order). Checked on the course's own table:

# %%
table = sinusoidal_encoding(300, 64).astype("float64")
frequencies = 1.0 / 10000 ** (np.arange(0, 64, 2) / 64)
for k in (1, 7, 50):
    sines, cosines = table[:-k, 0::2], table[:-k, 1::2]  # every position t that has a t + k in the table
    turned_sines = sines * np.cos(k * frequencies) + cosines * np.sin(k * frequencies)  # sin(a + b)
    turned_cosines = cosines * np.cos(k * frequencies) - sines * np.sin(k * frequencies)  # cos(a + b)
    largest = max(np.abs(turned_sines - table[k:, 0::2]).max(), np.abs(turned_cosines - table[k:, 1::2]).max())
    print(f"offset k = {k:>2}: PE(t + k) against PE(t) turned by k·ω_i, largest difference over every t: "
          f"{largest:.1e} (the table is float32)")

# %% [markdown]
# Two consequences. No position table: the model has no `sequence_length` rows to outgrow (how
# well it *generalises* to longer texts than it saw is another matter: section 6 measures it).
# And the cache of notebook 09 stores keys already rotated: a new token's key is rotated once, at
# its own position (`start_index`), and never again. Exercise 11.1 asks you to write the rotation.
#
# ## 2. RMSNorm and SwiGLU
#
# **RMSNorm** (Zhang and Sennrich, 2019) is LayerNorm without centring: each vector is divided
# by its root mean square, $\sqrt{\tfrac{1}{E}\sum_j x_j^2 + \epsilon}$, then multiplied by a
# learned scale. No mean is subtracted and no bias added: one vector of E parameters instead of
# two, and one pass over the features fewer. The course's `RMSNorm` against Keras' own, where the
# installed Keras has it (`keras.layers.RMSNormalization` came in a later Keras 3 release):

# %%
x = rng.normal(loc=2.0, size=(2, 5, 16)).astype("float32")  # a mean far from 0, so centring would matter
ours = RMSNorm(epsilon=1e-6)
normalised = keras.ops.convert_to_numpy(ours(x))
print(f"root mean square after RMSNorm: {np.sqrt((normalised ** 2).mean(-1)).round(4)[0]}; "
      f"mean: {normalised.mean(-1).round(2)[0]} (not removed)")
if hasattr(keras.layers, "RMSNormalization"):
    theirs = keras.layers.RMSNormalization(epsilon=1e-6)
    theirs.build(x.shape)
    theirs.set_weights([rng.normal(size=(16,)).astype("float32")])
    ours.set_weights(theirs.get_weights())
    difference = np.abs(keras.ops.convert_to_numpy(ours(x)) - keras.ops.convert_to_numpy(theirs(x))).max()
    print(f"largest difference from keras.layers.RMSNormalization: {difference:.1e}")
else:
    print(f"Keras {keras.__version__} has no RMSNormalization: the comparison is skipped")

# %% [markdown]
# **SwiGLU** (Shazeer, 2020, *GLU Variants Improve Transformer*, equation 6) replaces GPT-2's
# feed-forward network $W_2\,\mathrm{GELU}(x W_1)$ with a gated one: a second projection of the
# same input decides, unit by unit, how much of the first passes,
#
# $$\mathrm{SwiGLU}(x) = W_\text{down}\big(\mathrm{SiLU}(x W_\text{gate}) \odot x W_\text{up}\big),\qquad \mathrm{SiLU}(z) = z\,\sigma(z).$$
#
# Three matrices instead of two, so at the same parameters the hidden width F is 2/3 of the GELU
# network's (Shazeer keeps the count so; Llama does the same, §2.2). Our two blocks, counted:

# %%
def count(layer, shape=(1, 4, 256)):
    """Parameters of a layer once built on an input of `shape`."""
    layer.build(shape)
    return layer.count_params()


for name, parameters in (
        ("LayerNorm: scale and bias", count(keras.layers.LayerNormalization())),
        ("RMSNorm: scale", count(RMSNorm())),
        ("GELU network, F = 1,024 (GPT-2's), with biases",
         count(keras.layers.Dense(1024)) + count(keras.layers.Dense(256), (1, 4, 1024))),
        ("SwiGLU, F = 688 (2/3 of 1,024, rounded up to 8), no biases", count(SwiGLUFeedForward(688)))):
    print(f"{name:<58} {parameters:>9,}")

# %% [markdown]
# The gate costs a third matrix; the 2/3 rule gives it back: 528,384 parameters against the GELU
# network's 525,568, within 0.6%. Exercise 11.2 asks you to write RMSNorm.
#
# **What these two buy is not measured here.** The sources report it: Zhang and Sennrich (2019)
# find RMSNorm as good as LayerNorm on their tasks and faster per step; Shazeer (2020, Table 1)
# finds the gated networks, SwiGLU among them, reach a lower perplexity than the ReLU and GELU ones
# at the same parameters and compute. This notebook spends its training budget on one change,
# positions (sections 5 and 6): measuring either of these as section 5 measures positions — an arm
# of its own, three paired seeds, a rate each — would cost as much again. What this notebook does
# establish about them is what the cells above print: the parameters each costs.
#
# ## 3. Grouped-query attention
#
# In multi-head attention each of the N heads has its own query, key and value projections. In
# **grouped-query attention** (Ainslie et al., 2023, *GQA*, §2.2) the N query heads are split into
# G groups, and the heads of a group share one key head and one value head: G = N is multi-head
# attention, G = 1 is **multi-query attention** (Shazeer, 2019). The scores are computed exactly
# as before, once each shared key/value head is repeated for the query heads of its group. The
# course's `GroupedQueryAttention` against Keras' `GroupQueryAttention`, with the same weights:

# %%
sequence = rng.normal(size=(2, 10, 256)).astype("float32")
theirs = keras.layers.GroupQueryAttention(head_dim=64, num_query_heads=4, num_key_value_heads=2)
ours = GroupedQueryAttention(head_dim=64, num_query_heads=4, num_key_value_heads=2)
theirs(sequence, sequence)
ours(sequence, sequence)
ours.set_weights(theirs.get_weights())
difference = np.abs(keras.ops.convert_to_numpy(ours(sequence, sequence, use_causal_mask=True))
                    - keras.ops.convert_to_numpy(theirs(sequence, sequence, use_causal_mask=True))).max()
print(f"largest difference from keras.layers.GroupQueryAttention (causal): {difference:.1e}")
print("weights:", {weight.path.split("/", 1)[1]: tuple(weight.shape) for weight in ours.weights})

# %% [markdown]
# What it is for is the **key/value cache** of notebook 09: generating a token reads every
# cached key and value, so the cache's size sets how many sequences fit in memory and how fast
# each step reads. Per token and per layer the cache holds 2 × G × H numbers, not 2 × N × H. Our
# own caches, for a Llama-style block of width 256 (4 query heads of width 64), 1,024 tokens:

# %%
for groups, name in ((4, "multi-head (G = N = 4)"), (2, "grouped (G = 2)"), (1, "multi-query (G = 1)")):
    block = LlamaDecoder(intermediate_dim=688, num_query_heads=4, num_key_value_heads=groups)
    block.build((1, 1024, 256))
    cache = block.initial_caches(1, 1024)  # (B, 2, L, G, H): keys and values of every position
    cache_bytes = int(np.prod(cache.shape)) * 4  # float32
    print(f"{name:<24} cache {tuple(cache.shape)}: {cache_bytes / 1024:6.0f} KiB, {cache_bytes // 1024:>4} bytes a "
          f"token; attention parameters {block.attention.count_params():,}")

# %% [markdown]
# Half the key/value heads, half the cache, and fewer parameters in the key and value
# projections. **Does the smaller cache make a token faster?** Generating a token reads every
# cached key and value once; everything else a decoding step does costs the same whatever G. So
# where that read is most of a step — long caches — a step should take less time with fewer
# key/value heads, and where the projections dominate it should not. Measured: one attention
# layer of this width at batch 1 writes a new token's key and value at the last position of a
# cache of L positions and attends over all of them, compiled (XLA), for G = 4, 2 and 1. The arms
# take turns (`interleaved_timings`: a busy moment of the machine slows all alike), each timing
# `decoding_tokens` steps; each ratio is the mean of the per-round ratios to multi-head attention's,
# with a 95% bootstrap interval over the rounds (`bootstrap_interval`).

# %%
def decoding_step(key_value_heads, length):
    """`decoding_tokens` compiled decoding steps of a fresh layer, the cache full up to its last position."""
    keras.utils.set_random_seed(0)
    heads, width = settings.model["num_heads"], settings.model["embed_dim"] // settings.model["num_heads"]
    layer = GroupedQueryAttention(width, heads, key_value_heads, use_bias=False)
    token = keras.random.normal((1, 1, heads * width))
    cache = keras.random.normal((1, 2, length, key_value_heads, width))
    layer(token, token)  # builds the weights
    step = tf.function(lambda cache: layer(token, token, use_causal_mask=True, cache=cache,
                                           cache_update_index=length - 1)[0], jit_compile=True)
    return lambda _: [step(cache).numpy() for _ in range(settings.decoding_tokens)]

# %%
heads = settings.model["num_heads"]
groups = sorted({heads, settings.num_key_value_heads, 1}, reverse=True)
timings = interleaved_timings({(length, groups_): decoding_step(groups_, length) for length in settings.decoding_lengths
                               for groups_ in groups}, settings.decoding_rounds)
print(f"{'cache L':>8} {'G':>3} {'cache KiB':>10} {'ms a token':>11}   time / multi-head's, 95% interval over rounds")
for length in settings.decoding_lengths:
    for groups_ in groups:
        ratios = np.array(timings[length, groups_]) / np.array(timings[length, heads])  # paired by round
        _, low, high = bootstrap_interval(ratios) if groups_ != heads else (None, 1.0, 1.0)
        kib = 2 * length * groups_ * settings.model["embed_dim"] // heads * 4 / 1024
        milliseconds = 1000 * np.median(timings[length, groups_]) / settings.decoding_tokens
        print(f"{length:>8,} {groups_:>3} {kib:>10,.0f} {milliseconds:>11.3f}"
              + ("" if groups_ == heads else f"   {ratios.mean():.2f} [{low:.2f}, {high:.2f}]"))

# %% [markdown]
# **Reading the timing** (the recorded run, 30 interleaved rounds of 20 steps). Fewer key/value
# heads make a step faster, and more so the longer the cache. At 1,024 positions a step with G = 2
# takes 0.77 of multi-head attention's time (95% interval [0.75, 0.79]) and with G = 1 0.66: the
# projections and the step's fixed costs still weigh, so halving the cache does not halve the time.
# At 2,048 positions: 0.60 and 0.50. At 4,096: **0.46 [0.45, 0.48] and 0.29 [0.27, 0.30]**, where
# multi-head attention's step has grown from 0.957 to 2.724 milliseconds: reading the cache is
# now most of a step, and the time follows the cache's size — a little below it, even (0.46 for
# half the cache, 0.29 for a quarter). Why below is not measured; our hypothesis: the multi-head
# cache (8,192 KiB) no longer fits the processor's faster caches, where the smaller ones still
# partly do. On a GPU the same read is what bounds decoding, which is why it is the cache that
# grouped queries were made to shrink. `benchmarks/grouped_query_decoding.py` measures the same
# step with more rounds, and beside it the attention computed by group, without repeating the keys.

# %% [markdown]
# At the scale of published models, per token (16-bit numbers, 2 bytes each;
# 2 × layers × G × H × 2 bytes), and two designs that go further:
#
# | model | layers | query heads N | key/value heads G | head width H | cache a token |
# |---|---|---|---|---|---|
# | GPT-2 124M (Radford et al., 2019, Table 2), multi-head | 12 | 12 | 12 | 64 | 36 KiB |
# | Llama 2 70B (Touvron et al., 2023b, §2.2 and Table 1), grouped | 80 | 64 | 8 | 128 | 320 KiB |
# | the same 70B with multi-head attention | 80 | 64 | 64 | 128 | 2,560 KiB |
# | Mistral 7B (Jiang et al., 2023, Table 1), grouped, **sliding window** of 4,096 | 32 | 32 | 8 | 128 | 128 KiB, at most 4,096 tokens |
# | DeepSeek-V2 (DeepSeek-AI, 2024, §2.1), **multi-head latent attention** | 60 | 128 | one latent of 512 + a rotary key of 64 | 128 | 67.5 KiB |
#
# GPT-2's cache for a 1,024-token text is 36 MiB; a multi-head 70B model's for a 4,096-token
# text would be 10 GiB for one sequence, which is why Llama 2's largest models share 8 key/value
# heads among 64 query heads. Ainslie et al. report quality close to multi-head attention at
# 8 groups, at their scale.
#
# **A sliding window** (Mistral 7B; Beltagy et al., 2020, *Longformer*, before it) lets each
# position attend to the last W positions only: a band below the diagonal of the causal mask. The
# cache then needs W slots, used as a **ring buffer**: position p writes slot p mod W, over the
# key and value W positions older, which no later query may read. Information from further back
# still arrives, through the layers: each layer reaches W positions further, so k layers see k·W.
# **Multi-head latent attention** (DeepSeek-V2) caches, per token and layer, one compressed vector
# of 512 numbers from which every head's key and value are projected back up, and a 64-number key
# that carries the rotary position (rotations do not pass through the up-projection): 576 numbers
# a layer, where multi-head attention with its 128 heads of 128 would cache 32,768. The band and
# the ring, for W = 3:

# %%
positions, window = 8, 3
band = np.tril(np.ones((positions, positions), dtype=bool)) & ~np.tril(np.ones((positions, positions), dtype=bool),
                                                                       -window)
print("sliding-window mask (rows: queries, columns: keys; 1 = may attend):")
print("\n".join(" ".join(str(int(value)) for value in row) for row in band))
print("ring buffer, the slot each position's key and value is written to:",
      {position: position % window for position in range(positions)})

# %% [markdown]
# The cache of one sequence against its length, for each design (the table's arithmetic):

# %%
def cache_bytes(length, layers, numbers_a_layer, window=None):
    """The key/value cache of one sequence of `length` tokens at 2 bytes a number."""
    return (np.minimum(length, window) if window else length) * layers * numbers_a_layer * 2

# %%
lengths = np.geomspace(256, 131_072, 60)
designs = {"Llama 2 70B with multi-head attention": (80, 2 * 64 * 128, None),
           "Llama 2 70B, grouped (G = 8)": (80, 2 * 8 * 128, None),
           "Mistral 7B, grouped (G = 8), no window": (32, 2 * 8 * 128, None),
           "Mistral 7B, sliding window of 4,096": (32, 2 * 8 * 128, 4096),
           "DeepSeek-V2, latent (512 + 64)": (60, 512 + 64, None)}
figure, axis = plt.subplots(figsize=(7, 4))
for name, (layers, numbers, window) in designs.items():
    axis.plot(lengths, cache_bytes(lengths, layers, numbers, window) / 2**30, label=name)
axis.set(xscale="log", yscale="log", xlabel="tokens in the sequence", ylabel="key/value cache (GiB)",
         title="one sequence's cache, 16-bit numbers")
axis.legend(fontsize="small")
plt.show()
print("at 32,768 tokens: " + "; ".join(f"{name} {cache_bytes(32_768, *design) / 2**30:,.1f} GiB"
                                      for name, design in designs.items()))

# %% [markdown]
# **Reading.** Arithmetic on the published configurations, not a measurement: at 32,768 tokens
# one sequence's cache takes 80.0 GiB for the 70B model with multi-head attention and 10.0 GiB
# with its 8 key/value groups; Mistral 7B's window holds it at 0.5 GiB at any length (the flat
# line), where the same model without the window would need 4.0 GiB; and DeepSeek-V2's latent
# needs 2.1 GiB for a model of 128 query heads, about half what Mistral 7B without its window
# caches for 32. What each design costs in quality is the papers' claim, not this notebook's.
# Exercise 11.3 asks you to write the sharing.
#
# **FlashAttention's idea** (Dao et al., 2022) is about the other memory: the T × T scores. A
# whole softmax needs a row's maximum and sum before any weight, so naive attention holds every
# score at once. An **online softmax** (Milakov and Gimelshein, 2018) visits the keys a tile at a
# time and keeps, for each query, the largest score so far m, the sum so far ℓ of exp(score − m)
# and the output so far o; when a tile raises the maximum to m′, what was summed is rescaled by
# exp(m − m′) before the tile's terms are added, and o / ℓ at the end is exactly the softmax's
# weighted sum. Besides the output, it holds a tile of scores and two numbers a query: memory that
# grows with T, not T². (FlashAttention also tiles the queries, and keeps the tiles in a GPU's fast
# on-chip memory; the saving is in reads of the slow memory.) Exercise 11.4 asks you to write it.
# The extra memory for one head of width 64, float32, tiles of 128 keys:

# %%
print(f"{'T':>7} {'naive: T × T scores':>22} {'tiled: a tile + m and ℓ':>25}")
for length in (1024, 4096, 16_384, 65_536):
    naive, tiled = length * length * 4 / 2**20, (length * 128 + 2 * length) * 4 / 2**20  # MiB
    print(f"{length:>7,} {naive:>19,.1f} MiB {tiled:>21,.2f} MiB")

# %% [markdown]
# ## 4. The text: notebook 09's, in its tokens
#
# The same raw reviews and byte-level BPE as notebook 09: training and unlabelled reviews less
# every text of the test split and every second copy (`distinct_texts`), the first
# `validation_reviews` held out, `merges` BPE merges learned from the first `bpe_reviews`
# training texts, `<|endoftext|>` after every review, rows of `chunk_length` tokens
# (`encode_running_text`). A fixed sample of `test_reviews` test reviews is scored in bits per
# character. One difference: 2,000 merges instead of 09's 8,000. The output layer's softmax over
# the vocabulary is most of what an update costs on a CPU, and a quarter of the vocabulary makes
# an update about half as long, so this notebook's many runs fit its hour. Bits per character do not depend on the tokenizer, but a model with
# another vocabulary is another model: 09's numbers are not comparable to these.

# %%
train_split, test_split = load_imdb()
corpus = distinct_texts(train_split.texts + load_imdb_unlabelled(), test_split.texts)
reviews = corpus.texts[:settings.train_reviews]
validation_texts, train_texts = reviews[:settings.validation_reviews], reviews[settings.validation_reviews:]
test_texts = test_split.texts[:settings.test_reviews]  # the test reviews come shuffled: a fixed random sample
tokenizer = BytePairEncoding.train(train_texts[:settings.bpe_reviews], settings.merges,
                                   special_tokens=["<|endoftext|>"], progress=True).with_id_offset(1)
END, vocabulary_size = tokenizer.special_ids["<|endoftext|>"], tokenizer.vocabulary_size
print(f"{corpus.excluded:,} texts of the test split and {corpus.repeated:,} second copies left out; "
      f"{len(train_texts):,} training, {len(validation_texts):,} validation, {len(test_texts):,} test reviews; "
      f"{vocabulary_size:,} token ids")

# %%
train_inputs, train_targets = encode_running_text(tokenizer.encode, train_texts, settings.chunk_length, END,
                                                  description="encoding the training text")
validation_inputs, validation_targets = encode_running_text(tokenizer.encode, validation_texts,
                                                            settings.chunk_length, END)
test_inputs, test_targets = encode_running_text(tokenizer.encode, test_texts, settings.chunk_length, END)
scored_text = "".join(text + "\n" for text in test_texts)[len(tokenizer.decode(test_inputs[0][:1])):]
validation_characters = sum(len(text) + 1 for text in validation_texts)
print(f"{int((train_targets != 0).sum()):,} training tokens; {len(scored_text):,} test characters scored")

# %% [markdown]
# ## 5. One change at a time: rotary against learned positions
#
# Two models that differ in one part only. Both are the Llama-style block
# (`build_language_model(..., architecture="llama")`; Touvron et al., 2023, §2.2): pre-norm
# RMSNorm and a final RMSNorm, the SwiGLU network of width 688, no biases, grouped-query
# attention with 2 key/value heads (grouped queries came with Llama 2's larger models, Touvron et
# al., 2023b, §2.2), width 256, 2 blocks, 4 query heads, the output layer tied to the token
# embedding. One arm sees positions by **rotating** its queries and keys (section 1); the other
# adds a **learned** vector per position to each token's embedding, as GPT-2 does
# (`positions="learned"`), and nothing else changes.
#
# The protocol:
#
# - **equal updates**: every run makes `ablation_updates` updates of `batch_size` rows (the two
#   arms cost about the same per update; their times are printed), with 09's warm-up and cosine
#   schedule over them, and is validated `rounds` times; the weights of its best validation round
#   are kept;
# - **paired seeds**: a seed sets the initial weights and the order of the rows, the same order
#   for both arms;
# - **each arm its own learning rate**: seed 0 of each arm trains at every peak rate of its grid
#   (`position_learning_rates`), the rate with the lowest validation loss is kept (a run that
#   diverges scores an infinite loss), that run is the arm's seed 0, and the other seeds train at
#   that rate;
# - **the test text** (`test_reviews` test reviews, which no choice here reads) scores each kept
#   run once; the difference between the arms is reported per seed, with its mean and a 95%
#   Student-t interval over the seeds (n − 1 degrees of freedom).
#
# **Hypothesis (1)**, set before the run: the two arms lie within 0.02 bits per character of each
# other on the test text. (Section 6 asks what happens past the training length.)

# %%
POSITION_ARMS = {"rotary": "rotary positions", "learned": "learned positions"}


def new_language_model(positions, seed):
    """A fresh, untrained Llama-style model with rotary or learned positions (`seed` sets its initial weights)."""
    keras.utils.set_random_seed(seed)
    return build_language_model(vocabulary_size, settings.chunk_length, architecture="llama",
                                positions=positions, intermediate_dim=settings.intermediate_dim,
                                num_key_value_heads=settings.num_key_value_heads, **settings.model)


ablation_runs = {}  # (positions, seed, learning_rate, updates) -> (model, history, facts)

# %%
def train_arm(positions, seed, learning_rate, updates=settings.ablation_updates):
    """One arm and seed: `updates` (a multiple of rounds) at peak `learning_rate`; (model, history, facts), memoised."""
    key = (positions, seed, learning_rate, updates)
    if key not in ablation_runs:
        model = new_language_model(positions, seed)
        schedule = WarmupCosineDecay(learning_rate, min(settings.warmup_steps, updates // 2), updates)
        model.compile(optimizer=keras.optimizers.AdamW(schedule, weight_decay=0.01), loss=MaskedCrossEntropy(),
                      jit_compile=settings.jit_compile)
        batches = RowBatches(train_inputs, train_targets, settings.batch_size,
                             batches_per_epoch=updates // settings.rounds, seed=seed)
        model, history, facts = fit_best(model, batches, (validation_inputs, validation_targets),
                                         epochs=settings.rounds, patience=settings.rounds, validation_batch_size=64,
                                         callbacks=[epoch_progress()])
        ablation_runs[key] = (model, history, {**facts, "updates": updates})
    return ablation_runs[key]

# %%
def validation_loss(positions, learning_rate):
    """Seed 0's best validation loss at one rate; a diverged run (NaN) scores infinity."""
    loss = train_arm(positions, settings.seeds[0], learning_rate)[2]["best_val_loss"]
    return np.inf if np.isnan(loss) else loss

# %%
to_bits = int((validation_targets != 0).sum()) / np.log(2) / validation_characters  # mean nats a token -> bpc
position_rate, rate_scores = {}, {}
for positions, name in POSITION_ARMS.items():
    position_rate[positions], rate_scores[positions] = best_on_validation(
        settings.position_learning_rates, lambda rate, arm=positions: validation_loss(arm, rate),
        higher_is_better=False)
    print(f"{name:<18} seed {settings.seeds[0]}, best validation bits per character at each peak rate: "
          + ", ".join(f"{rate:g}: {loss * to_bits:.4f}" for rate, loss in rate_scores[positions].items())
          + f" -> {position_rate[positions]:g}")

# %%
runs = {(positions, seed): train_arm(positions, seed, position_rate[positions])
        for seed in settings.seeds for positions in POSITION_ARMS}

# %% [markdown]
# The floors every curve is drawn against, two tables of counts scored on the validation text in
# the same bits per character: a **unigram** table (each token's frequency in the training rows,
# add-one smoothed), which knows no context at all, and a **bigram** table with interpolated
# Kneser-Ney smoothing (notebook 09's `BigramModel`: one token of context), fitted on the same
# training rows in seconds. A model whose curve lies above the bigram table has learned less,
# so far, than counting pairs of tokens does.

# %%
counts = np.bincount(train_targets[train_targets != 0], minlength=vocabulary_size + 1)[1:] + 1.0
unigram = np.log(counts / counts.sum())
validation_real = validation_targets[validation_targets != 0]
unigram_bits = -unigram[validation_real - 1].sum() / np.log(2) / validation_characters
bigram = BigramModel(vocabulary_size + 1).fit(train_targets)  # the targets: the running text, its first token less
previous, following = validation_inputs[validation_targets != 0], validation_real
bigram_bits = -bigram.log_probability(previous, following).sum() / np.log(2) / validation_characters
print(f"the unigram count table: {unigram_bits:.4f} bits per character on the validation text; the Kneser-Ney "
      f"bigram table: {bigram_bits:.4f}")

# %%
figure, axis = plt.subplots(figsize=(7, 4))
for (positions, seed), (_, history, facts) in runs.items():
    rounds = len(history.history["val_loss"])
    axis.plot(np.arange(1, rounds + 1) * facts["updates"] // settings.rounds,
              np.array(history.history["val_loss"]) * to_bits, "o-" if positions == "rotary" else "s--",
              color="C3" if positions == "rotary" else "C0", alpha=1.0 if seed == settings.seeds[0] else 0.5,
              label=f"{POSITION_ARMS[positions]}, rate {position_rate[positions]:g}, seed {seed}")
axis.axhline(unigram_bits, color="grey", linestyle=":", label=f"unigram count table ({unigram_bits:.3f})")
axis.axhline(bigram_bits, color="black", linestyle="--", label=f"Kneser-Ney bigram table ({bigram_bits:.3f})")
axis.set(xlabel="updates", ylabel="validation bits per character",
         title="one change: how the model sees positions; the same rows in the same order per seed")
axis.legend(fontsize="small")
plt.show()

# %%
def test_scores(model, inputs, targets):
    """log P of each test token (float64, like `targets`) and the bits per character they make."""
    scores = token_log_probabilities(model, inputs, targets)
    return scores, bits_per_character(scores, targets, len(scored_text))

# %%
results = {positions: np.array([test_scores(runs[positions, seed][0], test_inputs, test_targets)[1]
                                for seed in settings.seeds]) for positions in POSITION_ARMS}

# %%
print(f"{'arm':<18} {'parameters':>10} {'updates':>8} {'minutes':>8}   test bits per character, per seed")
for positions, name in POSITION_ARMS.items():
    arm = [runs[positions, seed] for seed in settings.seeds]
    minutes = np.mean([facts["seconds"] for _, _, facts in arm]) / 60
    print(f"{name:<18} {arm[0][0].count_params():>10,} {arm[0][2]['updates']:>8,} {minutes:>8.1f}   "
          + ", ".join(f"{value:.4f}" for value in results[positions]))
differences = results["learned"] - results["rotary"]  # paired: the same seed's initial draw and rows
mean, low, high = mean_interval(differences)
print(f"learned minus rotary, per seed: {', '.join(f'{value:+.4f}' for value in differences)}; "
      f"mean {mean:+.4f}, 95% interval {low:+.4f} to {high:+.4f} ({len(differences)} seeds)")

# %%
report_metric("test_bits_per_character_rotary", float(results["rotary"].mean()),
              f"Llama-style block, rotary positions, {settings.ablation_updates} updates: mean test bits per "
              f"character over {len(settings.seeds)} seeds", headline=True,
              read_against="test_bits_per_character_learned")
report_metric("test_bits_per_character_learned", float(results["learned"].mean()),
              "the same block with learned positions: mean test bits per character over "
              f"{len(settings.seeds)} seeds")
report_metric("rotary_peak_learning_rate", position_rate["rotary"],
              f"the peak learning rate the rotary arm chose at seed {settings.seeds[0]} on the validation text "
              "(notebook 12's base trains at it)")

# %%
report_metric("learned_minus_rotary_bits_per_character", float(mean),
              "learned minus rotary positions, test bits per character, mean of the paired seeds")

# %% [markdown]
# **Reading the ablation** (the recorded run: three seeds an arm, 641,316 test characters).
# **Rotary positions lead: 2.3892 bits per character on the test text against 2.4344, 0.0452
# fewer, with a 95% interval of +0.0306 to +0.0598 over the three paired seeds**: the interval
# excludes zero, and each seed's difference is on the same side (+0.0391, +0.0457, +0.0508). At
# this budget the lead is separated from the seeds' noise. **Hypothesis (1) is refuted**: the two
# arms lie more than twice its margin apart.
#
# **Against the floors**: every curve lies far below the unigram count table's 2.8865, so both
# models learned to use some context — and far **above** the Kneser-Ney bigram table's 1.9712.
# After 120 updates (about a million tokens), both models are still worse than a table of token
# pairs counted over the whole training text (twelve million tokens): this compares two models
# early in training, where a ranking can still change.
#
# What the comparison holds equal, and what it does not:
#
# - **Compute.** 120 updates of 32 rows each for every run; the two arms cost the same per update
#   (2.6 minutes a run each, with validation). The learned arm has 65,536 more parameters (its
#   256 × 256 table: 2,097,106 against 2,031,570), which 120 updates must train from scratch:
#   that is part of what the lead measures.
# - **Tuning.** Both arms chose the top of their grid, 8·10⁻³, by under a thousandth of a bit per
#   character over 4·10⁻³ (2.3649 against 2.3651, and 2.4023 against 2.4031): each arm's best rate
#   may be higher still, and the comparison is fair only if both sit near their best.
# - **Scale.** Su et al. (2021, §4) report the same direction at a far larger scale: their rotary
#   model's pre-training loss fell faster than BERT's, whose positions are learned.

# %% [markdown]
# ## 6. Longer than trained: rotary positions, none at all, and Position Interpolation
#
# What happens when a model reads a text longer than any it trained on? **The literature's
# answer for rotary positions is: it breaks.** Press et al. (2022, *ALiBi*, figure 1) trained
# models on 512 and 1,024 tokens and read longer texts: the rotary model's perplexity rose steeply
# within a few hundred tokens past its training length, as the sinusoidal one's did — the rotations
# at offsets never seen in training give scores the model never learned to read. Two answers since:
# **no positions at all** (NoPE; Kazemnejad et al., 2023): a decoder's causal mask already tells a
# token how many came before it, and on their tasks decoders without position information
# generalised to longer inputs better than rotary ones; and **Position Interpolation** (Chen et al.,
# 2023): read a text s times longer with every position divided by s, so that every angle stays
# inside the trained range (one argument here: `rotary_scaling_factor=s`). Chen et al. fine-tune
# briefly (about a thousand steps) after interpolating; here it is scored with no training at all.
#
# Section 5's models cannot test this honestly: a model that hardly uses its context loses little
# when positions past its training length go wrong. So: models that train on **shorter rows for
# longer** — rows of `context_length` = 64 tokens (section 5's rows cut in four: the same text),
# `context_updates` = 600 updates of `batch_size` rows — the rotary arm and the NoPE arm (the same
# block with no positions anywhere), at the rate section 5's rotary arm chose (NoPE gets no grid of
# its own: a limitation), on two paired seeds (`context_seeds`).
#
# **The measurement**, paired token by token. The test text in rows of 128; the second half of each
# row is scored twice: as a row of its own (positions 0 to 63, the training length) and inside its
# row of 128 (positions 64 to 127: 64 more tokens of context, at offsets the model never trained
# on). A model that generalises gains from the longer context (the change is below zero); one that
# does not, loses. The change is a row's mean over its second half's tokens, in bits a token,
# averaged over the seeds; its intervals are over the seeds (t) and over the test rows (a bootstrap).
#
# **Hypotheses**, set before the run: (2) a precondition — the models use their context: in rows of
# 64, the last 16 positions' loss lies below the first 8's; (3) rotary positions do not extrapolate:
# their change lies above zero; (4) NoPE extrapolates better: its change minus rotary's lies below
# zero; (5) Position Interpolation, untrained, does better than plain rotary: its change minus
# rotary's lies below zero. Each holds only where both its intervals exclude zero.

# %%
CONTEXT_ARMS = {"rotary": "rotary positions", "none": "no positions (NoPE)"}
length = settings.context_length


def context_rows(inputs, targets, row_length):
    """Rows of chunk_length cut into rows of `row_length` (the same running text); rows with no target left out."""
    inputs, targets = inputs.reshape(-1, row_length), targets.reshape(-1, row_length)
    kept = (targets != 0).any(axis=1)
    return inputs[kept], targets[kept]


context_train = context_rows(train_inputs, train_targets, length)
context_validation = context_rows(validation_inputs, validation_targets, length)
long_inputs, long_targets = context_rows(test_inputs, test_targets, 2 * length)
print(f"{len(context_train[0]):,} training rows of {length}; {len(long_inputs):,} test rows of {2 * length}")

# %%
def context_model(positions, seed, scaling_factor=None):
    """A fresh Llama-style model for rows up to 2 × context_length, rotary or no positions."""
    keras.utils.set_random_seed(seed)
    return build_language_model(vocabulary_size, 2 * length, architecture="llama", positions=positions,
                                rotary_scaling_factor=scaling_factor, intermediate_dim=settings.intermediate_dim,
                                num_key_value_heads=settings.num_key_value_heads, **settings.model)

# %%
def train_context_model(positions, seed):
    """`context_updates` updates on rows of context_length at the rotary arm's rate; (model, history, facts)."""
    model = context_model(positions, seed)
    schedule = WarmupCosineDecay(position_rate["rotary"], min(settings.warmup_steps, settings.context_updates // 2),
                                 settings.context_updates)
    model.compile(optimizer=keras.optimizers.AdamW(schedule, weight_decay=0.01), loss=MaskedCrossEntropy(),
                  jit_compile=settings.jit_compile)
    batches = RowBatches(*context_train, settings.batch_size,
                         batches_per_epoch=settings.context_updates // settings.rounds, seed=seed)
    return fit_best(model, batches, context_validation, epochs=settings.rounds, patience=settings.rounds,
                    validation_batch_size=64, callbacks=[epoch_progress()],
                    resume_folder=stages.folder_for(f"context {positions} seed {seed}"))

# %%
context_runs = {(positions, seed): train_context_model(positions, seed)
                for seed in settings.context_seeds for positions in CONTEXT_ARMS}
stages.report()
for (positions, seed), (_, history, facts) in context_runs.items():
    print(f"{CONTEXT_ARMS[positions]:<20} seed {seed}: validation bits per character after each round "
          + ", ".join(f"{loss * to_bits:.4f}" for loss in history.history["val_loss"])
          + f" ({settings.context_updates} updates, {facts['seconds'] / 60:.1f} min)")

# %%
def bits_a_token(model, inputs, targets):
    """Bits each target token costs the model (0 where the target is padding): float64 (rows, length)."""
    return -token_log_probabilities(model, inputs, targets) / np.log(2)


halves = long_inputs[:, length:], long_targets[:, length:]  # each row's second half, as a row of its own
scored = {}  # (arm, seed) -> (bits of the second halves alone, of the whole rows of 2 × context_length)
for seed in settings.context_seeds:
    for arm in CONTEXT_ARMS:
        model = context_runs[arm, seed][0]
        scored[arm, seed] = bits_a_token(model, *halves), bits_a_token(model, long_inputs, long_targets)
    interpolated = context_model("rotary", seed, settings.interpolation_factor)
    interpolated.set_weights(context_runs["rotary", seed][0].get_weights())  # the same weights, positions / s
    # alone: the rotary model as it trained; in the long rows: the same weights, every position divided by s
    scored["interpolated", seed] = scored["rotary", seed][0], bits_a_token(interpolated, long_inputs, long_targets)

# %%
real = halves[1] != 0
used = real.any(axis=1)
early, late = real[:, :8], real[:, -16:]
for arm in CONTEXT_ARMS:
    print(f"{CONTEXT_ARMS[arm]:<20} rows of {length}, bits a token at positions 0-7 against the last 16, per seed: "
          + ", ".join(f"{short[:, :8][early].mean():.3f} -> {short[:, -16:][late].mean():.3f}"
                      for short, _ in (scored[arm, seed] for seed in settings.context_seeds)))

# %%
def row_changes(arm):
    """Per seed, each test row's change: its second half read in its row of 2 × length minus read alone, in bits
    a token (the mean over the half's real tokens). A list over the seeds of (rows,) arrays."""
    changes = []
    for seed in settings.context_seeds:
        short, long = scored[arm, seed]
        changes.append(((long[:, length:] - short) * real).sum(axis=1)[used] / real.sum(axis=1)[used])
    return changes


def intervals(changes):
    """The mean, its t interval over the seeds and its bootstrap interval over the test rows (seeds averaged)."""
    mean, seed_low, seed_high = mean_interval([change.mean() for change in changes])
    _, low, high = bootstrap_interval(np.mean(changes, axis=0))
    return mean, (seed_low, seed_high), (low, high)

# %%
def said(result):
    mean, (seed_low, seed_high), (low, high) = result
    return f"{mean:+.4f} (seeds [{seed_low:+.4f}, {seed_high:+.4f}]; test rows [{low:+.4f}, {high:+.4f}])"


def holds(result, below=False):
    _, seeds, rows = result
    return "holds" if (max(seeds[1], rows[1]) < 0 if below else min(seeds[0], rows[0]) > 0) else "does not hold"


changes = {arm: intervals(row_changes(arm)) for arm in ("rotary", "none", "interpolated")}
for arm, name in (("rotary", "rotary positions"), ("none", "no positions (NoPE)"),
                  ("interpolated", f"rotary, interpolated (s = {settings.interpolation_factor:g})")):
    print(f"{name:<34} change, bits a token: {said(changes[arm])}")

# %%
nope_minus_rotary = intervals([a - b for a, b in zip(row_changes("none"), row_changes("rotary"))])
interpolated_minus_rotary = intervals([a - b for a, b in zip(row_changes("interpolated"), row_changes("rotary"))])
print(f"(3) rotary's change above zero: {said(changes['rotary'])} -> {holds(changes['rotary'])}")
print(f"(4) NoPE's change minus rotary's below zero: {said(nope_minus_rotary)} -> "
      f"{holds(nope_minus_rotary, below=True)}")
print(f"(5) interpolated minus rotary below zero: {said(interpolated_minus_rotary)} -> "
      f"{holds(interpolated_minus_rotary, below=True)}")
for arm in ("rotary", "none", "interpolated"):
    report_metric(f"longer_context_change_{arm}", float(changes[arm][0]),
                  f"{arm}: the second half of each test row read in rows of {2 * length} minus alone, bits a token, "
                  f"mean of {len(settings.context_seeds)} seeds (models trained on rows of {length})")

# %%
figure, axis = plt.subplots(figsize=(7, 3.5))
window = max(1, length // 16)
for arm, color in (("rotary", "C3"), ("none", "C2"), ("interpolated", "C1")):
    whole = scored[arm, settings.context_seeds[0]][1]
    per_position = (whole * (long_targets != 0)).sum(axis=0) / np.maximum((long_targets != 0).sum(axis=0), 1)
    smoothed = np.convolve(per_position, np.ones(window) / window, mode="valid")
    axis.plot(np.arange(len(smoothed)) + window // 2, smoothed, color=color,
              label=f"{arm}, seed {settings.context_seeds[0]}")
axis.axvline(length, color="grey", linestyle=":", label="the training rows' length")
axis.set(xlabel="position in the row", ylabel="bits a token (moving mean)",
         title=f"the test text in rows of {2 * length}, models trained on rows of {length}")
axis.legend(fontsize="small")
plt.show()

# %% [markdown]
# **Reading: the precondition first** (the recorded run: two seeds an arm, 1,539 test rows of
# 128). The models read their context, but little of it. In rows of 64, a token among the last 16
# positions costs the rotary models 6.956 and 6.982 bits against 7.047 and 7.078 at positions 0 to
# 7, and the NoPE models 7.135 and 7.130 against 7.166 and 7.167: precondition (2) holds at every
# seed, and the gain from dozens of tokens more context is under a tenth of a bit. The loss by
# position (above) is flat after the first dozen positions. And after 600 updates every model
# still scores above the bigram table on validation (2.1237 and 2.1362 bits per character with
# rotary positions, 2.1747 and 2.1742 without, against 1.9712).
#
# **Longer than trained.** Read after the 64 tokens before them, at offsets never seen in
# training, the second halves cost every model more than read alone: rotary positions +0.0189
# bits a token (seeds [−0.0120, +0.0497]; test rows [+0.0170, +0.0208]), no positions +0.0209
# ([+0.0046, +0.0371]; [+0.0192, +0.0226]), Position Interpolation untrained +0.0752
# ([−0.2073, +0.3577]; [+0.0714, +0.0791]). **(3) does not hold** by the rule set before the run:
# over the test rows the rotary change lies above zero, but two seeds give a t interval wide enough
# to hold it. **(4) does not hold**: NoPE's change minus rotary's is +0.0020 ([−0.0126, +0.0166];
# [−0.0003, +0.0044]): no sign here that no positions extrapolate better. **(5) does not hold**:
# untrained interpolation costs more than plain rotary (+0.0563; test rows [+0.0526, +0.0601]),
# and in the plot its curve lies above the rotary one at every position, inside the training
# length too: dividing the positions by 2 puts neighbouring tokens at half-offsets the model never
# saw, which Chen et al. fine-tune for.
#
# **What this run can say, and what it cannot.** Press et al. found rotary perplexity rising
# steeply past the training length, in models trained far longer on longer rows. This run agrees
# in direction — at twice the training length, context at unseen offsets made every model a little
# worse instead of better — for small models at one length ratio. It cannot say how large the
# effect is where it matters, nor settle whether no positions generalise better (Kazemnejad et
# al.'s finding on their tasks): these models use little of their context and are weaker than a
# bigram table, and a model that hardly reads its context has little to lose past its training
# length. Testing that needs models that use their context — far more updates than this
# notebook's budget.

# %% [markdown]
# ## Summary
#
# - **Rotary position embedding** rotates queries and keys by their positions; the score sees
#   only the offset between them, decays on average with it, and the values are never rotated.
#   Notebook 04's sinusoids are the same rotations, applied to a fixed vector.
# - **RMSNorm** rescales without centring (one vector of parameters); **SwiGLU** gates the
#   feed-forward network, three matrices at 2/3 of the width.
# - **Grouped-query attention** shares key/value heads among query heads; the key/value cache
#   shrinks by N/G, and with it a decoding step's time where the cache is long (0.46 of
#   multi-head attention's at 4,096 positions with half the heads, here). A sliding window caps
#   the cache; DeepSeek's latent attention caches one compressed vector a token.
# - **FlashAttention's idea**: an online softmax over tiles of keys gives exactly the whole
#   softmax's output in memory that grows with T, not T².
# - One change at a time, at equal updates, paired seeds and a rate per arm: **rotary positions
#   led learned ones by 0.045 bits per character**, separated (95% interval 0.031 to 0.060, three
#   seeds), early in training — both models still above a bigram table.
# - **Longer than trained**: at twice the training length, context at unseen offsets cost small
#   models a little with rotary positions and as much without positions, and untrained Position
#   Interpolation more; models this small use too little of their context to test it further.
#
# ## Graded exercises
#
# Complete each function where it says `raise NotImplementedError(...)`, then run the cell after
# it: `check` tells you at once whether your function is right, and if not, what differs.
# All are plain NumPy. Four exercises, 11 points; our estimate of the time they take, not a
# measurement: about 75 minutes.
#
# ### Exercise 11.1 — rotary position embedding (3 points)
#
# Write `rotate_positions(x, start_index)`: `x` is float `(B, T, N, H)`, queries or keys split into
# N heads of even width H, and `x[:, t]` sits at position `start_index + t`. Pair feature `i` with
# feature `i + H/2` (the "rotate half" layout of section 1), for `i` in `0 .. H/2 - 1`, and turn
# each pair at position p by the angle $p\,\theta_i$ with $\theta_i = 10000^{-2i/H}$:
#
# $$(x_i, x_{i+H/2}) \mapsto (x_i \cos p\theta_i - x_{i+H/2} \sin p\theta_i,\;\; x_{i+H/2} \cos p\theta_i + x_i \sin p\theta_i).$$
#
# Return the rotated array, `(B, T, N, H)`.

# %% nbgrader={"grade": false, "grade_id": "exercise_11_1", "locked": false, "schema_version": 3, "solution": true}
def rotate_positions(x, start_index):
    """x (B, T, N, H), H even, x[:, t] at position start_index + t -> the rotated x, (B, T, N, H)."""
    ### BEGIN SOLUTION
    x = np.asarray(x, dtype="float64")
    half = x.shape[-1] // 2
    theta = 10000.0 ** (-2.0 * np.arange(half) / x.shape[-1])  # (H/2,)
    positions = start_index + np.arange(x.shape[1])  # (T,)
    angles = positions[:, None] * theta[None, :]  # (T, H/2)
    cos, sin = np.cos(angles)[None, :, None, :], np.sin(angles)[None, :, None, :]  # (1, T, 1, H/2)
    first, second = x[..., :half], x[..., half:]
    return np.concatenate([first * cos - second * sin, second * cos + first * sin], axis=-1)
    ### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "check_11_1", "locked": true, "points": 3, "schema_version": 3, "solution": false}
from transformer_course.exercises import check

check("11.1", rotate_positions)
### BEGIN HIDDEN TESTS
from transformer_course_grader import evaluate_hidden

assert evaluate_hidden("11.1", rotate_positions, seed=7).passed
### END HIDDEN TESTS

# %% [markdown]
# ### Exercise 11.2 — RMSNorm (2 points)
#
# Write `rms_norm(x, scale, epsilon)`: `x` is float `(..., E)`, `scale` float `(E,)`. Divide each
# vector along the last axis by its root mean square, $\sqrt{\tfrac{1}{E}\sum_j x_j^2 + \epsilon}$
# (ε inside the square root), then multiply by `scale`. Do not subtract the mean: that would be
# LayerNorm. Return float `(..., E)`.

# %% nbgrader={"grade": false, "grade_id": "exercise_11_2", "locked": false, "schema_version": 3, "solution": true}
def rms_norm(x, scale, epsilon):
    """x (..., E), scale (E,), epsilon >= 0 -> (..., E): x / sqrt(mean(x²) + epsilon) * scale."""
    ### BEGIN SOLUTION
    x = np.asarray(x, dtype="float64")
    return x / np.sqrt(np.mean(x ** 2, axis=-1, keepdims=True) + epsilon) * np.asarray(scale)
    ### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "check_11_2", "locked": true, "points": 2, "schema_version": 3, "solution": false}
check("11.2", rms_norm)
### BEGIN HIDDEN TESTS
assert evaluate_hidden("11.2", rms_norm, seed=7).passed
### END HIDDEN TESTS

# %% [markdown]
# ### Exercise 11.3 — grouped-query attention's shared key/value heads (3 points)
#
# Write `grouped_query_attention(query, key, value)`: `query` is float `(B, T, N, H)`, N query
# heads; `key` and `value` are float `(B, S, G, H)`, G key/value heads, with G dividing N. Query
# head n uses key/value head n // (N/G): heads 0 .. N/G − 1 share the first, and so on (section 3).
# Return the attention output `(B, T, N, H)`: for each query head, softmax over the S keys of
# $q \cdot k / \sqrt{H}$, then the weighted sum of the values. No mask. With G = N this is
# multi-head attention. For example, with N = 4 and G = 2, query heads 0 and 1 read key/value head
# 0 and query heads 2 and 3 read key/value head 1 (the first public case, shown by
# `show_case("11.3")`).

# %% nbgrader={"grade": false, "grade_id": "exercise_11_3", "locked": false, "schema_version": 3, "solution": true}
def grouped_query_attention(query, key, value):
    """query (B, T, N, H), key and value (B, S, G, H), G dividing N -> the output (B, T, N, H)."""
    ### BEGIN SOLUTION
    query, key, value = (np.asarray(array, dtype="float64") for array in (query, key, value))
    repeats = query.shape[2] // key.shape[2]
    key, value = np.repeat(key, repeats, axis=2), np.repeat(value, repeats, axis=2)  # head n -> group n // repeats
    scores = np.einsum("btnh,bsnh->bnts", query, key) / np.sqrt(query.shape[-1])
    weights = np.exp(scores - scores.max(axis=-1, keepdims=True))
    weights /= weights.sum(axis=-1, keepdims=True)
    return np.einsum("bnts,bsnh->btnh", weights, value)
    ### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "check_11_3", "locked": true, "points": 3, "schema_version": 3, "solution": false}
check("11.3", grouped_query_attention)
### BEGIN HIDDEN TESTS
assert evaluate_hidden("11.3", grouped_query_attention, seed=7).passed
### END HIDDEN TESTS

# %% [markdown]
# %% [markdown]
# ### Exercise 11.4 — tiled attention with an online softmax (3 points)
#
# Write `tiled_attention(query, key, value, mask, tile_size)`, FlashAttention's forward pass for one
# head (Dao et al., 2022, Algorithm 1, with all the queries in one block): `query` is float
# `(T, H)`, `key` and `value` float `(S, H)`, `mask` bool `(T, S)` (True: the query may attend to
# the key; every query may attend to at least one), `tile_size` an int ≥ 1. Visit the keys in tiles
# of `tile_size` (the last may be shorter) and never hold more than one tile's scores
# `(T, tile_size)`. For each query keep the largest score so far m (start at −∞), the running sum ℓ
# of exp(score − m) (start at 0) and the running output o (start at 0). For each tile: its scores
# q·k / √H, −∞ where the mask forbids; the new maximum m′ = max(m, the tile's largest); rescale
# ℓ and o by exp(m − m′), then add the tile's exp(score − m′) to ℓ and their weighted values to o.
# (A query whose keys so far are all masked has m′ = −∞: use 0 in place of m′ in the exponentials,
# so that nothing becomes NaN.) Return `(o / ℓ, m + log ℓ)`: the attention output `(T, H)`, equal
# to the whole softmax's, and each query's log-sum-exp of its scores `(T,)`, which FlashAttention
# keeps for the backward pass. `show_case("11.4")` shows the first public case.

# %% nbgrader={"grade": false, "grade_id": "exercise_11_4", "locked": false, "schema_version": 3, "solution": true}
def tiled_attention(query, key, value, mask, tile_size):
    """query (T, H), key and value (S, H), mask bool (T, S), tile_size int -> (output (T, H), log-sum-exp (T,))."""
    ### BEGIN SOLUTION
    query, key, value, mask = (np.asarray(query, "float64"), np.asarray(key, "float64"),
                               np.asarray(value, "float64"), np.asarray(mask, bool))
    largest, total = np.full(len(query), -np.inf), np.zeros(len(query))
    output = np.zeros((len(query), value.shape[1]))
    for start in range(0, len(key), tile_size):
        tile = slice(start, start + tile_size)
        scores = np.where(mask[:, tile], query @ key[tile].T / np.sqrt(query.shape[1]), -np.inf)
        new_largest = np.maximum(largest, scores.max(axis=1))
        shift = np.where(np.isfinite(new_largest), new_largest, 0.0)
        rescale, weights = np.exp(largest - shift), np.exp(scores - shift[:, None])
        total = total * rescale + weights.sum(axis=1)
        output = output * rescale[:, None] + weights @ value[tile]
        largest = new_largest
    return output / total[:, None], largest + np.log(total)
    ### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "check_11_4", "locked": true, "points": 3, "schema_version": 3, "solution": false}
check("11.4", tiled_attention)
### BEGIN HIDDEN TESTS
assert evaluate_hidden("11.4", tiled_attention, seed=7).passed
### END HIDDEN TESTS

# %% [markdown]
# ## Written questions (graded by your instructor)
#
# **Question 11.w1 (2 points).** In section 5, rotary positions led learned ones by 0.0452 bits
# per character, 95% interval +0.0306 to +0.0598 over three paired seeds; both arms chose
# 8·10⁻³, the top of their two-rate grid, by less than 0.001 bits per character over 4·10⁻³. Is
# the lead separated from the seeds' noise? What does the choice of the grid's top say about the
# comparison's fairness, and what runs would you make before calling rotary positions better at
# this budget?

# %% [markdown] nbgrader={"grade": true, "grade_id": "written_11_1", "locked": false, "points": 2, "schema_version": 3, "solution": true}
# ### BEGIN SOLUTION
# **Rubric (2 points).** 1 point: yes at this budget: the interval excludes zero and all three
# paired differences are positive (+0.0391, +0.0457, +0.0508); three seeds give a wide t
# multiplier (4.30), so the interval is honest but loose. 1 point: a best rate at the edge of the
# grid means each arm's optimum may lie above it; if one arm gains more from a higher rate, the
# order or the size of the lead could change, so extend the grid upward for both arms (1.6·10⁻²,
# on the validation text at seed 0), rerun the seeds at the new choices, and, since 120 updates
# is early (both arms are still above the bigram table), repeat at a longer budget: the learned
# arm's extra 65,536 table parameters may need more updates than the rotary arm needs.
# ### END SOLUTION
