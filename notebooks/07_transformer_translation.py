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
# # 07 — The Transformer decoder: translating English into Spanish
#
# [![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.research.google.com/github/transformer-course/transformer-course/blob/v0.1.0/release/07_transformer_translation.ipynb)
#
# **Run time:** full profile about 37 min on a 2-core CPU, smoke profile about 50 s (recorded runs). The profile comes from the environment variable `COURSE_PROFILE` (`full` or `smoke`): set it before starting Jupyter, or in Colab run `%env COURSE_PROFILE=smoke` before the first code cell. On Colab, a GPU runtime (Runtime, Change runtime type) trains on the GPU; the recorded times are CPU times. The outputs shown come from the recorded full-profile run; running a cell replaces its output with yours. In the smoke profile, run the exercises and their checks, and the cells whose output does not depend on the profile (shapes, worked examples, equalities with Keras): the accuracies, losses, curves, timings and samples it prints come from tiny data and a few steps and mean nothing; read the recorded ones.
#
# **What you will learn**
# - the decoder block: **masked (causal) self-attention**, **cross-attention** over the encoder's
#   output, and which padding mask each one needs;
# - **teacher forcing**: training on the target shifted right, predicting the target shifted left;
# - a loss and an accuracy that ignore padding, and how much padding distorts plain accuracy;
# - decoding a translation: **greedy search** with a key/value cache, and **beam search**;
# - scoring translations with **BLEU** (sacrebleu), and shipping a translator that takes strings.
#
# **Prerequisites:** notebooks 04 (masks, positional embeddings), 05 (the encoder block) and
# 06 (a `tf.data` pipeline, training with checkpoints).
#
# Data: English–Spanish sentence pairs from the Tatoeba Project (https://tatoeba.org), as
# packaged by manythings.org/anki; licensed CC-BY 2.0 FR. 118,964 pairs.

# %%
import subprocess
import sys

if "google.colab" in sys.modules:  # Colab only: install the course package, keep Colab's TensorFlow/Keras
    subprocess.run([sys.executable, "-m", "pip", "install", "-q",
                    "transformer-course @ git+https://github.com/transformer-course/transformer-course@v0.1.0"],
                   check=True)

import transformer_course as tc

settings = tc.start_notebook("07", seed=42)

# %%
import time

import keras
import matplotlib.pyplot as plt
import numpy as np
import tensorflow as tf

from transformer_course import (
    checkpoint_path,
    epoch_progress,
    masks,  # masks.causal_mask: exercise 07.1 writes its own
    report_metric,
)
from transformer_course.datasets import load_spa_eng, split_pairs
from transformer_course.generation import IncrementalDecoder
from transformer_course.metrics import MaskedCrossEntropy, corpus_bleu, masked_accuracy
from transformer_course.plots import plot_attention
from transformer_course.text import standardize_translation, translation_batches
from transformer_course.training import EpochScores, WarmupCosineDecay, fit_best
from transformer_course.translation import Translator, build_translation_model, cross_attention_weights

# %% [markdown]
# ## 1. Sentence pairs, split three ways
#
# Each pair is an English sentence and one Spanish translation. We shuffle the pairs with a fixed
# seed and split them 70 / 15 / 15 into training, validation and test sets. (Tatoeba holds some
# English sentences several times with different translations; the split is by pair, as in the
# usual tutorials, so a test sentence's English may also occur in training with another
# translation.)

# %%
pairs = load_spa_eng()
if settings.pairs is not None:  # the smoke profile uses a random subset
    pairs = [pairs[i] for i in np.random.default_rng(0).permutation(len(pairs))[: settings.pairs]]
train_pairs, validation_pairs, test_pairs = split_pairs(pairs, (0.7, 0.15, 0.15), seed=settings.split_seed)
print(f"pairs: {len(pairs):,} -> train {len(train_pairs):,}, validation {len(validation_pairs):,}, "
      f"test {len(test_pairs):,}")
for english, spanish in train_pairs[:3]:
    print(f"  {english!r:45} -> {spanish!r}")

# %% [markdown]
# ## 2. Standardisation that keeps Spanish
#
# Notebook 03 deleted all punctuation. For Spanish that would delete the opening marks `¿` and
# `¡`, which a translation must produce. `standardize_translation` lower-cases (accents stay:
# "Á" becomes "á"), removes the other punctuation, and splits `¿`/`¡` off as tokens of their own.
# It keeps `[` and `]`, so the markers `[start]` and `[end]` that wrap every target survive.

# %%
# NBVAL_CHECK_OUTPUT
examples = ["¿Dónde está la estación?", "¡Qué día tan bonito!", "Él no habló con Ana.", "[start] Hola. [end]"]
for text in examples:
    print(f"{text!r:30} -> {standardize_translation(tf.constant(text)).numpy().decode()!r}")

# %%
def wrap(spanish):
    """The decoder's target: the Spanish sentence between the start and end markers."""
    return f"[start] {spanish} [end]"

train_english, train_spanish = [e for e, _ in train_pairs], [wrap(s) for _, s in train_pairs]
print(train_spanish[0])

# %% [markdown]
# ## 3. Vocabularies and lengths, chosen from the data
#
# Every sentence in a batch is padded to one length; the longest sentence in the data would set
# a needlessly long length for all of them. We measure the training sentences in tokens and
# choose a length that covers nearly all of them (`length_quantile`); the few longer ones are
# cut.

