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
# # 06 — Sentiment classification on IMDB with a Transformer encoder
#
# [![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.research.google.com/github/transformer-course/transformer-course/blob/v0.1.0/release/06_imdb_classifier.ipynb)
#
# **Run time:** full profile about 18 min on a 2-core CPU, smoke profile about 25 s (recorded runs). The profile comes from the environment variable `COURSE_PROFILE` (`full` or `smoke`): set it before starting Jupyter, or in Colab run `%env COURSE_PROFILE=smoke` before the first code cell. On Colab, a GPU runtime (Runtime, Change runtime type) trains on the GPU; the recorded times are CPU times. The outputs shown come from the recorded full-profile run; running a cell replaces its output with yours. In the smoke profile, run the exercises and their checks, and the cells whose output does not depend on the profile (shapes, worked examples, equalities with Keras): the accuracies, losses, curves, timings and samples it prints come from tiny data and a few steps and mean nothing; read the recorded ones.
#
# **What you will learn**
# - a `tf.data` pipeline from raw reviews to padded batches of token ids: vectorise once, cache,
#   shuffle, batch, prefetch — and **length bucketing**, which pads less;
# - why a bag-of-bigrams model is the number to beat on this task;
# - a Transformer encoder classifier without and with **positional embeddings**, and two ways to
#   turn one vector per token into one per review: **global max pooling** and a **[CLS] token**;
# - honest evaluation: the best validation epoch is kept, the test set is used once;
# - shipping the model: one `.keras` file that takes raw strings and survives odd input;
# - looking inside: which tokens the model attends to and pools from.
#
# **Prerequisites:** notebook 03 (vectorising text), notebook 05 (the encoder block).
#
# Data: the IMDB Large Movie Review Dataset — Maas et al., 2011, *Learning Word Vectors for
# Sentiment Analysis*, ACL-HLT, pp. 142–150 (no explicit license; cite the paper). We use its
# original split: 25,000 training and 25,000 test reviews, half positive, half negative.

# %%
import subprocess
import sys

if "google.colab" in sys.modules:  # Colab only: install the course package, keep Colab's TensorFlow/Keras
    subprocess.run([sys.executable, "-m", "pip", "install", "-q",
                    "transformer-course @ git+https://github.com/transformer-course/transformer-course@v0.1.0"],
                   check=True)

import transformer_course as tc

settings = tc.start_notebook("06", seed=42)

# %%

import keras
import matplotlib.pyplot as plt
import numpy as np
import tensorflow as tf

from transformer_course import checkpoint_path, epoch_progress, report_metric
from transformer_course.classifier import build_end_to_end_classifier, build_sentiment_classifier, predict_sentiment
from transformer_course.datasets import load_imdb
from transformer_course.plots import plot_attention, plot_training_curves
from transformer_course.text import standardize_review, vectorized_batches
from transformer_course.training import fit_best

# %% [markdown]
# ## 1. The data, split three ways
#
# The model learns from the **training** reviews, we choose between epochs and models on the
# **validation** reviews (20% of the original training set, held out), and the **test** set is
# touched once, at the very end. Choosing anything by test accuracy would make it an
# optimistic number.

# %%
train, test = load_imdb()
rng = np.random.default_rng(0)
order = rng.permutation(len(train.texts))[: settings.train_reviews]  # None keeps them all
held_out = int(len(order) * settings.validation_fraction)
splits = {
    "train": ([train.texts[i] for i in order[held_out:]], np.asarray(train.labels)[order[held_out:]]),
    "validation": ([train.texts[i] for i in order[:held_out]], np.asarray(train.labels)[order[:held_out]]),
    "test": (list(test.texts[: settings.test_reviews]), np.asarray(test.labels[: settings.test_reviews])),
}
for name, (texts, labels) in splits.items():
    print(f"{name:<10} {len(texts):>6,} reviews, {labels.mean():.1%} positive")

# %% [markdown]
# ## 2. From text to token ids
#
# The vectoriser (notebook 03) keeps the 20,000 most frequent words and cuts or pads every review
# to 600 tokens. It is **adapted on the training texts only**: a vocabulary built with
# validation or test reviews would leak them into training. Its standardisation also removes the
# `<br />` tags that litter IMDB reviews.

# %%
vectorizer = keras.layers.TextVectorization(
    max_tokens=settings.max_tokens, output_sequence_length=settings.sequence_length, standardize=standardize_review)
