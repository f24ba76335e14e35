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
# # 09 — A GPT-style language model: the chain rule, bits per character, a key/value cache, sampling, and GPT-2
#
# [![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.research.google.com/github/transformer-course/transformer-course/blob/v0.1.0/release/09_language_model.ipynb)
#
# **Run time:** full profile about 38 min on a 2-core CPU, smoke profile about 25 s (recorded runs). The profile comes from the environment variable `COURSE_PROFILE` (`full` or `smoke`): set it before starting Jupyter, or in Colab run `%env COURSE_PROFILE=smoke` before the first code cell. On Colab, a GPU runtime (Runtime, Change runtime type) trains on the GPU; the recorded times are CPU times. The outputs shown come from the recorded full-profile run; running a cell replaces its output with yours. In the smoke profile, run the exercises and their checks, and the cells whose output does not depend on the profile (shapes, worked examples, equalities with Keras): the accuracies, losses, curves, timings and samples it prints come from tiny data and a few steps and mean nothing; read the recorded ones.
#
# **What you will learn**
# - a **language model** as the chain rule, $p(w_1 \dots w_n) = \prod_t p(w_t \mid w_{<t})$:
#   scoring whole sentences, **perplexity**, and **bits per character**: a language model is a
#   compressor, measured beside `zlib`, `bz2` and `xz` on the same text;
# - count-based baselines (a unigram and a Kneser-Ney bigram model) on the same tokens;
# - a **decoder-only Transformer** (GPT's shape): causal self-attention only, an output layer
#   tied to the token embedding, trained on raw movie reviews in byte-level BPE tokens
#   (notebook 03's, trained from scratch here);
# - the **key/value cache** that makes generation cost one new position per token, written out
#   and checked;
# - **sampling**: greedy, temperature, top-k and top-p (nucleus), and what each knob does to the
#   text — measured, not described;
# - how far this model is from GPT-3, in numbers; OpenAI's GPT-2 loaded into the course's own
#   decoder; and what separates a base model from an instruction-tuned one.
# - a language model **is** a compressor: its probabilities drive an **arithmetic coder** that writes
#   test reviews into a file smaller than `xz`'s, and decompresses it byte for byte.
#
# **Prerequisites:** notebook 04 (the causal mask), notebook 05 (the encoder block), notebook 07
# (the decoder block, greedy and beam search).
#
# Data: the IMDB Large Movie Review Dataset — Maas et al., 2011, *Learning Word Vectors for
# Sentiment Analysis*, ACL-HLT, pp. 142–150 (no explicit license; cite the paper). Only the text
# is used: the 25,000 training reviews and the archive's 50,000 unlabelled reviews to learn from
# (labels ignored), and the first `test_reviews` test reviews to measure the model: 2,500 in the
# full profile. They come shuffled, so this is a fixed random sample.
# Section 11 also compresses English sentences from the Tatoeba Project (https://tatoeba.org), as
# packaged by manythings.org/anki (the pairs of notebook 07); licensed CC-BY 2.0 FR.

# %%
import subprocess
import sys

if "google.colab" in sys.modules:  # Colab only: install the course package, keep Colab's TensorFlow/Keras
    subprocess.run([sys.executable, "-m", "pip", "install", "-q",
                    "transformer-course @ git+https://github.com/transformer-course/transformer-course@v0.1.0"],
                   check=True)

import transformer_course as tc

settings = tc.start_notebook("09", seed=42)

# %%
import os
import time
from functools import partial

import keras
import matplotlib.pyplot as plt
import numpy as np

from transformer_course import RunStages, checkpoint_path, epoch_progress, report_metric
from transformer_course.bpe import BytePairEncoding
from transformer_course.datasets import distinct_texts, load_imdb, load_imdb_unlabelled
from transformer_course.decoding import (
    NextTokenTable,
    apply_temperature,
    greedy_decode,
    sample_decode,
    top_k_filter,
    top_p_filter,
)
from transformer_course.generation import CachedLanguageModel
from transformer_course.gpt2_checkpoints import PresetUnavailableError, load_gpt2_preset
from transformer_course.language_model import (
    build_language_model,
    compute_parameters,
    forward_weights,
    training_flops_per_token,
)
from transformer_course.metrics import (
    MaskedCrossEntropy,
    bits_per_character,
    compressor_bits_per_character,
    distinct_n,
    masked_accuracy,
    perplexity,
    repetition_rate,
    token_log_probabilities,
)
from transformer_course.ngram import BigramModel, UnigramModel
from transformer_course.training import (
    RowBatches,
    WarmupCosineDecay,
    encode_running_text,
    fit_best,
    running_text_chunks,
)

# %% [markdown]
# ## 1. The chain rule
#
# A language model gives a probability to every sequence of words. Written with the chain rule,
# it is a product of next-word predictions:
#
# $$p(w_1, \dots, w_n) = p(w_1)\, p(w_2 \mid w_1) \cdots p(w_n \mid w_1, \dots, w_{n-1}) = \prod_{t=1}^{n} p(w_t \mid w_{<t}).$$
#
# A model that predicts the next word well therefore scores whole texts. Products of many small
# numbers underflow, so we add **log-probabilities**. The per-word average of $-\log p$ is the
# cross-entropy the model is trained on, and its exponent is the **perplexity**:
#
# $$\text{PPL} = \exp\Big(-\frac{1}{n} \sum_{t} \log p(w_t \mid w_{<t})\Big).$$
#
# A model that spreads its probability evenly over $V$ words has perplexity $V$: perplexity is the
# number of equally likely words the model is, on average, choosing between.
#
# The smallest example: a vocabulary of five ids and a next-word table (each row sums to 1).

# %%
words = ["", "the", "film", "was", "good"]  # id 0 is padding
table = np.array([[0, 0, 0, 0, 0], [0, 0.05, 0.8, 0.05, 0.1], [0, 0.1, 0.05, 0.8, 0.05],
                  [0, 0.3, 0.05, 0.05, 0.6], [0, 0.7, 0.1, 0.1, 0.1]])
model_of_words = NextTokenTable(table)


def sentence_log_probability(ids):
    """log p(w_2 … w_n | w_1) under the table: the chain rule, one factor per word."""
    return sum(np.log(model_of_words(np.array([ids[:t]]))[0, ids[t]]) for t in range(1, len(ids)))


for sentence in (["the", "film", "was", "good"], ["good", "was", "film", "the"]):
    log_probability = sentence_log_probability([words.index(word) for word in sentence])
    print(f"{' '.join(sentence):<18} log p = {log_probability:6.2f}   perplexity = {np.exp(-log_probability / 3):5.2f}")

# %% [markdown]
# The same four words in another order get a far lower probability: a language model knows
# about order. Everything below scales this up: a real vocabulary, a Transformer for the table.
#
# ## 2. Reviews as running text, in byte-pair tokens
#
# The model learns from the 25,000 training reviews and the archive's 50,000 unlabelled reviews
# (labels unused; every text that also occurs in the test split is dropped, and every second copy
# of a text), read as one long running text. The text stays **raw**: capitals, punctuation, the
# `<br />` line breaks, every byte. The tokens are notebook 03's byte-level **byte-pair
# encoding**, trained here from scratch on the first `bpe_reviews` training texts with `merges`
# merges. Any string can be encoded (the 256 bytes are tokens), so there is no `[UNK]`.
#
# Two ids are added around the merges: 0 stays **padding** (the course's models never predict
# it), so every BPE id moves up by one (`id_offset=1`), and `<|endoftext|>` (GPT-2's name for
# it) follows every review, so the model sees where one review stops and the next begins. The
# stream is cut into rows of `chunk_length` tokens; each row's targets are its tokens moved one
# place left.

# %%
train_split, test_split = load_imdb()
candidates = train_split.texts + load_imdb_unlabelled()
distinct = distinct_texts(candidates, excluded=test_split.texts)  # no test text, each text once
reviews = distinct.texts[:settings.train_reviews]
validation_texts, train_texts = reviews[:settings.validation_reviews], reviews[settings.validation_reviews:]
test_texts = test_split.texts[:settings.test_reviews]  # the test reviews come shuffled: a fixed random sample
print(f"{len(candidates):,} training and unlabelled reviews: {distinct.excluded:,} also in the test split and "
      f"{distinct.repeated:,} second copies dropped, {len(distinct.texts) - len(reviews):,} beyond train_reviews; "
      f"{len(train_texts):,} to train on, {len(validation_texts):,} for validation; {len(test_texts):,} test reviews")

# %%
learned = BytePairEncoding.train(train_texts[:settings.bpe_reviews], settings.merges,
                                 special_tokens=["<|endoftext|>"], progress=True)
tokenizer = learned.with_id_offset(1)  # id 0 is padding: every id one up
END, vocabulary_size = tokenizer.special_ids["<|endoftext|>"], tokenizer.vocabulary_size


def shown(ids):
    """Token ids as their texts, '·' between tokens, '␣' for a space, \\x.. for a byte that is part of a character."""
    def text(i):
        return tokenizer.token(i) if i == END else tokenizer.vocabulary[i].decode("utf-8", errors="backslashreplace")

    return " · ".join(text(int(i)).replace(" ", "␣") for i in ids if i)


print(f"{vocabulary_size:,} ids: padding, 256 bytes, {len(learned.merges):,} merges, <|endoftext|> ({END})")
for text in ("This movie wasn't bad at all!", "Penguins are flightless birds 🐧"):
    print(f"{text!r:>34} -> {shown(tokenizer.encode(text))}")

# %%
def chunks(texts, description):
    """Raw texts -> (inputs, targets) rows of chunk_length BPE ids, <|endoftext|> after every text."""
    return encode_running_text(tokenizer.encode, texts, settings.chunk_length, END, description=description)


train_inputs, train_targets = chunks(train_texts, "encoding the training text")
validation_inputs, validation_targets = chunks(validation_texts, "encoding the validation text")
test_inputs, test_targets = chunks(test_texts, "encoding the test text")
for name, texts, targets in (("train", train_texts, train_targets), ("validation", validation_texts,
                             validation_targets), ("test", test_texts, test_targets)):
    tokens, characters = int((targets != 0).sum()), sum(len(text) + 1 for text in texts)
    print(f"{name:<10} {len(targets):>7,} rows, {tokens:>11,} target tokens, {characters / tokens:.2f} characters "
          "a token")
print("a row:", tokenizer.decode(train_inputs[0][:60]).replace("<|endoftext|>", " <|endoftext|> "), "…")

# %% [markdown]
# ## 3. Baselines: bits per character
#
# **Perplexity** depends on the tokens: a model over bytes and a model over words see different
# numbers of tokens in the same text, so their perplexities cannot be compared. The number that
# does not depend on them is the model's **code length**: a language model is a compressor. An
# arithmetic coder driven by the model's next-token probabilities writes a text in almost exactly
# $-\sum_t \log_2 p(x_t \mid x_{<t})$ bits (MacKay, 2003, *Information Theory, Inference, and
# Learning Algorithms*, §6.2). Divided by the text's characters, that is **bits per character**:
#
# $$\text{bpc} = \frac{-\sum_t \log_2 p(x_t \mid x_{<t})}{\text{characters of the text}}.$$
#
# The scored text is exactly what the test targets spell out: every test review followed by one
# `<|endoftext|>`, which stands for one character (a newline: no review contains one), less the
# very first token, which is never a target. On that same text, three yardsticks:
#
# - general-purpose **compressors** from Python's standard library: `zlib` (DEFLATE), `bz2`
#   (Burrows-Wheeler) and `lzma` (xz), at their strongest settings. They learn from the test text
#   itself as they go, and know nothing else; since more text helps them, their figures on the
#   whole test split are printed too;
# - a **unigram** model, $p(x)$: token frequencies, add-one smoothed — no context at all;
# - a **bigram** model, $p(x \mid v)$, with interpolated **Kneser-Ney** smoothing (Kneser and
#   Ney, 1995): the classic count model with one token of context. It discounts every seen pair a
#   little and gives that mass to a "continuation" probability: how many different tokens a token
#   has been seen after, not how often it occurs.