# %%
def token_counts(texts):
    standardized = standardize_translation(tf.constant(texts)).numpy()
    return np.array([len(text.split()) for text in standardized])

english_counts, spanish_counts = token_counts(train_english), token_counts(train_spanish)
source_length = int(np.ceil(np.quantile(english_counts, settings.length_quantile)))
target_length = int(np.ceil(np.quantile(spanish_counts, settings.length_quantile)))  # with [start] and [end]
print(f"English: mean {english_counts.mean():.1f} tokens, longest {english_counts.max()}; "
      f"source length S = {source_length}")
print(f"Spanish with markers: mean {spanish_counts.mean():.1f}, longest {spanish_counts.max()}; "
      f"target length = {target_length}")

# %%
figure, axis = plt.subplots(figsize=(7, 3))
bins = np.arange(0, max(english_counts.max(), spanish_counts.max()) + 2) - 0.5
axis.hist(english_counts, bins=bins, alpha=0.6, label="English (source)")
axis.hist(spanish_counts, bins=bins, alpha=0.6, label="Spanish + [start]/[end] (target)")
for length, colour in ((source_length, "C0"), (target_length, "C1")):
    axis.axvline(length + 0.5, color=colour, linestyle="--")
axis.set_xlabel("tokens per sentence"); axis.set_ylabel("training sentences"); axis.set_yscale("log"); axis.legend()
plt.show()

# %%
source_vectorizer = keras.layers.TextVectorization(
    max_tokens=settings.source_vocabulary_size, output_sequence_length=source_length,
    standardize=standardize_translation)
target_vectorizer = keras.layers.TextVectorization(
    max_tokens=settings.target_vocabulary_size, output_sequence_length=target_length,
    standardize=standardize_translation)
source_vectorizer.adapt(train_english)  # training sentences only
target_vectorizer.adapt(train_spanish)
target_vocabulary = [str(word) for word in target_vectorizer.get_vocabulary()]
print("source vocabulary:", source_vectorizer.vocabulary_size(), "; target vocabulary:", len(target_vocabulary))
print("first target words:", target_vocabulary[:10])

# %% [markdown]
# ## 4. Teacher forcing
#
# The decoder is trained to predict the next target token at **every** position in parallel. Its
# input is the target **shifted right** (it starts with `<s>`, the start marker); the label at
# each position is the target **shifted left** — the token that comes next. The lecture notes'
# example, translating "hello how are you" into Hindi:

# %%
# NBVAL_CHECK_OUTPUT
encoder_input = "hello how are you".split()
target = "<s> namaste aap kaise hai </s>".split()  # the notes' target, with the end token added
decoder_input, label = target[:-1], target[1:]
print("encoder input:", encoder_input)
for position, predict in enumerate(label):
    print(f"position {position}: decoder has read {decoder_input[: position + 1]!s:45} -> must predict {predict!r}")

# %% [markdown]
# > **The notes say** the target is `<s> namaste aap kaise hai` — with a start token but no end
# > token. Then no position is ever taught to predict "the sentence is over", and at inference
# > the decoder would not know when to stop; it would write until the length limit. The target
# > needs both markers, as above (and as `[start]` … `[end]` below).
#
# At training time the decoder sees the *true* previous tokens ("teacher forcing"), never its own
# guesses, so all positions train in one pass. What keeps position 1 from simply reading the
# answer at position 2? The **causal mask** in self-attention: position t may attend only to
# positions ≤ t (white below = allowed).

# %%
figure, axis = plt.subplots(figsize=(3.6, 3.6))
plot_attention(keras.ops.convert_to_numpy(masks.causal_mask(len(decoder_input))).astype("float32"),
               decoder_input, decoder_input, "causal mask (1 = may attend)", axis=axis)
plt.show()

# %% [markdown]
# The same on a real pair: the vectorised target has `target_length` ids; the decoder input drops
# the last, the label drops the first.

# %%
english, spanish = train_pairs[0]
ids = target_vectorizer([wrap(spanish)])[0].numpy()
print("English:", english, "| source ids:", source_vectorizer([english])[0].numpy().tolist())
print("decoder input:", [target_vocabulary[i] for i in ids[:-1] if i])
print("label:        ", [target_vocabulary[i] for i in ids[1:] if i])

# %% [markdown]
# ## 5. The `tf.data` pipeline
#
# Vectorise in chunks, cut each sentence's padding off, split the target into decoder input and
# label, cache, shuffle the training pairs every epoch, and batch pairs of similar target length
# together (**length bucketing**, as in notebook 06): each batch is padded only to its own
# longest sentence. Most sentences are short, so this saves most of the work padding would cost;
# the masks make the results the same.
#
# `text.translation_batches` does all of it (the same `wrap` as above is its default):

# %%
batches = {name: translation_batches(split, source_vectorizer, target_vectorizer, settings.batch_size,
                                     settings.bucket_boundaries, shuffle=name == "train", wrap=wrap)
           for name, split in (("train", train_pairs), ("validation", validation_pairs), ("test", test_pairs))}
for inputs, labels in batches["train"].take(3):
    print({name: tuple(tensor.shape) for name, tensor in inputs.items()}, "labels", tuple(labels.shape))
print("batches per epoch:", {name: int(data.cardinality()) for name, data in batches.items()})