vectorizer.adapt(splits["train"][0])
vocabulary = [str(word) for word in vectorizer.get_vocabulary()]
print("vocabulary size:", len(vocabulary), "; first entries:", vocabulary[:8])
print("'br' in the vocabulary:", "br" in vocabulary)
example = vectorizer(["An utterly <br />wonderful film!"])
print("ids:", example.shape, example[0, :6].numpy().tolist())

# %% [markdown]
# ### The `tf.data` pipeline
#
# `transformer_course.text.vectorized_batches` vectorises every review **once**, caches the ids in
# memory, reshuffles every epoch, batches, and prefetches the next batch while the model works
# on the current one.
#
# Padding every review to 600 tokens wastes work: most are much shorter, and attention costs
# grow with the *square* of the length. **Length bucketing** batches reviews of similar length
# together and pads each batch only to its bucket's boundary (63, 127, …, 600). Because every
# layer of our model ignores padding — attention masks it, pooling skips it — a review gets the
# same prediction however much padding its batch has: bucketing changes the speed, not the model.

# %%
token_batches = {
    name: vectorized_batches(texts, labels, vectorizer, settings.batch_size,
                             bucket_boundaries=settings.bucket_boundaries, shuffle=name == "train", seed=0)
    for name, (texts, labels) in splits.items()
}
ids, labels = next(iter(token_batches["validation"]))
print("a validation batch:", ids.shape, ids.dtype.name, "labels", labels.shape)
widths = [int(ids.shape[1]) for ids, _ in token_batches["train"]]
print("train batch widths (tokens):", {width: widths.count(width) for width in sorted(set(widths))})
print(f"padded tokens computed per epoch: {sum(widths) * settings.batch_size:,} bucketed vs "
      f"{len(widths) * settings.batch_size * settings.sequence_length:,} padded to {settings.sequence_length}")

# %% [markdown]
# ## 3. Training, the same way for every model
#
# Each model trains with `fit_best`, the course's training helper, until its validation loss has
# not improved for `patience` epochs. The checkpoint of its best validation epoch is saved as a
# `.keras` file (in a folder of the active profile, so a quick smoke run never overwrites a full
# run's) and reloaded, so what we evaluate is that epoch, not the last one. `fit_best` also keeps
# the wall-clock time of every epoch, to report **time to best** beside accuracy.

# %%
def train_model(model, name, train_data, validation_data, epochs, jit_compile=False):
    """Compile (RMSprop, binary cross-entropy) and fit with fit_best. Returns (model, history, facts)."""
    model.compile(optimizer="rmsprop", loss="binary_crossentropy", metrics=["accuracy"], jit_compile=jit_compile)
    return fit_best(model, train_data, validation_data, epochs=epochs, patience=settings.patience,
                    checkpoint=checkpoint_path(name), callbacks=[epoch_progress()])

# %% [markdown]
# ## 4. The number to beat: a bag of bigrams
#
# Before any Transformer, a model that ignores word order except inside pairs of adjacent words:
# each review becomes a 20,000-wide multi-hot vector of the words and bigrams it contains
# ("not good" is one feature), followed by one small dense layer. On IMDB this simple model is
# strong (Chollet reports about 89%). A sequence model has to beat it to be worth its cost.

# %%
bigrams = keras.layers.TextVectorization(max_tokens=settings.max_tokens, ngrams=2, output_mode="multi_hot",
                                         standardize=standardize_review)
bigrams.adapt(splits["train"][0])
multi_hot = {name: tf.data.Dataset.from_tensor_slices(split).shuffle(len(split[0]) if name == "train" else 1, seed=0)
             .batch(settings.batch_size).map(lambda text, label: (bigrams(text), label)).prefetch(tf.data.AUTOTUNE)
             for name, split in splits.items()}  # vectorised on the fly: 20,000 floats a review is too big to cache
features = keras.Input(shape=(settings.max_tokens,))
hidden = keras.layers.Dropout(0.5)(keras.layers.Dense(16, activation="relu")(features))
baseline = keras.Model(features, keras.layers.Dense(1, activation="sigmoid")(hidden), name="bag_of_bigrams")
baseline, baseline_history, baseline_facts = train_model(
    baseline, "bag_of_bigrams", multi_hot["train"], multi_hot["validation"], settings.baseline_epochs)

