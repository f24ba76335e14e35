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
# # 09 — A GPT-style language model: the chain rule, a key/value cache, and sampling
#
# [![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.research.google.com/github/transformer-course/transformer-course/blob/v0.1.0/release/09_language_model.ipynb)
#
# **Run time:** full profile about 40 min on a 2-core CPU, smoke profile about 25 s (recorded runs). The profile comes from the environment variable `COURSE_PROFILE` (`full` or `smoke`): set it before starting Jupyter, or in Colab run `%env COURSE_PROFILE=smoke` before the first code cell. On Colab, a GPU runtime (Runtime, Change runtime type) trains on the GPU; the recorded times are CPU times. The outputs shown come from the recorded full-profile run; running a cell replaces its output with yours (in the smoke profile, numbers that mean nothing).
#
# **What you will learn**
# - a **language model** as the chain rule, $p(w_1 \dots w_n) = \prod_t p(w_t \mid w_{<t})$:
#   scoring whole sentences, and **perplexity**, the number that summarises it;
# - count-based baselines (a unigram and a Kneser-Ney bigram model) that give that number a
#   meaning;
# - a **decoder-only Transformer** (GPT's shape): causal self-attention only, an output layer
#   tied to the token embedding, trained on movie reviews as running text;
# - the **key/value cache** that makes generation cost one new position per token, written out
#   and checked;
# - **sampling**: greedy, temperature, top-k and top-p (nucleus), and what each knob does to the
#   text — measured, not described;
# - how far this model is from GPT-3, in numbers.
#
# **Prerequisites:** notebook 04 (the causal mask), notebook 05 (the encoder block), notebook 07
# (the decoder block, greedy and beam search).
#
# Data: the IMDB Large Movie Review Dataset — Maas et al., 2011, *Learning Word Vectors for
# Sentiment Analysis*, ACL-HLT, pp. 142–150 (no explicit license; cite the paper). Only the text
# is used: the 25,000 training reviews to learn from (labels ignored), and the first
# `test_reviews` test reviews to measure perplexity: 2,500 in the full profile. They come
# shuffled, so this is a fixed random sample. Scoring all 25,000 would add about 11 minutes to a
# run on a 2-core CPU.

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
import time

import keras
import matplotlib.pyplot as plt
import numpy as np

from transformer_course import checkpoint_path, epoch_progress, progress, report_metric
from transformer_course.datasets import load_imdb
from transformer_course.decoding import (
    NextTokenTable,
    apply_temperature,
    greedy_decode,
    sample_decode,
    top_k_filter,
    top_p_filter,
)
from transformer_course.generation import CachedLanguageModel, model_blocks, output_probabilities
from transformer_course.language_model import (
    build_language_model,
    perplexity,
    running_text_chunks,
    token_log_probabilities,
)
from transformer_course.metrics import MaskedCrossEntropy, distinct_n, masked_accuracy, repetition_rate
from transformer_course.ngram import BigramModel, UnigramModel
from transformer_course.plots import plot_training_curves
from transformer_course.text import standardize_running_text
from transformer_course.training import WarmupCosineDecay, fit_best

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
# ## 2. Reviews as running text
#
# The model reads the reviews as one long text. Each review is standardised
# (`standardize_running_text`: lower case, `<br />` removed, sentence punctuation kept as tokens
# of its own, so generated text can have sentences), split into words, and mapped to ids with a
# vocabulary of the `vocab_size` most frequent tokens; rarer words become `[UNK]`. An `[end]` id
# follows every review; then the stream is cut into rows of `chunk_length` tokens, and each row's
# targets are its tokens moved one place left. No row is padded, except the very last one.

# %%
train_split, test_split = load_imdb()
train_texts = train_split.texts[:settings.train_reviews]  # the labels are never used
test_texts = test_split.texts[:settings.test_reviews]
validation_count = int(len(train_texts) * settings.validation_fraction)
train_texts, validation_texts = train_texts[validation_count:], train_texts[:validation_count]
counter = keras.layers.TextVectorization(max_tokens=settings.vocab_size - 1, standardize=standardize_running_text)
counter.adapt(train_texts, batch_size=512)  # "", [UNK], then the most frequent words and marks
vectorizer = keras.layers.TextVectorization(standardize=standardize_running_text, ragged=True,
                                            vocabulary=["[end]"] + counter.get_vocabulary()[2:])