# %% [markdown]
# ## 6. The model
#
# `build_translation_model`: `PositionalEmbedding` + a stack of `TransformerEncoder` blocks for
# the English sentence; `PositionalEmbedding` + a stack of `TransformerDecoder` blocks for the
# Spanish so far; a softmax over the Spanish vocabulary at every position. Each decoder block:
#
# 1. **masked self-attention** over the target — target padding mask AND causal mask;
# 2. **cross-attention**: queries from the target, keys and values from the encoder's output,
#    masked with the **source** padding mask (the encoder's padding, not the decoder's — a bug
#    one well-known tutorial shipped);
# 3. the position-wise feed-forward network; each sub-layer with dropout, residual and LayerNorm.

# %%
keras.utils.set_random_seed(42)
model = build_translation_model(
    source_vectorizer.vocabulary_size(), len(target_vocabulary), source_length, target_length - 1,
    **settings.model, name="english_to_spanish")
model.summary(line_length=100)

# %% [markdown]
# ### The training recipe
#
# Most label positions are padding (short sentences padded to their batch's longest). The loss
# averages the cross-entropy over **real tokens only**, and `masked_accuracy` counts only real
# tokens. Around that, four choices that matter on 83,000 sentence pairs and a 2-core CPU, each
# kept because it lowered the **validation** loss (the test split played no part):
#
# - **tied embeddings**: the output layer reuses the Spanish embedding table (`tie_embeddings`),
#   which removes a vocabulary-sized matrix the data could not fill;
# - **label smoothing** ε (Szegedy et al., 2016; the Transformer paper uses 0.1): the target puts
#   1 − ε on the right word and spreads ε over all words, so the model is never rewarded for
#   total certainty;
# - **dropout** in every block;
# - a learning rate that **warms up** linearly, then follows a half cosine down to a small floor
#   at the last planned epoch (`WarmupCosineDecay`).
#
# `fit_best`, the course's training helper, keeps the epoch with the lowest validation loss,
# and stops after `patience` epochs without one; how long it trains is a number of epochs, the same on
# every machine (a slower one takes longer, and learns the same).
# After every epoch it also measures what we care about — greedy BLEU on a fixed sample of
# validation sentences — so the curve below shows what each minute of training bought.

# %%
steps_per_epoch = int(batches["train"].cardinality())
schedule = WarmupCosineDecay(settings.learning_rate, settings.warmup_steps, steps_per_epoch * settings.epochs)
model.compile(optimizer=keras.optimizers.Adam(schedule, beta_2=0.98),
              loss=MaskedCrossEntropy(label_smoothing=settings.label_smoothing), metrics=[masked_accuracy])
sample = validation_pairs[: settings.validation_bleu_sentences]  # fixed: the same sentences every epoch
sample_references = [text.decode() for text in standardize_translation(tf.constant([s for _, s in sample])).numpy()]
training_translator = Translator(source_vectorizer, target_vectorizer, model, max_length=target_length - 1)

def validation_bleu():
    """Greedy BLEU of the model as it is now, on the fixed validation sample."""
    return corpus_bleu(training_translator.translate([english for english, _ in sample]), sample_references)[0]

# %%
model, history, facts = fit_best(
    model, batches["train"], batches["validation"], epochs=settings.epochs, patience=settings.patience,
    checkpoint=checkpoint_path("english_to_spanish"),
    callbacks=[EpochScores(validation_bleu=validation_bleu), epoch_progress()])
print(f"best epoch {facts['best_epoch']} of {facts['epochs']} (stopped by: {facts['stopped_by']}); "
      f"{facts['seconds_to_best'] / 60:.1f} min to reach it, {facts['seconds'] / 60:.1f} min in all")

# %%
minutes = np.cumsum(facts["epoch_seconds"]) / 60  # training minutes at the end of each epoch
curves = {"loss (label-smoothed)": ("loss", "val_loss"),
          "masked token accuracy": ("masked_accuracy", "val_masked_accuracy"),
          f"greedy BLEU, {len(sample):,} validation sentences": (None, "validation_bleu")}
figure, axes = plt.subplots(1, 3, figsize=(15, 3.6))
for axis, (label, (train_key, validation_key)) in zip(axes, curves.items()):
    if train_key:
        axis.plot(minutes, history.history[train_key], "-o", label="training")
    axis.plot(minutes, history.history[validation_key], "--s", label="validation")
    axis.axvline(minutes[facts["best_epoch"] - 1], color="grey", linestyle=":", label="epoch kept")
    axis.set_xlabel("training minutes (this machine)"); axis.set_ylabel(label); axis.grid(alpha=0.3); axis.legend()
plt.tight_layout()
plt.show()

# %% [markdown]
# ### How much padding distorts plain accuracy
#
# Keras' plain `"accuracy"` scores every label position, padding included. Bucketing already
# keeps padding low here; with every sentence padded to the full length it would dominate. Our model never
# learned to predict padding (the masked loss ignores it), so plain accuracy *understates* it. A
# model trained on the plain loss learns the easy rule "after `[end]` comes padding" and collects
# every padded position for free, so plain accuracy *overstates* it. Either way the number is not
# about translation.

# %%
_, validation_masked = model.evaluate(batches["validation"], verbose=0)
hits = padding = positions = 0
for inputs, label in batches["validation"]:
    label = label.numpy()
    hits += np.sum(np.argmax(model(inputs), axis=-1) == label)
    padding, positions = padding + np.sum(label == 0), positions + label.size