# %% [markdown]
# ## 5. A Transformer encoder without positions
#
# Embedding → one `TransformerEncoder` block (notebook 05) → pooling → dropout → sigmoid, the
# set-up of *Deep Learning with Python* (E = 256, 2 heads of 128, feed-forward 32). Self-attention
# is **permutation-equivariant**: shuffle the words and the token vectors shuffle the same way, and
# max pooling then forgets the order entirely. This model is a bag of words whose words have
# looked at each other.

# %%
keras.utils.set_random_seed(42)
no_positions = build_sentiment_classifier(
    settings.max_tokens, settings.sequence_length, **settings.model, positions=False, name="transformer_no_positions")
no_positions.summary(line_length=90)

# %%
no_positions, no_positions_history, no_positions_facts = train_model(
    no_positions, "transformer_no_positions", token_batches["train"], token_batches["validation"],
    settings.epochs, jit_compile=settings.jit_compile)

# %% [markdown]
# ## 6. Adding positions
#
# `PositionalEmbedding` (notebook 04) adds a learned vector per position to each token's
# embedding, so "not … good" and "good … not" are no longer the same input.
#
# ### Pooling: max, or a [CLS] token
#
# The encoder outputs one vector per token; the classifier needs one per review.
# - **Global max pooling** takes, for each of the E features, its largest value over the real
#   tokens. It is cheap and works well when a few strong words decide (as in sentiment). Keras'
#   `GlobalMaxPooling1D` does not skip padding, so a padded position can win the max; the course's
#   `MaskedGlobalMaxPooling1D` does.
# - A **[CLS] token** (BERT, Devlin et al. 2019, §3) is an extra token put in front of every
#   review. It has no meaning of its own, so attention makes its output a summary of the whole
#   review, learned for the task. `pooling="cls"` builds that variant; the exercise trains it.

# %%
keras.utils.set_random_seed(42)
positional = build_sentiment_classifier(
    settings.max_tokens, settings.sequence_length, **settings.model, positions=True, name="transformer_positions")
positional, positional_history, positional_facts = train_model(
    positional, "transformer_positions", token_batches["train"], token_batches["validation"],
    settings.epochs, jit_compile=settings.jit_compile)

# %%
# NBVAL_CHECK_OUTPUT
cls_model = build_sentiment_classifier(100, 10, embed_dim=16, num_heads=2, intermediate_dim=8, pooling="cls")
short, padded = np.array([[5, 17, 3]]), np.array([[5, 17, 3, 0, 0, 0]])
print("[CLS] ids:", cls_model.get_layer("prepend_cls")(short).numpy().tolist())
print("same prediction with extra padding:", np.allclose(cls_model(short), cls_model(padded), atol=1e-6))

# %% [markdown]
# ### Training curves
#
# Solid lines are training, dashed lines validation. The Transformers fit the training set fast
# and start to overfit after a few epochs — the reason we keep the best validation epoch.

# %%
histories = {"bag of bigrams": baseline_history, "no positions": no_positions_history, "positions": positional_history}
plot_training_curves(histories)
plt.tight_layout()
plt.show()

# %% [markdown]
# ## 7. The test set, once
#
# Each model predicts the 25,000 test reviews exactly once, with the weights of its best
# validation epoch; a review counts as positive when P(positive) ≥ 0.5.

# %%
rows, test_predictions = [], {}
for name, model, data, facts in [("bag of bigrams", baseline, multi_hot["test"], baseline_facts),
                                 ("Transformer, no positions", no_positions, token_batches["test"], no_positions_facts),
                                 ("Transformer, positions", positional, token_batches["test"], positional_facts)]:
    true_labels = np.concatenate([labels.numpy() for _, labels in data])
    test_predictions[name] = (true_labels, model.predict(data, verbose=0)[:, 0] >= 0.5)
    accuracy = float(np.mean(test_predictions[name][0] == test_predictions[name][1]))
    rows.append((name, accuracy, facts))
    print(f"{name:<27} test accuracy {accuracy:.2%}   best epoch {facts['best_epoch']}/{facts['epochs']}   "
          f"time to best {facts['seconds_to_best']:.0f} s ({facts['seconds'] / facts['epochs']:.0f} s/epoch)")

# %%
accuracies = {name: accuracy for name, accuracy, _ in rows}
gain = accuracies["Transformer, positions"] - accuracies["Transformer, no positions"]
# The sampling noise of one accuracy measured on n reviews: sqrt(p (1 - p) / n).
standard_error = np.sqrt(accuracies["Transformer, positions"] * (1 - accuracies["Transformer, positions"])
                         / len(test_predictions["Transformer, positions"][0]))