vocabulary = [str(word) for word in vectorizer.get_vocabulary()]  # id 0 padding, 1 [UNK], 2 [end], then words
END, UNK = vocabulary.index("[end]"), vocabulary.index("[UNK]")
print(f"{len(train_texts):,} training, {len(validation_texts):,} validation, {len(test_texts):,} test reviews; "
      f"vocabulary {len(vocabulary):,}: {vocabulary[:16]}")


# %%
def chunks(texts):
    """Texts -> (inputs, targets) rows of chunk_length tokens, reviews separated by [end]."""
    ids = vectorizer(texts).to_list()  # one list of ids per review, no padding
    return running_text_chunks(ids, settings.chunk_length, separator_id=END)


train_inputs, train_targets = chunks(train_texts)
validation_inputs, validation_targets = chunks(validation_texts)
test_inputs, test_targets = chunks(test_texts)
for name, targets in (("train", train_targets), ("validation", validation_targets), ("test", test_targets)):
    print(f"{name:<10} {len(targets):>7,} rows, {int((targets != 0).sum()):>10,} target tokens, "
          f"[UNK] {np.mean(targets[targets != 0] == 1):.2%}")
print("a row:", " ".join(vocabulary[i] for i in train_inputs[0][:40]), "…")

# %% [markdown]
# ## 3. Baselines: how good is a perplexity?
#
# Two count-based models on exactly the same tokens and the same target positions (every target
# whose input is a real token):
#
# - a **unigram** model, $p(w)$: word frequencies, add-one smoothed — no context at all;
# - a **bigram** model, $p(w \mid v)$, with interpolated **Kneser-Ney** smoothing (Kneser and
#   Ney, 1995): the classic strong count model with one word of context. It discounts every seen
#   pair a little and gives that mass to a "continuation" probability: how many different words a
#   word has been seen after, not how often it occurs.

# %%
def as_rows(inputs, targets):
    """(R, L) inputs and targets -> (R, L + 1) rows whose adjacent pairs are exactly (input, target)."""
    return np.concatenate([inputs, targets[:, -1:]], axis=1)


unigram = UnigramModel(len(vocabulary)).fit(as_rows(train_inputs, train_targets))
bigram = BigramModel(len(vocabulary)).fit(as_rows(train_inputs, train_targets))
baselines = {name: model.perplexity(as_rows(test_inputs, test_targets))
             for name, model in (("unigram", unigram), ("bigram", bigram))}
for name, value in baselines.items():
    report_metric(f"{name}_test_perplexity", value, f"{name} model (counts): test perplexity")
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
model = build_language_model(len(vocabulary), settings.chunk_length, embed_dim=settings.embed_dim,
                             intermediate_dim=settings.intermediate_dim, num_heads=settings.num_heads,
                             num_layers=settings.num_layers, dropout=settings.dropout)
print(f"parameters: {model.count_params():,}")
row = test_inputs[:1].copy()
before = keras.ops.convert_to_numpy(model(row))
row[0, 20:] = 3  # change every token from position 20 on
after = keras.ops.convert_to_numpy(model(row))
print("positions 0-19 unchanged when later tokens change:", np.allclose(before[0, :20], after[0, :20], atol=1e-6))

# %% [markdown]
# ## 5. Training
#
# The loss is the cross-entropy over real target tokens (`MaskedCrossEntropy`; padding, which
# only the last row has, is never counted), AdamW with a warm-up and a cosine decay, and
# `fit_best`: the weights of the best validation epoch, early stopping, and a time budget of
# `max_training_minutes`. With `jit_compile` Keras compiles the training step with XLA; on a
# CPU it is off unless asked for, and here it about doubles the speed. Most of the work is in
# the output layer: every position scores all `vocab_size` words.