padding_share = padding / positions
print(f"masked accuracy (real tokens only):                 {validation_masked:.1%}")
print(f"share of label positions that are padding:          {padding_share:.1%}  (bucketed batches)")
print(f"plain accuracy of this model (padding counted):     {hits / positions:.1%}")
print("plain accuracy if padding were predicted perfectly: "
      f"{validation_masked * (1 - padding_share) + padding_share:.1%}")
real_share = (spanish_counts.mean() - 1) / (target_length - 1)  # real label positions if all padded to full length
print(f"... the same, every sentence padded to {target_length - 1} tokens:  "
      f"{validation_masked * real_share + 1 - real_share:.1%}  (estimated from the training lengths)")

# %% [markdown]
# ## 7. Decoding
#
# At inference there is no target to force: the decoder feeds on its own output, one token at a
# time, from `[start]` until `[end]`.
#
# - **Greedy search** takes the most likely token at each step. Recomputing the whole decoder
#   over all t tokens at step t would waste work: the encoder output does not change, and
#   (thanks to the causal mask) neither do the earlier positions' keys and values. The course's
#   attention layers keep a **key/value cache** (`MultiHeadAttention(..., cache=...,
#   cache_update_index=t)`), and `IncrementalDecoder` threads it through the decoder blocks: the
#   encoder runs once, each step processes one token (`benchmarks/translation_decoding.py`
#   measures the gain).
# - **Beam search** keeps the `beam_width` most likely partial translations at each step and
#   ranks finished ones by log-probability divided by a length penalty (Wu et al., 2016, §7).
#
# `Translator` holds both vectorisers and the model, takes strings and returns strings.
#
# ### One cached step, written out
#
# Decode "Where is the train station?" for three steps, then compute step 4 by hand with the
# first decoder block's own sub-layers: embed the one new token at its position, let
# self-attention write its key and value into the block's cache and attend over the cache,
# cross-attend to the source keys and values computed once, and run the feed-forward network.
# The probabilities must equal those of the whole model run on the whole prefix.

# %%
decoder_steps = IncrementalDecoder(model, max_length=target_length - 1)
source_ids = source_vectorizer(["Where is the train station?"]).numpy()
next_token = decoder_steps.next_token_function(source_ids)
decoded = np.array([[target_vocabulary.index("[start]")]])
for _ in range(3):  # three cached steps through the package
    decoded = np.concatenate([decoded, next_token(decoded).argmax(-1)[:, None]], axis=1)
print("decoded so far:", [target_vocabulary[i] for i in decoded[0]])
recomputed = model({"source_ids": source_ids, "target_ids": decoded})[:, -1].numpy()  # the whole prefix again
cached = next_token(decoded)                                                         # one new position
cached[:, 0] = recomputed[:, 0] = 0.0  # (the decoder never emits padding)
print("cached == recomputed:", np.allclose(cached, recomputed, atol=1e-5),
      "; most likely next:", target_vocabulary[cached.argmax()])

# %% [markdown]
# That used the package. Now the same step by hand for the first decoder block (a deeper model
# repeats it per block), one line per sub-layer, compared with the block run on the whole prefix:

# %%
block, embedding, position = model.decoder_blocks[0], model.target_embedding, decoded.shape[1] - 1
encoded, source_mask = model.encode(source_ids)                               # the encoder, once
empty_source_cache = block.cross_attention.initial_cache(1, encoded.shape[1])
_, cross_cache = block.cross_attention(encoded[:, :1], encoded, cache=empty_source_cache, cache_update_index=0)  # once
self_cache = block.self_attention.initial_cache(1, target_length - 1)
for t in range(position + 1):                                                 # one token per step
    x = embedding(decoded[:, t:t + 1], start_index=t)                         # (1, 1, E), at its position
    attended, self_cache = block.self_attention(x, x, use_causal_mask=True, cache=self_cache, cache_update_index=t)
x = block.self_attention_norm(x + attended)                                   # post-norm residual, as in the block
crossed, _ = block.cross_attention(x, None, cache=cross_cache, attention_mask=source_mask[:, None, :])
x = block.cross_attention_norm(x + crossed)
x = block.feedforward_norm(x + block.feedforward_output(block.feedforward_hidden(x)))
whole = block(embedding(decoded), encoded, encoder_padding_mask=source_mask)[:, -1]  # recompute everything
print("one cached step by hand == the block on the whole prefix:", np.allclose(x[:, 0], whole, atol=1e-5))

# %%
translator = Translator(source_vectorizer, target_vectorizer, model, max_length=target_length - 1)
sentences = ["I love you.", "Where is the train station?", "She doesn't like to eat vegetables.",
             "We will go to the beach tomorrow if it doesn't rain."]
greedy = translator.translate(sentences)
beam = translator.translate(sentences, beam_width=settings.beam_width, alpha=settings.length_penalty_alpha)
for sentence, greedy_text, beam_text in zip(sentences, greedy, beam):
    print(f"{sentence}\n    greedy: {greedy_text}\n    beam:   {beam_text}")

# %% [markdown]
# ## 8. Evaluation on the test split
#
# **How we score.** Hypotheses are the translator's output: lower-case tokens joined by single
# spaces, punctuation removed except `¿ ¡`, which stand alone. References are the test pairs'
# Spanish sentences passed through the same `standardize_translation`, so both sides are
# normalised identically. Then sacrebleu computes corpus BLEU with its default `13a`
# tokenisation, one reference per sentence, and prints a signature that pins down the settings.
# The exact-match rate counts hypotheses equal to their reference.