# %%
assert not any("\n" in text for text in test_texts), "a review holds a newline: <|endoftext|> would not be one"
scored_text = "".join(text + "\n" for text in test_texts)[len(tokenizer.decode(test_inputs[0][:1])):]
test_characters = len(scored_text)
compressors = compressor_bits_per_character(scored_text)
for name, value in compressors.items():
    report_metric(f"{name.split()[0]}_bits_per_character", value, f"{name}: bits per character of the test text")
reference_texts = test_split.texts[:settings.compressor_reference_reviews]
whole_split = compressor_bits_per_character("".join(text + "\n" for text in reference_texts))
print(f"the same compressors on {len(reference_texts):,} test reviews (more text to learn from): "
      + ", ".join(f"{name} {value:.3f}" for name, value in whole_split.items()))


def as_rows(inputs, targets):
    """(R, L) inputs and targets -> (R, L + 1) rows whose adjacent pairs are exactly (input, target)."""
    return np.concatenate([inputs, targets[:, -1:]], axis=1)

# %%
unigram = UnigramModel(vocabulary_size).fit(as_rows(train_inputs, train_targets))
bigram = BigramModel(vocabulary_size).fit(as_rows(train_inputs, train_targets))
baselines, baseline_scores = {}, {}
for name, counts in (("unigram", unigram), ("bigram", bigram)):
    rows = as_rows(test_inputs, test_targets)
    baseline_scores[name] = np.where(test_targets != 0, counts.log_probability(rows[:, :-1], rows[:, 1:]), 0.0)
    baselines[name] = bits_per_character(baseline_scores[name], test_targets, test_characters)
    report_metric(f"{name}_bits_per_character", baselines[name], f"{name} model (counts): bits per character of "
                  "the test text")
    report_metric(f"{name}_test_perplexity", counts.perplexity(rows), f"{name} model (counts): test perplexity per "
                  f"BPE token ({vocabulary_size:,} ids)")
print(f"bigram discount D = {bigram.discount:.3f}")

# %% [markdown]
# ## 4. A decoder-only Transformer
#
# GPT is the decoder of notebook 07 without the encoder: token and position embeddings, a stack
# of blocks with **causal** self-attention (position $t$ sees positions $\le t$ only) and a
# feed-forward network, and an output layer that multiplies by the token-embedding matrix (tied
# weights) before the softmax (Radford et al., 2018, §3.1). Every position predicts its next
# token at once: one forward pass trains on `chunk_length` predictions per row.

# %%
model = build_language_model(vocabulary_size, settings.chunk_length, **settings.model)
print(f"parameters: {model.count_params():,}")
row = test_inputs[:1].copy()
before = keras.ops.convert_to_numpy(model(row))
row[0, 20:] = 3  # change every token from position 20 on
after = keras.ops.convert_to_numpy(model(row))
print("positions 0-19 unchanged when later tokens change:", np.allclose(before[0, :20], after[0, :20], atol=1e-6))

# %% [markdown]
# ## 5. Training: how large a model for the compute we have?
#
# The loss is the cross-entropy over real target tokens (`MaskedCrossEntropy`; padding, which
# only the last row has, is never counted), AdamW with a warm-up over a tenth of the updates and a
# cosine decay to the end, and `fit_best`. There is more text than a CPU reads in a sitting, so
# training is counted in **updates** of `batch_size` rows, not passes, and the budget is
# **compute**: floating-point operations, the same on every machine (a slower one takes longer and
# learns the same). A token costs a forward and a backward pass, about 6 operations per weight it
# meets plus attention's share (Kaplan et al., 2020, §2.1; `training_flops_per_token`, which counts
# the output layer's product with the embedding matrix, most of the work at these sizes). With
# `jit_compile` Keras compiles the training step with XLA; on a CPU it is off unless asked for,
# and here it about doubles the speed.
#
# Section 4's model has 3.8 million parameters. Is that the right size? For a fixed compute a
# larger model sees fewer tokens, a smaller one more; Hoffmann et al. (2022, *Training
# Compute-Optimal Large Language Models*, §3.2) trained many sizes at each of several budgets,
# "IsoFLOP profiles", and found the loss a valley in the model size, its floor moving to larger
# models as the compute grows, parameters and tokens growing alike (N_opt ∝ C^0.5), about 20 tokens
# a parameter. Here, in small: section 4's block at `sweep_embed_dims` widths (the feed-forward
# four times as wide), each trained for the same `sweep_compute` at two peak learning rates (each
# size's better one chosen on the validation text), a parabola fitted to the valley in log
# parameters, and its floor moved to the final run's compute, `final_compute` (8 times the
# sweep's), by Hoffmann et al.'s exponent; the sweep's width nearest it is trained there, to the
# end of its schedule. Every run is a stage kept in the course's cache (`RunStages`), and the
# final run keeps each of its rounds, so a run stopped midway goes on where it stood.
#
# **The hypothesis**, set before the run: the model chosen this way writes the test reviews in at
# most 1.60 bits per character, at least 0.15 below the Kneser-Ney bigram's on the same text.

# %%
stages = RunStages("09", settings)  # this run's kept stages, in the course's cache
validation_characters = sum(len(text) + 1 for text in validation_texts)
to_bits = int((validation_targets != 0).sum()) / np.log(2) / validation_characters  # mean nats a token -> bpc


def architecture(width):
    """Section 4's model at `width`: the feed-forward four times as wide, the same heads and blocks."""
    return {**settings.model, "embed_dim": width, "intermediate_dim": 4 * width}


def sizes_of(width):
    """(weights a token meets, training operations an update) of the model at `width`."""
    shape = architecture(width)
    weights = compute_parameters(vocabulary_size, width, shape["intermediate_dim"], shape["num_layers"])
    per_token = training_flops_per_token(vocabulary_size, settings.chunk_length, width, shape["intermediate_dim"],
                                         shape["num_layers"])
    return weights, per_token * settings.batch_size * settings.chunk_length

# %%
def train(width, peak, compute, rounds, name, checkpoint=None):
    """A fresh model at `width`, trained for `compute` operations at peak rate `peak` -> (model, history, facts,
    updates)."""
    per_round = max(1, round(compute / sizes_of(width)[1] / rounds))
    keras.utils.set_random_seed(0)  # every run starts from the same draw of its size
    trained = build_language_model(vocabulary_size, settings.chunk_length, **architecture(width))
    schedule = WarmupCosineDecay(peak, int(settings.warmup_fraction * per_round * rounds), per_round * rounds)
    trained.compile(optimizer=keras.optimizers.AdamW(schedule, weight_decay=0.01), loss=MaskedCrossEntropy(),
                    metrics=[masked_accuracy], jit_compile=settings.jit_compile)
    batches = RowBatches(train_inputs, train_targets, settings.batch_size, batches_per_epoch=per_round, seed=0)
    return (*fit_best(trained, batches, (validation_inputs, validation_targets), epochs=rounds, patience=rounds,
                      checkpoint=checkpoint, validation_batch_size=64, callbacks=[epoch_progress()],
                      resume_folder=stages.folder_for(name)), per_round * rounds)

# %%
print(f"{'width':>5}{'weights a token meets':>23}{'operations an update':>22}{'updates':>9}{'tokens':>12}"
      f"{'tokens a weight':>17}   (each at the sweep's {settings.sweep_compute:.1e} operations)")
for width in settings.sweep_embed_dims:
    weights, per_update = sizes_of(width)
    updates = max(1, round(settings.sweep_compute / per_update))
    tokens = updates * settings.batch_size * settings.chunk_length
    print(f"{width:>5}{weights:>23,}{per_update:>22.3e}{updates:>9,}{tokens:>12,}{tokens / weights:>17.1f}")

# %%
def sweep_point(width, peak):
    """One run of the sweep: its validation bits per character, updates and seconds."""
    _, _, point, updates = train(width, peak, settings.sweep_compute, 1, f"sweep width {width} rate {peak:g}")
    return {"bits": point["best_val_loss"] * to_bits, "updates": updates, "seconds": point["seconds"]}


sweep = {(width, peak): stages.stage(f"sweep width {width} rate {peak:g}", partial(sweep_point, width, peak))
         for width in settings.sweep_embed_dims for peak in settings.sweep_learning_rates}
print(f"{'width':>5}{'peak rate':>11}{'updates':>9}{'validation bits per character':>31}{'minutes here':>14}")
for (width, peak), point in sweep.items():
    print(f"{width:>5}{peak:>11g}{point['updates']:>9,}{point['bits']:>31.4f}{point['seconds'] / 60:>14.1f}")
best_rate = {width: min(settings.sweep_learning_rates, key=lambda peak: sweep[width, peak]["bits"])
             for width in settings.sweep_embed_dims}
stages.report()

# %%
widths, weights = list(settings.sweep_embed_dims), np.array([sizes_of(w)[0] for w in settings.sweep_embed_dims], "f8")
valley = np.array([sweep[width, best_rate[width]]["bits"] for width in widths])
curve = np.polyfit(np.log10(weights), valley, min(2, len(widths) - 1))  # a parabola in log weights (Hoffmann et al.)
curve = np.concatenate([np.zeros(3 - len(curve)), curve])  # (a line where the sweep has two widths)
floor = -curve[1] / (2 * curve[0]) if curve[0] > 0 else np.inf
inside = np.log10(weights).min() <= floor <= np.log10(weights).max()
sweep_optimum = 10**floor if inside else weights[np.argmin(valley)]
target = sweep_optimum * (settings.final_compute / settings.sweep_compute) ** settings.scaling_exponent
final_width = widths[int(np.argmin(np.abs(np.log(weights / target))))]
print(f"the valley's floor at the sweep's compute: {sweep_optimum:,.0f} weights"
      + ("" if inside else " (the parabola's floor lies outside the sweep: its best width taken)")
      + f"\nmoved to {settings.final_compute / settings.sweep_compute:g} times the compute (N_opt ∝ C^"
      f"{settings.scaling_exponent}): {target:,.0f} weights -> the sweep's nearest width, {final_width} "
      f"({sizes_of(final_width)[0]:,} weights), at its rate {best_rate[final_width]:g}\nChinchilla's rule (about 20 "
      f"tokens a weight, C ≈ 6·N·D) at the final compute: {np.sqrt(settings.final_compute / 120):,.0f} weights")

# %%
figure, axis = plt.subplots(figsize=(7, 4))
for peak, marker in zip(settings.sweep_learning_rates, "os"):
    axis.plot(weights, [sweep[width, peak]["bits"] for width in widths], marker + ":", label=f"peak rate {peak:g}")
grid = np.linspace(np.log10(weights).min() - 0.1, np.log10(weights).max() + 0.1, 100)
axis.plot(10**grid, np.polyval(curve, grid), "k-", alpha=0.4, label="parabola in log weights (best rates)")
axis.axvline(sweep_optimum, color="C2", linestyle="--", label="the valley's floor")
axis.axhline(baselines["bigram"], color="C1", linestyle=":", label="Kneser-Ney bigram (test text)")
for width, weight in zip(widths, weights):
    axis.annotate(f"width {width}", (weight, valley[widths.index(width)]), textcoords="offset points",
                  xytext=(4, 6), fontsize=8)
axis.set(xscale="log", xlabel="weights a token meets (log scale)", ylabel="validation bits per character",
         title=f"IsoFLOP sweep: every size for {settings.sweep_compute:.1e} operations")
axis.legend(fontsize="small")
plt.show()

