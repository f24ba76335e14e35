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
# # 12 — Adapting and serving a decoder: a classifier with LoRA, quantized weights, memory, several devices
#
# [![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.research.google.com/github/transformer-course/transformer-course/blob/v0.1.0/release/12_adapting_decoders.ipynb)
#
# **Run time:** full profile about 42 min on a 2-core CPU, smoke profile about 40 s (recorded runs). The profile comes from the environment variable `COURSE_PROFILE` (`full` or `smoke`): set it before starting Jupyter, or in Colab run `%env COURSE_PROFILE=smoke` before the first code cell. On Colab, a GPU runtime (Runtime, Change runtime type) trains on the GPU; the recorded times are CPU times. The outputs shown come from the recorded full-profile run; running a cell replaces its output with yours. In the smoke profile, run the exercises and their checks, and the cells whose output does not depend on the profile (shapes, worked examples, equalities with Keras): the accuracies, losses, curves, timings and samples it prints come from tiny data and a few steps and mean nothing; read the recorded ones.
#
# **What you will learn**
# - the language model as a **classifier**: its head alone, then, from that head, **LoRA** on the
#   attention and feed-forward projections and full fine-tuning, three seeds each, each arm its
#   own learning rate and epochs, beside two **floors** (a bag of words, the head on an untrained
#   model), with intervals over seeds and over test reviews;
# - LoRA on a projection's **whole matrix** against Keras' **per-head** LoRA, the rank with and
#   without **rsLoRA**'s scale, and **merging** the change into the weights;
# - the model in **int8**, then **int4 and int3 with group-wise scales**: bits per character
#   against bits per weight and the file's size; **LoRA on an int8 base** (QLoRA's idea);
# - what training holds in **memory** (AdamW's 16 bytes a parameter, ZeRO's stages), **gradient
#   accumulation**, and the same training steps on **several devices** (data parallelism).
#
# **Prerequisites:** notebook 11 (the Llama-style block with rotary positions, and the text it
# trains on) and notebook 08 (the fine-tuning protocol the classifier follows).
#
# Every layer here is the course's own, in `transformer_course`, checked against Keras' own
# `enable_lora` and `quantize("int8")`. Four graded exercises put each new idea in your hands:
# int8, LoRA's merge, the data-parallel gradient and group-wise int4.
#
# Data: the IMDB Large Movie Review Dataset — Maas et al., 2011, *Learning Word Vectors for
# Sentiment Analysis*, ACL-HLT, pp. 142–150 (no explicit license; cite the paper): 09's running
# text (training and unlabelled reviews, labels unused) for the language model, and the labels
# of a fixed sample of training reviews for the classifier.

# %%
import subprocess
import sys

if "google.colab" in sys.modules:  # Colab only: install the course package, keep Colab's TensorFlow/Keras
    subprocess.run([sys.executable, "-m", "pip", "install", "-q",
                    "transformer-course @ git+https://github.com/transformer-course/transformer-course@v0.1.0"],
                   check=True)

import transformer_course as tc

settings = tc.start_notebook("12", seed=42)

# %%
import inspect
import json
import os
import tempfile
import warnings

import keras
import matplotlib.pyplot as plt
import numpy as np
from sklearn.feature_extraction.text import CountVectorizer
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import log_loss

from transformer_course import epoch_progress, load_record, report_metric
from transformer_course.bpe import BytePairEncoding
from transformer_course.datasets import distinct_texts, load_imdb, load_imdb_unlabelled
from transformer_course.decoding import greedy_decode
from transformer_course.generation import CachedLanguageModel
from transformer_course.language_model import LanguageModel, build_language_model, language_model_classifier
from transformer_course.lora import LoRA, add_lora, lora_weights, merge_lora
from transformer_course.metrics import (
    MaskedCrossEntropy,
    bits_per_character,
    bootstrap_interval,
    mean_interval,
    token_log_probabilities,
)
from transformer_course.parallel import training_memory
from transformer_course.quantization import quantize_model_weights
from transformer_course.training import (
    RowBatches,
    WarmupCosineDecay,
    WarmupLinearDecay,
    best_on_validation,
    encode_running_text,
    fit_best,
    interleaved_timings,
)

rng = np.random.default_rng(0)
stages = tc.RunStages("12", settings)  # the base and every adapted arm are kept as they train: a stopped run resumes

# %% [markdown]
# ## 1. The base model
#
# Notebook 11's text in notebook 11's tokens: training and unlabelled reviews less every text of
# the test split and every second copy (`distinct_texts`), the first `validation_reviews` held
# out, `merges` byte-level BPE merges learned from the first `bpe_reviews` training texts,
# `<|endoftext|>` after every review, rows of `chunk_length` tokens. A fixed sample of
# `test_reviews` test reviews is scored in bits per character.

# %%
train_split, test_split = load_imdb()
corpus = distinct_texts(train_split.texts + load_imdb_unlabelled(), test_split.texts)
reviews = corpus.texts[:settings.train_reviews]
validation_texts, train_texts = reviews[:settings.validation_reviews], reviews[settings.validation_reviews:]
test_texts = test_split.texts[:settings.test_reviews]  # the test reviews come shuffled: a fixed random sample
tokenizer = BytePairEncoding.train(train_texts[:settings.bpe_reviews], settings.merges,
                                   special_tokens=["<|endoftext|>"], progress=True).with_id_offset(1)
END, vocabulary_size = tokenizer.special_ids["<|endoftext|>"], tokenizer.vocabulary_size

# %%
train_inputs, train_targets = encode_running_text(tokenizer.encode, train_texts, settings.chunk_length, END,
                                                  description="encoding the training text")
validation_inputs, validation_targets = encode_running_text(tokenizer.encode, validation_texts,
                                                            settings.chunk_length, END)
test_inputs, test_targets = encode_running_text(tokenizer.encode, test_texts, settings.chunk_length, END)
scored_text = "".join(text + "\n" for text in test_texts)[len(tokenizer.decode(test_inputs[0][:1])):]
validation_characters = sum(len(text) + 1 for text in validation_texts)
print(f"{len(train_texts):,} training, {len(validation_texts):,} validation, {len(test_texts):,} test reviews; "
      f"{vocabulary_size:,} token ids; {int((train_targets != 0).sum()):,} training tokens")

# %% [markdown]
# The base is notebook 11's Llama-style block with rotary positions (RMSNorm, SwiGLU, grouped
# queries; width 256, 2 blocks), seed 0, at the peak learning rate notebook 11's ablation chose
# for its rotary arm (`base_learning_rate`; the cell prints notebook 11's record beside it),
# trained for `base_updates` updates of 32 rows of 256 tokens, three times as long as one of
# notebook 11's ablation runs: those need to be many and short, and a classifier can only be as
# good as the features its base gives it. The floor its validation loss is read against: a
# **unigram count table** (each token's frequency in the training rows, add-one smoothed).

# %%
keras.utils.set_random_seed(settings.seeds[0])
pretrained = build_language_model(vocabulary_size, settings.chunk_length, architecture="llama", positions="rotary",
                                  intermediate_dim=settings.intermediate_dim,
                                  num_key_value_heads=settings.num_key_value_heads, **settings.model)