# %%
test_english = [english for english, _ in test_pairs]
references = [text.decode() for text in standardize_translation(tf.constant([s for _, s in test_pairs])).numpy()]
start = time.perf_counter()
hypotheses = translator.translate(test_english)
greedy_seconds = time.perf_counter() - start
greedy_bleu, signature = corpus_bleu(hypotheses, references)
exact_match = float(np.mean([h == r for h, r in zip(hypotheses, references)]))
_, test_masked_accuracy = model.evaluate(batches["test"], verbose=0)
print(f"greedy decoding of {len(test_english):,} test sentences: {greedy_seconds:.0f} s")
print(f"BLEU (greedy) = {greedy_bleu:.2f}   [{signature}]")
print(f"exact match = {exact_match:.1%}; masked token accuracy (teacher forcing) = {test_masked_accuracy:.1%}")

# %% [markdown]
# Beam search does about `beam_width` times greedy's work per sentence; the batched, cached
# version decodes all beams of many sentences together. The whole test split, the same sentences
# as greedy:

# %%
start = time.perf_counter()
beam_hypotheses = translator.translate(test_english, beam_width=settings.beam_width,
                                       alpha=settings.length_penalty_alpha)
beam_seconds = time.perf_counter() - start
beam_bleu, _ = corpus_bleu(beam_hypotheses, references)
print(f"whole test split: BLEU greedy {greedy_bleu:.2f} ({len(test_english) / greedy_seconds:.0f} sentences/s), "
      f"beam width {settings.beam_width}, alpha {settings.length_penalty_alpha}: {beam_bleu:.2f} "
      f"({len(test_english) / beam_seconds:.0f} sentences/s)")
strip = lambda texts: [" ".join(text.replace("¿", " ").replace("¡", " ").split()) for text in texts]  # noqa: E731
print(f"the same with ¿ ¡ removed from both sides (as write-ups that strip all punctuation score): "
      f"greedy {corpus_bleu(strip(hypotheses), strip(references))[0]:.2f}, "
      f"beam {corpus_bleu(strip(beam_hypotheses), strip(references))[0]:.2f}")

# %%
report_metric("test_bleu_greedy", round(greedy_bleu, 2), f"sacreBLEU, greedy, whole test split ({signature})",
              headline=True)
report_metric("test_bleu_beam", round(beam_bleu, 2),
              f"sacreBLEU, beam width {settings.beam_width}, alpha {settings.length_penalty_alpha}, whole test split")
report_metric("test_masked_accuracy", test_masked_accuracy, "masked token accuracy on the test split, teacher forcing")
report_metric("validation_masked_accuracy", validation_masked, "masked token accuracy on the validation split, best epoch")  # noqa: E501
report_metric("test_exact_match", exact_match, "greedy translations identical to the reference")
report_metric("best_epoch", facts["best_epoch"], f"epoch with the best validation loss, of {facts['epochs']} run")
report_metric("training_minutes", round(facts["seconds"] / 60, 1), f"training minutes in all (stopped by {facts['stopped_by']})")  # noqa: E501
report_metric("minutes_to_best", round(facts["seconds_to_best"] / 60, 1), "training minutes until the end of the best epoch")  # noqa: E501
report_metric("greedy_sentences_per_second", round(len(test_english) / greedy_seconds, 1),
              "cached greedy decoding, batches of 256")
report_metric("beam_sentences_per_second", round(len(test_english) / beam_seconds, 1),
              f"cached batched beam search, width {settings.beam_width}, batches of 256 sentences")

# %% [markdown]
# ### Sample translations
#
# A sample of test sentences with the reference and the greedy translation.

# %%
for index in np.random.default_rng(1).choice(len(test_pairs), size=8, replace=False):
    print(f"EN  {test_english[index]}\nREF {references[index]}\nOUT {hypotheses[index]}\n")

# %% [markdown]
# ### Where it fails, visibly
#
# - **Unknown words.** The vocabularies hold the most frequent words of the training
#   sentences; anything else becomes `[UNK]` on the way in, and the decoder can write `[UNK]`
#   itself where it meets a word it cannot spell out (it has no subwords to build one from).
# - **Nothing to translate.** Given an empty sentence the decoder still writes something (the
#   export section below shows it): with no source to attend to, it falls back on what it
#   learned of Spanish alone, and what comes out says nothing of the input — here mostly
#   `[UNK]` and short words it has seen everywhere (el, de, que). Output that the source does
#   not support is called a *hallucination*.
# - **Guessing the unknown.** The same section translates "I love 🍕 and 🎉!", whose emoji are
#   `[UNK]` on the way in, as "me encanta la comida y [UNK]": "la comida" (the food) is nothing
#   the input says. The decoder filled the gap with a likely continuation of "me encanta la" —
#   a hallucination that reads like a translation, the kind no BLEU score on its own reveals.

# %%
unknown_in = np.mean([1 in row for row in source_vectorizer(test_english).numpy()])
unknown_out = np.mean(["[UNK]" in hypothesis.split() for hypothesis in hypotheses])
print(f"test sentences with an unknown English word: {unknown_in:.1%}; "
      f"greedy translations containing [UNK]: {unknown_out:.1%}")
for sentence in ["My friend Bartholomew repairs harpsichords in Reykjavik.", "I bought a quokka and a dulcimer."]:
    print(f"{sentence}\n    -> {translator.translate(sentence)}")