# %% [markdown]
# **Reading the sweep** (the stored run). At 1.0·10¹³ operations one run of the eight left the
# plateau every model first sits on, where it predicts each token from how often tokens occur and
# nothing of their order: width 64 at the lower peak rate, 2.1834 bits per character on the
# validation text after its 294 updates. The seven others ended between 2.5237 and 2.5353, the
# unigram table's level (2.536 on the test text). The wider the model, the fewer updates the same
# compute buys (294 at width 64, 52 at width 256), and at this compute no width but the narrowest
# got enough of them to leave the plateau; the higher rate kept even width 64 on it. So there is no
# valley to fit: the parabola's floor lies outside the sweep, and its narrowest width (626,816
# weights) is taken as the floor. That is a statement about this compute, not a scaling law:
# Hoffmann et al.'s smallest budget gave every size thousands of updates, where ours gave 52 to
# 294, and a sweep that finds the valley needs each width past its plateau (a few hundred
# updates for the widest, several times this compute). What the sweep does show is their point in
# small: at a fixed compute the largest model is not the best. Section 4's model, 3,767,362
# parameters, would have read 0.1 tokens a weight here; Chinchilla's 20 tokens a weight at the
# final compute asks for about 816,497 weights. Moved to eight times the compute by
# N_opt ∝ C^0.5, the floor becomes 1,772,903 weights, and the nearest width is 128 (1,450,240
# weights), trained below at its better rate, 0.002.

# %%
model, history, facts, updates = train(final_width, best_rate[final_width], settings.final_compute, settings.rounds,
                                       "final run", checkpoint=checkpoint_path("imdb_language_model"))
stages.report()
trained_tokens = updates * settings.batch_size * settings.chunk_length
final_weights = sizes_of(final_width)[0]
print(f"width {final_width}: {model.count_params():,} parameters, {updates:,} updates, {trained_tokens:,} tokens "
      f"({trained_tokens / (train_targets != 0).sum():.2f} passes over the training text, "
      f"{trained_tokens / final_weights:.1f} tokens a weight) in {facts['seconds'] / 60:.1f} min here; best round "
      f"{facts['best_epoch']} of {facts['epochs']}")

# %%
tokens_seen = np.arange(1, facts["epochs"] + 1) * trained_tokens / settings.rounds / 1e6
figure, axis = plt.subplots(figsize=(7, 4))
axis.plot(tokens_seen, np.array(history.history["val_loss"]) * to_bits, "o-", label="Transformer, validation text")
for name, value in {**compressors, "unigram (counts)": baselines["unigram"], "Kneser-Ney bigram (counts)":
                    baselines["bigram"]}.items():
    axis.axhline(value, linestyle=":", color="gray" if name in compressors else "C1")
    axis.annotate(f"{name} (test text)", (tokens_seen[0], value), textcoords="offset points", xytext=(0, 3),
                  fontsize=8)
axis.set(xlabel="training tokens (millions)", ylabel="bits per character", title="the language model as a compressor")
axis.legend()
plt.show()

# %%
scores = token_log_probabilities(model, test_inputs, test_targets)
transformer_bits = bits_per_character(scores, test_targets, test_characters)
report_metric("test_bits_per_character", transformer_bits, f"Transformer LM: bits per character of the test text "
              f"({test_characters:,} characters, {len(test_texts):,} reviews)", headline=True)
report_metric("transformer_test_perplexity", perplexity(scores, test_targets),
              f"Transformer LM: test perplexity per BPE token ({vocabulary_size:,} ids)")
table = {**compressors, "unigram (counts)": baselines["unigram"], "Kneser-Ney bigram (counts)": baselines["bigram"],
         "Transformer (this notebook)": transformer_bits}
for name, value in sorted(table.items(), key=lambda item: -item[1]):
    print(f"{name:<28} {value:5.3f} bits per character")

# %%
below_bigram = baselines["bigram"] - transformer_bits
report_metric("bits_below_bigram", below_bigram, "the Kneser-Ney bigram's test bits per character minus the "
              "Transformer's", read_against="bigram_bits_per_character")
report_metric("final_width", final_width, f"the width the IsoFLOP sweep chose for {settings.final_compute:.1e} "
              "training operations")
met = transformer_bits <= 1.60 and below_bigram >= 0.15
print(f"the hypothesis (at most 1.60 bits per character, at least 0.15 below the bigram): {transformer_bits:.3f}, "
      f"{below_bigram:.3f} below: {'met' if met else 'not met'}")

# %% [markdown]
# What does the context buy? Every row of the test text is scored at positions 1 to
# `chunk_length`; at position 1 a model has one token of context, at position 200 it has 199.
# The mean bits per token at each position of the row, for the three models:

# %%
real = test_targets != 0
figure, axis = plt.subplots(figsize=(7, 3.6))
for name, position_scores in (("unigram (no context)", baseline_scores["unigram"]),
                              ("Kneser-Ney bigram (one token)", baseline_scores["bigram"]),
                              ("Transformer (every token before)", scores)):
    bits = -(position_scores * real).sum(axis=0) / real.sum(axis=0) / np.log(2)
    axis.plot(np.arange(1, len(bits) + 1), bits, label=name)
    half = len(bits) // 2
    print(f"{name:<33} position 1: {bits[0]:5.2f}, position 2: {bits[1]:5.2f}, positions {half + 1}-{len(bits)}: "
          f"{bits[half:].mean():5.2f} bits a token")
axis.set(xscale="log", xlabel="position in the row (tokens of context, log scale)", ylabel="mean bits per token",
         title="what the context buys")
axis.legend(fontsize="small")
plt.show()

# %% [markdown]
# **Reading the numbers** (the stored run). The final run trained width 128 (1,494,594
# parameters) for 1,032 updates: 8,454,144 tokens, 0.35 of a pass over the training text and 5.8
# tokens a weight, to the end of its schedule, in 15.4 minutes on the machine that recorded it.
# Every round lowered the validation loss and the last was the best, by less each time (the curve
# below). On the 3,224,826 characters of the 2,500 test reviews:
#
# | model | bits per character |
# |---|---|
# | `zlib -9` | 3.224 |
# | unigram (counts) | 2.536 |
# | `xz -9e` | 2.458 |
# | `bz2 -9` | 2.394 |
# | Transformer, 2 blocks of width 128, 1.5 million parameters, 8.5 million tokens | 1.779 |
# | Kneser-Ney bigram (counts) | **1.776** |
#
# **The hypothesis is not met.** The model writes the test text in 1.779 bits a character, not at
# most 1.60, and 0.003 *above* the Kneser-Ney bigram's 1.776 rather than 0.15 below it: it draws
# level with the count table and does not pass it. It writes the text in under a quarter of plain
# ASCII's 8 bits and 28% fewer bits than `xz` on the same text (18% fewer than `xz` on all 25,000
# test reviews, 2.181, where the compressor has ten times as much text to learn from); but the
# bigram counted every one of the 24 million training tokens, where the Transformer read 8.5
# million once. This is the floor doing its job: a network that has not passed its simplest
# count-based rival is not yet better than counting, and the table says so before any sample
# does. What would move it is compute, not architecture: the loss was still falling at the end,
# and the sweep says a model of this size wants about three times the tokens it read (20 a weight).
# The compressors see the test text once, as it comes; the language models learned from the
# training text first.
#
# The **perplexity** per token, 135.8 here (the bigram's 134.6, the unigram's 1,097), belongs
# to these 8,258 BPE tokens of raw text: with another tokeniser the same model would have another
# perplexity, which is why bits per character is the number to compare.

# %% [markdown]
# In the stored run the unigram model spends about 10.1 bits a token wherever the token sits, and
# the bigram about 7.1. The Transformer starts *worse* than the bigram at position 1 (7.72 bits:
# with one token of context it is a bigram model trained on a third of a pass over the text, where
# the bigram counted all of it), is still behind at position 2 (7.32 against 6.97), falls as the
# context grows, and ends at 7.09 bits a token over the second half of the row, level with the
# bigram's 7.08. The fall with position is what attention over the context adds; at this compute
# it does no more than make up for the bigram's head start in counting.
#
# ### Scoring sentences
#
# With a trained model the chain rule of section 1 scores any text: the sum of the log-probabilities
# of its tokens, each given the ones before it.

# %%
def text_log_probability(text):
    """log p(text | the start of a review) under the Transformer and the unigram model, and the token count."""
    ids = np.array([[END, *tokenizer.encode(text)]], dtype="int32")  # <|endoftext|> first: a review begins
    transformer = float(token_log_probabilities(model, ids[:, :-1], ids[:, 1:]).sum())
    return transformer, float(unigram.log_probability(ids[:, :-1], ids[:, 1:]).sum()), ids.shape[1] - 1


rng = np.random.default_rng(0)
for text in ("This movie was one of the best I have ever seen.",
             "The acting was terrible and the plot made no sense."):
    shuffled = " ".join(rng.permutation(text.split()))
    for label, candidate in (("original", text), ("shuffled", shuffled)):
        transformer, counts, count = text_log_probability(candidate)
        print(f"{label:<9} log p: Transformer {transformer:7.1f}, unigram {counts:7.1f}  ({count} tokens)  {candidate}")

# %% [markdown]
# In the stored run each original sentence is far more probable than its shuffled words under
# the Transformer: by 53.8 nats for the first (a factor of about $e^{54}$) and by 45.0 for the second.
# The unigram model, which knows nothing of order, also scores them apart, by 4.9 and 8.8 nats — only
# because byte-pair encoding cuts the shuffled words into other tokens (a "This" in mid-sentence
# is not the token that starts one, and the second shuffle spells 12 tokens against 11). What
# tells the two orders apart is the Transformer's context.

# %% [markdown]
# ## 6. The key/value cache
#
# To generate, the model predicts one token, appends it, and predicts again. Run naively, step
# $t$ feeds all $t$ tokens through every layer again, although the keys and values of the first
# $t - 1$ positions have not changed (the causal mask guarantees that earlier positions never
# see later ones). The **key/value cache** keeps them: every block stores the keys and values of
# the positions so far, and step $t$ embeds one token at position $t$, computes its query, key
# and value, writes the key and value into the cache, and attends over the cache.
#
# The course's `MultiHeadAttention` takes the cache as call arguments (`cache`,
# `cache_update_index`, as keras-hub's `CachedMultiHeadAttention` does), and
# `CachedLanguageModel` threads each block's cache from step to step. Watch it fill up:

# %%
embedding, blocks = model.token_embedding, model.decoder_blocks
caches = [block.self_attention.initial_cache(1, settings.chunk_length) for block in blocks]  # (1, 2, L, N, H) each
ids, position = np.array([[END, *tokenizer.encode("This movie was")]], dtype="int32"), 0
print("cache of block 1:", tuple(caches[0].shape), "= (batch, keys|values, positions, heads, head width)")
for step in range(5):
    x = embedding(ids[:, position:], start_index=position)  # the prompt once, then one new token
    for index, block in enumerate(blocks):
        x, caches[index] = block(x, self_attention_cache=caches[index], self_attention_cache_update_index=position)
    filled = int(np.any(keras.ops.convert_to_numpy(caches[0]) != 0, axis=(0, 1, 3, 4)).sum())
    probabilities = keras.ops.convert_to_numpy(model.output_distribution(x[:, -1:, :]))[0, 0]
    next_id = int(np.argmax(probabilities[1:])) + 1  # never padding
    position = ids.shape[1]
    ids = np.concatenate([ids, [[next_id]]], axis=1).astype("int32")
    print(f"step {step + 1}: fed {x.shape[1]} position(s); cache holds {filled} positions -> {shown(ids[0])}")

# %% [markdown]
# Cached generation must give exactly what recomputing gives. Greedy decoding both ways, token
# for token:

# %%
def recomputed_next_token(decoded):
    """Next-token probabilities by running the whole model on everything decoded so far."""
    probabilities = keras.ops.convert_to_numpy(model(np.asarray(decoded, dtype="int32")))[:, -1, :]
    probabilities[:, 0] = 0.0
    return probabilities