schedule = WarmupCosineDecay(settings.base_learning_rate, min(settings.warmup_steps, settings.base_updates // 2),
                             settings.base_updates)
pretrained.compile(optimizer=keras.optimizers.AdamW(schedule, weight_decay=0.01), loss=MaskedCrossEntropy(),
                   jit_compile=settings.jit_compile)
batches = RowBatches(train_inputs, train_targets, settings.batch_size,
                     batches_per_epoch=settings.base_updates // settings.rounds, seed=settings.seeds[0])
pretrained, _, pretraining = fit_best(pretrained, batches, (validation_inputs, validation_targets),
                                      epochs=settings.rounds, patience=settings.rounds, validation_batch_size=64,
                                      callbacks=[epoch_progress()], resume_folder=stages.folder_for("base"))

# %%
to_bits = int((validation_targets != 0).sum()) / np.log(2) / validation_characters  # mean nats a token -> bpc
counts = np.bincount(train_targets[train_targets != 0], minlength=vocabulary_size + 1)[1:] + 1.0
validation_real = validation_targets[validation_targets != 0]
unigram_bits = -np.log(counts / counts.sum())[validation_real - 1].sum() / np.log(2) / validation_characters
eleven = load_record("11_modern_decoders")
chosen = eleven["metrics"].get("rotary_peak_learning_rate") if eleven else None
print(f"the base: rotary positions, seed {settings.seeds[0]}, {settings.base_updates} updates at peak rate "
      f"{settings.base_learning_rate:g} (notebook 11's record: its rotary arm chose "
      + (f"{chosen['value']:g}" if chosen else "no record here")
      + f"), {pretraining['seconds'] / 60:.1f} min of training; validation "
      f"{pretraining['best_val_loss'] * to_bits:.4f} bits per character (the unigram table: {unigram_bits:.4f})")

# %% [markdown]
# ## 2. The language model as a classifier: head only, LoRA and full fine-tuning
#
# A classifier reads its final states through a pooling and a dense layer
# (`language_model_classifier`). GPT's classifier reads the last real token (Radford et al.,
# 2018, §3.2), the one position that has read the whole text; but a model trained only to predict
# the next token keeps there what the next token needs, not a summary of the review. This
# classifier reads the mean of every real token's state instead (`pooling="mean"`, padding
# masked), then dropout and one dense unit with a sigmoid.
#
# Three arms and a variant, each starting from the same pre-trained weights:
#
# - **head only**: every weight of the language model frozen; only the dense layer trains. The
#   control: it measures what the pre-trained features carry with nothing adapted. A frozen model
#   gives each review the same pooled vector at every epoch, so the vectors are computed once and
#   the head (dropout and the sigmoid unit) trains on them: the same model, at a tiny fraction of
#   the cost, so the control gets `head_epochs` epochs, more patience and a grid of its own, its best chance;
# - **LoRA on the attention and feed-forward projections**: every pre-trained weight frozen; each
#   query, key, value and output projection, and each of SwiGLU's three matrices, gains a
#   trainable change $\tfrac{\alpha}{r} A B$ of its whole matrix (section 2.1; Hu et al., 2021,
#   §4.1), as Schulman and Thinking Machines, 2025 (*LoRA Without Regret*), recommend; and, as a
#   variant, **LoRA on the attention projections only**, where Hu et al. (§4.2) put it;
# - **full fine-tuning**: every weight trains.
#
# The protocol is notebook 08's: a fixed random sample of `label_reviews` training reviews to
# learn from and `label_validation_reviews` more to choose the epoch and the learning rate, a
# fixed sample of `classifier_test_reviews` test reviews to report; each review its **last**
# `classifier_length` tokens (the verdict tends to come at the end); AdamW with a warm-up over the
# first tenth of the updates and a linear decay to 0; dropout `classifier_dropout` on the pooled
# vector. **Each arm chooses its epochs on the validation reviews, at every seed**: the decay runs
# over `fine_tune_max_epochs` epochs (the head alone `head_epochs`), training stops after
# `fine_tune_patience` epochs without a lower validation loss (the head `head_patience`), and the best epoch's weights are
# kept. **Each arm has its own learning-rate grid**, chosen at seed 0 on the validation reviews: LoRA's about 10 times full fine-tuning's, as *LoRA Without Regret* finds,
# and one step below; LoRA on the attention projections alone trains at the rate LoRA on every
# projection chose, at seed 0 only (a variant, not a fourth arm). **Three paired seeds** (a seed
# sets the dense layer's and A's initial weights, the dropout and the batch order).
#
# **Every adapted arm starts from the head-only arm's trained head** of the same seed: first
# the linear probe, then the fine-tuning (*LP-FT*, Kumar et al., 2022). A head drawn at random
# sends random gradients into the model for the first updates; from the trained head, LoRA and
# full fine-tuning start where the control ended, and their difference from it is what adapting
# the model adds.
#
# **The hypothesis**, set before the run: with epochs chosen per arm, LoRA on every projection,
# training at most 3% of the parameters, ends within 2 points of full fine-tuning's test accuracy
# at 1,000 labels (section 2.3 states the rule that decides it).

# %%
def classifier_rows(texts):
    """Each text's last classifier_length BPE ids, padded with 0 on the right: int (R, classifier_length)."""
    rows = np.zeros((len(texts), settings.classifier_length), "int32")
    for row, text in enumerate(texts):
        ids = tokenizer.encode(text)[-settings.classifier_length:]
        rows[row, :len(ids)] = ids
    return rows


order = np.random.default_rng(0).permutation(len(train_split.texts))  # a fixed sample of labelled reviews
labelled = order[:settings.label_reviews + settings.label_validation_reviews]
label_x = classifier_rows([train_split.texts[index] for index in labelled])
label_y = train_split.labels[labelled].astype("float32")
split = settings.label_reviews
test_x = classifier_rows(test_split.texts[:settings.classifier_test_reviews])
test_y = test_split.labels[:settings.classifier_test_reviews].astype("float32")

# %%
majority = max(test_y.mean(), 1 - test_y.mean())
print(f"{split:,} reviews to learn from, {len(label_y) - split:,} to validate on, {len(test_y):,} test reviews; "
      f"always answering the test sample's majority class scores {majority:.4f}, and a constant guess "
      f"of 0.5 a validation loss of ln 2 = {np.log(2):.4f}")

# %% [markdown]
# ### 2.1 LoRA on the whole matrix, and Keras' per-head LoRA
#
# LoRA (Hu et al., 2021, §4.1) freezes a pre-trained weight matrix W (d × k) and learns a
# low-rank change, $W + \tfrac{\alpha}{r} A B$, with A (d × r) drawn at random and B (r × k) at
# zero, so the adapted model starts as the pre-trained one. The course's `LoRA` layer
# (`transformer_course.lora`) reads a projection's kernel as that matrix: the query projection's
# kernel (E, N, H) is the E × N·H matrix that maps a token to all N heads at once, so A is
# (E × r), B (r × N·H), and the change has rank at most r. Keras has LoRA built in
# (`EinsumDense.enable_lora`), and on the output projection, whose kernel (N, H, E) reads as an
# N·H × E matrix, the two are the same: Keras' A is (N, H, r) and B (r, E). On the query
# projection they differ: Keras gives A the kernel's leading axes, (E, N, r), and B (r, H), so
# **each head gets its own A**: N changes of rank r side by side, rank up to N·r.

# %%
def einsum_projection(equation, output_shape, input_shape, bias_axes=None):
    """A built EinsumDense with random weights (the shape of one of attention's projections)."""
    layer = keras.layers.EinsumDense(equation, output_shape, bias_axes=bias_axes)
    layer.build(input_shape)
    return layer


alpha_kwargs = ({"lora_alpha": settings.lora_alpha}
                if "lora_alpha" in inspect.signature(keras.layers.EinsumDense.enable_lora).parameters else None)
rank, heads, width = 2, 4, 8  # small, so the ranks can be read

# %%
output_projection = einsum_projection("btnh,nhe->bte", (None, 32), (None, None, heads, width), "e")
ours = LoRA(output_projection, rank=rank, alpha=settings.lora_alpha if alpha_kwargs else rank)
ours.build()
theirs = einsum_projection("btnh,nhe->bte", (None, 32), (None, None, heads, width), "e")
theirs.set_weights(output_projection.get_weights())
theirs.enable_lora(rank, **(alpha_kwargs or {}))  # a Keras before lora_alpha: alpha = rank
a, b = rng.normal(size=(heads * width, rank)).astype("float32"), rng.normal(size=(rank, 32)).astype("float32")
ours.lora_a.assign(a)
ours.lora_b.assign(b)
theirs.lora_kernel_a.assign(a.reshape(heads, width, rank))
theirs.lora_kernel_b.assign(b)
x = rng.normal(size=(2, 5, heads, width)).astype("float32")
print("output projection: ours against Keras' enable_lora with the same A and B, largest difference "
      f"{np.abs(keras.ops.convert_to_numpy(ours(x)) - keras.ops.convert_to_numpy(theirs(x))).max():.1e}")

# %%
query_projection = einsum_projection("bte,enh->btnh", (None, heads, width), (None, None, 32))
ours = LoRA(query_projection, rank=rank)
ours.build()
ours.lora_b.assign(rng.normal(size=(rank, heads * width)).astype("float32"))
our_change = keras.ops.convert_to_numpy(ours.merged_kernel() - query_projection.kernel).reshape(32, -1)
theirs = einsum_projection("bte,enh->btnh", (None, heads, width), (None, None, 32))
theirs.enable_lora(rank)
theirs.lora_kernel_b.assign(rng.normal(size=(rank, width)).astype("float32"))
their_change = keras.ops.convert_to_numpy(theirs.kernel - theirs._kernel).reshape(32, -1)
print(f"query projection (E, N, H) = (32, {heads}, {width}), rank r = {rank}:")
print(f"  ours:   A {tuple(ours.lora_a.shape)}, B {tuple(ours.lora_b.shape)}; the change of the 32 x {heads * width} "
      f"matrix has rank {np.linalg.matrix_rank(our_change, tol=1e-4)}")
print(f"  Keras': A {tuple(theirs.lora_kernel_a.shape)}, B {tuple(theirs.lora_kernel_b.shape)}; the change has "
      f"rank {np.linalg.matrix_rank(their_change, tol=1e-4)} (N·r = {heads * rank})")

# %% [markdown]
# Merging: after training, $W + \tfrac{\alpha}{r} A B$ can be computed once and stored as the
# projection's kernel, so the adapted model runs as fast as the original (`merge_lora` returns
# such a copy; exercise 12.2 asks you to write the merge).
#
# ### 2.2 The floors: what a classifier gets without the pre-trained model
#
# A control means something only beside what it controls for. Two floors, on the same 1,000
# reviews, each tuned on the same validation reviews:
#
# - a **bag of words**: logistic regression on which words the classifier's text holds
#   (scikit-learn's `CountVectorizer` and `LogisticRegression`, its regularization strength
#   chosen over a grid), given exactly the text the models read (each review's last
#   `classifier_length` tokens, decoded);
# - the **head on a randomly initialised model** of the same shape: the pooled vectors of a model
#   that learned nothing, read by the same head with the same grid, seeds and epochs. What the
#   head-only arm gains over it is what pre-training put into the features.

# %%
text_of = [tokenizer.decode(row[row != 0]) for row in label_x]  # what the models read, as text
bag_of_words = CountVectorizer(min_df=2).fit(text_of[:split])
words_train, words_validation = (bag_of_words.transform(part) for part in (text_of[:split], text_of[split:]))
words_test = bag_of_words.transform([tokenizer.decode(row[row != 0]) for row in test_x])


def bag_of_words_classifier(strength):
    """Logistic regression on word counts, fitted on the 1,000 reviews at inverse strength C = `strength`."""
    return LogisticRegression(C=strength, max_iter=2000).fit(words_train, label_y[:split])

# %%
strength, scores = best_on_validation(
    settings.bag_of_words_strengths,
    lambda value: log_loss(label_y[split:], bag_of_words_classifier(value).predict_proba(words_validation)[:, 1]),
    higher_is_better=False)
words_correct = bag_of_words_classifier(strength).predict(words_test) == test_y
print(f"bag of words ({words_train.shape[1]:,} words seen twice or more): validation loss at each C: "
      + ", ".join(f"{value:g}: {loss:.4f}" for value, loss in scores.items())
      + f" -> C = {strength:g}; test accuracy {words_correct.mean():.4f}")

# %%
def pooled_vectors(model):
    """The mean of the final states of `model` over each row's real tokens, for the labelled and test rows."""
    pooling = language_model_classifier(model, pooling="mean")  # shares the model's layers; nothing trains
    encoder = keras.Model(pooling.input, pooling.get_layer("mean_of_real_tokens").output)
    return tuple(encoder.predict(rows, batch_size=64, verbose=0) for rows in (label_x, test_x))


keras.utils.set_random_seed(settings.seeds[0])
untrained = LanguageModel.from_config(pretrained.get_config())  # the same shape, fresh initial weights
untrained(label_x[:1])
features = {"head": pooled_vectors(pretrained), "random_head": pooled_vectors(untrained)}
print(f"the frozen models' pooled vectors: {features['head'][0].shape} to learn from and validate on, "
      f"{features['head'][1].shape} to test")

# %% [markdown]
# ### 2.3 The arms
#
# Each arm trains with its own rate, chosen at seed 0, and **its own number of epochs, chosen on
# the validation reviews at every seed**: the linear decay runs over `fine_tune_max_epochs`
# epochs, training stops after `fine_tune_patience` epochs without a lower validation loss, and
# the best epoch's weights are kept (the head: `head_epochs` epochs, patience `head_patience`). Each run of
# an adapted arm is kept as it trains (`RunStages`): a stopped run resumes at its last epoch.

# %%
ADAPTATIONS = {"random_head": "head, random model (floor)", "head": "head only",
               "lora_attention": "LoRA, attention", "lora_all": "LoRA, attention + feed-forward",
               "full": "full fine-tuning"}
backbones, arm_rate, fine_tuning_runs = {}, {}, {}  # fine_tuning_runs: memoised runs by arm


def copied(model):
    """A new language model with `model`'s configuration and weights (fine-tuning changes the copy only)."""
    copy = LanguageModel.from_config(model.get_config())
    copy.set_weights(model.get_weights())
    return copy

# %%
def keras_lora(backbone, rank):
    """Keras' own LoRA (`enable_lora`) on every projection of the blocks; every other weight frozen."""
    for layer in backbone._flatten_layers():  # Keras has no public list of nested layers
        if isinstance(layer, (keras.layers.Dense, keras.layers.EinsumDense)):  # the blocks' projections
            layer.enable_lora(rank, **(alpha_kwargs or {}))
    for variable in backbone.weights:
        variable.trainable = "lora_kernel" in variable.path
    return backbone

# %%
def new_head(kind):
    """Dropout and the sigmoid unit, on a frozen model's pooled vectors; what it learns from and is tested on."""
    head = keras.Sequential([keras.Input(features[kind][0].shape[1:]),
                             keras.layers.Dropout(settings.classifier_dropout),
                             keras.layers.Dense(1, activation="sigmoid", name="class_output", dtype="float32")])
    return head, *features[kind]

# %%
def new_classifier(kind, learning_rate, seed, rank, stabilized, probe):
    """An arm's classifier, and what it learns from and is tested on; it starts from `probe`'s head."""
    if kind.endswith("head"):
        return new_head(kind)
    backbone = copied(pretrained) if not kind.endswith("int8") else quantized_copy(pretrained)
    if kind.startswith("keras_lora"):
        keras_lora(backbone, rank)
    elif kind.startswith("lora"):
        add_lora(backbone, rank, alpha=settings.rank_stabilized_alpha if stabilized else settings.lora_alpha,
                 feedforward=kind == "lora_all", seed=seed, rank_stabilized=stabilized)
    backbones[kind, learning_rate, seed, rank, stabilized] = backbone  # kept for the merge
    classifier = language_model_classifier(backbone, pooling="mean", dropout=settings.classifier_dropout)
    classifier.get_layer("class_output").set_weights(probe.get_layer("class_output").get_weights())
    return classifier, label_x, test_x

# %%
def fine_tune(kind, learning_rate, seed, rank=settings.lora_rank, stabilized=False):
    """One arm trained at peak `learning_rate`, its epochs chosen on validation: (classifier, history, facts)."""
    key = (kind, learning_rate, seed, rank, stabilized)
    if key not in fine_tuning_runs:
        probe = None if kind.endswith("head") else fine_tune("head", arm_rate["head"], seed)[0]  # this seed's head
        keras.utils.set_random_seed(seed)
        classifier, inputs, _ = new_classifier(*key, probe)
        epochs, patience = ((settings.head_epochs, settings.head_patience) if kind.endswith("head")
                            else (settings.fine_tune_max_epochs, settings.fine_tune_patience))
        compile_classifier(classifier, learning_rate, epochs)
        train, validation, arguments = training_data(key, inputs)
        fine_tuning_runs[key] = fit_best(classifier, train, validation, epochs=epochs, patience=patience, **arguments)
    return fine_tuning_runs[key]

# %%
def compile_classifier(classifier, learning_rate, epochs):
    """AdamW at peak `learning_rate`: a warm-up over the first tenth of `epochs`' updates, then a linear decay to 0."""
    updates = epochs * -(-split // settings.fine_tune_batch_size)
    schedule = WarmupLinearDecay(learning_rate, updates // 10, updates)
    classifier.compile(optimizer=keras.optimizers.AdamW(schedule, weight_decay=0.01), loss="binary_crossentropy",
                       metrics=["accuracy"], jit_compile=settings.fine_tune_jit_compile)


def training_data(key, inputs):
    """(training data, validation data, fit's arguments): an adapted arm's in resumable batches, kept as it trains."""
    validation = (inputs[split:], label_y[split:])
    if key[0].endswith("head"):  # seconds a run: the arrays, shuffled by Keras
        return (inputs[:split], label_y[:split]), validation, {"batch_size": settings.fine_tune_batch_size}
    batches = RowBatches(inputs[:split], label_y[:split], settings.fine_tune_batch_size, seed=key[2])
    folder = stages.folder_for(" ".join(str(part) for part in key))
    return batches, validation, {"resume_folder": folder, "validation_batch_size": 64}


# %%
for kind, rates in {"random_head": settings.fine_tune_learning_rates["head"],
                    **settings.fine_tune_learning_rates}.items():  # the head first: the other arms start from it
    arm_rate[kind], scores = best_on_validation(
        rates, lambda rate, arm=kind: fine_tune(arm, rate, settings.seeds[0])[2]["best_val_loss"],
        higher_is_better=False)
    print(f"{ADAPTATIONS[kind]:<31} seed {settings.seeds[0]}, best validation loss at each peak rate: "
          + ", ".join(f"{rate:g}: {loss:.4f}" for rate, loss in scores.items()) + f" -> {arm_rate[kind]:g}")
arm_rate["lora_attention"] = arm_rate["lora_all"]
seeds_of = {kind: settings.seeds[:1] if kind == "lora_attention" else settings.seeds for kind in ADAPTATIONS}
print(f"{ADAPTATIONS['lora_attention']:<31} seed {settings.seeds[0]} only, at the rate of LoRA on every projection")

# %%
test_predictions = {}


def test_correct(kind, learning_rate, seed, rank=settings.lora_rank, stabilized=False):
    """Whether one trained arm classifies each test review right: bool (test reviews,), memoised."""
    key = (kind, learning_rate, seed, rank, stabilized)
    if key not in test_predictions:
        inputs = features[kind][1] if kind.endswith("head") else test_x
        predicted = fine_tune(*key)[0].predict(inputs, batch_size=64, verbose=0)
        test_predictions[key] = keras.ops.convert_to_numpy(predicted)[:, 0] > 0.5
    return test_predictions[key] == (test_y > 0.5)


def parameter_counts(kind, classifier):
    """(trainable, total) parameters of an arm's classifier; a head's total counts the frozen model too."""
    trainable = sum(int(np.prod(weight.shape)) for weight in classifier.trainable_weights)
    return trainable, classifier.count_params() + (pretrained.count_params() if kind.endswith("head") else 0)

# %%
correct = {kind: np.array([test_correct(kind, arm_rate[kind], seed) for seed in seeds_of[kind]])
           for kind in ADAPTATIONS}  # (seeds, test reviews) each
accuracy = {kind: rows.mean(axis=1) for kind, rows in correct.items()}
resumed = sum(run[2]["resumed_epochs"] > 0 for run in fine_tuning_runs.values())
print(f"{resumed} of {len(fine_tuning_runs)} runs took epochs from an earlier sitting (kept in {stages.folder})")
print(f"{'arm':<31} {'trains':>9} {'share':>7} {'rate':>7}   test accuracy (best epoch / epochs run), per seed")
for kind, name in ADAPTATIONS.items():
    trainable, total = parameter_counts(kind, fine_tune(kind, arm_rate[kind], settings.seeds[0])[0])
    runs = [fine_tune(kind, arm_rate[kind], seed)[2] for seed in seeds_of[kind]]
    print(f"{name:<31} {trainable:>9,} {trainable / total:>7.2%} {arm_rate[kind]:>7g}   "
          + ", ".join(f"{value:.4f} ({run['best_epoch']}/{run['epochs']})" for value, run in zip(accuracy[kind], runs))
          + f"  mean {accuracy[kind].mean():.4f}")
print(f"{'bag of words (floor)':<31} {words_train.shape[1] + 1:>9,} {'':>7} {'C=' + format(strength, 'g'):>7}   "
      f"{words_correct.mean():.4f}")

# %%
for kind in ("lora_all", "full"):  # where each seed's best epoch fell, and the head it started from
    for seed in settings.seeds:
        history, facts = fine_tune(kind, arm_rate[kind], seed)[1:]
        print(f"{ADAPTATIONS[kind]}, seed {seed}: validation loss after each epoch "
              + ", ".join(f"{loss:.4f}" for loss in history.history["val_loss"])
              + f" (stopped by {facts['stopped_by']}; its head: "
              f"{fine_tune('head', arm_rate['head'], seed)[2]['best_val_loss']:.4f})")

# %% [markdown]
# Two intervals for each difference. **Over seeds**: the paired seeds' differences, Student's
# t (`mean_interval`; it counts how training varies). **Over test reviews**: each review's
# correctness averaged over the seeds, then a paired bootstrap over the 2,000 reviews
# (`bootstrap_interval`; it counts the test sample's own noise, which the seeds' interval does
# not see). A difference is **separated** where both intervals exclude zero.

# %%
def difference(kind, against):
    """kind − against in points: (mean over the test reviews, seed interval or NaNs, test-review interval)."""
    per_review = [correct[arm].mean(axis=0) if arm in correct else words_correct for arm in (kind, against)]
    mean, low, high = bootstrap_interval(100 * (per_review[0] - per_review[1].astype(float)))
    paired = kind in correct and against in correct and len(accuracy[kind]) == len(accuracy[against]) > 1
    seeds = mean_interval(100 * (accuracy[kind] - accuracy[against]))[1:] if paired else (np.nan, np.nan)
    return mean, seeds, (low, high)


print(f"{'difference, points':<58} {'mean':>6}   over seeds        over test reviews")
for kind, against in (("head", "random_head"), ("head", "bag_of_words"), ("full", "head"), ("lora_all", "head"),
                      ("lora_all", "full")):
    mean, (seed_low, seed_high), (low, high) = difference(kind, against)
    name = f"{ADAPTATIONS[kind]} minus {ADAPTATIONS.get(against, 'bag of words')}"
    seeds_text = f"[{seed_low:+.2f}, {seed_high:+.2f}]" if np.isfinite(seed_low) else "(one run)"
    print(f"{name:<58} {mean:+6.2f}   {seeds_text:<17} [{low:+.2f}, {high:+.2f}]")

# %%
alone = accuracy["lora_attention"][0]  # one seed: no seed interval; a reading
mean, _, (low, high) = difference("lora_attention", "lora_all")
print(f"{ADAPTATIONS['lora_attention']}, seed {settings.seeds[0]} only, minus each arm's seed {settings.seeds[0]}: "
      + ", ".join(f"{ADAPTATIONS[kind]} {100 * (alone - accuracy[kind][0]):+.2f}"
                  for kind in ("head", "lora_all", "full"))
      + f"; against LoRA on every projection's mean over seeds, over the test reviews: [{low:+.2f}, {high:+.2f}]")

# %% [markdown]
# **The hypothesis**, set before the run, decided by this rule: LoRA on every projection trains at
# most 3% of the parameters and its difference from full fine-tuning has **both** intervals'
# lower ends above −2 points: *holds*; both intervals lie wholly below −2: *does not hold* (as a
# difference is separated from zero only where both intervals exclude it); otherwise this run
# does not decide it.

# %%
trainable, total = parameter_counts("lora_all", fine_tune("lora_all", arm_rate["lora_all"], settings.seeds[0])[0])
mean, seeds, reviews = difference("lora_all", "full")
if trainable / total <= 0.03 and min(seeds[0], reviews[0]) > -2:
    verdict = "holds"
elif trainable / total > 0.03 or max(seeds[1], reviews[1]) < -2:
    verdict = "does not hold"
else:
    verdict = "is not decided by this run"
print(f"LoRA on every projection trains {trainable / total:.2%} of the parameters; minus full fine-tuning "
      f"{mean:+.2f} points (seeds [{seeds[0]:+.2f}, {seeds[1]:+.2f}], test reviews [{reviews[0]:+.2f}, "
      f"{reviews[1]:+.2f}]): the hypothesis {verdict}")

# %%
record = load_record("08_bert_pretraining")
if record is None:
    print("No recorded full run of notebook 08 here (results/08_bert_pretraining.json).")
else:
    for name in ("fine_tuned_1000_pretrained", "fine_tuned_1000_scratch"):
        metric = record["metrics"][name]
        print(f"notebook 08: {metric['description']}: {metric['value']:.4f}")

# %%
figure, axis = plt.subplots(figsize=(8, 3.8))
for position, kind in enumerate(ADAPTATIONS):
    mean, low, high = mean_interval(accuracy[kind])
    axis.errorbar([position], [mean], yerr=[[mean - low], [high - mean]] if np.isfinite(low) else None, fmt="o",
                  color=f"C{position}", capsize=4)
    axis.plot([position] * len(accuracy[kind]), accuracy[kind], ".", color=f"C{position}", alpha=0.5)
axis.axhline(majority, color="grey", linestyle=":", label=f"the majority class ({majority:.3f})")
axis.axhline(words_correct.mean(), color="C5", linestyle="-.", label=f"bag of words ({words_correct.mean():.3f})")
if record is not None:
    scratch = record["metrics"]["fine_tuned_1000_scratch"]["value"]
    axis.axhline(scratch, color="black", linestyle="--", label=f"notebook 08's encoder from scratch ({scratch:.3f})")
axis.set_xticks(range(len(ADAPTATIONS)), [name.replace(", ", ",\n") for name in ADAPTATIONS.values()])
axis.set(ylabel="test accuracy", title="1,000 labels: seeds (dots), mean and 95% seed interval (bars)")
axis.legend(fontsize="small")
plt.show()


# %% [markdown]
# ### 2.4 The rank, with the scale held apart
#
# With α fixed, LoRA's scale α/r falls as the rank grows (8, 2 and 0.5 at ranks 1, 4 and 16):
# a sweep over r changes the rank **and** how large the same A B moves the weights, two factors
# at once. **rsLoRA** (Kalajdzievski, 2023) scales by α/√r instead, which keeps the change's
# size of the same order at every rank, so a larger rank can learn more rather than less.
# Both sweeps, seed 0, LoRA on every projection at its chosen rate, epochs on validation; α for
# rsLoRA is `rank_stabilized_alpha`, chosen so that at rank 4 both scales are 2 (one run for
# both).

# %%
print(f"{'rank':>4} {'scale':<11} {'trains':>8} {'best validation loss':>21} {'epochs':>7} {'test accuracy':>14}")
for rank in settings.lora_ranks:
    for stabilized in (False, True):
        same = stabilized and rank == settings.lora_rank  # both scales are 2: the same run
        arguments = ("lora_all", arm_rate["lora_all"], settings.seeds[0], rank, stabilized and not same)
        classifier, _, facts = fine_tune(*arguments)
        scale = (f"α/√r = {settings.rank_stabilized_alpha / np.sqrt(rank):g}" if stabilized
                 else f"α/r = {settings.lora_alpha / rank:g}")
        print(f"{rank:>4} {scale:<11} {parameter_counts('lora_all', classifier)[0]:>8,} "
              f"{facts['best_val_loss']:>21.4f} {facts['best_epoch']:>3}/{facts['epochs']:<3} "
              f"{test_correct(*arguments).mean():>14.4f}"
              + ("  (the run above)" if same else ""))

# %%
key = ("lora_all", arm_rate["lora_all"], settings.seeds[0], settings.lora_rank, False)
adapted = fine_tune(*key)[0]
merged_backbone = merge_lora(backbones[key])  # a plain LanguageModel: each W + (alpha / r) A B folded in
merged = language_model_classifier(merged_backbone, pooling="mean", dropout=settings.classifier_dropout)
merged.get_layer("class_output").set_weights(adapted.get_layer("class_output").get_weights())
difference_of_merge = np.abs(keras.ops.convert_to_numpy(merged.predict(test_x[:64], verbose=0))
                             - keras.ops.convert_to_numpy(adapted.predict(test_x[:64], verbose=0))).max()
print(f"merged into plain projections: {len(lora_weights(merged_backbone))} LoRA weights left, "
      f"{merged.count_params():,} parameters against the adapted classifier's {adapted.count_params():,}; "
      f"largest difference in their predictions {difference_of_merge:.1e}")

# %%
for kind, name in (("full", "classifier_accuracy_full"), ("lora_all", "classifier_accuracy_lora"),
                   ("lora_attention", "classifier_accuracy_lora_attention"), ("head", "classifier_accuracy_head_only"),
                   ("random_head", "classifier_accuracy_random_model_head")):
    report_metric(name, float(accuracy[kind].mean()),
                  f"{ADAPTATIONS[kind]}, 1,000 labels, epochs chosen on validation: mean test accuracy over "
                  f"{len(accuracy[kind])} seed(s) ({len(test_y):,} test reviews)", headline=kind == "lora_all",
                  read_against="classifier_accuracy_full" if kind == "lora_all" else "")
report_metric("classifier_accuracy_bag_of_words", float(words_correct.mean()),
              "bag of words (logistic regression) on the same text, 1,000 labels: test accuracy")
report_metric("lora_minus_full_points", float(difference("lora_all", "full")[0]),
              "LoRA on every projection minus full fine-tuning, test accuracy points (mean over seeds)")

# %% [markdown]
# **Reading the fine-tuning** (the recorded run). **On this base a bag of words beats every arm;
# LoRA adapts the model and recovers three fifths of what full fine-tuning adds over the head.**
# The base trained 360 updates, to 2.0361 bits per character on the validation text (the unigram
# table: 2.8865).
#
# - **The floors.** A bag of words on the very text the models read reaches **75.25%** (C = 0.1,
#   inside its grid): above every arm, full fine-tuning's 71.03% included. At 1,000 labels, counting
#   words beats reading the states of a 2-million-parameter model pre-trained for 360 updates. The
#   head on an untrained model of the same shape reaches 52.43%, near the majority class (50.95%);
#   the head on the pre-trained model reaches 63.00%, **10.57 points above it** (seeds +8.93 to
#   +12.21, test reviews +8.13 to +12.95): pre-training put something into the features, but 12.25
#   points less than word counts carry (test reviews −14.60 to −9.88).
# - **The control works.** Adapting the model adds to the head: full fine-tuning 8.03 points
#   (seeds +4.35 to +11.72, reviews +6.33 to +9.75), LoRA on every projection **4.82** (seeds +2.76
#   to +6.87, reviews +3.32 to +6.33), both separated.
# - **LoRA against full fine-tuning**: 67.82% (67.80, 68.60, 67.05) against 71.03% (71.30, 72.30,
#   69.50), **−3.22 points**, separated from zero (seeds −4.88 to −1.55, reviews −4.55 to −1.87),
#   training 1.80% of the weights. **The hypothesis is not decided** by its rule: neither interval
#   lies wholly below −2, and neither has its lower end above it. LoRA on the attention
#   projections alone (seed 0, 0.71% of the weights) reaches 67.90%, with LoRA on every projection
#   (over the test reviews −1.23 to +1.42).
# - **Epochs, chosen per arm.** Full fine-tuning's best epoch was the second at two seeds and the
#   first at the third; its loss then rose, and patience stopped it. LoRA's best came at epochs 5
#   and 6 of 8, its loss flat over the last four: the cap did not cut it off. LoRA on the
#   attention projections alone was best at its last epoch (8 of 8): more epochs might help it.
# - **Rates: where this run cannot yet rule out the obvious.** LoRA chose 3·10⁻³, the **lowest**
#   rate of its grid (0.5897 against 0.6064 at 10⁻²), the rate full fine-tuning chose too, not ten
#   times it; a lower rate might raise LoRA. The head chose 0.1, the top of its grid, by under a thousandth
#   over 0.03 (0.6579 against 0.6585), within the noise of 500 reviews. Until LoRA's grid reaches
#   below 3·10⁻³, its −3.22 points is a statement about this grid.
# - **The rank, with the scale held apart** (seed 0, readings): with α/r, ranks 1, 4 and 16 reach
#   66.05%, 67.80% and 67.60% (validation losses 0.6218, 0.5897, 0.5914); with rsLoRA's α/√r, rank
#   1 and 16 reach 65.40% and 68.30% (0.6369, 0.6051). Neither scaling finds a rank that matters
#   by more than the seeds do: on this task the rank is not what holds LoRA back.
#
# Merging works: the adapted classifier's LoRA layers, folded into plain projections, give the
# same predictions (largest difference 0.0), with 37 thousand fewer parameters to store.

# %% [markdown]
# ## 3. int8: a quarter of the bytes
#
# A trained model can be stored and run with 8-bit integer weights. Keras' `quantize("int8")`
# replaces each kernel of a `Dense` or `EinsumDense` layer, and each row of an `Embedding` table,
# by integers in [−127, 127] and one float scale per output unit (per row): the unit's largest
# absolute weight becomes 127 (**absmax** quantization; `keras.quantizers.abs_max_quantize`).
# Inputs are quantized on the fly too. The norms' scales and the output bias stay float32.
#
# Absmax spends its 255 levels on the range up to the largest weight, so one large weight (an
# **outlier**) coarsens every other weight of its row. Dettmers et al., 2022 (*LLM.int8()*) show
# that from about 6.7 billion parameters a few outlier features dominate, and keep those in 16
# bits. One row of 256 weights, with and without one outlier:

# %%
row = rng.normal(0.0, 0.02, size=(1, 256)).astype("float32")
with_outlier = row.copy()
with_outlier[0, 0] = 1.0
for name, weights in (("no outlier", row), ("one weight of 1.0", with_outlier)):
    integers, multiplier = (keras.ops.convert_to_numpy(value)
                            for value in keras.quantizers.abs_max_quantize(weights, axis=-1))
    error = np.abs(integers / multiplier - weights)[0, 1:]  # the other 255 weights
    print(f"{name:<18} step {1 / multiplier[0, 0]:.5f}; distinct integers {len(np.unique(integers)):>3}; "
          f"mean error of the other weights {error.mean():.5f} ({error.mean() / np.abs(row[0, 1:]).mean():.0%} of "
          "their mean size)")

# %% [markdown]
# Exercise 12.1 asks you to write absmax quantization of a matrix, row by row, and its
# dequantization. On the base model of section 1: its weight file (the weights alone,
# `save_weights`), its bits per character on the same test text, and its generation speed.

# %%
def quantized_copy(model):
    """A copy of `model` in int8 (Keras names every layer it leaves in float, norms and dropout: not news)."""
    copy = copied(model)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*does not have a `quantize` method")
        copy.quantize("int8")
    return copy


float_model, int8_model = copied(pretrained), quantized_copy(pretrained)
folder = tempfile.mkdtemp()
sizes = {}
for name, model in (("float32", float_model), ("int8", int8_model)):
    model.save_weights(os.path.join(folder, f"{name}.weights.h5"))
    sizes[name] = os.path.getsize(os.path.join(folder, f"{name}.weights.h5"))
print(f"weights: float32 {sizes['float32'] / 1e6:.2f} MB, int8 {sizes['int8'] / 1e6:.2f} MB "
      f"({sizes['int8'] / sizes['float32']:.3f} of float32)")

# %%
reloaded = quantized_copy(pretrained)  # a quantized model is built, then the int8 weights are loaded into it
reloaded.load_weights(os.path.join(folder, "int8.weights.h5"))
same = np.array_equal(*(keras.ops.convert_to_numpy(model(test_inputs[:2])) for model in (reloaded, int8_model)))
print("the int8 weights, reloaded, give the same probabilities:", same)

# %% [markdown]
# Generation speed: greedy decoding with the key/value cache, `generation_prompts` sequences at
# once, `generation_length` new tokens each. One timing says little on a shared CPU, so the two
# models take turns (`interleaved_timings`: one untimed call each to compile, then
# `timing_repeats` timed calls each, alternating) and the median of each is reported.

# %%
prompts = test_inputs[:settings.generation_prompts, :8]


def generation(model):
    """A function that generates `generation_length` tokens for every prompt with `model`'s cache."""
    cached = CachedLanguageModel(model, settings.chunk_length)
    return lambda call: greedy_decode(cached.next_token_function(prompts), prompts, end_id=None,
                                      max_length=settings.generation_length)


timings = interleaved_timings({"float32": generation(float_model), "int8": generation(int8_model)},
                              repeats=settings.timing_repeats)
quantized = {}
for name, model in (("float32", float_model), ("int8", int8_model)):
    scores = token_log_probabilities(model, test_inputs, test_targets)
    speeds = settings.generation_length * len(prompts) / np.array(timings[name])
    quantized[name] = (bits_per_character(scores, test_targets, len(scored_text)), float(np.median(speeds)))
    print(f"{name:<8} {quantized[name][0]:.4f} bits per character; {quantized[name][1]:7.1f} tokens/s, the median "
          f"of {len(speeds)} (from {speeds.min():.1f} to {speeds.max():.1f})")

# %%
report_metric("int8_size_ratio", sizes["int8"] / sizes["float32"], "int8 weight file / float32 weight file")
report_metric("int8_bits_per_character_change", quantized["int8"][0] - quantized["float32"][0],
              "int8 minus float32 test bits per character (rotary model, seed 0)")
report_metric("int8_generation_speed_ratio", quantized["int8"][1] / quantized["float32"][1],
              f"int8 / float32 generated tokens a second, medians of {settings.timing_repeats} interleaved timings")

# %% [markdown]
# **Reading int8** (the recorded run). The int8 weights take 0.263 of the float32 file (2.16 MB
# against 8.21 MB; the scales, the norms and the output bias stay float32) and change the base's
# test bits per character by +0.0002 (2.0523 against 2.0521). **Generation is slower in int8
# here**: 1012.1 tokens a second against 1223.8, the medians of five interleaved timings each,
# whose ranges do not overlap (959.0 to 1073.2 against 1134.8 to 1264.8): 0.83 of float32's speed.
# Where the time goes is not measured here; our hypothesis: Keras' int8 layers quantize each input
# on the fly and rescale each output around the integer product, extra passes over the
# activations that a model this small does not win back by moving fewer bytes. What int8 buys on
# any machine is memory: a model four times larger fits in the same space; speed needs int8
# arithmetic in hardware and kernels that use it. The outlier row above shows what absmax costs:
# one weight of 1.0 among weights of about 0.02 widens the step twentyfold (0.00040 to 0.00787),
# leaves 14 distinct integers to the row, and the other weights' mean error grows from 1% to 12%
# of their size.

# %% [markdown]
# ### 3.1 Where quantization stops being free
#
# Keras' int8 keeps one scale a row. With fewer bits each step is coarser, and one scale for a
# whole row of 256 or 688 weights lets its largest weight coarsen all the others. The answer of
# GPTQ (Frantar et al., 2023, §5), AWQ and llama.cpp's `Q4_0` format: **a scale for every group**
# of 32 to 128 consecutive weights, at 16 bits a scale, a quarter to a half of a bit more a weight.
# `quantize_model_weights(model, bits, group_size)` rounds every projection kernel and the
# embedding table of a copy in place (a "fake-quantized" model: float arithmetic on rounded
# values, so the cost of the rounding is measured, not a kernel's speed) and returns the arrays a
# file would store, 4-bit integers packed two a byte; `np.savez` writes them. Integers of 3 and 2
# bits go in the same 4-bit slots here, so their files are int4's: what they show is the cost of
# the coarser steps (a format that packs 3 bits, as llama.cpp's `Q3_K` does, would also store
# less). Exercise 12.4 asks you to write group-wise int4.

# %%
def stored_megabytes(arrays):
    """The size in MB of the .npz file holding `arrays` (dict name -> array)."""
    path = os.path.join(folder, "stored.npz")
    np.savez(path, **arrays)
    return os.path.getsize(path) / 1e6

# %%
parameters = pretrained.count_params()
formats = {"float32": None, **{f"int{bits}, " + ("a scale a row" if group is None else f"groups of {group}"):
                               (bits, group) for bits, group in settings.quantization_formats}}
print(f"{'weights':<22} {'file, MB':>9} {'bits a parameter':>17} {'test bits per character':>24}")
stored = {}
for name, quantization in formats.items():
    model = copied(pretrained)
    arrays = ({weight.path: keras.ops.convert_to_numpy(weight) for weight in model.weights} if quantization is None
              else quantize_model_weights(model, *quantization))
    scores = token_log_probabilities(model, test_inputs, test_targets)
    stored[name] = (stored_megabytes(arrays), bits_per_character(scores, test_targets, len(scored_text)))
    print(f"{name:<22} {stored[name][0]:>9.2f} {8e6 * stored[name][0] / parameters:>17.2f} {stored[name][1]:>24.4f}")

# %%
figure, axis = plt.subplots(figsize=(6.5, 3.5))
sizes_in_bits = [8e6 * megabytes / parameters for megabytes, _ in stored.values()]
axis.plot(sizes_in_bits, [bits for _, bits in stored.values()], "o")
for name, x_value, (_, y_value) in zip(stored, sizes_in_bits, stored.values()):
    axis.annotate(name, (x_value, y_value), textcoords="offset points", xytext=(4, 4), fontsize="small")
axis.set_xscale("log", base=2)
axis.set(xlabel="bits a parameter in the file (log scale)", ylabel="test bits per character",
         title="What each format stores, and what it costs the model")
plt.show()

# %% [markdown]
# ### 3.2 LoRA on an int8 base
#
# QLoRA's idea (Dettmers et al., 2023): keep the frozen base quantized and train only LoRA's A
# and B in float, so the base takes a quarter of the memory while it is adapted. Keras'
# `enable_lora` works on an int8 layer: its kernel stays int8 and frozen. Keras' LoRA gives each
# head its own A on the query, key and value projections (section 2.1), so the like-for-like
# comparison is Keras' LoRA on the float32 base: both at seed 0, at the rate LoRA on every
# projection chose, rank `lora_rank`, epochs chosen on validation, from the same trained head.
# Memory: the frozen weights as stored, and for each trained parameter its weight, gradient and
# AdamW's two moments, 16 bytes in float32.

# %%
quantized_runs = {}
for kind, name in (("keras_lora_float", "Keras' LoRA, float32 base"), ("keras_lora_int8", "Keras' LoRA, int8 base")):
    classifier, _, facts = fine_tune(kind, arm_rate["lora_all"], settings.seeds[0])
    backbone = backbones[kind, arm_rate["lora_all"], settings.seeds[0], settings.lora_rank, False]
    frozen = sum(int(np.prod(weight.shape)) * np.dtype(weight.dtype).itemsize
                 for weight in backbone.weights if not weight.trainable)
    trained = sum(int(np.prod(weight.shape)) for weight in classifier.trainable_weights)
    quantized_runs[kind] = test_correct(kind, arm_rate["lora_all"], settings.seeds[0])
    print(f"{name:<26} test accuracy {quantized_runs[kind].mean():.4f} (best epoch {facts['best_epoch']} of "
          f"{facts['epochs']}); frozen weights {frozen / 1e6:.2f} MB, {trained:,} trained parameters "
          f"{16 * trained / 1e6:.2f} MB; {np.median(facts['epoch_seconds']):.1f} s an epoch (median)")
mean, low, high = bootstrap_interval(100 * (quantized_runs["keras_lora_int8"].astype(float)
                                            - quantized_runs["keras_lora_float"]))
print(f"int8 base minus float32 base, seed {settings.seeds[0]}: {mean:+.2f} points "
      f"(test reviews [{low:+.2f}, {high:+.2f}]; one seed: a reading)")

# %% [markdown]
# **Reading the formats and LoRA on int8** (the recorded run). **Rounding is nearly free down to
# 4 bits, and the groups are what keep int4 cheap; below 4 bits it stops being free.** The float32
# model's 2.0521 bits per character become 2.0522 in int8, 2.0599 in int4 with one scale a row,
# 2.0584 with a scale for every 128 weights and 2.0563 for every 32: groups of 32 take back about
# half of int4's cost for 4.59 bits a parameter in the file against 4.15. With 3 bits in groups of
# 32 the model pays more (2.0749), and with 2 it breaks (2.3600). The int4 file is 1.05 MB, an
# eighth of float32's 8.13 MB.
#
# LoRA on the int8 base (seed 0, one run each: readings): Keras' LoRA reaches 67.65% on the int8
# base against 68.60% on the float32 base, **−0.95 points, not separated** (test reviews −2.05 to
# +0.15), with frozen weights of 2.07 MB against 8.13 MB and the same 44,929 trained parameters
# (0.72 MB with their gradients and AdamW's moments). An epoch took 17.7 s on the int8 base
# against 11.6 s (medians), the same on-the-fly quantization of every input that slows generation
# above: QLoRA's saving is memory; on this CPU the time goes the other way. (Keras' per-head LoRA
# on float32, 68.60%, and ours at seed 0, 67.80%, train different parameters: 44,929 against
# 37,249.)

# %% [markdown]
# ## 4. Training on several devices
#
# With **data parallelism** each of D devices holds a copy of the weights and takes 1/D of every
# batch; the gradients are averaged across devices before each update, so the update is the one
# a single device would make on the whole batch (for a loss that is a mean over the batch's rows,
# and equal shards). Keras 3 says so in one line set before the model is built,
# `keras.distribution.set_distribution(keras.distribution.DataParallel(devices=...))` (JAX
# backend), and the training code does not change. `transformer_course.parallel` trains a small
# Llama-style model for a few steps on one device, then under `DataParallel`, with the same
# initial weights and global batches. This machine has no several accelerators, so the notebook
# starts a separate Python with the JAX backend and XLA told to show 4 virtual CPU devices
# (`--xla_force_host_platform_device_count`, as Keras' own tests do). Exercise 12.3 asks you to
# show the averaging for a linear model.

# %%
environment = {**os.environ, "KERAS_BACKEND": "jax",
               "XLA_FLAGS": f"--xla_force_host_platform_device_count={settings.virtual_devices}"}
command = [sys.executable, "-m", "transformer_course.parallel", "--steps", str(settings.parallel_steps)]
finished = subprocess.run(command, env=environment, capture_output=True, text=True)
if finished.returncode != 0:
    parallel = None
    print("Not run here:", (finished.stderr.strip().splitlines() or ["no message"])[-1])
else:
    parallel = json.loads(finished.stdout.strip().splitlines()[-1])
    one, many = parallel["one_device"], parallel["data_parallel"]
    print(f"{len(parallel['devices'])} devices: {', '.join(parallel['devices'])}")
    for step, (loss_one, loss_many) in enumerate(zip(one["losses"], many["losses"]), 1):
        print(f"step {step}: loss on 1 device {loss_one:.6f}, on {len(parallel['devices'])} {loss_many:.6f} "
              f"(difference {abs(loss_one - loss_many):.1e}); {one['seconds'][step - 1] * 1000:7.1f} ms against "
              f"{many['seconds'][step - 1] * 1000:7.1f} ms")

# %%
if parallel is not None:
    largest = max(abs(a - b) for a, b in zip(parallel["one_device"]["losses"], parallel["data_parallel"]["losses"]))
    report_metric("data_parallel_largest_loss_difference", largest,
                  f"largest |loss on 1 device - loss on {len(parallel['devices'])} virtual devices| over "
                  f"{settings.parallel_steps} steps")

# %% [markdown]
# **Reading the devices** (the recorded run). At every step the loss on 4 devices equals the loss
# on one to within 3.3·10⁻⁶, float rounding: the devices add their gradients up in another
# order. After the first step, which compiles, a step took 17.0 to 42.2 ms on one device and 19.1
# to 33.5 ms on four: one run each, so read them as "about as long". The 4 "devices" are slices of
# the same two cores, so no more arithmetic runs at once than before. On 4 real accelerators each
# would take a quarter of every batch at once.

# %% [markdown]
# ### 4.1 What training holds in memory, and what ZeRO shards
#
# Training with AdamW keeps four numbers for every trained parameter: the weight, its gradient
# and the optimizer's two moments, 16 bytes in float32 before a single activation. Data
# parallelism copies all four onto every device. ZeRO (Rajbhandari et al., 2020, §5) removes the
# copies stage by stage: stage 1 shards the optimizer's states across the D devices, stage 2 the
# gradients too, stage 3 the weights too (each layer gathered when it runs).
# `transformer_course.parallel.training_memory` counts them; activations, which grow with the
# batch and the length, are not counted. This notebook's base, and a model of 7 billion
# parameters, on `virtual_devices` devices:

# %%
plans = [("one device", 1, 0), *((f"{settings.virtual_devices} devices, " + (f"ZeRO stage {stage}" if stage
                                  else "data parallelism"), settings.virtual_devices, stage) for stage in range(4))]
for name_of_model, count in (("this notebook's base", pretrained.count_params()), ("7 billion parameters", 7e9)):
    unit, divisor = ("MB", 1e6) if count < 1e9 else ("GB", 1e9)
    print(f"{name_of_model} ({count:,.0f} parameters), {unit} on each device:")
    print(f"  {'':<32} {'weights':>9} {'gradients':>10} {'moments':>9} {'total':>9} {'bytes a parameter':>18}")
    for name, devices, stage in plans:
        memory = training_memory(int(count), devices=devices, zero_stage=stage)
        print(f"  {name:<32} " + " ".join(f"{memory[part] / divisor:>{width}.2f}" for part, width in (
            ("weights", 9), ("gradients", 10), ("optimizer states", 9), ("total", 9)))
              + f" {memory['total'] / count:>18.1f}")

# %% [markdown]
# **Gradient accumulation** is data parallelism on one device, in time instead of space: the
# batch is cut into k micro-batches, each one's gradient is computed in turn, and their mean
# makes one update (Keras' optimizers: `gradient_accumulation_steps=k`). For a loss that is a
# mean over the rows and equal micro-batches, the update is the one the whole batch would make,
# as in exercise 12.3, with a k-th of the activations' memory. One update of the classifier, SGD,
# the whole batch at once against `accumulation_steps` micro-batches:

# %%
def one_update(micro_batches):
    """The classifier's weights after one SGD update on the first batch, made in `micro_batches` (0: none made)."""
    keras.utils.set_random_seed(settings.seeds[0])
    classifier = language_model_classifier(copied(pretrained), pooling="mean")  # no dropout: the same function
    accumulation = micro_batches if micro_batches > 1 else None  # Keras: None, or 2 micro-batches or more
    classifier.compile(optimizer=keras.optimizers.SGD(0.1, gradient_accumulation_steps=accumulation),
                       loss="binary_crossentropy")
    rows = slice(0, settings.fine_tune_batch_size)
    if micro_batches:
        classifier.fit(label_x[rows], label_y[rows], batch_size=settings.fine_tune_batch_size // micro_batches,
                       shuffle=False, verbose=0)
    return classifier.get_weights()

# %%
start, whole, accumulated = one_update(0), one_update(1), one_update(settings.accumulation_steps)
moved = max(np.abs(after - before).max() for after, before in zip(whole, start))
largest = max(np.abs(one - other).max() for one, other in zip(whole, accumulated))
print(f"one update of {settings.fine_tune_batch_size} rows moved a weight by up to {moved:.1e}; made in "
      f"{settings.accumulation_steps} micro-batches of {settings.fine_tune_batch_size // settings.accumulation_steps}"
      f", it differs from it by at most {largest:.1e}")

# %% [markdown]
# On real accelerators the same code runs unchanged: `keras.distribution.list_devices()` lists
# the GPUs or TPU cores, and `DataParallel` splits each batch across them. Across several
# machines, each process calls `keras.distribution.initialize()` first (it reads the
# coordinator's address, the number of processes and this process's id, from its arguments or
# the environment) and then sees every host's devices. When the weights no longer fit one device,
# `ModelParallel` with a `DeviceMesh` and a `LayoutMap` splits the weights too (Keras'
# distribution guide, keras.io/guides/distribution; `jax.distributed.initialize` underneath).
#
# ## Summary
#
# - **LoRA** trains a low-rank change of each projection's whole matrix (Keras' per-head LoRA
#   changes the query matrix by rank up to N·r); merged, it costs nothing at inference. With
#   every arm's rate and epochs chosen on validation, on 1,000 labels: full fine-tuning 71.0%,
#   LoRA on every projection (1.8% of the weights) 67.8%, the head alone 63.0%, the head on an
#   untrained model 52.4%, and a **bag of words 75.3%, above them all**: this small base's
#   features carry less than word counts. LoRA adds 4.8 points to the head and stays 3.2 below
#   full fine-tuning (both separated); its rate was the lowest of its grid, so the gap is a
#   statement about this grid. rsLoRA's scale and the rank moved it by less than the seeds.
# - **Quantization** is nearly free to 4 bits with a scale for every 32 weights (+0.004 bits per
#   character for an eighth of the file), costs more with a scale a row, more again at 3 bits,
#   and breaks the model at 2. **int8** is a quarter of the file and 0.83 of float32's generation
#   speed on this CPU; LoRA on an int8 base trains in a quarter of the frozen memory, a point
#   lower at one seed (not separated), and slower.
# - **Memory**: AdamW holds 16 bytes a trained parameter; ZeRO's stages cut a device's share to 10,
#   7 and 4 bytes on 4 devices. **Gradient accumulation** and **data parallelism** make the same
#   update as the whole batch on one device.
#
# ## Graded exercises
#
# Complete each function where it says `raise NotImplementedError(...)`, then run the cell after
# it: `check` tells you at once whether your function is right, and if not, what differs.
# All are plain NumPy. Four exercises, 9 points; our estimate of the time they take, not a
# measurement: about 65 minutes.
#
# ### Exercise 12.1 — absmax int8 quantization (2 points)
#
# Write `absmax_int8(weights)`: `weights` is float `(R, C)`. For each row r, its scale is
# $s_r = \max_j |w_{rj}| / 127$ (for a row of zeros, $s_r = 1$); its integers are
# $q_{rj} = \mathrm{round}(w_{rj} / s_r)$ (`np.round`), all in [−127, 127]; and its
# dequantized weights are $q_{rj}\, s_r$. Return `(integers, scales, dequantized)`: float or int
# `(R, C)`, float `(R,)`, float `(R, C)`. For example, the row [0.5, −1.0, 0.25] has scale 1/127,
# integers [64, −127, 32] (63.5 rounds to the even 64) and dequantized [0.5039, −1.0, 0.2520].

# %% nbgrader={"grade": false, "grade_id": "exercise_12_1", "locked": false, "schema_version": 3, "solution": true}
def absmax_int8(weights):
    """weights (R, C) -> (integers (R, C), scales (R,), dequantized (R, C)): per row, absmax to [-127, 127]."""
    ### BEGIN SOLUTION
    weights = np.asarray(weights, dtype="float64")
    scales = np.abs(weights).max(axis=1) / 127
    scales = np.where(scales == 0, 1.0, scales)
    integers = np.round(weights / scales[:, None])
    return integers, scales, integers * scales[:, None]
    ### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "check_12_1", "locked": true, "points": 2, "schema_version": 3, "solution": false}
from transformer_course.exercises import check

check("12.1", absmax_int8)
### BEGIN HIDDEN TESTS
from transformer_course_grader import evaluate_hidden

assert evaluate_hidden("12.1", absmax_int8, seed=7).passed
### END HIDDEN TESTS

# %% [markdown]
# ### Exercise 12.2 — merging LoRA into the weights (2 points)
#
# Write `merge_lora_kernel(kernel, a, b, alpha)`: `kernel` is the frozen weight matrix W, float
# `(d, k)`; `a` is A, float `(d, r)`; `b` is B, float `(r, k)`; `alpha` a float. Return the merged
# matrix $W + \tfrac{\alpha}{r} A B$, float `(d, k)` (section 2.1): a plain projection with it as
# its kernel computes what the adapted one does. For example, W = 0 (2 × 2), A = [[1], [0]],
# B = [[2, 3]], α = 2 give [[4, 6], [0, 0]].

# %% nbgrader={"grade": false, "grade_id": "exercise_12_2", "locked": false, "schema_version": 3, "solution": true}
def merge_lora_kernel(kernel, a, b, alpha):
    """kernel (d, k), a (d, r), b (r, k), alpha -> kernel + alpha / r * a @ b, (d, k)."""
    ### BEGIN SOLUTION
    a = np.asarray(a, dtype="float64")
    return np.asarray(kernel, dtype="float64") + alpha / a.shape[1] * a @ np.asarray(b, dtype="float64")
    ### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "check_12_2", "locked": true, "points": 2, "schema_version": 3, "solution": false}
check("12.2", merge_lora_kernel)
### BEGIN HIDDEN TESTS
assert evaluate_hidden("12.2", merge_lora_kernel, seed=7).passed
### END HIDDEN TESTS

# %% [markdown]
# ### Exercise 12.3 — the data-parallel gradient (2 points)
#
# A linear model $\hat y = X w$ with the mean squared error over a batch of B rows,
# $L = \tfrac{1}{B}\sum_i (x_i \cdot w - y_i)^2$, has the gradient
# $\nabla_w L = \tfrac{2}{B} X^\top (X w - y)$. Write `data_parallel_gradient(x, y, w, devices)`:
# `x` float `(B, F)`, `y` float `(B,)`, `w` float `(F,)`, `devices` an int D that divides B.
# Split the batch into D equal shards of consecutive rows (device d takes rows d·B/D to
# (d + 1)·B/D − 1), compute on each shard its own loss's gradient (the mean over *its* rows), and
# average them, as `DataParallel` does (section 4). Return `(shard_gradients, gradient)`: float
# `(D, F)` and float `(F,)`. The average equals the whole batch's gradient.

# %% nbgrader={"grade": false, "grade_id": "exercise_12_3", "locked": false, "schema_version": 3, "solution": true}
def data_parallel_gradient(x, y, w, devices):
    """x (B, F), y (B,), w (F,), devices D dividing B -> (each shard's gradient (D, F), their mean (F,))."""
    ### BEGIN SOLUTION
    x, y, w = (np.asarray(array, dtype="float64") for array in (x, y, w))
    shards = [2 / len(rows_y) * rows_x.T @ (rows_x @ w - rows_y)
              for rows_x, rows_y in zip(np.split(x, devices), np.split(y, devices))]
    return np.array(shards), np.mean(shards, axis=0)
    ### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "check_12_3", "locked": true, "points": 2, "schema_version": 3, "solution": false}
check("12.3", data_parallel_gradient)
### BEGIN HIDDEN TESTS
assert evaluate_hidden("12.3", data_parallel_gradient, seed=7).passed
### END HIDDEN TESTS

# %% [markdown]
# ### Exercise 12.4 — group-wise int4 quantization (3 points)
#
# Write `groupwise_int4(weights, group_size)`: `weights` is float `(R, C)`, and `group_size` an
# int that divides C. Each row is cut into groups of `group_size` consecutive weights, and each
# group g of row r gets its own scale $s_{rg} = \max_{j \in g} |w_{rj}| / 7$ (for a group of
# zeros, $s_{rg} = 1$); its integers are $q_{rj} = \mathrm{round}(w_{rj} / s_{rg})$ (`np.round`),
# all in [−7, 7]; the dequantized weights are $q_{rj}\, s_{rg}$ (section 3.1). Return
# `(integers, scales, dequantized)`: float or int `(R, C)`, float `(R, C / group_size)`, float
# `(R, C)`. For example, the row [0.7, −0.35, 0.14, 0.07] in groups of 2 has scales [0.1, 0.02],
# integers [7, −4, 7, 4] (−3.5 and 3.5 round to the even −4 and 4) and dequantized
# [0.7, −0.4, 0.14, 0.08].

# %% nbgrader={"grade": false, "grade_id": "exercise_12_4", "locked": false, "schema_version": 3, "solution": true}
def groupwise_int4(weights, group_size):
    """weights (R, C), group_size dividing C -> (integers (R, C), scales (R, C / group_size), dequantized (R, C))."""
    ### BEGIN SOLUTION
    weights = np.asarray(weights, dtype="float64")
    groups = weights.reshape(len(weights), -1, group_size)
    scales = np.abs(groups).max(axis=2) / 7
    scales = np.where(scales == 0, 1.0, scales)
    integers = np.round(groups / scales[..., None])
    return integers.reshape(weights.shape), scales, (integers * scales[..., None]).reshape(weights.shape)
    ### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "check_12_4", "locked": true, "points": 3, "schema_version": 3, "solution": false}
check("12.4", groupwise_int4)
### BEGIN HIDDEN TESTS
assert evaluate_hidden("12.4", groupwise_int4, seed=7).passed
### END HIDDEN TESTS

# %% [markdown]
# ## Written question (graded by your instructor)
#
# **Question 12.w1 (2 points).** A study compares LoRA with full fine-tuning alone, finds LoRA
# near chance, and concludes that LoRA failed. What one run
# separates "LoRA failed" from "the pre-trained features carry nothing LoRA could use", what
# would each outcome of that run have said, and what does section 2's head-only arm say here?

# %% [markdown] nbgrader={"grade": true, "grade_id": "written_12_1", "locked": false, "points": 2, "schema_version": 3, "solution": true}
# ### BEGIN SOLUTION
# **Rubric (2 points).** 1 point: the control is the head-only run: the pre-trained model frozen,
# only the classifier's dense layer trained (with its own tuned rate), read beside its floors (a
# constant guess, ln 2 in validation loss; the head on an untrained model of the same shape; a
# bag of words). If the head alone is well above the untrained model's head, the features carry
# the signal, and LoRA near chance would be LoRA's (or its rate's) failure; if it is at that floor
# too, the features or the protocol carry nothing usable, and LoRA's result says nothing about
# LoRA. 1 point: here the head alone reached 63.00%, 10.57 points above the untrained model's head
# (52.43%; both intervals exclude zero), and LoRA, started from that head, added 4.82 points
# (seeds +2.76 to +6.87): the features carry a signal and LoRA adapts the model. A full answer
# also notes the bag of words' 75.25%: the base's features carry less than word counts, so
# "LoRA reaches 67.82%" is a statement about this base, and LoRA's 3.22-point shortfall against
# full fine-tuning about its grid (its rate was the grid's lowest).
# ### END SOLUTION