# %% [markdown]
# ### Where the decoder looks
#
# Cross-attention weights of the last decoder block, averaged over heads: row t is the Spanish
# token being predicted from position t, columns are English tokens. Source padding gets zero
# weight.

# %%
source_vocabulary = [str(word) for word in source_vectorizer.get_vocabulary()]
figure, axes = plt.subplots(1, 2, figsize=(12, 5))
for axis, sentence in zip(axes, ["Where is the train station?", "She doesn't like to eat vegetables."]):
    source_ids = source_vectorizer([sentence]).numpy()
    source_ids = source_ids[:, : max(1, int(np.count_nonzero(source_ids)))]
    output_ids = target_vectorizer([wrap(translator.translate(sentence))]).numpy()
    output_ids = output_ids[:, : int(np.count_nonzero(output_ids))]
    weights = cross_attention_weights(model, source_ids, output_ids[:, :-1])[0].mean(axis=0)  # (T, S)
    plot_attention(weights, [source_vocabulary[i] for i in source_ids[0]],
                   [target_vocabulary[i] for i in output_ids[0, 1:]], sentence, axis=axis,
                   xlabel="English token (key)", ylabel="Spanish token predicted (query)")
plt.tight_layout()
plt.show()

# %% [markdown]
# ## 9. Export: one file that translates strings
#
# The `Translator` saves as one `.keras` file — vocabularies, standardisation and weights — and
# loads back with `keras.models.load_model` (after `import transformer_course`).

# %%
translator_file = checkpoint_path("translator")
translator.save(translator_file)
reloaded = keras.models.load_model(translator_file)
print("identical after reloading:", reloaded.translate(sentences) == translator.translate(sentences))
odd_inputs = {"empty string": "", "500 words": "the cat sat on the mat " * 84, "emoji": "I love 🍕 and 🎉!",
              "a number": 42, "list with None": ["Hello.", None]}
for label, sentence in odd_inputs.items():
    try:
        print(f"{label:<15} -> {reloaded.translate(sentence)!r:.100}")
    except TypeError as error:
        print(f"{label:<15} TypeError: {error}")

# %% [markdown]
# ## Summary
#
# - The decoder block adds two things to the encoder block: a **causal mask** on self-attention
#   (the target padding mask AND "no looking ahead") and **cross-attention** over the encoder's
#   output, masked with the **source** padding mask.
# - Teacher forcing trains all positions at once: input = target shifted right, label = target
#   shifted left.
# - Padding must be masked out of the loss and the accuracy; plain accuracy misstates quality in
#   either direction.
# - Greedy decoding with a key/value cache does one position of work per step; beam search keeps
#   several hypotheses and usually scores a little higher.
# - BLEU means little without its normalisation and sacrebleu signature, both given above.
#
# ## Graded exercises
#
# Complete each function where it says `raise NotImplementedError(...)`, then run the cell after
# it: `check` tells you at once whether your function is right, and if not, what differs.
# Everything above keeps working whether or not you finish — it uses the package's versions.
# Six exercises, 13 points; our estimate of the time they take, not a measurement: about two
# and a half hours (07.4, beam search, the longest, about 45 minutes).
#
# ### Exercise 07.1 — the causal mask (1 point)
#
# Write `causal_mask(length)` in NumPy: a bool array of shape `(length, length)` whose entry
# `[t, s]` is True when target position `t` may attend to position `s`, that is when `s ≤ t`.

# %% nbgrader={"grade": false, "grade_id": "exercise_07_1", "locked": false, "schema_version": 3, "solution": true}
def causal_mask(length):
    """Bool (length, length): True where query position t may attend to key position s (s <= t)."""
    ### BEGIN SOLUTION
    positions = np.arange(length)
    return positions[:, None] >= positions[None, :]
    ### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "check_07_1", "locked": true, "points": 1, "schema_version": 3, "solution": false}
from transformer_course.exercises import check

check("07.1", causal_mask)
### BEGIN HIDDEN TESTS
from transformer_course_grader import evaluate_hidden

assert evaluate_hidden("07.1", causal_mask, seed=7).passed
### END HIDDEN TESTS

# %% [markdown]
# ### Exercise 07.2 — greedy decoding (3 points)
#
# Write `greedy_decode(next_token_probabilities, start_ids, end_id, max_length)`.
# `next_token_probabilities(decoded)` takes the int ids decoded so far, shape `(B, t)`, and
# returns next-token probabilities `(B, V)`. Start every row with its start id; at each step
# append the most likely id; a row that has produced `end_id` gets padding (0) from then on;
# stop after `max_length` new ids, or earlier once every row has ended. Return int64
# `(B, 1 + steps)`.

# %% nbgrader={"grade": false, "grade_id": "exercise_07_2", "locked": false, "schema_version": 3, "solution": true}
def greedy_decode(next_token_probabilities, start_ids, end_id, max_length):
    """Greedy search: int64 (B, 1 + steps), each row its start id, then the argmax ids, padding after end_id."""
    ### BEGIN SOLUTION
    decoded = np.asarray(start_ids, dtype="int64").reshape(-1, 1)
    finished = np.zeros(len(decoded), dtype=bool)
    for _ in range(max_length):
        next_ids = np.argmax(next_token_probabilities(decoded), axis=-1)
        next_ids = np.where(finished, 0, next_ids)
        decoded = np.concatenate([decoded, next_ids[:, None]], axis=1)
        finished |= next_ids == end_id
        if finished.all():
            break
    return decoded
    ### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "check_07_2", "locked": true, "points": 3, "schema_version": 3, "solution": false}