prompts = test_inputs[:8, :settings.prompt_length]
generator, timings = CachedLanguageModel(model, max_length=settings.chunk_length), {}
for name, function in (("recomputed", lambda: recomputed_next_token),
                       ("cached", lambda: generator.next_token_function(prompts))):
    start = time.perf_counter()
    outputs = greedy_decode(function(), prompts, end_id=None, max_length=settings.generation_length)
    timings[name] = (outputs, time.perf_counter() - start)
print("cached == recomputed:", np.array_equal(timings["cached"][0], timings["recomputed"][0]))
print(f"time for {len(prompts)} × {settings.generation_length} tokens: recomputed {timings['recomputed'][1]:.2f} s, "
      f"cached {timings['cached'][1]:.2f} s (first calls include compiling; see benchmarks/language_model_generation.py)")  # noqa: E501

# %% [markdown]
# ## 7. Sampling
#
# Greedy decoding always takes the most likely token. Language models written that way tend to
# loop ("the movie is a movie that is a movie …"): the most likely continuation of a repetition
# is more repetition. **Sampling** draws the next token at random from the model's distribution,
# reshaped by three knobs (all in `transformer_course.decoding`, all behind the same
# next-token-function interface as greedy and beam search):
#
# - **temperature** $T$: $p_i \propto p_i^{1/T}$ (the logits divided by $T$). $T < 1$ sharpens the
#   distribution toward greedy, $T > 1$ flattens it toward uniform;
# - **top-k**: keep the $k$ most likely tokens, renormalise (Fan et al., 2018);
# - **top-p** (nucleus): keep the smallest set of most likely tokens whose probability reaches
#   $p$, renormalise (Holtzman et al., 2020) — the set is small where the model is sure and large
#   where it is not. As a rule on ranked tokens: keep a token while the probability ranked above
#   it is at most $p$ (`top_p_filter`, as keras-hub's `TopPSampler`).
#
# Padding (id 0) is never generated: the next-token function gives it probability 0 and
# renormalises the rest before any knob is applied. No other token needs keeping out: byte-level
# tokens have no `[UNK]`.

# %%
def next_token_function(prompts):
    """Cached next-token probabilities for `prompts` (B, t0), padding never generated."""
    return CachedLanguageModel(model, settings.chunk_length).next_token_function(prompts)


# %% [markdown]
# One distribution from the model, reshaped each way (the 8 most likely tokens shown):

# %%
prompt = np.array([[END, *tokenizer.encode("The plot of this film is")]], dtype="int32")
distribution = next_token_function(prompt)(prompt)
top_ids = np.argsort(-distribution[0])[:8]
variants = {"model": distribution, "T = 0.5": apply_temperature(distribution, 0.5),
            "T = 1.5": apply_temperature(distribution, 1.5), "top-k 3": top_k_filter(distribution, 3),
            "top-p 0.5": top_p_filter(distribution, 0.5)}
print(f"{'':<10}" + "".join(f"{tokenizer.token(i).replace(' ', '␣'):>9}" for i in top_ids) + "   kept")
for name, values in variants.items():
    print(f"{name:<10}" + "".join(f"{values[0, i]:9.3f}" for i in top_ids) + f"   {int((values[0] > 0).sum()):,}")

# %% [markdown]
# The notes show the same reading for GPT-3 (OpenAI's playground, `text-davinci-002`, continuing a
# list of the ethical risks of generative AI): five candidate next words with their probabilities,
# "offensive = 26%" chosen, and the line "Total: −1.35 logprob on 1 tokens (50.48% probability
# covered in top 5 logits)". The logprob is a natural logarithm: $e^{-1.35} = 0.259$, the 26% of
# the word it picked. The same two numbers for our model's distribution above (its most likely token
# chosen, as greedy decoding would):

# %%
ranked = np.sort(distribution[0])[::-1]
print(f"Total: {np.log(ranked[0]):.2f} logprob on 1 tokens ({100 * ranked[:5].sum():.2f}% probability covered "
      f"in top 5 logits); as bits: {-np.log2(ranked[0]):.2f}")

# %% [markdown]
# In the stored run: $-1.77$, the 17.1% of " a", and 34.57% in the top five, against GPT-3's 50.48%
# on its list. Our distribution is flatter: a small model trained on 8.5 million tokens, on a prompt
# that many words could continue. The two numbers are the same reading as section 3's bits: $-\log_2$
# of the chosen token's probability, 2.55 bits here, is what coding that token costs.

# %% [markdown]
# ### What the knobs do, measured
#
# `knob_prompts` openings of test reviews (their first `prompt_length` tokens), continued for
# `generation_length` tokens at every setting, with a fixed seed. Three measures:
#
# - the **entropy** of the (reshaped) next-token distribution, in nats, averaged over steps: how
#   much choice the sampler leaves;
# - **distinct-2**: the share of distinct bigrams among all generated bigrams (Li et al., 2016) —
#   variety across the texts;
# - the **repetition rate**: per text, 1 − distinct 4-grams / 4-grams (seq-rep-4, Welleck et al.,
#   2020) — how much a text repeats itself.