print(f"positions minus no positions: {100 * gain:+.2f} points "
      f"(one standard error of a test accuracy on 25,000 reviews: {100 * standard_error:.2f} points)")

# %%
for (name, accuracy, facts), key in zip(rows, ["bag_of_bigrams", "transformer_no_positions", "transformer_positions"]):
    report_metric(f"{key}_test_accuracy", accuracy, f"{name}: IMDB test accuracy (25,000 reviews)",
                  headline=key == "transformer_positions")
    report_metric(f"{key}_best_epoch", facts["best_epoch"], f"{name}: epoch with the best validation loss")
    report_metric(f"{key}_seconds_to_best", round(facts["seconds_to_best"], 1),
                  f"{name}: training seconds until the end of the best epoch")

# %% [markdown]
# Read the times with two caveats. The first epoch of each model includes building and
# compiling it (with XLA, one compilation per bucket shape), so short runs look slower per
# epoch than they are. And the times are wall-clock on a shared 2-core machine: another process
# on the same cores slows every epoch it overlaps. Compare them within this run, as orders of
# magnitude, not across machines.
#
# **Positions.** In the recorded run the two Transformers end within a standard error of each
# other: positions bought nothing measurable here, from one seed each. Sentiment hangs mostly
# on which words a review uses, and a few strong words decide it — the same reason the bag of
# bigrams does so well. Word order matters far more when the output is itself a sentence
# (notebook 07).

# %% [markdown]
# The model trained on bucketed batches; the end-to-end model below pads every review to 600
# tokens. Masking makes that safe — checked here on real test reviews, each predicted with no
# padding at all and padded to 600:

# %%
sample = vectorizer(splits["test"][0][:8]).numpy()
unpadded = np.array([float(positional(row[None, : np.count_nonzero(row)])[0, 0]) for row in sample])
padded = keras.ops.convert_to_numpy(positional(sample))[:, 0]
print("P(positive), no padding:   ", np.round(unpadded, 4))
print("largest difference when padded to 600:", f"{np.max(np.abs(unpadded - padded)):.1e}")

# %% [markdown]
# ### Where the Transformer errs
#
# The Transformer with positions is the model the rest of this notebook packages and inspects,
# though on the test set it came third of the three (the table above). A confusion matrix counts
# its test reviews by true label (rows) and predicted label (columns), with the decision
# threshold at 0.5.

# %%
test_labels, predicted = test_predictions["Transformer, positions"]
confusion = np.array([[np.sum((test_labels == t) & (predicted == p)) for p in (0, 1)] for t in (0, 1)])
figure, axis = plt.subplots(figsize=(3.6, 3.2))
axis.imshow(confusion, cmap="Blues")
for (t, p), count in np.ndenumerate(confusion):
    axis.text(p, t, f"{count:,}", ha="center", va="center", color="black")
axis.set_xticks([0, 1], ["negative", "positive"]); axis.set_yticks([0, 1], ["negative", "positive"])
axis.set_xlabel("predicted"); axis.set_ylabel("true"); axis.set_title("Transformer with positions, test set")
plt.show()

# %% [markdown]
# ## 8. One model that takes raw strings
#
# For use outside this notebook, the vectoriser goes inside the model. The `.keras` file then
# holds the vocabulary, the standardisation function and the weights; loading it needs only
# `import transformer_course` (which registers the course's layers).

# %%
end_to_end = build_end_to_end_classifier(vectorizer, positional, name="imdb_sentiment")
end_to_end.save(checkpoint_path("imdb_sentiment"))
reloaded = keras.models.load_model(checkpoint_path("imdb_sentiment"))
new_reviews = ["A moving story with superb acting. I loved every minute of it.",
               "Two hours of my life I will never get back. Dull, predictable and badly acted.",
               "Not bad at all, though the ending was weak."]
before, after = predict_sentiment(end_to_end, new_reviews), predict_sentiment(reloaded, new_reviews)
for review, probability in zip(new_reviews, after):
    print(f"P(positive) = {probability:.3f}  {review}")
print("identical after reloading:", np.array_equal(before, after))

# %% [markdown]
# Look at the third review: a mild compliment ("not bad at all"). A bag-of-words view of it
# holds "bad" and "weak" and no praise word at all. In the recorded run the model gets it wrong,
# and confidently (its P(positive) is printed above). **Negation** ("not bad", "not good") is the
# classic failure of classifiers that mostly count words; section 9 shows where this model looks
# on a review built around it.