# %%
steps_per_epoch = -(-len(train_inputs) // settings.batch_size)
schedule = WarmupCosineDecay(settings.learning_rate, settings.warmup_steps, steps_per_epoch * settings.epochs)
model.compile(optimizer=keras.optimizers.AdamW(schedule, weight_decay=0.01), loss=MaskedCrossEntropy(),
              metrics=[masked_accuracy], jit_compile=settings.jit_compile)
model, history, facts = fit_best(model, (train_inputs, train_targets), (validation_inputs, validation_targets),
                                 epochs=settings.epochs, patience=settings.patience,
                                 checkpoint=checkpoint_path("imdb_language_model"),
                                 budget_minutes=settings.max_training_minutes, batch_size=settings.batch_size,
                                 callbacks=[epoch_progress()])
print(f"{facts['epochs']} epochs in {facts['seconds'] / 60:.1f} min (stopped by {facts['stopped_by']}); "
      f"best epoch {facts['best_epoch']}")
plot_training_curves({"language model": history}, metrics=("loss", "masked_accuracy"))
plt.show()

# %% [markdown]
# In the stored run both planned epochs ran, about 19 minutes each, inside the
# `max_training_minutes` budget. The cosine schedule was planned for those two epochs, so it
# reached its end.

# %%
scores = token_log_probabilities(model, test_inputs, test_targets)
transformer_perplexity = perplexity(scores, test_targets)
report_metric("transformer_test_perplexity", transformer_perplexity,
              f"Transformer LM: test perplexity ({int((test_targets != 0).sum()):,} tokens, "
              f"vocabulary {len(vocabulary):,} words and marks)", headline=True)
report_metric("transformer_vs_bigram", 1 - transformer_perplexity / baselines["bigram"],
              "share by which the Transformer's test perplexity is below the bigram model's")

# %% [markdown]
# **Reading the numbers.** The stored run's test perplexities, on the same 650,086 target tokens
# of 2,500 test reviews:
#
# | model | test perplexity |
# |---|---|
# | unigram (add-one) | 490.9 |
# | Kneser-Ney bigram | 149.4 |
# | Transformer, 2 blocks, 4.2 million parameters, 2 epochs | 103.5 |
#
# The Transformer's perplexity is 31% below the bigram's. A perplexity only means something
# together with its tokenisation. Here the tokens are lower-cased words and punctuation marks
# (`standardize_running_text`) from a vocabulary of the 10,000 most frequent tokens of the
# training reviews, with `[end]` between reviews. Every rarer word is one `[UNK]` token: 5.5% of
# the test tokens, and an easy one to predict. A larger vocabulary, or subword tokens as GPT
# uses, gives numbers that are not comparable with these.

# %% [markdown]
# ### Scoring sentences
#
# With a trained model the chain rule of section 1 scores any text: the sum of the log-probabilities
# of its tokens, each given the ones before it.

# %%
def text_log_probability(text):
    """log p(tokens 2..n | token 1) of a text under the trained model, and its token count."""
    ids = np.array([vectorizer([text]).to_list()[0]], dtype="int32")
    return float(token_log_probabilities(model, ids[:, :-1], ids[:, 1:]).sum()), ids.shape[1]


rng = np.random.default_rng(0)
for text in ("this movie was one of the best i have ever seen .",
             "the acting was terrible and the plot made no sense ."):
    shuffled = " ".join(rng.permutation(text.split()))
    for label, candidate in (("original", text), ("shuffled", shuffled)):
        value, count = text_log_probability(candidate)
        print(f"{label:<9} log p = {value:7.1f}  ({count} tokens)  {candidate}")

# %% [markdown]
# In the stored run each original sentence is far more probable than its shuffled words: by 52
# nats for the first (a factor of about $e^{52}$) and by 30 for the second. The model learned
# word order, not only word frequencies, and the unigram model cannot tell the two apart.

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
embedding, blocks = model.get_layer("token_embedding"), model_blocks(model, "decoder")
caches = [block.self_attention.initial_cache(1, settings.chunk_length) for block in blocks]  # (1, 2, L, N, H) each
ids, position = np.array([vectorizer(["this movie was"]).to_list()[0]], dtype="int32"), 0
print("cache of block 1:", tuple(caches[0].shape), "= (batch, keys|values, positions, heads, head width)")
for step in range(5):
    x = embedding(ids[:, position:], start_index=position)  # the prompt once, then one new token
    for index, block in enumerate(blocks):
        x, caches[index] = block(x, self_attention_cache=caches[index], self_attention_cache_update_index=position)
    filled = int(np.any(keras.ops.convert_to_numpy(caches[0]) != 0, axis=(0, 1, 3, 4)).sum())
    probabilities = keras.ops.convert_to_numpy(output_probabilities(model, x[:, -1:, :], "token_embedding"))[0, 0]
    next_id = int(np.argmax(np.where(np.isin(np.arange(len(probabilities)), [0, UNK]), 0.0, probabilities)))  # no [UNK]
    position = ids.shape[1]
    ids = np.concatenate([ids, [[next_id]]], axis=1).astype("int32")
    print(f"step {step + 1}: fed {x.shape[1]} position(s); cache holds {filled} positions -> "
          + " ".join(vocabulary[i] for i in ids[0]))

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
# One rule holds for all of them, as it did for the cache above: **`[UNK]` is never
# generated.** It stands for every word outside the vocabulary, so the model predicts it often
# (section 2 printed its share of the tokens), but it is not a word anyone can read.
# `excluded_ids` gives it probability 0 and renormalises the rest, before any knob is applied.

# %%
def next_token_function(prompts):
    """Cached next-token probabilities for `prompts` (B, t0), with padding and [UNK] never generated."""
    return CachedLanguageModel(model, settings.chunk_length).next_token_function(prompts, excluded_ids=(UNK,))


# %% [markdown]
# One distribution from the model, reshaped each way (the 8 most likely tokens shown):

# %%
prompt = np.array([vectorizer(["the plot of this film is"]).to_list()[0]], dtype="int32")
distribution = next_token_function(prompt)(prompt)
shown = np.argsort(-distribution[0])[:8]
variants = {"model": distribution, "T = 0.5": apply_temperature(distribution, 0.5),
            "T = 1.5": apply_temperature(distribution, 1.5), "top-k 3": top_k_filter(distribution, 3),
            "top-p 0.5": top_p_filter(distribution, 0.5)}
print(f"{'':<10}" + "".join(f"{vocabulary[i]:>9}" for i in shown) + "   kept")
for name, values in variants.items():
    print(f"{name:<10}" + "".join(f"{values[0, i]:9.3f}" for i in shown) + f"   {int((values[0] > 0).sum()):,}")

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


def generate(temperature=1.0, top_p=None, greedy=False, seed=0):
    """Continue the knob prompts; return (generated ids without the prompts, mean entropy of the distributions used)."""
    entropies, next_token = [], next_token_function(knob_prompts)

    def measured(decoded):
        probabilities = next_token(decoded)
        shaped = apply_temperature(probabilities, temperature)
        shaped = top_p_filter(shaped, top_p) if top_p else shaped
        entropies.append(float(np.mean(-(shaped * np.log(np.where(shaped > 0, shaped, 1))).sum(-1))))
        return probabilities

    run = greedy_decode if greedy else lambda *a, **k: sample_decode(*a, **k, temperature=temperature, top_p=top_p,
                                                                     seed=seed)
    ids = run(measured, knob_prompts, end_id=None, max_length=settings.generation_length)[:, settings.prompt_length:]
    return ids, (0.0 if greedy else float(np.mean(entropies)))

# %%
def measure(ids, entropy):
    return {"entropy": entropy, "distinct-2": distinct_n(list(ids), 2), "repetition": repetition_rate(list(ids), 4)}


greedy_ids, _ = generate(greedy=True)
greedy = measure(greedy_ids, 0.0)
by_temperature = {t: measure(*generate(temperature=t)) for t in progress(settings.temperatures, desc="temperatures")}
by_top_p = {p: measure(*generate(top_p=p)) for p in progress(settings.top_ps, desc="top-p")}
figure, axes = plt.subplots(1, 3, figsize=(13, 3.4))
for axis, key in zip(axes, ("entropy", "distinct-2", "repetition")):
    axis.plot(list(by_temperature), [m[key] for m in by_temperature.values()], "o-", label="temperature (top-p off)")
    axis.plot(list(by_top_p), [m[key] for m in by_top_p.values()], "s-", label="top-p (T = 1)")
    axis.axhline(greedy[key], color="gray", linestyle=":", label="greedy")
    axis.set_title(key)
    axis.set_xlabel("knob value")
axes[0].legend(fontsize="small")
plt.show()

# %%
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
# In the stored run, distinct-2 rises at every step of temperature, from 0.16 at $T = 0.2$ (the
# texts share most of their bigrams: near-greedy decoding sends different prompts down the same
# phrases) to 0.99 at $T = 1.5$. Greedy decoding repeats 38% of its 4-grams within a text; top-p
# 0.9 repeats 0.25%. Variety is not quality: at high temperature the texts are varied because
# they are incoherent.

# %% [markdown]
# ### The notes' setting
#
# The notes show a 6-billion-parameter model (GPT-J-6B) continuing "This is a story about me
# and my brothers" with **top-p 0.9** and **temperature 0.8**. Our model with the same setting,
# three seeds (change the prompt to your own):

# %%
story = np.array([vectorizer(["this is a story about me and my brothers"]).to_list()[0]], dtype="int32")
for seed in range(3):
    ids = sample_decode(next_token_function(story), story, end_id=END, max_length=settings.generation_length,
                        temperature=0.8, top_p=0.9, seed=seed)
    print(f"seed {seed}:", " ".join(vocabulary[i] for i in ids[0] if i))
greedy_story = greedy_decode(next_token_function(story), story, END, settings.generation_length)
print("greedy:", " ".join(vocabulary[i] for i in greedy_story[0] if i))

# %% [markdown]
# In the stored run the sampled continuations are locally fluent and globally aimless: seed 1
# calls the film terrible and then the acting excellent within two sentences, and nothing links
# back to the brothers. The greedy continuation falls into the loop that section 7 described
# ("i don't know what i have to say about", twice over). A two-block model trained on 13
# million tokens of film reviews writes like a film review, nothing more.

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
ours_parameters, ours_tokens = model.count_params(), int((train_targets != 0).sum()) * facts["epochs"]
print(f"parameters:      ours {ours_parameters:>15,}   GPT-3 {175_000_000_000:>19,}   "
      f"ratio {175e9 / ours_parameters:,.0f}×")
print(f"tokens trained:  ours {ours_tokens:>15,}   GPT-3 {300_000_000_000:>19,}   ratio {300e9 / ours_tokens:,.0f}×")
ours_operations = 6 * ours_parameters * ours_tokens
print(f"training FLOPs:  ours {ours_operations:>15.2e}   GPT-3 {3.14e23:>19.2e}   "
      f"ratio {3.14e23 / ours_operations:,.0f}×")
print(f"training time:   ours {facts['seconds'] / 60:.0f} min on this machine's CPU")

# %% [markdown]
# The architecture is the same idea — a stack of causal decoder blocks and a softmax over the
# vocabulary, trained to predict the next token; GPT-3 has 96 blocks of width 12,288 and reads
# 2,048 tokens at a time. What separates the two is scale: parameters, data and compute, each by
# several orders of magnitude, and what scale brings (a subword vocabulary, text from the whole
# web, and abilities that a model of film reviews never shows).
#
# ## Summary
#
# - A language model is the chain rule: a product of next-token probabilities; perplexity is the
#   exponent of the mean negative log-likelihood of real tokens.
# - A decoder-only Transformer is the decoder block with causal self-attention only, and output
#   weights tied to the embedding; it beats count models on the same tokens (measured above).
# - The key/value cache makes each generated token cost one new position; cached and recomputed
#   generation give the same tokens.
# - Temperature, top-k and top-p reshape the next-token distribution; the measurements show what
#   each does to variety and repetition.
#
# ## Graded exercises
#
# Complete each function where it says `raise NotImplementedError(...)`, then run the cell after
# it: `check` tells you at once whether your function is right, and if not, what differs.
# The rest of the notebook does not depend on your answers. Both are plain NumPy.
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
from transformer_course.grading import evaluate_hidden

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
# ## Exercise (ungraded)
#
# Train the same model with `tie_embeddings=False` and compare the parameter count and the test
# perplexity. Then generate 200 tokens from one prompt with greedy decoding and with top-p 0.9,
# and plot, for each, the fraction of 4-grams seen before against the position in the text: at
# what point does greedy decoding fall into a loop?