# %%
knob_prompts = test_inputs[::max(1, len(test_inputs) // settings.knob_prompts)]
knob_prompts = knob_prompts[:settings.knob_prompts, :settings.prompt_length]
print(f"{len(knob_prompts)} prompts of {knob_prompts.shape[1]} tokens, e.g. {shown(knob_prompts[0])}")

# %%
def generate(temperature=1.0, top_k=None, top_p=None, greedy=False, seed=0):
    """Continue the knob prompts; return (generated ids without the prompts, mean entropy of the distributions used)."""
    entropies, next_token = [], next_token_function(knob_prompts)

    def measured(decoded):
        probabilities = next_token(decoded)
        shaped = apply_temperature(probabilities, temperature)
        shaped = top_k_filter(shaped, top_k) if top_k else shaped
        shaped = top_p_filter(shaped, top_p) if top_p else shaped
        entropies.append(float(np.mean(-(shaped * np.log(np.where(shaped > 0, shaped, 1))).sum(-1))))
        return probabilities

    run = greedy_decode if greedy else lambda *a, **k: sample_decode(*a, **k, temperature=temperature, top_k=top_k,
                                                                     top_p=top_p, seed=seed)
    ids = run(measured, knob_prompts, end_id=None, max_length=settings.generation_length)[:, settings.prompt_length:]
    return ids, (0.0 if greedy else float(np.mean(entropies)))

# %%
def measure(ids, entropy):
    return {"entropy": entropy, "distinct-2": distinct_n(list(ids), 2), "repetition": repetition_rate(list(ids), 4)}


greedy_ids, _ = generate(greedy=True)
greedy = measure(greedy_ids, 0.0)
knobs = {"temperature (no filter)": {t: measure(*generate(temperature=t)) for t in settings.temperatures},
         "top-k (T = 1)": {k: measure(*generate(top_k=k)) for k in settings.top_ks},
         "top-p (T = 1)": {p: measure(*generate(top_p=p)) for p in settings.top_ps}}

# %%
figure, axes = plt.subplots(3, 3, figsize=(12, 8), sharey="row")
for row, (key, unit) in enumerate((("entropy", "nats"), ("distinct-2", "share of bigrams"),
                                   ("repetition", "seq-rep-4"))):
    for column, (knob, measured) in enumerate(knobs.items()):
        axes[row, column].plot(list(measured), [m[key] for m in measured.values()], "o-", color=f"C{column}")
        axes[row, column].axhline(greedy[key], color="gray", linestyle=":", label="greedy")
        axes[row, column].set(xlabel=knob if row == 2 else None, ylabel=f"{key} ({unit})" if column == 0 else None,
                              xscale="log" if knob.startswith("top-k") else "linear")
axes[0, 0].legend(fontsize="small")
plt.show()

# %%
by_temperature, by_top_k = knobs["temperature (no filter)"], knobs["top-k (T = 1)"]
print("distinct-2 by top-k:", {k: round(m["distinct-2"], 3) for k, m in by_top_k.items()})
temperatures = sorted(by_temperature)
distinct_rises = all(by_temperature[a]["distinct-2"] < by_temperature[b]["distinct-2"]
                     for a, b in zip(temperatures, temperatures[1:]))
print("distinct-2 by temperature:", {t: round(m["distinct-2"], 3) for t, m in by_temperature.items()},
      "| increases at every step:", distinct_rises)
nucleus = measure(*generate(temperature=1.0, top_p=0.9))
print(f"repetition rate: greedy {greedy['repetition']:.3f}, top-p 0.9 {nucleus['repetition']:.3f}")
report_metric("greedy_repetition_rate", greedy["repetition"], "greedy decoding: mean seq-rep-4 of the knob prompts")
report_metric("top_p_0_9_repetition_rate", nucleus["repetition"],
              "top-p 0.9 sampling: mean seq-rep-4 of the knob prompts")

# %% [markdown]
# In the stored run every knob moves the three measures the same way. Distinct-2 (of BPE tokens)
# rises with the temperature from 0.147 at $T = 0.2$ (near-greedy decoding sends different prompts
# down the same phrases) to 0.954 at $T = 1.2$ and 0.981 at 1.5; with top-k from 0.071 at $k = 1$
# (greedy) to 0.921 at $k = 1{,}000$; with top-p likewise (the plot). Greedy decoding repeats 46%
# of its 4-grams within a text; sampling with top-p 0.9 almost none (0.001 to three decimals).
#
# Variety is not quality. One opening, continued at a low, the model's own and two high
# temperatures (the same seed):

# %%
opening = knob_prompts[:1]
for temperature in (0.5, 1.0, 1.2, 1.5):
    ids = sample_decode(next_token_function(opening), opening, end_id=END, max_length=settings.generation_length,
                        temperature=temperature, seed=0)
    print(f"T = {temperature}: {tokenizer.decode(ids[0][ids[0] != 0])!r}")

# %% [markdown]
# In the stored run the continuation at $T = 0.5$ is review sentences that say nothing ("It's not a
# lot of the movie, and it's not a touching action movie."); at $T = 1$ it drifts into names and
# capitals that are no names ("Cheiss", "DeREERSERE Lucas FORONODEN"); at 1.2 and 1.5 words break
# into pieces that are no words ("hlockwalkers", "swoly", "twcked", "Warcome"). The high
# distinct-2 of the highest temperatures is variety of noise.

# %% [markdown]
# ### The notes' setting
#
# The notes show a 6-billion-parameter model (GPT-J-6B) continuing "This is a story about me
# and my brothers" with **top-p 0.9** and **temperature 0.8**. Our model with the same setting,
# three seeds (change the prompt to your own):

# %%
story = np.array([[END, *tokenizer.encode("This is a story about me and my brothers")]], dtype="int32")
for seed in range(3):
    ids = sample_decode(next_token_function(story), story, end_id=END, max_length=settings.generation_length,
                        temperature=0.8, top_p=0.9, seed=seed)
    print(f"seed {seed}:", tokenizer.decode(ids[0, 1:][ids[0, 1:] != 0]))
greedy_story = greedy_decode(next_token_function(story), story, END, settings.generation_length)
print("greedy:", tokenizer.decode(greedy_story[0, 1:][greedy_story[0, 1:] != 0]))

# %% [markdown]
# In the stored run the sampled continuations are fluent for a few words and aimless beyond: they
# turn to films at once (seed 0: "of the film, but she was never seen by his turd"; seed 1: "The
# movie is better and that makes us about it. I loved it."), and nothing links back to the
# brothers. The greedy continuation falls into the loop that section 7 described ("It's a good
# movie. It's a good movie. It's a good movie."). The text is raw: capitals, apostrophes and
# punctuation come out as the model read them. A two-block model trained on 8.5 million tokens of
# film reviews writes like a film review, and not yet a good one.

# %% [markdown]
# ## 8. How far from GPT-3?
#
# The notes give GPT-3's size, 175 billion parameters, and a training cost of over \$4.6M. The
# GPT-3 paper (Brown et al., 2020, Table 2.2) adds the data: about 300 billion training tokens.
# Training a Transformer costs about 6 floating-point operations per parameter and token
# (2 forward, 4 backward; Kaplan et al., 2020, *Scaling Laws for Neural Language Models*, §2.1):
# for GPT-3, 6 × 175·10⁹ × 300·10⁹ ≈ 3.1·10²³, the figure its paper gives (3.14·10²³ FLOPs,
# Appendix D). The same rule for our model, from its own counts (every parameter counted once:
# the tied embedding matrix does its multiplications in the output layer):

# %%
ours_parameters, ours_tokens = model.count_params(), trained_tokens
print(f"parameters:      ours {ours_parameters:>15,}   GPT-3 {175_000_000_000:>19,}   "
      f"ratio {175e9 / ours_parameters:,.0f}×")
print(f"tokens trained:  ours {ours_tokens:>15,}   GPT-3 {300_000_000_000:>19,}   ratio {300e9 / ours_tokens:,.0f}×")
ours_operations = 6 * ours_parameters * ours_tokens
print(f"training FLOPs:  ours {ours_operations:>15.2e}   GPT-3 {3.14e23:>19.2e}   "
      f"ratio {3.14e23 / ours_operations:,.0f}×")
print(f"training time:   ours {facts['seconds'] / 60:.0f} min on this machine's CPU")
print(f"tokens per parameter: ours {ours_tokens / ours_parameters:.1f}, GPT-3 {300e9 / 175e9:.1f}; compute-optimal "
      "training (Hoffmann et al., 2022, the Chinchilla paper) is about 20")

# %% [markdown]
# Our run read 5.7 tokens per parameter, under a third of the compute-optimal 20 of Hoffmann et al.
# (2022): a model of this size would want about 30 million tokens, where it read 8.5 million.
# Section 5's sweep chose the size for the compute; the compute itself is what a 2-core CPU gives a
# notebook in a sitting.
#
# The architecture is the same idea — a stack of causal decoder blocks and a softmax over the
# vocabulary, trained to predict the next token; GPT-3 has 96 blocks of width 12,288 and reads
# 2,048 tokens at a time. What separates the two is scale: parameters, data and compute, each by
# several orders of magnitude, and what scale brings (text from the whole web, and abilities
# that a model of film reviews never shows).
#
# > **The notes say** training GPT-3 "costed over \$4.6M using a Tesla V100 cloud instance". That
# > is an **estimate**, not a bill: Lambda Labs' (Chuan Li, *OpenAI's GPT-3 Language Model: A
# > Technical Overview*, 2020) price for 3.14·10²³ FLOPs at a V100's speed, about 355 GPU-years,
# > at its cheapest cloud rate. OpenAI has not published what the training cost. The notes also
# > list "parallel processing instead of left-to-right or bidirectional models" among what marks
# > large language models. GPT is a **left-to-right** model (the causal mask of section 4): what is
# > parallel is *training*, where every position of a row predicts its next token in one forward
# > pass (teacher forcing). *Generation* stays one token after another (section 6's loop).
#
# ## 9. GPT-2 inside our decoder
#
# OpenAI's GPT-2 (Radford et al., 2019, *Language Models are Unsupervised Multitask Learners*) is
# the model of section 4 grown up: 12 pre-norm blocks of width 768, learned positions for 1,024
# tokens, a final layer normalisation, the output tied to the token embedding, and a byte-level
# BPE of 50,000 merges — 124,439,808 parameters, trained on 40 GB of web text (WebText).
# `transformer_course.gpt2_checkpoints` copies keras-hub's `GPT2Backbone` weights into the
# course's own `build_language_model` (`normalize_first=True`, `final_norm=True`), and GPT-2's
# vocabulary and merges into the course's `BytePairEncoding`. The test suite checks the
# conversion offline on a small random `GPT2Backbone`: equal probabilities (to 1e-4) on a padded
# batch, and cached greedy decoding equal to uncached over 20 steps.
#
# Where the `gpt2_base_en` preset can be downloaded (Colab, any machine with internet), the cells
# below load it (about 500 MB) and run our code on it (a classroom without internet can point the
# environment variable `COURSE_GPT2_PRESET` at the folder of a copy of the preset): the notes' prompt with the notes' setting,
# GPT-2's bits per character on the same test text as our model's, and the speed of our cache at
# 124 million parameters. Where it cannot, one line says so and the section is skipped.

# %%
gpt2_preset = os.environ.get("COURSE_GPT2_PRESET", "gpt2_base_en")  # or the folder of a copy of the preset
try:
    gpt2, gpt2_tokenizer = load_gpt2_preset(gpt2_preset, sequence_length=settings.gpt2_sequence_length)
    print(f"GPT-2 in the course's decoder: {gpt2.count_params():,} parameters")
except PresetUnavailableError as error:
    gpt2 = None
    print(f"GPT-2 is not loaded here, so this section is skipped: {error}")

# %%
if gpt2 is not None:
    gpt2_end = gpt2_tokenizer.special_ids["<|endoftext|>"]
    notes_prompt = np.array([[gpt2_end, *gpt2_tokenizer.encode("This is a story about me and my brothers")]], "int32")
    for seed in range(2):
        gpt2_next = CachedLanguageModel(gpt2, settings.gpt2_sequence_length).next_token_function(notes_prompt)
        ids = sample_decode(gpt2_next, notes_prompt, end_id=gpt2_end, max_length=settings.generation_length,
                            temperature=0.8, top_p=0.9, seed=seed)
        print(f"seed {seed}:", gpt2_tokenizer.decode(ids[0, 1:][ids[0, 1:] != 0]))

# %%
if gpt2 is not None:
    sample_texts = test_texts[:settings.gpt2_test_reviews]  # GPT-2 is slow on a CPU: the first reviews only
    sample_characters = {}
    for name, coder in (("GPT-2", gpt2_tokenizer), ("ours", tokenizer)):
        end = coder.special_ids["<|endoftext|>"]
        inputs, targets = running_text_chunks([coder.encode(text) for text in sample_texts], settings.chunk_length, end)
        text = "".join(text + "\n" for text in sample_texts)[len(coder.decode(inputs[0][:1])):]
        scored = token_log_probabilities(gpt2 if name == "GPT-2" else model, inputs, targets, batch_size=8)
        sample_characters[name] = bits_per_character(scored, targets, len(text))
    print(f"bits per character of the first {len(sample_texts)} test reviews (rows of {settings.chunk_length} tokens): "
          + ", ".join(f"{name} {value:.3f}" for name, value in sample_characters.items()))

# %%
def gpt2_next_token(name):
    """A fresh next-token function for the notes' prompt: the whole model on every step, or the cache."""
    if name == "recomputed":
        return lambda decoded: keras.ops.convert_to_numpy(gpt2(np.asarray(decoded, "int32")))[:, -1, :]
    return gpt2_cached.next_token_function(notes_prompt)  # one CachedLanguageModel: its step compiles once


if gpt2 is not None:
    gpt2_cached = CachedLanguageModel(gpt2, settings.gpt2_sequence_length)
    for name in ("recomputed", "cached"):
        greedy_decode(gpt2_next_token(name), notes_prompt, end_id=None, max_length=2)  # compiles: not timed
        started = time.perf_counter()
        ids = greedy_decode(gpt2_next_token(name), notes_prompt, end_id=None, max_length=settings.generation_length)
        print(f"{name:<10} {settings.generation_length / (time.perf_counter() - started):6.1f} tokens/s "
              f"(one sequence): {gpt2_tokenizer.decode(ids[0, 1:])!r}")

# %% [markdown]
# ## 10. A base model continues text; it does not answer
#
# Everything trained in this notebook, and GPT-2 and GPT-3 too, is a **base model**: it
# continues text the way its training text goes on. Ask it a question and it writes what tends
# to follow a question in its data. The notes show it: a base model given "What is the capital
# of France?" goes on with more questions ("What is France's largest city? What is France's
# population?"), a list as it might appear on a quiz page. The notes' two other prompts ask for
# more: the instructions the *Guardian* gave GPT-3 for its op-ed "A robot wrote this entire
# article" (2020), and a question PaLM (Chowdhery et al., 2022) answered with a chain of
# reasoning ("300 miles per hour is about 480 km/h. This is about the speed of a commercial
# airplane … The answer is \"yes\"."). Our model, given each (two seeds):

# %%
notes_prompts = {
    "question": "What is the capital of France?",
    "op-ed": "Please write a short op-ed around 500 words. Keep the language simple and concise. Focus on why "
             "humans have nothing to fear from AI.",
    "reasoning": "Jennifer looked out her window and sees a really cool cloud below her. She unbuckles her seatbelt "
                 "and heads to the bathroom. Is Jennifer probably traveling more than 300 miles per hour relative "
                 "to the earth?",
}
fits = settings.chunk_length - settings.generation_length - 1  # the whole prompt in the full profile

# %%
for name, text in notes_prompts.items():
    question = np.array([[END, *tokenizer.encode(text)[-fits:]]], dtype="int32")
    for seed in range(2):
        ids = sample_decode(next_token_function(question), question, end_id=END, max_length=settings.generation_length,
                            temperature=0.8, top_p=0.9, seed=seed)
        continuation = ids[0, question.shape[1]:]
        print(f"{name} (seed {seed}): …", " ".join(tokenizer.decode(continuation[continuation != 0]).split()))

# %% [markdown]
# In the stored run none of the six continuations answers, writes an op-ed or reasons. Each goes on
# as a film review would, or drifts into nonsense ("a belly song in the world"): the model has only
# ever seen reviews, and it continues text the way reviews go on. GPT-3's op-ed needed both more than a base model and more than one sample: the
# *Guardian* ran eight of its outputs and edited the best parts together (its editor's note), and
# PaLM's answer came after it was shown worked examples of the same form (chain-of-thought
# prompting; Wei et al., 2022) — a prompt, not an instruction-following model.
#
# An **instruction-tuned** model is a base model trained further to follow instructions (Ouyang
# et al., 2022, *Training language models to follow instructions with human feedback*, the
# InstructGPT paper, §3):
#
# 1. **supervised fine-tuning** on prompts paired with answers that people wrote — the same
#    next-token loss as section 5, on (instruction, good answer) text;
# 2. a **reward model**, trained on people's rankings of several answers to one prompt, to score
#    an answer;
# 3. **reinforcement learning from human feedback** (RLHF): the fine-tuned model is trained to
#    produce answers the reward model scores highly (with PPO), while a penalty keeps it close to
#    the fine-tuned model.
#
# The paper's labellers preferred the answers of a 1.3-billion-parameter InstructGPT to those of
# the 175-billion-parameter GPT-3 (its §4.1). The notes' "helpful, honest, harmless" are the
# goals that paper sets for the labellers (after Askell et al., 2021). The notes' GPT-3 slides
# say the model was "elegantly trained on an unlabeled text dataset" and that it "takes in a
# prompt, and attempts to complete it": both describe the base model; the ChatGPT-style answer
# "The capital of France is Paris." comes from the instruction tuning on top.

# %% [markdown]
# ## 11. A language model is a compressor: the file gets smaller
#
# Section 3 measured the model in bits per character and called that a code length. Here the
# model writes the code. **Arithmetic coding** (Witten, Neal and Cleary, 1987, *Arithmetic coding
# for data compression*) turns any sequence of next-token distributions into bits, within a few
# bits of $-\sum_t \log_2 p(x_t \mid x_{<t})$ for the whole message (MacKay, 2003, §6.2; Delétang et
# al., 2024, *Language Modeling Is Compression*, do it with large models):
#
# 1. The coder keeps an interval of integers, $[\text{low}, \text{high}]$, at first all of
#    $[0, 2^{32} - 1]$. Each token's distribution becomes **integer frequencies** summing to $T = 2^{24}$
#    (every token at least 1, so nothing is impossible to code; padding 0).
# 2. To code token $s$ of frequency $f_s$, with $c_s$ the frequencies of the tokens before it, the
#    interval narrows to $s$'s share of it: with $w = \text{high} - \text{low} + 1$,
#    $$\text{low}' = \text{low} + \lfloor w\,c_s / T \rfloor, \qquad
#    \text{high}' = \text{low} + \lfloor w\,(c_s + f_s) / T \rfloor - 1.$$
#    A likely token keeps most of the interval; an unlikely one a sliver.
# 3. Whenever the interval lies in one half of the range, that leading bit can never change: the
#    coder writes it and doubles the interval. A token of probability $p$ shrinks the interval by
#    the factor $p$, so it writes about $-\log_2 p$ bits.
# 4. The **decoder** holds the same model. At each step it computes the same frequencies, finds
#    which token's share contains the code it reads, and narrows exactly as the coder did.
#
# The decoder must compute *the very same integers* as the coder, or it goes wrong from the first
# difference on. So both run the model the same way: one step a token through the key/value cache
# of section 6 (the same compiled function, the same shapes); when the cache is full (256 tokens)
# both restart it with the last 128 tokens. The frequencies come from the float probabilities by
# one exact rule (`integer_frequencies`). On another machine, whose arithmetic may differ in the
# last bit, decoding stops with a checksum error; it never returns wrong text. The file
# begins with a header: a format version, the model's vocabulary size and context length, and a
# CRC-32 checksum of the text.
#
# The worked example first, by hand: three symbols of frequencies 2, 1, 1 (of 4), the message 0, 2, 1.

# %%
import inspect

import transformer_course.masks
from transformer_course.compression import (
    ArithmeticEncoder,
    LineTokenizer,
    compress,
    decompress,
    general_purpose_compressors,
    integer_frequencies,
    narrowed,
)
from transformer_course.datasets import load_spa_eng

frequencies = [2, 1, 1]
cumulative, coder = [0, 2, 3, 4], ArithmeticEncoder()
for symbol in (0, 2, 1):
    low, high = narrowed(coder.low, coder.high, cumulative, symbol)
    before = coder.bits_written
    coder.encode(symbol, frequencies)  # narrows, then writes the settled bits and doubles the interval
    settled = "".join(map(str, coder.bits[before:]))
    print(f"symbol {symbol}: [{coder.low:,}, {coder.high:,}] after writing {settled or 'no bit'}; "
          f"it had narrowed to [{low:,}, {high:,}]")
code = coder.finish()
print(f"the code: {''.join(map(str, coder.bits))} ({coder.bits_written} bits: the ideal 1 + 2 + 2, and 2 that "
      f"pick a point inside the last interval) -> the byte {code.hex()}")

# %% [markdown]
# Now the model. The file to compress is what section 5 scored, cut to whole reviews: test reviews,
# one a line. The tokenizer becomes the one the model was trained with, plus one rule: a newline is
# written as `<|endoftext|>`, which is how the training text separated reviews. The text is cut into
# a few parts coded side by side (`streams`): the model runs them as one batch, which on this CPU
# costs little more than one row. Decompressing runs the model again, token by token, and must give
# back every byte.

# %%
lines = LineTokenizer(tokenizer, separator_id=END)  # a newline is <|endoftext|>, as between training reviews
chosen = []
for text in test_texts:  # whole reviews of section 5's sample, up to the size chosen
    if chosen and sum(len(review) + 1 for review in chosen) + len(text) + 1 > settings.compression_characters:
        break
    chosen.append(text)
reviews_text = "".join(text + "\n" for text in chosen)
characters = len(reviews_text)
started = time.perf_counter()
packed, coded = compress(reviews_text, model, lines, streams=settings.compression_streams, statistics=True,
                         progress=True)
compress_seconds, started = time.perf_counter() - started, time.perf_counter()
exact = decompress(packed, model, lines, progress=True) == reviews_text
decompress_seconds = time.perf_counter() - started

# %%
coded_bits, model_bits = 8 * len(packed) / characters, coded["model_bits"] / characters
print(f"{len(chosen)} test reviews: {characters:,} characters ({len(reviews_text.encode('utf-8')):,} bytes of UTF-8), "
      f"{coded['tokens']:,} tokens in {coded['streams']} streams, {coded['restarts']} context restarts")
print(f"compressed: {len(packed):,} bytes ({coded['header_bytes']} of header) -> {coded_bits:.4f} bits per character")
print(f"the model's own -log2 p of those tokens: {model_bits:.4f} bits per character; the file is "
      f"{coded_bits / model_bits - 1:+.3%} larger")
in_model = coded["model_seconds"] / (coded["model_seconds"] + coded["coder_seconds"])
print(f"decompressed: {'every byte equal to the original' if exact else 'NOT EQUAL'}; {compress_seconds:.0f} s to "
      f"compress, {decompress_seconds:.0f} s to decompress ({in_model:.0%} of compressing in the model)")
report_metric("arithmetic_coder_bits_per_character", coded_bits, f"the model driving an arithmetic coder: bits per "
              f"character of the compressed file, {len(chosen)} test reviews ({characters:,} characters)")
report_metric("arithmetic_coder_overhead", coded_bits / model_bits - 1, "the compressed file's size over the model's "
              "own -log2 p of the tokens, minus 1")

# %% [markdown]
# In the stored run the coder wrote 77 test reviews (99,799 characters) in 22,269 bytes: 1.7851
# bits per character, 0.226% more than the model's own $-\sum \log_2 p$ of the same tokens (the
# goal was within 0.5%). The difference is the 46-byte header, the few bits that end each of the
# 8 streams, and the rounding of each distribution to integer frequencies. Decompressing gave
# back every byte. 92% of the time went into the model, not the coder's arithmetic.
#
# The same bytes through four general-purpose compressors, with their speeds, beside the file the
# model wrote; and section 5's measure (rows of 256 tokens, no context carried across rows) on
# this sample:

# %%
general = general_purpose_compressors(reviews_text.encode("utf-8"), repeats=settings.compressor_timing_repeats)
rows = [(name, sizes["bytes"], sizes["compress_seconds"], sizes["decompress_seconds"])
        for name, sizes in general.items()]
rows.append(("this notebook's model + arithmetic coder", len(packed), compress_seconds, decompress_seconds))
print(f"{'':<42}{'bytes':>9}{'bits/char':>11}{'compress':>13}{'decompress':>13}   (characters a second)")
for name, size, squeeze, expand in sorted(rows, key=lambda row: row[1]):
    print(f"{name:<42}{size:>9,}{8 * size / characters:>11.4f}{characters / squeeze:>13,.0f}"
          f"{characters / expand:>13,.0f}")
smaller = 1 - len(packed) / general["xz -9e"]["bytes"]
report_metric("arithmetic_coder_smaller_than_xz", smaller, "the model's compressed file, 1 minus its size over "
              "xz -9e's, on the same test reviews")

# %% [markdown]
# A count table is a language model too, and the coder takes any next-token distribution: the
# Kneser-Ney bigram of section 3 (`BigramModel.next_token_probabilities`: the whole distribution
# after a token) drives the very same coder on the very same reviews. Beating `xz` is a claim the
# bigram could make as well; beating the bigram's own file is a claim only a model that uses more
# than one token of context can make.

# %%
started = time.perf_counter()
table_packed = compress(reviews_text, bigram, lines, streams=settings.compression_streams)
table_seconds = time.perf_counter() - started
assert decompress(table_packed, bigram, lines) == reviews_text
versus_table = 1 - len(packed) / len(table_packed)
print(f"the Kneser-Ney bigram through the same coder: {len(table_packed):,} bytes, "
      f"{8 * len(table_packed) / characters:.4f} bits per character ({characters / table_seconds:,.0f} characters a "
      f"second; {1 - len(table_packed) / general['xz -9e']['bytes']:.1%} smaller than xz -9e's file)")
print(f"the Transformer's file: {len(packed):,} bytes, {versus_table:.1%} smaller than the bigram's")
report_metric("arithmetic_coder_smaller_than_bigram", versus_table, "the model's compressed file, 1 minus its size "
              "over the Kneser-Ney bigram's through the same coder, on the same test reviews")

# %%
sample_inputs, sample_targets = chunks(chosen, "encoding the sample")
scored = reviews_text[len(tokenizer.decode(sample_inputs[0][:1])):]
section_5 = bits_per_character(token_log_probabilities(model, sample_inputs, sample_targets), sample_targets,
                               len(scored))
print(f"section 5's measure on this sample: {section_5:.4f} bits per character (the coder's contexts: "
      f"{model_bits:.4f})")
parameters_bytes = 4 * model.count_params()
print(f"the decoder needs the model: {model.count_params():,} parameters, {parameters_bytes / 1e6:.1f} MB as "
      f"float32, {parameters_bytes / len(packed):,.0f} times the compressed file; counted with it, "
      f"{8 * (len(packed) + parameters_bytes) / characters:.2f} bits per character of this text")

# %% [markdown]
# **The hypothesis** (set before the run): on the held-out reviews the model's file is at least
# 25% smaller than `xz -9e`'s. Measured: 41.9% smaller (22,269 bytes against 38,312), and smaller
# than bzip2's (35,471), the best general compressor on this short text, by 37%. Supported — and
# empty: the Kneser-Ney bigram through the same coder wrote the same reviews in 22,316 bytes, 41.8%
# smaller than `xz`'s too, and the Transformer's file is only 0.2% (47 bytes) smaller than the
# table's. Beating `xz` on 100 KB is what any model of the language does, because `xz` has little
# to match against there (on all 25,000 test reviews, section 5, it reaches 2.181 bits per
# character); the claim that only context can earn — a file clearly smaller than the best count
# table's — is not earned at this compute, as section 5 found.
#
# What the comparison leaves out. **Speed**: the model codes about 4,600 characters a second
# compressing and 4,900 decompressing; `xz` compresses 360 times faster and decompresses about
# twelve thousand times faster, because the model runs once per token in both directions (the
# bigram table, a row of counts a token, codes about 49,000 characters a second). **The model**:
# the decoder needs its 1,494,594 parameters, 6.0 MB as float32, 268 times the compressed file;
# counted with them, the file costs 481.02 bits a character of these 100 KB, where `xz`'s costs
# 3.0711. The rate that counts the model's own size (Delétang et al., 2024, *Language Modeling Is
# Compression*) says when a learned compressor pays: only past the text whose savings, about 0.16
# bytes a character over `xz` here, add up to its 6 MB, on the order of forty million characters.
#
# The model learned IMDB reviews, not English. Two texts of other kinds, coded the same way: English
# sentences from Tatoeba (the corpus of notebooks 01, 02 and 07: short everyday sentences, no film
# in sight) and a page of Python, the source of the package's masks.

# %%
english = list(dict.fromkeys(english for english, _ in load_spa_eng()))
sentences = "\n".join(np.random.default_rng(0).permutation(english)[:5000])[:settings.other_characters]
others = {"IMDB test reviews (above)": reviews_text,
          "Tatoeba English sentences": sentences[:sentences.rfind("\n")],
          "Python source (transformer_course/masks.py)": inspect.getsource(transformer_course.masks)[
              :settings.other_characters]}
print(f"{'':<44}{'characters':>11}{'model':>8}{'xz -9e':>8}{'bzip2':>8}   bits per character; the model's "
      "file over xz's")
for name, text in others.items():
    data = packed if name.startswith("IMDB") else compress(text, model, lines, streams=settings.compression_streams)
    assert name.startswith("IMDB") or decompress(data, model, lines) == text
    sizes = {key: 8 * value["bytes"] / len(text) for key, value in general_purpose_compressors(text.encode()).items()}
    print(f"{name:<44}{len(text):>11,}{8 * len(data) / len(text):>8.3f}{sizes['xz -9e']:>8.3f}"
          f"{sizes['bzip2 -9']:>8.3f}   {8 * len(data) / len(text) / sizes['xz -9e']:.2f}")

# %% [markdown]
# In the stored run the advantage holds on Tatoeba's sentences (the model's file 0.61 of `xz`'s,
# 2.079 bits per character against 1.785 on reviews): everyday English shares most of its words
# and short-range statistics with reviews, and 15,000 characters give `xz` little to match. On
# Python source it reverses: 4.419 bits per character, 1.52 times `xz`'s file. Code is not in the
# model's data; its BPE cuts identifiers into many short tokens, and the source repeats itself
# (names, `keras.ops`, docstring phrases), which is exactly what `xz`'s matches exploit and what a
# model that never saw this text cannot. The hypothesis's second half — the advantage shrinks or
# reverses away from the model's own domain — holds for code and, within this measurement, not
# for plain English.

# %% [markdown]
# ## 12. The three families the course built
#
# | | encoder-decoder (notebook 07) | encoder-only (notebook 08) | decoder-only (this notebook) |
# |---|---|---|---|
# | attention masks | encoder: padding only; decoder: causal + padding, and cross-attention to the encoder | padding only: every token sees both sides | causal: each token sees itself and the tokens before it |
# | training objective | next target token given the whole source (teacher forcing) | masked language model (plus next-sentence prediction in BERT) | next token, at every position |
# | what it is for | mapping one sequence to another: translation, summarisation | understanding a given text: classification, tagging, span finding | generating text; scoring text (a compressor) |
# | output at inference | one token at a time (greedy or beam search) | one vector per token, all at once | one token at a time (sampling) |
# | the notes' examples | a French sentence translated to English, the decoder attending to "étudiant" as it writes "student" | BERT fine-tuned for named entities and question answering; the Texas / New York blanks | GPT-3's essay, GPT-J's story |
#
# ## Summary
#
# - A language model is the chain rule: a product of next-token probabilities. Its negative
#   log-likelihood in bits is a code length: **bits per character** compares any two models, and
#   a model with general-purpose compressors, on the same text; perplexity is the same quantity
#   per token, and only comparable between models with the same tokens.
# - Byte-level BPE leaves no word out of the vocabulary, so the model scores and writes raw text.
# - A decoder-only Transformer is the decoder block with causal self-attention only, and output
#   weights tied to the embedding; GPT-2 is the same model, bigger, and loads into it.
# - The key/value cache makes each generated token cost one new position; cached and recomputed
#   generation give the same tokens.
# - Temperature, top-k and top-p reshape the next-token distribution; the measurements show what
#   each does to variety and repetition.
# - A base model continues text; instruction tuning and RLHF make it answer.
# - The model's probabilities drive an arithmetic coder: the file it writes is the model's
#   bits per character made real, and decompressing needs the very same model.
#
# ## Graded exercises
#
# Complete each function where it says `raise NotImplementedError(...)`, then run the cell after
# it: `check` tells you at once whether your function is right, and if not, what differs.
# The rest of the notebook does not depend on your answers. All six are plain NumPy; 09.5, the
# capstone, puts the pieces of notebooks 04, 05 and this one together into the whole model.
# Six exercises, 17 points; our estimate of the time they take, not a measurement: about three
# and a half hours (the capstone about 90 minutes).
#
# ### Exercise 09.1 — softmax with a temperature (2 points)
#
# Write `softmax_with_temperature(logits, temperature)`: `logits` is float `(B, V)`; return the
# softmax of `logits / temperature` along the last axis, `(B, V)`. Subtract each row's own maximum
# before the exponential, so large logits do not overflow (one maximum for the whole array is not
# enough: a row far below it would underflow to 0 / 0).

# %% nbgrader={"grade": false, "grade_id": "exercise_09_1", "locked": false, "schema_version": 3, "solution": true}
def softmax_with_temperature(logits, temperature):
    """logits (B, V), temperature > 0 -> probabilities (B, V) of softmax(logits / temperature)."""
    ### BEGIN SOLUTION
    scaled = np.asarray(logits, dtype="float64") / temperature
    scaled -= scaled.max(axis=-1, keepdims=True)
    exponentials = np.exp(scaled)
    return exponentials / exponentials.sum(axis=-1, keepdims=True)
    ### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "check_09_1", "locked": true, "points": 2, "schema_version": 3, "solution": false}
from transformer_course.exercises import check

check("09.1", softmax_with_temperature)
### BEGIN HIDDEN TESTS
from transformer_course_grader import evaluate_hidden

assert evaluate_hidden("09.1", softmax_with_temperature, seed=7).passed
### END HIDDEN TESTS

# %% [markdown]
# ### Exercise 09.2 — the top-p (nucleus) filter (3 points)
#
# Write `nucleus_filter(probabilities, p)`: `probabilities` is float `(B, V)`, each row summing
# to 1. Rank each row's tokens from most to least likely (ties in probability: the lower id first)
# and keep a token while the probability of the tokens ranked above it is **at most** `p` (`<=`,
# the rule of keras-hub's `TopPSampler` and of `decoding.top_p_filter`): the most likely token is
# always kept, and so is the token that makes the total reach `p`. Set the others to 0 and
# renormalise the row to sum to 1.

# %% nbgrader={"grade": false, "grade_id": "exercise_09_2", "locked": false, "schema_version": 3, "solution": true}
def nucleus_filter(probabilities, p):
    """probabilities (B, V), 0 < p <= 1 -> (B, V): the top-p set of each row kept and renormalised."""
    ### BEGIN SOLUTION
    probabilities = np.asarray(probabilities, dtype="float64")
    order = np.argsort(-probabilities, axis=-1, kind="stable")
    ranked = np.take_along_axis(probabilities, order, axis=-1)
    keep = np.cumsum(ranked, axis=-1) - ranked <= p  # the mass ranked above a token is at most p
    kept = np.zeros_like(probabilities)
    np.put_along_axis(kept, order, np.where(keep, ranked, 0.0), axis=-1)
    return kept / kept.sum(axis=-1, keepdims=True)
    ### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "check_09_2", "locked": true, "points": 3, "schema_version": 3, "solution": false}
check("09.2", nucleus_filter)
### BEGIN HIDDEN TESTS
assert evaluate_hidden("09.2", nucleus_filter, seed=7).passed
### END HIDDEN TESTS

# %% [markdown]
# ### Exercise 09.3 — one attention step with a key/value cache (3 points)
#
# Write `cached_attention_step(query, key, value, key_cache, value_cache, index)`: the step of
# section 6 for one new token at position `index` = t. `query`, `key` and `value` are float
# `(B, N, 1, H)`, the new token's projections; `key_cache` and `value_cache` are float
# `(B, N, L, H)` with room for L positions, holding the keys and values of positions 0 … t − 1
# (what they hold from t on is stale: never attend to it). Write `key` and `value` at position t,
# attend from `query` over positions 0 … t (scaled by √H; no mask is needed), and return
# `(output (B, N, 1, H), new key cache, new value cache)`. The layout differs from the course's
# layer on purpose: here heads come before positions, as after `split_heads`, and keys and values
# are two arrays; the layer of section 6 stores one `(B, 2, L, N, H)` array (keys, then values;
# positions before heads). `show_case("09.3")` (from `transformer_course.exercises`) prints the
# first public case, t = 0, with the output and caches expected.

# %% nbgrader={"grade": false, "grade_id": "exercise_09_3", "locked": false, "schema_version": 3, "solution": true}
def cached_attention_step(query, key, value, key_cache, value_cache, index):
    """The new token's q, k, v (B, N, 1, H), caches (B, N, L, H), its position -> (output, caches)."""
    ### BEGIN SOLUTION
    key_cache, value_cache = key_cache.copy(), value_cache.copy()
    key_cache[:, :, index:index + 1], value_cache[:, :, index:index + 1] = key, value
    keys, values = key_cache[:, :, :index + 1], value_cache[:, :, :index + 1]  # positions 0 ... t
    scores = query @ keys.transpose(0, 1, 3, 2) / np.sqrt(query.shape[-1])  # (B, N, 1, t + 1)
    weights = np.exp(scores - scores.max(axis=-1, keepdims=True))
    return weights / weights.sum(axis=-1, keepdims=True) @ values, key_cache, value_cache
    ### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "check_09_3", "locked": true, "points": 3, "schema_version": 3, "solution": false}
check("09.3", cached_attention_step)
### BEGIN HIDDEN TESTS
assert evaluate_hidden("09.3", cached_attention_step, seed=7).passed
### END HIDDEN TESTS

# %% [markdown]
# ### Exercise 09.4 — perplexity and bits per character (2 points)
#
# Write `perplexity_and_bits(log_probabilities, targets, characters)`: `log_probabilities` is
# float `(R, L)`, the natural log of the probability the model gave each target token (0 at
# padding), `targets` int `(R, L)` with 0 = padding, and `characters` the number of characters
# the real targets spell. Return `(perplexity, bits per character)`: the exponential of the mean
# negative log-likelihood over the real targets, and their summed negative log-likelihood in
# bits divided by `characters` (sections 1 and 3). The cell after the check runs your function on this
# notebook's test scores.

# %% nbgrader={"grade": false, "grade_id": "exercise_09_4", "locked": false, "schema_version": 3, "solution": true}
def perplexity_and_bits(log_probabilities, targets, characters):
    """(R, L) log-probabilities, (R, L) targets (0 = padding), characters -> (perplexity, bits per character)."""
    ### BEGIN SOLUTION
    scores = log_probabilities[targets != 0]
    return float(np.exp(-scores.mean())), float(-scores.sum() / np.log(2) / characters)
    ### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "check_09_4", "locked": true, "points": 2, "schema_version": 3, "solution": false}
check("09.4", perplexity_and_bits)
### BEGIN HIDDEN TESTS
assert evaluate_hidden("09.4", perplexity_and_bits, seed=7).passed
### END HIDDEN TESTS

# %%
try:
    yours = perplexity_and_bits(scores, test_targets, test_characters)
    print(f"yours: perplexity {yours[0]:.3f}, {yours[1]:.4f} bits per character; the package's: "
          f"{perplexity(scores, test_targets):.3f}, {transformer_bits:.4f}")
except NotImplementedError:
    print("perplexity_and_bits: not attempted yet")

# %% [markdown]
# ### Exercise 09.5 — capstone: the whole GPT forward pass (5 points)
#
# Everything of notebooks 04, 05 and this one, in one function: write
# `gpt_forward(token_ids, weights, config)`, the forward pass of the package's `LanguageModel`
# in NumPy. `token_ids` is int `(B, T)`, 0 = padding (only at the end of a row). Return the
# logits, float `(B, T, V)`: at position t, the scores of the token that follows. Logits at
# padding positions are not checked.
#
# `weights` is what `forward_weights(model)` returns (its docstring lists every name and shape):
# `"token_embedding"` `(V, E)`, `"position_embedding"` `(T_max, E)`, `"blocks"` (a list, one dict
# per block in the layout of exercise 05.3), `"final_norm"` (`gamma`, `beta`; only when the model
# has one) and `"output_bias"` `(V,)`. `config` holds `"num_heads"`, `"normalize_first"` (pre-norm
# blocks), `"activation"` (`"relu"`, or `"gelu_approximate"`:
# `0.5 x (1 + tanh(√(2/π) (x + 0.044715 x³)))`) and `"layer_norm_epsilon"`.
#
# The pass: token embedding plus position embedding; then each block — causal multi-head
# self-attention in which no query attends to a later position or to padding, then the
# feed-forward network, each with its residual connection and LayerNorm (after the sum in a
# post-norm block, before the sub-layer in a pre-norm one); then the final norm if there is one;
# then the **tied** output: `h @ token_embedding.T + output_bias`. The layout, the activation, the
# final norm and `layer_norm_epsilon` are four independent settings: read each from `config` or
# `weights`, never from another (the cases include a post-norm model with GELU, a final norm and
# ε = 10⁻²). Reuse your `layer_norm`, `feed_forward`, `multi_head_attention_forward` and
# `encoder_block` from notebooks 04 and 05 by pasting them here, and extend two of them:
# 05.3's `encoder_block` takes a `(B, T)` padding mask, where each query here needs its own row of
# a `(B, T, T)` mask (causal and padding together); 05.2's `feed_forward` applies ReLU, where the
# activation here comes from `config`. `show_case("09.5")` (from `transformer_course.exercises`)
# prints the first public case: the token ids, the weights' names and shapes, the config. The
# cell after the check runs your function on the model this notebook trained.

# %% nbgrader={"grade": false, "grade_id": "exercise_09_5", "locked": false, "schema_version": 3, "solution": true}
def gpt_forward(token_ids, weights, config):
    """token ids (B, T), the weights of forward_weights(model), its config -> logits (B, T, V)."""
    ### BEGIN SOLUTION
    epsilon = config["layer_norm_epsilon"]

    def norm(x, parameters):
        mean, variance = x.mean(axis=-1, keepdims=True), x.var(axis=-1, keepdims=True)
        return parameters["gamma"] * (x - mean) / np.sqrt(variance + epsilon) + parameters["beta"]

    def attend(x, parameters, allowed):  # (B, T, E), Keras' layout, (B, 1, T, T) -> (B, T, E)
        def project(name):
            return np.einsum("bte,enh->bnth", x, parameters[f"{name}_kernel"]) + parameters[f"{name}_bias"][:, None]

        q, k, v = project("query"), project("key"), project("value")
        scores = np.where(allowed, q @ k.transpose(0, 1, 3, 2) / np.sqrt(q.shape[-1]), -np.inf)
        scores = np.exp(scores - scores.max(axis=-1, keepdims=True))
        heads = scores / scores.sum(axis=-1, keepdims=True) @ v
        return np.einsum("bnth,nhe->bte", heads, parameters["output_kernel"]) + parameters["output_bias"]

    def feed(x, parameters):
        hidden = x @ parameters["hidden_kernel"] + parameters["hidden_bias"]
        if config["activation"] == "relu":
            hidden = np.maximum(hidden, 0.0)
        else:
            hidden = 0.5 * hidden * (1 + np.tanh(np.sqrt(2 / np.pi) * (hidden + 0.044715 * hidden ** 3)))
        return hidden @ parameters["output_kernel"] + parameters["output_bias"]

    length = token_ids.shape[1]
    x = weights["token_embedding"][token_ids] + weights["position_embedding"][:length]
    allowed = (np.tril(np.ones((length, length), dtype=bool)) & (token_ids != 0)[:, None, :])[:, None]
    for block in weights["blocks"]:
        for sublayer, name, norm_name in ((lambda h, p: attend(h, p, allowed), "attention", "attention_norm"),
                                          (feed, "feedforward", "feedforward_norm")):
            if config["normalize_first"]:
                x = x + sublayer(norm(x, block[norm_name]), block[name])
            else:
                x = norm(x + sublayer(x, block[name]), block[norm_name])
    if "final_norm" in weights:
        x = norm(x, weights["final_norm"])
    return x @ weights["token_embedding"].T + weights["output_bias"]
    ### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "check_09_5", "locked": true, "points": 5, "schema_version": 3, "solution": false}
check("09.5", gpt_forward)
### BEGIN HIDDEN TESTS
assert evaluate_hidden("09.5", gpt_forward, seed=7).passed
### END HIDDEN TESTS

# %% [markdown]
# Your forward pass on the trained model's own weights, beside the model itself, on the first two
# test rows:

# %%
trained_weights, trained_config = forward_weights(model)
rows = test_inputs[:2]
try:
    logits = gpt_forward(rows, trained_weights, trained_config).astype("float64")
except NotImplementedError:
    print("gpt_forward: not attempted yet")
else:
    yours = np.exp(logits - logits.max(axis=-1, keepdims=True))
    yours /= yours.sum(axis=-1, keepdims=True)
    theirs = model.predict(rows, verbose=0)
    real = rows != 0
    print(f"largest difference from the model's probabilities at {real.sum()} real positions: "
          f"{np.abs(yours - theirs)[real].max():.2e}; the same most likely next token at "
          f"{(yours.argmax(-1) == theirs.argmax(-1))[real].mean():.1%} of them")

# %% [markdown]
# ### Exercise 09.6 — one step of the arithmetic coder: narrowing the interval (2 points)
#
# Write `narrow_interval(low, high, frequencies, symbol)`: the interval `[low, high]` (ints,
# inclusive, $0 \le$ `low` $\le$ `high` $< 2^{32}$) narrowed to `symbol`'s share, as section 11
# wrote it: with $w$ = `high - low + 1`, $c$ the sum of the frequencies before `symbol` and $f$ its
# own, $T$ their total, return `(low + w·c // T, low + w·(c + f) // T - 1)` as Python ints.
# `frequencies` is an int array `(V,)` (a zero marks a token never coded), `symbol` an int with a
# frequency above 0. Integer arithmetic only: `w · c` reaches $2^{56}$, beyond a float's exact
# integers. First public case: frequencies `[2, 1, 1]`, symbol 2, the whole interval
# `[0, 4294967295]` → `(3221225472, 4294967295)`, the top quarter. The cell after the check codes a
# sentence with your function in place of the package's.

# %% nbgrader={"grade": false, "grade_id": "exercise_09_6", "locked": false, "schema_version": 3, "solution": true}
def narrow_interval(low, high, frequencies, symbol):
    """The interval [low, high] (ints) narrowed to symbol's share of the int frequencies (V,) -> (low, high)."""
    ### BEGIN SOLUTION
    before = int(np.sum(frequencies[:symbol]))
    through, total = before + int(frequencies[symbol]), int(np.sum(frequencies))
    width = int(high) - int(low) + 1
    return int(low) + width * before // total, int(low) + width * through // total - 1
    ### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "check_09_6", "locked": true, "points": 2, "schema_version": 3, "solution": false}
check("09.6", narrow_interval)
### BEGIN HIDDEN TESTS
assert evaluate_hidden("09.6", narrow_interval, seed=7).passed
### END HIDDEN TESTS

# %%
sentence, fed = lines.encode("This movie was one of the best I have ever seen."), [END]
step = next_token_function(np.array([fed], "int32"))
yours, theirs, ideal = (0, 2**32 - 1), (0, 2**32 - 1), 0.0

# %%
try:
    for token in sentence:
        probabilities = step(np.array([fed], "int32"))[0]
        frequencies = integer_frequencies(probabilities)
        if (yours[1] - yours[0] + 1) * int(frequencies[token]) < 2**30:  # too narrow: a real coder rescales first
            break
        yours = narrow_interval(*yours, frequencies, token)
        theirs = narrowed(*theirs, np.concatenate([[0], np.cumsum(frequencies)]), token)
        ideal, fed = ideal - float(np.log2(probabilities[token])), [*fed, token]
    print(f"{len(fed) - 1} tokens, {tokenizer.decode(fed[1:])!r}: yours [{yours[0]:,}, {yours[1]:,}], the package's "
          f"[{theirs[0]:,}, {theirs[1]:,}] ({'equal' if yours == theirs else 'DIFFERENT'}); the interval shrank by "
          f"{np.log2(2**32 / (yours[1] - yours[0] + 1)):.2f} bits, the tokens' -log2 p sum to {ideal:.2f}")
except NotImplementedError:
    print("narrow_interval: not attempted yet")

# %% [markdown]
# ## Exercise (ungraded)
#
# Train the same model with `tie_embeddings=False` and compare the parameter count and the test
# perplexity. Then generate 200 tokens from one prompt with greedy decoding and with top-p 0.9,
# and plot, for each, the fraction of 4-grams seen before against the position in the text: at
# what point does greedy decoding fall into a loop?

# %% [markdown]
# ## Written question (2 points, graded by your instructor)
#
# **Question 09.w1.** Section 5 compares the Transformer's bits per character with a
# Kneser-Ney bigram model's and with `xz`'s on the same test text. Why is bits per character, not
# perplexity per token, the number to compare across these three? And what does the comparison with
# the bigram model tell you that the comparison with `xz` does not?

# %% [markdown] nbgrader={"grade": true, "grade_id": "written_09_1", "locked": false, "points": 2, "schema_version": 3, "solution": true}
# ### BEGIN SOLUTION
# **Rubric (2 points).** 1 point: perplexity per token depends on the tokeniser (a BPE token is a
# different unit from a character or a byte, and `xz` has no tokens), while bits per character
# measures the code length of the same text, so any model or compressor is compared on one scale.
# 1 point: the bigram model sees one token of context, so the gap between it and the Transformer is
# what the longer context (attention over up to a row of tokens) buys on this data; `xz` is a
# general compressor that learns nothing about English in advance, so beating it shows the models
# compress text, not what context adds.
# ### END SOLUTION

# %% [markdown]
# ## Written question (2 points, graded by your instructor)
#
# **Question 09.w2.** Section 11's coder writes the test reviews in about as many bits as the
# model's $-\sum_t \log_2 p$. Why can no compressor, however clever, write texts drawn from a
# source in fewer bits on average than that source's own cross-entropy — and what, then, could
# write *these reviews* in fewer bits than this model does?

# %% [markdown] nbgrader={"grade": true, "grade_id": "written_09_2", "locked": false, "points": 2, "schema_version": 3, "solution": true}
# ### BEGIN SOLUTION
# **Rubric (2 points).** 1 point: the codeword lengths ℓ of any lossless (uniquely decodable) code
# satisfy Kraft's inequality, Σ 2^(−ℓ) ≤ 1, so q = 2^(−ℓ) is (at most) a distribution, and the
# expected length under the source p is Σ p·ℓ = H(p) + KL(p ‖ q) ≥ H(p) (Shannon's source coding
# theorem). The model's bits on real reviews estimate the cross-entropy of the true source against
# the model; a code does better only if the distribution its lengths imply is closer to the source:
# it is a better model. 1 point: a better
# model of these reviews — more training (the curve of section 5 was still falling), a larger model,
# a longer context, or a model adapted to the text as it is read (as `xz` adapts) — or the same
# model with more context carried across the streams; not a cleverer coder, which is already within
# a fraction of a percent of the model's bits.
# ### END SOLUTION

# %% [markdown]
# ## Written question (2 points, graded by your instructor)
#
# **Question 09.w3.** The notes quote Tom Dietterich (2019): for a system to *understand*, it must
# link the world to concepts, states and actions, and understanding is a spectrum, not a yes or
# no. Section 10 showed a model that writes review-like English and answers no question. Name one
# observable behaviour that would place a language model further along that spectrum than ours, and
# one experiment you could run on a model like this notebook's to look for it. What would the
# experiment's result *not* tell you?

# %% [markdown] nbgrader={"grade": true, "grade_id": "written_09_3", "locked": false, "points": 2, "schema_version": 3, "solution": true}
# ### BEGIN SOLUTION
# **Rubric (2 points).** There is no single right answer; the points are for a testable claim and
# an honest limit. 1 point: a behaviour that can be checked from outside and goes beyond
# continuing text in style — e.g. consistent answers to paraphrases of one question, correct
# predictions about a situation never written down in the training text (the notes' water and
# blow-dryer), or acting on a described state — with an experiment a student could run: held-out
# probes scored by the model's probabilities (as 08 probes facts with masked words), paraphrase
# consistency, or a counterfactual edit of a prompt and its effect. 1 point: what it leaves open —
# passing a probe shows the behaviour on those probes only (the text may hold the answer verbatim,
# which a lookup in the training data can check), and behaviour alone does not settle whether the
# model links words to the world rather than to other words; the answer names the confound its own
# experiment leaves.
# ### END SOLUTION