# %% [markdown]
# Odd input gets a prediction or a clear error. An empty review is all padding: the pooled
# vector is zero and the model returns its prior. Unknown scripts become out-of-vocabulary
# tokens. A 10,000-word review is cut at 600 tokens. Only a non-string is refused.

# %%
odd_inputs = {"empty string": "", "Japanese": "この映画は本当に素晴らしかった", "emoji only": "😀😀😀",
              "10,000 words": "boring " * 10_000, "a number": 42, "list with None": ["fine", None]}
for label, review in odd_inputs.items():
    try:
        print(f"{label:<15} P(positive) = {np.round(predict_sentiment(reloaded, review), 3)}")
    except TypeError as error:
        print(f"{label:<15} TypeError: {error}")

# %% [markdown]
# ## 9. Looking inside: attention and pooling on one review
#
# Left: the attention weights of the encoder block, averaged over its heads — row *t* shows how
# token *t* mixes the others into its vector. Right: for each token, the share of the E features
# whose max it supplied to the pooled vector — the tokens the classifier actually reads. (What a
# model attends to is a clue, not an explanation; Jain & Wallace, 2019, *Attention is not
# Explanation*.)

# %%
review = "The plot was not good and the acting was terrible, but the music was wonderful."
ids = vectorizer([review])
ids = ids[:, : int(np.count_nonzero(ids))]
words = [vocabulary[i] for i in ids[0].numpy()]
embedded = positional.get_layer("embedding")(ids)
encoded, scores = positional.get_layer("encoder_1")(embedded, return_attention_scores=True)
weights = keras.ops.convert_to_numpy(scores)[0].mean(axis=0)  # (T, T), the mean of the heads
winners = np.argmax(keras.ops.convert_to_numpy(encoded)[0], axis=0)          # (E,) winning position per feature
share = np.bincount(winners, minlength=len(words)) / winners.size
print(f"attention weights from {weights.min():.4f} to {weights.max():.4f}; "
      f"even attention over {len(words)} tokens would give each {1 / len(words):.4f}")

# %%
figure, (left, right) = plt.subplots(1, 2, figsize=(12, 5), gridspec_kw={"width_ratios": [1.3, 1]})
plot_attention(weights, words, words, "self-attention, mean of heads", axis=left,
               vmin=None, vmax=None)  # colours from the smallest to the largest weight: read the colour bar
right.barh(range(len(words)), share); right.set_yticks(range(len(words)), words); right.invert_yaxis()
right.set_xlabel("share of pooled features")
right.set_title(f"P(positive) = {predict_sentiment(reloaded, review):.2f}")
plt.tight_layout(); plt.show()

# %% [markdown]
# In the recorded run the weights are nearly even — the colour bar spans a narrow range around
# $1/15$. This block mostly averages the review into every token, and the decision is made by
# the pooled maxima on the right, where "terrible" and "wonderful" supply the most features,
# "good" the next most and "not" few: the model has not learned to read "not good" as a unit.
#
# ## Summary
#
# - A `tf.data` pipeline vectorises once, caches, shuffles, batches and prefetches. Length
#   bucketing pads each batch only as far as its bucket — exact, because every layer masks
#   padding — and trains about 2.7 times as many reviews a second on a 2-core CPU
#   (`benchmarks/imdb_classifier.py`; its last report is in `results/benchmarks/`).
# - A bag of bigrams is a strong baseline on sentiment — in the table above it beats both
#   Transformers, as Chollet also reports for this data set. Twenty thousand labelled reviews are
#   too few for a small Transformer trained from scratch to pay for its extra power; Transformers
#   win when they are larger and pretrained on much more text first (BERT, Devlin et al. 2019).
#   Notebook 08 measures what pre-training buys on this very data: the same small encoder
#   pre-trained on the IMDB reviews or not, fine-tuned on 200 to 6,000 labels, with an interval
#   over seeds for each gain; its own summary and record give the numbers. Positions bought nothing measurable here (within one
#   standard error, one seed each).
# - Pooling turns token vectors into a review vector: masked global max, or a [CLS] token.
# - The model we evaluate is the best validation checkpoint; the test set is used once.
# - One `.keras` file with the vectoriser inside takes raw strings, reloads identically, and
#   refuses only what is not text.
#
# Notebook 07 adds the decoder and translates English into Spanish.
#
# ## Graded exercises
#
# Complete each function where it says `raise NotImplementedError(...)`, then run the cell after
# it: `check` tells you at once whether your function is right, and if not, what differs.
# The rest of the notebook does not depend on your answers. Two exercises, 4 points; our
# estimate of the time they take, not a measurement: about 30 minutes.
#
# Both are pooling heads in NumPy: `values` are the encoder's token vectors, shape `(B, T, E)`;
# `mask` is bool `(B, T)`, True for a real token and False for padding. Each returns one vector
# per review, shape `(B, E)`, computed from the real tokens only, so that padding a review
# further never changes its prediction (section 7 checked this on real reviews). A review with
# no real token at all (an empty string) gets a vector of zeros.
#
# ### Exercise 06.1 — masked global max pooling (2 points)
#
# Write `masked_max_pool(values, mask)`: for each review and feature, the largest value over its
# real tokens. Padding positions must never win, however large their values.