check("07.2", greedy_decode)
### BEGIN HIDDEN TESTS
assert evaluate_hidden("07.2", greedy_decode, seed=7).passed
### END HIDDEN TESTS

# %% [markdown]
# ### Exercise 07.3 — teacher forcing and the padding-masked loss (2 points)
#
# Write `teacher_forcing_loss(target_ids, probabilities)`. `target_ids` is int `(B, L)`, each row
# `[start] w₁ … wₙ [end]` then padding (0); `probabilities` is float `(B, L − 1, V)`, what the
# decoder predicted at each of its input positions. Return `(decoder_inputs, labels, loss)`:
# the decoder reads every id but the last of each row, `(B, L − 1)`; it learns to predict the id
# that follows, so the labels are every id but the first, `(B, L − 1)`; and the loss is the mean
# cross-entropy `−log p(label)` (without the label smoothing this notebook trains with) over the
# positions whose label is not padding — every real token of the batch counts once, whatever
# its sentence (section 4).

# %% nbgrader={"grade": false, "grade_id": "exercise_07_3", "locked": false, "schema_version": 3, "solution": true}
def teacher_forcing_loss(target_ids, probabilities):
    """target ids (B, L), predictions (B, L - 1, V) -> (decoder inputs, labels, masked mean cross-entropy)."""
    ### BEGIN SOLUTION
    inputs, labels = target_ids[:, :-1], target_ids[:, 1:]
    picked = np.take_along_axis(probabilities, labels[..., None], axis=-1)[..., 0]  # p(label) at each position
    real = labels != 0
    return inputs, labels, float(-np.log(picked[real]).mean())
    ### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "check_07_3", "locked": true, "points": 2, "schema_version": 3, "solution": false}
check("07.3", teacher_forcing_loss)
### BEGIN HIDDEN TESTS
assert evaluate_hidden("07.3", teacher_forcing_loss, seed=7).passed
### END HIDDEN TESTS

# %% [markdown]
# ### Exercise 07.4 — one step of beam search (3 points)
#
# Write `beam_step(scores, log_probabilities, beam_width, end_id, step, alpha)`, one step of
# section 7's beam search. `scores` is float `(K,)`, the summed log-probabilities of the K live
# beams; `log_probabilities` float `(K, V)`, each beam's next-token log-probabilities; `step`
# the length each beam reaches with this token (the start id not counted). Score every
# extension, `scores[k] + log_probabilities[k, v]`, and go through the best 2 × `beam_width` of
# all K × V from the best down (ties: the lower `k × V + v` first), stopping at a score of −inf:
# an extension by `end_id` is **finished**, with its score divided by the length penalty
# `((5 + step) / 6) ** alpha`; any other stays **live**; stop as soon as `beam_width` are live.
# Return five arrays: the live beams' parents (int, which k each extends), their tokens (int)
# and their scores (float), then the finished ones' parents (int) and normalised scores (float);
# empty arrays where there are none. `show_case("07.4")` (from `transformer_course.exercises`)
# prints the first public case — one beam, width 3, four impossible ids — with the five arrays
# expected.

# %% nbgrader={"grade": false, "grade_id": "exercise_07_4", "locked": false, "schema_version": 3, "solution": true}
def beam_step(scores, log_probabilities, beam_width, end_id, step, alpha):
    """(K,) scores, (K, V) log-probabilities -> live parents, tokens, scores; finished parents, scores."""
    ### BEGIN SOLUTION
    vocabulary = log_probabilities.shape[1]
    candidates = (scores[:, None] + log_probabilities).ravel()  # (K * V,)
    live, finished = [], []
    for flat in np.argsort(-candidates, kind="stable")[:2 * beam_width]:
        if not np.isfinite(candidates[flat]):
            break
        parent, token = divmod(int(flat), vocabulary)
        if token == end_id:
            finished.append((parent, candidates[flat] / ((5 + step) / 6) ** alpha))
        else:
            live.append((parent, token, candidates[flat]))
            if len(live) == beam_width:
                break
    parents, tokens, kept = (np.array(column, dtype=dtype) for column, dtype in
                             zip(zip(*live) if live else ([], [], []), ("int64", "int64", "float64")))
    ended, ended_scores = (np.array(column, dtype=dtype) for column, dtype in
                           zip(zip(*finished) if finished else ([], []), ("int64", "float64")))
    return parents, tokens, kept, ended, ended_scores
    ### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "check_07_4", "locked": true, "points": 3, "schema_version": 3, "solution": false}
check("07.4", beam_step)
### BEGIN HIDDEN TESTS
assert evaluate_hidden("07.4", beam_step, seed=7).passed
### END HIDDEN TESTS

# %% [markdown]
# ### Exercise 07.5 — the warm-up and cosine learning-rate schedule (2 points)
#
# Write `warmup_cosine(steps, peak, warmup_steps, decay_steps, final_fraction)`: the learning
# rate this notebook trains with (`WarmupCosineDecay`, section 6) at every step of the int array
# `steps` (counted from 0), as a float array of the same shape. During warm-up (`step <
# warmup_steps`) the rate rises linearly, `peak × (step + 1) / warmup_steps`; then it falls along
# half a cosine from `peak` to `final_fraction × peak`, reached at `decay_steps` and kept after:
# `peak × (f + (1 − f) × (1 + cos(π × progress)) / 2)` with `progress = (step − warmup_steps) /
# (decay_steps − warmup_steps)` clipped to [0, 1].