# %% nbgrader={"grade": false, "grade_id": "exercise_06_1", "locked": false, "schema_version": 3, "solution": true}
def masked_max_pool(values, mask):
    """values (B, T, E), bool mask (B, T) -> (B, E): max over real tokens; zeros for no real token."""
    ### BEGIN SOLUTION
    pooled = np.max(np.where(mask[..., None], values, -np.inf), axis=1)
    return np.where(mask.any(axis=1)[:, None], pooled, 0.0)
    ### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "check_06_1", "locked": true, "points": 2, "schema_version": 3, "solution": false}
from transformer_course.exercises import check

check("06.1", masked_max_pool)
### BEGIN HIDDEN TESTS
from transformer_course_grader import evaluate_hidden

assert evaluate_hidden("06.1", masked_max_pool, seed=7).passed
### END HIDDEN TESTS

# %% [markdown]
# ### Exercise 06.2 — masked global average pooling (2 points)
#
# Write `masked_mean_pool(values, mask)`: for each review, the mean of its real token vectors —
# the sum over real tokens divided by their number, not by `T`.

# %% nbgrader={"grade": false, "grade_id": "exercise_06_2", "locked": false, "schema_version": 3, "solution": true}
def masked_mean_pool(values, mask):
    """values (B, T, E), bool mask (B, T) -> (B, E): mean over real tokens; zeros for no real token."""
    ### BEGIN SOLUTION
    counts = mask.sum(axis=1, keepdims=True)
    total = np.where(mask[..., None], values, 0.0).sum(axis=1)
    return np.where(counts > 0, total / np.maximum(counts, 1), 0.0)
    ### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "check_06_2", "locked": true, "points": 2, "schema_version": 3, "solution": false}
check("06.2", masked_mean_pool)
### BEGIN HIDDEN TESTS
assert evaluate_hidden("06.2", masked_mean_pool, seed=7).passed
### END HIDDEN TESTS

# %% [markdown]
# ## Exercise (ungraded)
#
# Train the `pooling="cls"` variant with the same settings and compare its test accuracy and
# time to best with max pooling. Then swap `MaskedGlobalMaxPooling1D` for Keras'
# `GlobalMaxPooling1D` (which does not skip padding), evaluate the same trained weights on the
# bucketed and on the 600-padded test set, and explain why the two accuracies now differ.

# %% [markdown]
# ## Written question (2 points, graded by your instructor)
#
# **Question 06.w1.** In section 7's test table the bag of bigrams scores higher than both
# Transformers trained here. Give two reasons a Transformer trained from scratch on these 25,000
# labelled reviews may not beat it, and name one experiment in notebook 08 that tests one of them.
# Answer in three to six sentences.

# %% [markdown] nbgrader={"grade": true, "grade_id": "written_06_1", "locked": false, "points": 2, "schema_version": 3, "solution": true}
# ### BEGIN SOLUTION
# **Rubric (2 points).** 1 point for two sound reasons, for example: sentiment is carried mostly
# by local words and pairs, which the bigram model sees directly; the Transformer must learn its
# embeddings and attention from 25,000 labels alone, with many more parameters and no prior (no
# pre-training); a single run and a small test difference are not a ranking. 1 point for naming 08's
# label-efficiency comparison of a pre-trained encoder against the same encoder from scratch (or
# 08's frozen-encoder probe) and saying which reason it tests (what pre-training on unlabelled
# text buys).
# ### END SOLUTION