# %% nbgrader={"grade": false, "grade_id": "exercise_07_5", "locked": false, "schema_version": 3, "solution": true}
def warmup_cosine(steps, peak, warmup_steps, decay_steps, final_fraction):
    """int steps (any shape) -> float learning rates: linear warm-up, then a cosine down to final_fraction x peak."""
    ### BEGIN SOLUTION
    steps = np.asarray(steps, dtype="float64")
    progress = np.clip((steps - warmup_steps) / (decay_steps - warmup_steps), 0.0, 1.0)
    decayed = peak * (final_fraction + (1 - final_fraction) * (1 + np.cos(np.pi * progress)) / 2)
    return np.where(steps < warmup_steps, peak * (steps + 1) / warmup_steps, decayed)
    ### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "check_07_5", "locked": true, "points": 2, "schema_version": 3, "solution": false}
check("07.5", warmup_cosine)
### BEGIN HIDDEN TESTS
assert evaluate_hidden("07.5", warmup_cosine, seed=7).passed
### END HIDDEN TESTS

# %% [markdown]
# ### Exercise 07.6 — one AdamW step (2 points)
#
# This notebook trains with Adam; notebooks 08 to 10 with AdamW, Adam with *decoupled* weight
# decay (Loshchilov and Hutter, 2019). Write `adamw_step(parameters, gradients, m, v, step,
# learning_rate, beta_1, beta_2, epsilon, weight_decay)` for float arrays of one shape and the
# step number `step` (from 1), as Keras' `AdamW` computes it: the moments
# `m ← β₁ m + (1 − β₁) g` and `v ← β₂ v + (1 − β₂) g²`; the decay `θ ← θ − lr · λ · θ`, applied
# to the parameters directly, never through the gradient; and the step
# `θ ← θ − lr · √(1 − β₂ᵗ) / (1 − β₁ᵗ) · m / (√v + ε)` (the bias correction in Keras' form).
# Return `(new parameters, new m, new v)`. With `weight_decay = 0` it is one Adam step.
#
# Why decoupled: weight decay added to the gradient (L2 regularisation, `g + λθ`) passes through
# Adam's division by √v, so a weight with large gradients is decayed less than one with small
# ones; AdamW shrinks every weight by the same factor `1 − lr · λ`, whatever its gradients, which
# Loshchilov and Hutter found to generalise better and to make the best decay less dependent on
# the learning rate. Each value you return is compared with a float64 reference within
# 10⁻⁶ + 10⁻⁵ × |expected|: float32 arithmetic passes, as Keras' own `AdamW` does. One case has
# small gradients and ε = 10⁻³, where the place of ε in the denominator matters.

# %% nbgrader={"grade": false, "grade_id": "exercise_07_6", "locked": false, "schema_version": 3, "solution": true}
def adamw_step(parameters, gradients, m, v, step, learning_rate, beta_1, beta_2, epsilon, weight_decay):
    """One AdamW update of `parameters` from `gradients` -> (parameters, m, v)."""
    ### BEGIN SOLUTION
    m = beta_1 * m + (1 - beta_1) * gradients
    v = beta_2 * v + (1 - beta_2) * gradients ** 2
    parameters = parameters - learning_rate * weight_decay * parameters
    rate = learning_rate * np.sqrt(1 - beta_2 ** step) / (1 - beta_1 ** step)
    return parameters - rate * m / (np.sqrt(v) + epsilon), m, v
    ### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "check_07_6", "locked": true, "points": 2, "schema_version": 3, "solution": false}
check("07.6", adamw_step)
### BEGIN HIDDEN TESTS
assert evaluate_hidden("07.6", adamw_step, seed=7).passed
### END HIDDEN TESTS

# %% [markdown]
# ## Exercise (ungraded)
#
# Translate a few sentences of your own, including one longer than the source length. Then vary
# the beam width (1, 2, 4, 8) and the length-penalty exponent on 200 **validation** sentences
# (never the test split: a setting chosen on the test sentences makes their BLEU an optimistic
# estimate, as the written question below says): where does BLEU peak, and what happens to the
# average translation length? Then score the chosen setting once on the test split.

# %% [markdown]
# ## Written question (2 points, graded by your instructor)
#
# **Question 07.w1.** Section 8 scores greedy decoding and beam search on the test split.
# Beam search keeps several hypotheses, yet it can end with a *lower* BLEU or shorter translations
# than greedy search. Explain how, and what the length penalty's exponent changes. Then say what
# you would measure, and on which split, to choose the beam width and the exponent honestly.

# %% [markdown] nbgrader={"grade": true, "grade_id": "written_07_1", "locked": false, "points": 2, "schema_version": 3, "solution": true}
# ### BEGIN SOLUTION
# **Rubric (2 points).** 1 point: the model's most probable sequence need not be the best
# translation (summed log-probabilities favour short outputs: every token multiplies in a
# probability below 1, so an early end id can win; BLEU's brevity penalty then punishes them); the
# length penalty divides the score by ((5 + length) / 6) ** alpha, so a larger alpha favours
# longer hypotheses. 1 point: choose the width and alpha by BLEU on the validation split, never the
# test split, and report the test BLEU once for the chosen setting (with sacreBLEU's signature).
# ### END SOLUTION
