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
# # 08 — BERT-style pre-training: masked language modelling, fine-tuning, and what pre-training buys
#
# [![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.research.google.com/github/transformer-course/transformer-course/blob/v0.1.0/release/08_bert_pretraining.ipynb)
#
# **Run time:** full profile about 83 min on a 2-core CPU, smoke profile about 2 min (recorded runs). The profile comes from the environment variable `COURSE_PROFILE` (`full` or `smoke`): set it before starting Jupyter, or in Colab run `%env COURSE_PROFILE=smoke` before the first code cell. On Colab, a GPU runtime (Runtime, Change runtime type) trains on the GPU; the recorded times are CPU times. The outputs shown come from the recorded full-profile run; running a cell replaces its output with yours. In the smoke profile, run the exercises and their checks, and the cells whose output does not depend on the profile (shapes, worked examples, equalities with Keras): the accuracies, losses, curves, timings and samples it prints come from tiny data and a few steps and mean nothing; read the recorded ones.
#
# **Where BERT-Tiny downloads**, section 9 adds its own learning-rate grid, curve and probe: about
# 15 more minutes, estimated from the masked LM's arm (blocks of the same shape), not timed here.
#
# **What you will learn**
# - **subword tokens**: a WordPiece vocabulary computed on the pre-training text, and what it does
#   to `[UNK]`;
# - **masked language modelling**: choose 15% of the tokens, hide most of them behind `[MASK]`,
#   and train an encoder to fill them in — with loss and accuracy on those positions only;
# - **next-sentence prediction**: `[CLS] A [SEP] B [SEP]`, segment embeddings and a pooled
#   `[CLS]` output — and why this notebook pre-trains without it;
# - **fine-tuning**, and the honest question: what does pre-training on unlabelled text buy? — a
#   label-efficiency curve where every arm gets the same care, which vector the classifier should
#   read (`[CLS]` or the mean of the outputs), a frozen-encoder probe, and downstream accuracy
#   measured against pre-training progress;
# - **a more compute-efficient objective**: replaced-token detection (ELECTRA), a small generator
#   and a discriminator that learns from every position, pre-trained for the same minutes as the
#   masked LM and put on the same curve — with a hypothesis set before the run, and its test;
# - what the model learned, probed with fill-in-the-blank sentences; token-tagging and span heads;
# - **a published checkpoint in our own model**: Google's BERT-Tiny loaded into the course's encoder.
#
# **Prerequisites:** notebook 03 (subword tokens), notebook 05 (the encoder block), notebook 06
# (IMDB, `[CLS]` pooling).
#
# Data: the IMDB Large Movie Review Dataset, its labelled reviews and its 50,000 unlabelled ones —
# Maas et al., 2011, *Learning Word Vectors for Sentiment Analysis*, ACL-HLT, pp. 142–150 (no
# explicit license; cite the paper).

# %%
import subprocess
import sys

if "google.colab" in sys.modules:  # Colab only: install the course package, keep Colab's TensorFlow/Keras
    subprocess.run([sys.executable, "-m", "pip", "install", "-q",
                    "transformer-course @ git+https://github.com/transformer-course/transformer-course@v0.1.0"],
                   check=True)

import transformer_course as tc

settings = tc.start_notebook("08", seed=42)

# %%
import os
import time

import keras
import keras_hub
import matplotlib.pyplot as plt
import numpy as np
import tensorflow as tf
from sklearn.feature_extraction.text import CountVectorizer
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from transformer_course import checkpoint_path, epoch_progress, load_record, progress, report_metric
from transformer_course.bert import (
    build_bert_classifier,
    build_bert_encoder,
    build_bert_pretrainer,
    build_span_finder,
    build_token_tagger,
)
from transformer_course.bert_checkpoints import PresetUnavailableError, load_bert_preset
from transformer_course.datasets import load_imdb, load_imdb_unlabelled
from transformer_course.electra import (
    DISCRIMINATOR_WEIGHT,
    ElectraBatches,
    ElectraPretrainer,
    ReplacedTokenDetectionLoss,
    electra_inputs,
)
from transformer_course.metrics import MaskedCrossEntropy, masked_accuracy
from transformer_course.pretraining import (
    PretrainingBatches,
    contiguous_segments,
    gather_selected,
    mask_tokens,
    pack_pair,
    pack_single,
    split_sentences,
)
from transformer_course.text import standardize_review
from transformer_course.training import WarmupCosineDecay, WarmupLinearDecay, WindowMeans, equal_cost_updates, fit_best

# %% [markdown]
# ## 1. Text without labels, and the vocabulary
#
# Pre-training reads plain text; labels are never used. Here that is the IMDB **training**
# reviews and the archive's **50,000 unlabelled** reviews, which its authors set aside for
# unsupervised learning: three times as much text as there are labels. The **test** reviews are
# kept out entirely: section 5 measures classification on them, and a model that had read them —
# even without labels — would have seen the very texts it is graded on. The archive holds exact
# duplicates, some of them of test reviews, so every text that also occurs in the test split is
# dropped, and so is every second copy of a text. A few reviews are held out of pre-training
# altogether to measure the masked LM on text it never read.

# %%
train_split, test_split = load_imdb()
unlabelled = load_imdb_unlabelled()
test_texts = set(test_split.texts)
candidates = train_split.texts + unlabelled
distinct = list(dict.fromkeys(text for text in candidates if text not in test_texts))
in_test = sum(text in test_texts for text in candidates)
print(f"{len(train_split.texts):,} training + {len(unlabelled):,} unlabelled reviews: "
      f"{in_test:,} also occur in the test split and {len(candidates) - in_test - len(distinct):,} are second copies; "
      "both dropped")
documents = [distinct[i].replace("<br />", " ") for i in np.random.default_rng(0).permutation(len(distinct))]
documents = documents[:settings.pretraining_reviews]
held_out, pretraining_texts = documents[:settings.validation_reviews], documents[settings.validation_reviews:]
print(f"pre-training on {len(pretraining_texts):,} reviews; {len(held_out):,} held out for the masked LM's validation")

# %% [markdown]
# **Subword tokens.** The first edition of this notebook used notebook 06's whole-word vocabulary:
# the 10,000 most frequent words, every other word `[UNK]`. A masked LM then spends many of its
# blanks on `[UNK]`, and the notes' own example loses its rarest words. BERT uses **WordPiece**
# (Wu et al., 2016; Devlin et al., 2019, §3): a vocabulary of whole words *and* word pieces
# (`##less` continues a word), so that any word can be spelled from pieces and `[UNK]` all but
# disappears. keras-hub computes the vocabulary from text (`compute_word_piece_vocabulary`, which
# wraps TensorFlow Text's BERT vocabulary learner; notebook 03 builds byte-pair encoding, a close
# cousin, from scratch) and splits text with it (`WordPieceTokenizer`: lower case, accents and
# punctuation split off, then the longest piece that matches, left to right). Both vocabularies
# are computed on the same sample of pre-training reviews; the `[UNK]` rates are measured on the
# held-out reviews.

# %%
words = keras.layers.TextVectorization(max_tokens=settings.word_vocabulary_size, standardize=standardize_review)
words.adapt(pretraining_texts[:settings.vocab_sample], batch_size=512)
word_ids = keras.ops.convert_to_numpy(words(held_out))
unknown_words = (word_ids == 1).sum() / (word_ids != 0).sum()
vocabulary = keras_hub.tokenizers.compute_word_piece_vocabulary(
    tf.data.Dataset.from_tensor_slices(pretraining_texts[:settings.vocab_sample]).batch(1000),
    vocabulary_size=settings.vocabulary_size, lowercase=True, strip_accents=True,
    reserved_tokens=["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"])
tokenizer = keras_hub.tokenizers.WordPieceTokenizer(vocabulary=vocabulary, lowercase=True, strip_accents=True)
PAD, UNK, CLS, SEP, MASK = (vocabulary.index(token) for token in ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"))
print(f"WordPiece vocabulary {len(vocabulary):,}: ... {vocabulary[len(vocabulary) // 2:len(vocabulary) // 2 + 6]} ...; "
      f"{sum(piece.startswith('##') for piece in vocabulary):,} of them continue a word (##)")

# %%
def tokenize(texts, tokenizer=tokenizer, batch_size=2000):
    """Texts -> one list of ids each (no special tokens), through a tf.data pipeline (10x faster than eager calls)."""
    batches = tf.data.Dataset.from_tensor_slices(list(texts)).batch(batch_size).map(tokenizer)
    rows = []
    for ids in progress(batches, desc="tokenizing", total=-(-len(texts) // batch_size),
                        disable=len(texts) <= batch_size):
        rows += ids.to_list()
    return rows


def pieces(ids):
    return " ".join(vocabulary[i] for i in ids)


held_out_pieces = np.concatenate(tokenize(held_out))
print(f"[UNK] on the held-out reviews: {unknown_words:.2%} of the words ({settings.word_vocabulary_size:,} whole "
      f"words), {np.mean(held_out_pieces == UNK):.4%} of the pieces ({len(vocabulary):,} WordPiece pieces)")
for sentence in ("he bought a gallon of milk", "penguins are flightless birds"):
    print(f"{sentence!r:>33} -> {pieces(tokenize([sentence])[0])}")

# %% [markdown]
# ## 2. Masked language modelling
#
# A left-to-right language model (notebook 09) sees only the past. BERT's first task lets the
# encoder use both sides: choose **15%** of the real tokens at random (never padding, `[CLS]` or
# `[SEP]`) and ask the model for the original token at each chosen position (Devlin et al., 2019,
# §3.1). Of the chosen tokens,
#
# - **80%** are replaced by `[MASK]`,
# - **10%** by a random token,
# - **10%** are left unchanged,
#
# because `[MASK]` never appears when the model is used later: if only `[MASK]` positions ever
# mattered, the model would need no good representation of real words. The loss and the accuracy
# count the chosen positions only.
#
# > **The notes say** "15% of the words in each sequence are replaced with a `[MASK]` token"; 15%
# > are *chosen*, and only 80% of those become `[MASK]` (12% of the tokens). They also write the
# > paper's example as "my dog is hairy `[MASK]`": the paper masks "hairy" itself, "my dog is
# > `[MASK]`". And they call the 80/10/10 rule "3 proxy tasks": BERT has two pre-training tasks,
# > the masked LM and next-sentence prediction; 80/10/10 is how the masked LM corrupts its chosen
# > tokens.
#
# `transformer_course.pretraining.mask_tokens` does the choosing. Measured on the held-out
# reviews, cut into inputs as section 4 cuts the pre-training text:

# %%
sample = contiguous_segments(tokenize(held_out), settings.sequence_length, CLS, SEP)
masked, labels, selected = mask_tokens(sample, np.random.default_rng(0), len(vocabulary), MASK,
                                       unselectable_token_ids=(PAD, CLS, SEP, MASK))
real = ~np.isin(sample, (PAD, CLS, SEP))
print(f"{int(real.sum()):,} tokens; chosen {selected.sum() / real.sum():.2%}; of those: [MASK] "
      f"{np.mean(masked[selected] == MASK):.2%}, unchanged {np.mean(masked[selected] == sample[selected]):.2%}, "
      f"random {np.mean((masked[selected] != MASK) & (masked[selected] != sample[selected])):.2%}")
print("special tokens chosen:", int(selected[~real].sum()),
      "| labels outside the chosen positions:", int(labels[~selected].any()))
print("before:", pieces(sample[0, :24]))
print("after: ", pieces(masked[0, :24]))

# %% [markdown]
# Masking is **dynamic**: every batch draws new positions (`PretrainingBatches` calls
# `mask_tokens` afresh), so the model never sees the same blanks twice (Liu et al., 2019,
# RoBERTa, §4.1; the original BERT masked each sentence 10 fixed ways).
#
# ## 3. Next-sentence prediction — and why we leave it out
#
# BERT's second task: given two sentences, did B follow A in the text? Half the pairs are two
# consecutive sentences (**IsNext**), half pair a sentence with one from another document
# (**NotNext**). The input is `[CLS] A [SEP] B [SEP]`; a **segment embedding** (0 for A, 1 for B)
# is added to every token's embedding, so the model knows which sentence a token belongs to; and
# the `[CLS]` output, through a dense layer with tanh (the **pooled** output), feeds the
# IsNext/NotNext classifier (Devlin et al., 2019, §3.1). The notes' two examples, in our pieces:

# %%
for first, second, label in (("the man went to the store", "he bought a gallon of milk", "IsNext"),
                             ("the man went to the store", "penguins are flightless birds", "NotNext")):
    token_ids, segments_of_pair = pack_pair(*tokenize([first, second]), CLS, SEP, 24)
    kept = token_ids != PAD
    print(f"{label:<8} {pieces(token_ids[kept])}\n{'segments':<8} {' '.join(map(str, segments_of_pair[kept]))}")

# %% [markdown]
# > **The notes say** the segment embeddings help the model "being aware the position of the
# > tokens". Positions have embeddings of their own; a segment embedding says which *sentence* a
# > token belongs to, A or B. (The notes also title the task "Next Sequence Prediction": it is
# > next-*sentence* prediction.)
#
# This notebook pre-trains **without** next-sentence prediction, for two measured reasons:
#
# 1. RoBERTa (Liu et al., 2019, §4.2) removed it and matched or beat BERT on every downstream
#    task, training on **contiguous text** instead: inputs filled with consecutive sentences, up
#    to the full length ("FULL-SENTENCES").
# 2. Packed pairs make pre-training inputs unlike fine-tuning inputs. In this notebook's first
#    edition, segment 1 held at least 99% of positions 64–127 of the pre-training pairs and a fifth
#    of all positions were padding, while a review to classify is `[CLS] review [SEP]` with
#    segment 0 everywhere and usually no padding at all.
#
# So the pre-training inputs here are `[CLS]` + 126 consecutive pieces + `[SEP]`, segment 0
# everywhere, cut from the reviews read one after another (a `[SEP]` between two reviews):
# exactly the shape of a fine-tuning input, with no padding. The ungraded exercise at the end
# puts next-sentence prediction back.
#
# ## 4. The model, and pre-training
#
# `build_bert_pretrainer(next_sentence=False)`: token + segment + position embeddings, LayerNorm
# and dropout; a stack of encoder blocks (post-norm, GELU, as BERT); and a masked-LM head that
# scores only the chosen positions — dense (GELU), LayerNorm, then a product with the
# **token-embedding matrix** itself (the notes: "multiplying the output vectors by the embedding
# matrix") plus a bias, softmax.
#
# The recipe, sized for two CPU cores: AdamW, batches of 64 inputs, and a budget in **updates**,
# the same on every machine: `pretraining_updates` = 5,824 for the masked LM, what 16 minutes of its
# update gave on the machine that recorded the course. Section 5 pre-trains a second objective at
# the **same compute**: its updates are the masked LM's divided by what one of its updates costs in
# masked-LM updates (`electra_update_cost`), measured once on that machine and stored in the
# profile. The cell below times both updates on *this* machine (the median of `timing_steps`
# updates after compiling, interleaved so that a busy moment slows both alike) and says how long
# the budget takes here: a slower machine trains the same amounts, only for longer. Each
# objective's updates are cut into four rounds with a held-out score and a checkpoint after each. The learning rate warms up over 300 updates to
# 10⁻³, **stays there**,
# and decays along a cosine over the last 15% of the updates only ("warm-up, stable, decay", Hu et
# al., 2024, *MiniCPM*): a masked LM first sits on a plateau (the curve below shows it), and a rate
# held high is meant to leave it sooner — a hypothesis this notebook does not test. No dropout
# during pre-training: no input is seen more than twice, so there is little to regularise, and on
# a CPU dropout makes every step slower. The held-out accuracy is measured after each round on the
# same blanks: held-out inputs masked once.

# %%
segments = contiguous_segments(tokenize(pretraining_texts), settings.sequence_length, CLS, SEP)
validation_segments = sample[:settings.validation_segments]
masked, labels, selected = mask_tokens(validation_segments, np.random.default_rng(1), len(vocabulary), MASK,
                                       unselectable_token_ids=(PAD, CLS, SEP, MASK))
positions, position_labels = gather_selected(selected, labels, settings.max_predictions)
held_out_blanks = ({"token_ids": masked, "segment_ids": np.zeros_like(masked), "mask_positions": positions},
                   {"mlm": position_labels})
print(f"pre-training inputs: {len(segments):,} of {settings.sequence_length} tokens ({segments.size / 1e6:.1f} M "
      f"positions, no padding); held out: {len(validation_segments):,} inputs, "
      f"{int((position_labels != 0).sum()):,} blanks")

# %%
def new_pretrainer(dropout=0.0):
    """The notebook's BERT-style encoder with its masked-LM head, freshly initialised."""
    return build_bert_pretrainer(len(vocabulary), settings.sequence_length, settings.max_predictions,
                                 **settings.model, dropout=dropout, next_sentence=False)


def new_electra(dropout=0.0):
    """ELECTRA's generator and discriminator (section 5): the discriminator is the encoder above."""
    return ElectraPretrainer(len(vocabulary), settings.sequence_length, settings.max_predictions, **settings.model,
                             generator_fraction=settings.generator_fraction, dropout=dropout)


pretrainer = new_pretrainer()
print(f"parameters: {pretrainer.count_params():,}")

# %%
OBJECTIVES = {"masked LM": {"loss": {"mlm": MaskedCrossEntropy()}, "metrics": {"mlm": [masked_accuracy]}},
              "ELECTRA": {"loss": {"generator": MaskedCrossEntropy(), "discriminator": ReplacedTokenDetectionLoss()},
                          "loss_weights": {"generator": 1.0, "discriminator": DISCRIMINATOR_WEIGHT},
                          "metrics": {"generator": [masked_accuracy]}}}


def schedule_for(updates):
    """Warm-up over `warmup_steps`, the peak held, a cosine decay over the last `decay_fraction` of `updates`."""
    warmup, decay = min(settings.warmup_steps, updates // 4), max(1, int(updates * settings.decay_fraction))
    return WarmupCosineDecay(settings.learning_rate, warmup, updates, hold_steps=updates - warmup - decay)


def compiled(model, objective, updates):
    """`model` compiled for `objective` with AdamW on `schedule_for(updates)`."""
    model.compile(optimizer=keras.optimizers.AdamW(schedule_for(updates), weight_decay=0.01),
                  **OBJECTIVES[objective], jit_compile=settings.jit_compile)
    return model

# %%
def batches_for(objective, per_round):
    """Pre-training batches for `objective`, masked afresh every batch; `per_round` batches an epoch."""
    if objective == "masked LM":
        return PretrainingBatches(segments, None, None, settings.batch_size, len(vocabulary), MASK, (CLS, SEP),
                                  settings.max_predictions, seed=0, batches_per_epoch=per_round)
    return ElectraBatches(segments, None, settings.batch_size, len(vocabulary), MASK, (CLS, SEP),
                          settings.max_predictions, seed=0, batches_per_epoch=per_round)


def update_step(objective, build):
    """A fresh model's update for `objective`, compiled by a first, untimed call: `step(index)` trains batch index."""
    model, batches = compiled(build(), objective, 1000), batches_for(objective, None)
    model.train_on_batch(*batches[0])
    return lambda index: model.train_on_batch(*batches[index])

# %%
steps = {"masked LM": update_step("masked LM", new_pretrainer), "ELECTRA": update_step("ELECTRA", new_electra)}
times = {objective: [] for objective in steps}
for index in range(1, settings.timing_steps + 1):  # interleaved, so that a busy moment slows both alike
    for objective, step in steps.items():
        started = time.perf_counter()
        step(index)
        times[objective].append(time.perf_counter() - started)
step_seconds = {objective: float(np.median(values)) for objective, values in times.items()}  # median: one slow step
rounds = settings.rounds
per_round = equal_cost_updates(settings.pretraining_updates, {"masked LM": 1.0,
                               "ELECTRA": settings.electra_update_cost}, rounds)  # the profile's, on any machine
for objective, seconds in step_seconds.items():
    print(f"{objective:<9} {seconds:.3f} s an update -> {per_round[objective] * rounds:,} updates in "
          f"{per_round[objective] * rounds * seconds / 60:.0f} min")

# %%
updates = per_round["masked LM"] * rounds
trace = WindowMeans("masked_accuracy", every=max(1, min(100, per_round["masked LM"] // 10)))  # training accuracy
round_minutes, pretraining_started = [], time.perf_counter()  # minutes of pre-training at the end of each round
save_round = keras.callbacks.LambdaCallback(on_epoch_end=lambda epoch, logs: (
    round_minutes.append((time.perf_counter() - pretraining_started) / 60),
    pretrainer.save(checkpoint_path(f"bert_round_{epoch + 1}"))))
pretrainer = compiled(pretrainer, "masked LM", updates)
pretrainer, history, facts = fit_best(pretrainer, batches_for("masked LM", per_round["masked LM"]), held_out_blanks,
                                      epochs=rounds, patience=rounds, validation_batch_size=256,
                                      callbacks=[epoch_progress(), trace, save_round])
print(f"{facts['epochs']} rounds ({trace.updates:,} updates, {trace.updates * settings.batch_size / len(segments):.2f} "
      f"passes over the inputs), {facts['seconds'] / 60:.1f} min, best round {facts['best_epoch']}")

# %%
figure, (left, right) = plt.subplots(1, 2, figsize=(11, 3.8), layout="constrained")
steps, accuracy = zip(*trace.points) if trace.points else ((), ())
left.plot(steps, accuracy, label=f"training, each {trace.every} updates")
round_ends = [per_round["masked LM"] * (index + 1) for index in range(facts["epochs"])]
left.plot(round_ends, history.history["val_masked_accuracy"], "o-", label="held-out blanks, after each round")
left.set(xlabel="updates", ylabel="masked-LM accuracy", title="masked language modelling")
left.legend()
right.plot(range(updates), keras.ops.convert_to_numpy(schedule_for(updates)(np.arange(updates))))
right.set(xlabel="updates", ylabel="learning rate", title="the schedule: warm-up, peak held, decay")
plt.show()
mlm_accuracy = history.history["val_masked_accuracy"][facts["best_epoch"] - 1]
report_metric("pretraining_mlm_accuracy", mlm_accuracy, "masked-LM accuracy on held-out blanks (best round)")

# %% [markdown]
# **Reading the run** (the recorded full run: two CPU cores). Within 1,000 updates the masked LM's accuracy climbs to about 12%; then it sits on a **plateau** near 13% until about update 3,000, climbs steeply to about 25% by update 4,000, and goes on more slowly. On the held-out blanks
# it reached about 13%, 14% and 27% after the first three rounds, and **31.1%** after the fourth,
# which holds the decay of the schedule (right panel). All four rounds ran: 5,824 updates
# in 17.0 minutes, the updates its timed step (0.165 s) allows in 16 minutes, plus the
# held-out scoring and checkpoints after each round. The accuracy was still rising at the end.
#
# A masked-LM accuracy needs a yardstick: count tables built on the same pre-training text and
# pieces, filling the very same held-out blanks (`benchmarks/masked_word_baselines.py`; its last
# run is kept in `results/benchmarks/masked_word_baselines.txt`):
#
# | fills the blank with | held-out blanks right |
# |---|---|
# | the most frequent piece | 4.4% |
# | the piece seen most often after the piece before | 13.2% |
# | the piece seen most often between the two neighbours | 28.9% |
# | this model, after four rounds (5,824 updates) | 31.1% |
#
# The plateau sits at the piece-before table's level; leaving it, the model began to use both sides of a blank, and by the end it beats the two-neighbour table by about two points.
#
# For scale: BERT-base trained for 1,000,000 updates of 256 sequences, 90% of them 128 tokens long
# and the rest 512 (Devlin et al., 2019, §A.2), through a model 77 times the size of ours.
#
# ## 5. A more compute-efficient objective: replaced-token detection (ELECTRA)
#
# The masked LM learns from the positions it must fill in: at most 20 of each input's 128. ELECTRA
# (Clark et al., 2020, *ELECTRA: Pre-training Text Encoders as Discriminators Rather Than
# Generators*, ICLR) makes every position count. A small **generator** — a masked LM a quarter of
# the width here, sharing the token and position embeddings (§3.2) — fills the chosen positions
# with tokens it **samples** from its own predictions; the **discriminator**, the encoder we keep,
# reads the result and says for **every** position whether its token is the original or a
# replacement (a sample equal to the original counts as original). The loss is the generator's
# masked-LM loss plus λ = 50 times the discriminator's (§2); no gradient crosses the sampling, and
# the discriminator never sees `[MASK]`. The paper reports its gain largest for small models at
# small compute (ELECTRA-Small 79.9 on GLUE against BERT-Small's 75.1 for the same compute, §3.3),
# and its ablation puts most of the gain on the loss over every token (§3.5).
#
# `transformer_course.electra.ElectraPretrainer` builds both; its discriminator has the masked
# LM's encoder exactly (same sizes, same layers), so section 6 fine-tunes it the same way. It
# pre-trains on the same inputs, with the same schedule and peak rate (chosen for the masked LM,
# which can only favour the masked LM), for the **same compute** — the masked LM's updates divided
# by its update's cost in masked-LM updates (`electra_update_cost`, measured on the recording
# machine: the same 16 minutes there). Its chosen positions are all `[MASK]` in the generator's input (§2), and the held-out
# inputs are the masked LM's, with the same positions chosen.
#
# **The hypothesis**, set before the run: at equal pre-training minutes, ELECTRA's gain over
# training from scratch is at least the masked LM's + 2 points at 1,000 and at 3,000 labels.

# %%
held_out_electra = electra_inputs(validation_segments, np.random.default_rng(1), len(vocabulary), MASK,
                                  (PAD, CLS, SEP, MASK), settings.max_predictions)
assert (held_out_electra[0]["mask_positions"] == positions).all()  # the masked LM's held-out blanks
electra = compiled(new_electra(), "ELECTRA", per_round["ELECTRA"] * rounds)
detection = WindowMeans("discriminator_loss", every=max(1, min(100, per_round["ELECTRA"] // 10)))
electra, electra_history, electra_facts = fit_best(
    electra, batches_for("ELECTRA", per_round["ELECTRA"]), held_out_electra, epochs=rounds, patience=rounds,
    validation_batch_size=256,
    callbacks=[epoch_progress(), detection])
electra.save(checkpoint_path("electra"))
print(f"{electra_facts['epochs']} rounds ({detection.updates:,} updates), {electra_facts['seconds'] / 60:.1f} min, "
      f"best round {electra_facts['best_epoch']}; parameters {electra.count_params():,} (the discriminator "
      f"{build_bert_encoder(electra).count_params():,})")

# %%
figure, (left, right) = plt.subplots(1, 2, figsize=(11, 3.8), layout="constrained")
left.plot(round_ends, history.history["val_masked_accuracy"], "o-", label="masked LM (the encoder itself)")
electra_round_ends = [per_round["ELECTRA"] * (index + 1) for index in range(electra_facts["epochs"])]
left.plot(electra_round_ends, electra_history.history["val_generator_masked_accuracy"], "s-",
          label=f"ELECTRA's generator ({electra.generator_width} wide)")
left.set(xlabel="updates", ylabel="held-out blanks right", title="filling the same held-out blanks")
left.legend()
right.plot(*zip(*detection.points), label=f"training, each {detection.every} updates")
right.plot(electra_round_ends, electra_history.history["val_discriminator_loss"], "o-", label="held out")
right.set(xlabel="updates", ylabel="binary cross-entropy per real token", title="the discriminator's loss")
right.legend()
plt.show()

# %% [markdown]
# **Reading ELECTRA's run.** In the same 16 minutes ELECTRA made 4,788 updates against the
# masked LM's 5,824 (0.200 s an update against 0.165 s; pre-training took 18.3 minutes with the
# scoring). Its generator, a quarter of the width, filled about 9% of the held-out blanks at the
# end, against the masked LM's 31.1% (left panel). The discriminator's loss (right panel) sat near
# 0.397 a token for about 3,500 updates — a plateau, like the masked LM's — and began to fall only
# in the last round, to 0.381 on the held-out inputs: pre-training stopped just as the
# discriminator began to tell replacements from originals. Section 6 shows what that does to
# fine-tuning.
#
# ## 6. Fine-tuning, and what pre-training buys
#
# For sentiment, `[CLS] review [SEP]` through the encoder, then one vector per review, dropout and
# a softmax over negative/positive. BERT's recipe reads the vector at `[CLS]` through a pooler
# (dense, tanh; Devlin et al., 2019, §4.1), trained by next-sentence prediction. Neither objective
# here trains the `[CLS]` position for that: `[CLS]` is never masked, and no loss reads its output
# as a summary. So the classifier reads the **mean of the outputs over the review's real
# positions** (the MEAN pooling of Reimers and Gurevych, 2019, *Sentence-BERT*, §3); the ungraded
# exercise compares it with the pooled `[CLS]`. `build_bert_classifier(..., pooling="mean")` builds
# it on the pre-trained layers — the masked LM's encoder or ELECTRA's discriminator; built on a
# freshly initialised model, it is the same architecture trained from scratch.
#
# A review longer than the 126 pieces between `[CLS]` and `[SEP]` keeps its first quarter of them
# and fills the rest from its end: reviews often end on the verdict, and head + tail was the best
# cut for IMDB in Sun et al. (2019, *How to Fine-Tune BERT for Text Classification?*, §5.3.1;
# `pretraining.pack_single` packs them).
#
# **A fair comparison** gives every arm the same care:
#
# - a **validation set** of 1,000 labelled training reviews, never trained on, for every run;
#   each run keeps its **best validation epoch** (`fit_best`, lowest validation loss), stops after
#   3 epochs without improvement, and runs at most enough epochs for about 600 updates (2 to 40
#   epochs);
# - **BERT's fine-tuning schedule**: a linear warm-up over the first 10% of those updates, then a
#   linear decay to zero (Devlin et al., 2019, §A.3), with AdamW;
# - a **learning rate chosen per arm** on validation, from 3·10⁻⁴, 10⁻³ and 3·10⁻³ at 1,000
#   labels: a pre-trained encoder and a random one need not want the same rate. These rates are far
#   above BERT's published fine-tuning grid, 2·10⁻⁵ to 5·10⁻⁵ (Devlin et al., 2019, §A.3): that
#   grid is for a checkpoint of 110 million parameters pre-trained for days. §9 gives BERT-Tiny,
#   where it downloads, this notebook's grid; to fine-tune a checkpoint the size of BERT-base,
#   start from the published grid;
# - **the same dropout**: 0.1 in the encoder and 0.1 before the output layer, in every arm;
# - **paired seeds**: a seed draws the same labelled reviews, and the same initial output layer,
#   for every arm, so each seed gives one difference between two arms with the luck of its draw
#   taken out.
#
# The test reviews are used only to score the chosen models: a fixed sample of 5,000.

# %%
def review_inputs(tokenize_texts, cls_id, sep_id):
    """Every labelled training review, the test sample and the whole test split, as inputs for one tokenizer."""
    def inputs(texts):
        return pack_single(tokenize_texts([text.replace("<br />", " ") for text in texts]), cls_id, sep_id,
                           settings.sequence_length)
    return {"labelled": inputs(train_split.texts), "test": inputs(test_split.texts)}

# %%
ours = review_inputs(tokenize, CLS, SEP)
order = np.random.default_rng(1234).permutation(len(train_split.labels))
validation_rows, pool = order[:settings.label_validation_reviews], order[settings.label_validation_reviews:]
all_labels = len(pool) if settings.all_labels is None else settings.all_labels
test_rows = {"sample": np.arange(min(settings.test_sample, len(test_split.labels))),
             "all": np.arange(len(test_split.labels))}
arms = {"masked LM": {"start": checkpoint_path(f"bert_round_{facts['best_epoch']}"), "build": new_pretrainer,
                      "data": ours},
        "ELECTRA": {"start": checkpoint_path("electra"), "build": new_electra, "data": ours},
        "from scratch": {"start": None, "build": new_pretrainer, "data": ours}}
print(f"labelled pool {len(pool):,} reviews, validation {len(validation_rows):,}; test sample "
      f"{len(test_rows['sample']):,}; reviews that fill all {settings.sequence_length} positions: "
      f"{np.mean(ours['labelled']['token_ids'][:, -1] != 0):.1%}")

# %%
def encoder_for(arm, start=None, dropout=None):
    """A fresh encoder for an arm: the weights of its checkpoint (`start`, or the arm's own), or a random start."""
    model = arm["build"](settings.encoder_dropout if dropout is None else dropout)
    start = start or arm["start"]
    if start is not None:
        model.set_weights(keras.models.load_model(start).get_weights())
    return model


def take(inputs, rows):
    return {key: value[rows] for key, value in inputs.items()}

# %%
runs = {}  # (arm, start, labels, seed, learning rate, pooling) -> the run's facts: a run asked for twice runs once


def fine_tune(name, size, seed, learning_rate, start=None, pooling=settings.classifier_pooling):
    """Fine-tune arm `name` on `size` labelled reviews (a seeded draw from the pool); score it on the test reviews."""
    key = (name, str(start or arms[name]["start"]), size, seed, learning_rate, pooling)
    if key not in runs:
        keras.backend.clear_session()  # about fifty models in one kernel: drop the global state of the ones before
        keras.utils.set_random_seed(seed)
        chosen, arm = pool[np.random.default_rng(seed).permutation(len(pool))[:size]], arms[name]
        model, history, run = train_classifier(encoder_for(arm, start), arm["data"]["labelled"], chosen, learning_rate,
                                               pooling)
        test = test_rows["all" if size == all_labels else "sample"]
        started = time.perf_counter()
        run["test_accuracy"] = float(model.evaluate(take(arm["data"]["test"], test), test_split.labels[test],
                                                    batch_size=256, verbose=0)[1])
        runs[key] = {**run, "scoring_seconds": time.perf_counter() - started, "history": history.history}
    return runs[key]

# %%
def train_classifier(encoder, labelled, chosen, learning_rate, pooling):
    """A classifier on `encoder`, trained on the `chosen` labelled rows with the protocol above; its best epoch."""
    model = build_bert_classifier(encoder, num_classes=2, dropout=settings.classifier_dropout, pooling=pooling)
    steps = -(-len(chosen) // settings.fine_tune_batch_size)
    epochs = int(np.clip(np.ceil(settings.fine_tune_updates / steps), settings.fine_tune_min_epochs,
                         settings.fine_tune_max_epochs))
    schedule = WarmupLinearDecay(learning_rate, int(settings.warmup_fraction * steps * epochs), steps * epochs)
    model.compile(optimizer=keras.optimizers.AdamW(schedule, weight_decay=0.01), loss="sparse_categorical_crossentropy",
                  metrics=["accuracy"], jit_compile=settings.fine_tune_jit_compile)
    model, history, facts = fit_best(model, (take(labelled, chosen), train_split.labels[chosen]),
                                     (take(labelled, validation_rows), train_split.labels[validation_rows]),
                                     epochs=epochs, patience=settings.fine_tune_patience,
                                     batch_size=settings.fine_tune_batch_size, validation_batch_size=256)
    validation_accuracy = history.history["val_accuracy"][facts["best_epoch"] - 1]
    return model, history, {**facts, "validation_accuracy": validation_accuracy, "epoch_cap": epochs}

# %% [markdown]
# First the learning rate of each arm, chosen on the validation reviews (seed 0, 1,000 labels):

# %%
def choose_learning_rate(name, pooling=settings.classifier_pooling):
    """The rate of the grid with the best validation accuracy for arm `name`; prints the grid."""
    scores = {rate: fine_tune(name, settings.grid_labels, 0, rate, pooling=pooling)["validation_accuracy"]
              for rate in progress(settings.learning_rates, desc=f"{name}: learning rates")}
    print(f"{name:<14}" + "".join(f"  {rate:.0e}: {score:.2%}" for rate, score in scores.items()))
    return max(scores, key=scores.get)


started = time.perf_counter()
rate = {name: choose_learning_rate(name) for name in arms}
print("chosen:", {name: f"{value:.0e}" for name, value in rate.items()})

# %% [markdown]
# Then the **label-efficiency curve**: 200, 1,000, 3,000 and 6,000 labelled reviews, five seeds
# at the two smaller sizes and three at the larger (each seed draws its own reviews and initialises
# its own output layer, the same for every arm). ELECTRA's arm stops at 3,000 labels: its
# hypothesis is at 1,000 and 3,000, and three runs at 6,000 would cost seven minutes. The seed-0
# runs at 1,000 labels are the grid's runs at the chosen rate, reused.

# %%
seeds = dict(zip(settings.label_sizes, (tuple(range(count)) for count in settings.seed_counts)))


def curve_for(name):
    """Test accuracy of arm `name` at each of its label sizes: an array of one score per seed."""
    sizes_here = settings.electra_label_sizes if name == "ELECTRA" else settings.label_sizes
    return {size: np.array([fine_tune(name, size, seed, rate[name])["test_accuracy"] for seed in seeds[size]])
            for size in progress(sizes_here, desc=f"{name}: label sizes")}


curve = {name: curve_for(name) for name in arms}
training = sum(run["seconds"] for run in runs.values()) / 60
scoring = sum(run["scoring_seconds"] for run in runs.values()) / 60
print(f"{len(runs)} fine-tuning runs: {training:.1f} min training (compiling included), {scoring:.1f} min scoring, "
      f"{(time.perf_counter() - started) / 60:.1f} min in all")

# %%
def cell(scores):
    """'mean ± half-range (seeds)' of a set of test accuracies; blank where the arm was not run."""
    return "" if scores is None else f"{scores.mean():.2%} ± {(scores.max() - scores.min()) / 2:.2%} ({len(scores)})"


print(f"{'labelled reviews':>16}" + "".join(f"{name:>24}" for name in arms))
for size in settings.label_sizes:
    print(f"{size:>16,}" + "".join(f"{cell(curve[name].get(size)):>24}" for name in arms))
print("± is half the range of the seeds' test accuracies (the number of seeds in brackets); test sample "
      f"{len(test_rows['sample']):,} reviews")

# %% [markdown]
# **The comparison is paired.** Each seed gives one difference per pre-trained arm: its accuracy
# minus the model from scratch's, on the same labelled reviews. Those differences, with a zero
# line: a gain stands out from the seeds' noise where every seed's difference is on the same side
# of zero and they lie close together (with five seeds, five signs alike happen one time in
# sixteen by chance alone).

# %%
figure, axis = plt.subplots(figsize=(7, 3.6))
gains = {}
for offset, name, colour in ((-0.12, "masked LM", "tab:blue"), (0.12, "ELECTRA", "tab:green")):
    for index, size in enumerate(settings.label_sizes):
        if size in curve[name]:
            gains[name, size] = (curve[name][size] - curve["from scratch"][size]) * 100
            axis.plot(np.full(len(gains[name, size]), index + offset), gains[name, size], "o", color=colour,
                      alpha=0.6, label=name if index == 0 else None)
            axis.plot(index + offset, gains[name, size].mean(), "_", color="black", markersize=14)
axis.axhline(0, color="grey", linestyle=":")
axis.set_xticks(range(len(settings.label_sizes)), [f"{size:,}" for size in settings.label_sizes])
axis.set(xlabel="labelled training reviews", ylabel="accuracy difference (points)",
         title="pre-trained minus from scratch, paired by seed (bar: mean)")
axis.legend()
plt.show()

# %%
for (name, size), differences in gains.items():
    side = ("every seed above zero" if differences.min() > 0 else "every seed below zero" if differences.max() < 0
            else "not every seed on one side of zero")
    print(f"{name:<9} {size:>6,} labels: minus scratch per seed {', '.join(f'{d:+.1f}' for d in differences)} "
          f"points; mean {differences.mean():+.1f}, {side}")
    tag = "paired_gain" if name == "masked LM" else "electra_paired_gain"
    report_metric(f"{tag}_{size}", differences.mean() / 100,
                  f"{size:,} labels: {name} minus from scratch, mean over {len(differences)} paired seeds "
                  f"(per seed: {', '.join(f'{d:+.1f}' for d in differences)} points)")

# %%
for size in (1000, 3000):
    if ("ELECTRA", size) in gains and ("masked LM", size) in gains:
        difference = gains["ELECTRA", size] - gains["masked LM", size]  # = ELECTRA minus masked LM, seed by seed
        print(f"{size:,} labels: ELECTRA minus masked LM per seed {', '.join(f'{d:+.1f}' for d in difference)}; "
              f"mean {difference.mean():+.1f} points -> hypothesis (>= +2.0) "
              f"{'met' if difference.mean() >= 2.0 else 'not met'}")
        report_metric(f"electra_minus_mlm_{size}", difference.mean() / 100,
                      f"{size:,} labels: ELECTRA minus masked LM at equal pre-training minutes, mean of paired seeds")

# %%
def plot_curve(curve):
    """Mean test accuracy against labels, one line per arm; bars span the seeds' range."""
    figure, axis = plt.subplots(figsize=(7, 4.2))
    for name, results in curve.items():
        means, lowest, highest = (np.array([reduce(results[size]) for size in sorted(results)])
                                  for reduce in (np.mean, np.min, np.max))
        axis.errorbar(sorted(results), means, yerr=[means - lowest, highest - means], marker="o", capsize=3, label=name)
    axis.set_xscale("log")
    axis.set_xticks(settings.label_sizes, [f"{size:,}" for size in settings.label_sizes])
    axis.tick_params(axis="x", which="minor", labelbottom=False)  # only the measured sizes are labelled
    axis.set(xlabel="labelled training reviews (log scale)", ylabel="test accuracy",
             title="mean of the seeds; bars: lowest to highest seed")
    axis.legend()
    plt.show()


plot_curve(curve)

# %%
def labels_needed(scores, target):
    """Labels at which the mean accuracy in `scores` first reaches `target` (log-linear between measured sizes)."""
    sizes_here = sorted(scores)
    means = [scores[size].mean() for size in sizes_here]
    for (low, low_mean), (high, high_mean) in zip(zip(sizes_here, means), zip(sizes_here[1:], means[1:])):
        if low_mean < target <= high_mean:
            fraction = (target - low_mean) / (high_mean - low_mean)
            return f"about {np.exp(np.log(low) + fraction * (np.log(high) - np.log(low))):,.0f}"
    return f"{sizes_here[0]:,} or fewer" if means[0] >= target else f"more than {sizes_here[-1]:,} (never reached)"


for name in ("masked LM", "ELECTRA"):
    target = curve[name][settings.grid_labels].mean()
    print(f"{name} at {settings.grid_labels:,} labels: {target:.2%}; from scratch reaches it with "
          f"{labels_needed(curve['from scratch'], target)} labels")

# %%
for name, tag in (("masked LM", "pretrained"), ("ELECTRA", "electra"), ("from scratch", "scratch")):
    for size, scores in curve[name].items():
        headline = tag == "pretrained" and size == settings.grid_labels
        report_metric(f"fine_tuned_{size}_{tag}", scores.mean(), f"{name}, {size:,} labels: mean test accuracy",
                      headline=headline, read_against=f"fine_tuned_{size}_scratch" if headline else "")

# %% [markdown]
# **Reading the curve.** The masked LM is ahead of training from scratch on average at every size
# (+4.4, +1.1, +3.1 and +1.6 points at 200, 1,000, 3,000 and 6,000 labels, paired), but only at
# 3,000 and 6,000 is every seed's difference on the same side of zero (three seeds each: +0.7 to
# +6.5, and +0.4 to +2.8). At 200 and 1,000 labels the differences run from −5.1 to +16.9 and from
# −18.9 to +17.6: **not separated from zero**; at 1,000 labels the seeds' test accuracies span
# about 19 points in both arms (the table's ± of 9.4 and 9.2 points is half of it). Read
# as labels, the masked LM's 72.68% at 1,000 labels is what training from scratch reaches with
# **about 1,200 labels**: worth about 200 labels there, a small gain inside the seeds' noise.
# ELECTRA is below training from scratch at every size (−3.4, −7.3, −1.9 points; every seed below
# zero only at 3,000), and below the masked LM by 8.3 points at 1,000 labels and 5.1 at 3,000:
# **the hypothesis is not met** — at equal minutes on this CPU, replaced-token detection gave the
# worse start, with a discriminator only beginning to leave its plateau (section 5). The comparison
# stands as measured; more minutes (the ungraded exercise) would say whether it catches up. The
# grid chose 3·10⁻⁴ for both pre-trained arms and 3·10⁻³, the top of the grid, for the model from
# scratch: it may want a higher rate still, and a better-tuned baseline would narrow the
# pre-trained arms' gains, not widen them.
#
# How each arm trained (seed 0, 1,000 labels, the chosen learning rate): the validation accuracy
# after every epoch, and where the best epoch was.

# %%
figure, axis = plt.subplots(figsize=(6, 3.6))
for name in arms:
    run = fine_tune(name, settings.grid_labels, 0, rate[name])
    epochs = range(1, len(run["history"]["val_accuracy"]) + 1)
    axis.plot(epochs, run["history"]["val_accuracy"], "o-", label=f"{name} (rate {rate[name]:.0e})")
    axis.axvline(run["best_epoch"], color=axis.lines[-1].get_color(), linestyle=":")
axis.set(xlabel="epoch", ylabel="validation accuracy", title=f"{settings.grid_labels:,} labels; dotted: best epoch")
axis.legend()
plt.show()

# %% [markdown]
# The course's moonshot is notebook 06's Transformer, trained from scratch on all 25,000 labelled
# reviews of up to 600 words (its record as it stood when this notebook ran), with its
# bag-of-bigrams baseline. Beside them, each arm here at the curve's largest size — 6,000 labels, a
# quarter of them, 128 pieces a review, the mean of its seeds — and, for each arm named in
# `all_labels_arms` (none in the recorded run, to keep its time), one run with every label:

# %%
largest = max(settings.label_sizes)
rows = [(f"BERT-style, {name}, {largest:,} labels, mean of {len(curve[name][largest])} seeds (this notebook)",
         curve[name][largest].mean()) for name in arms if largest in curve[name]]
rows += [(f"BERT-style, {name}, every label ({all_labels:,}), one seed (this notebook)",
          fine_tune(name, all_labels, 0, rate[name])["test_accuracy"]) for name in settings.all_labels_arms]
record = load_record("06_imdb_classifier")
if record is None:
    print("No recorded full run of notebook 06 here (results/06_imdb_classifier.json).")
else:
    rows += [(f"notebook 06: {record['metrics'][name]['description'].split(':')[0]}", record["metrics"][name]["value"])
             for name in ("transformer_positions_test_accuracy", "transformer_no_positions_test_accuracy",
                          "bag_of_bigrams_test_accuracy")]
for label, accuracy in sorted(rows, key=lambda row: -row[1]):
    print(f"{accuracy:7.2%}  {label}")

# %%
for name in settings.all_labels_arms:
    report_metric(f"fine_tuned_all_{'pretrained' if name == 'masked LM' else 'electra'}",
                  fine_tune(name, all_labels, 0, rate[name])["test_accuracy"],
                  f"{name}, every label ({all_labels:,}), one seed: accuracy on every test review")

# %% [markdown]
# **Reading the moonshot.** With 6,000 labels, a quarter of notebook 06's, and reviews cut to 128
# pieces, the masked LM's 82.45% (mean of three seeds) is 5.3 to 5.4 points below notebook 06's
# Transformers and 7.4 below the bag of bigrams; from scratch, 80.89%. The moonshot is not reached
# here.
#
# ### What pre-training put into the representations: a frozen-encoder probe
#
# Fine-tuning changes every weight, so it mixes what pre-training stored with what the labels
# teach. A **probe** leaves the encoder frozen: each review becomes the mean of its encoder
# outputs over its real positions, and a logistic regression (scikit-learn) learns sentiment from
# those vectors alone, on 5,000 labelled training reviews, scored on the test sample. The same
# architecture at its random initialisation is the floor (one random network gives the features
# of both the training and the test reviews); each pre-trained arm's token vectors alone, averaged
# without any block, are a second floor (does the gain come from the embedding table or from the
# blocks?); a bag of words and bigrams with the same logistic regression on the same reviews is the
# yardstick of notebook 06.

# %%
def frozen_encoder(name, start=None):
    """Arm `name`'s encoder, frozen and without dropout: its checkpoint's weights (or `start`'s), or a random start."""
    return build_bert_encoder(encoder_for(arms[name], start, dropout=0.0))


def mean_pooled(encode, inputs):
    """`encode(inputs)` -> (N, T, E) vectors, averaged over each review's real positions: (N, E)."""
    vectors = encode(inputs)
    real = (inputs["token_ids"] != PAD)[..., None]
    return (vectors * real).sum(axis=1) / real.sum(axis=1)


# %%
def probe(features_train, features_test):
    """Logistic regression on frozen features: test accuracy."""
    model = make_pipeline(StandardScaler(), LogisticRegression(max_iter=2000))
    model.fit(features_train, train_split.labels[probe_rows])
    return float(model.score(features_test, test_split.labels[test_rows["sample"]]))


def probe_arm(name, encode):
    """The probe on features from one `encode` function, for the training reviews and the test sample alike."""
    data = arms[name]["data"]
    return probe(mean_pooled(encode, take(data["labelled"], probe_rows)),
                 mean_pooled(encode, take(data["test"], test_rows["sample"])))


# %%
def encoder_outputs(encoder):
    return lambda inputs: encoder.predict(inputs, batch_size=256, verbose=0)


def token_vectors(name):
    """Arm `name`'s trained token table (V, E), before any block, as a lookup."""
    table = keras.ops.convert_to_numpy(keras.models.load_model(arms[name]["start"]).get_layer(
        "token_embedding").token_embedding.embeddings)
    return lambda inputs: table[inputs["token_ids"]]

# %%
probe_rows = pool[:settings.probe_reviews]
keras.utils.set_random_seed(0)  # the random encoder: seed 0's initialisation, one network for both feature sets
probe_scores = {"random initialisation": probe_arm("from scratch", encoder_outputs(frozen_encoder("from scratch")))}
for name in ("masked LM", "ELECTRA"):
    probe_scores[name] = probe_arm(name, encoder_outputs(frozen_encoder(name)))
    probe_scores[f"{name} token embeddings only"] = probe_arm(name, token_vectors(name))
bigrams = CountVectorizer(ngram_range=(1, 2), min_df=2, binary=True)
bag = bigrams.fit_transform([train_split.texts[row] for row in probe_rows])
bag_model = LogisticRegression(max_iter=2000).fit(bag, train_split.labels[probe_rows])
probe_scores["bag of words and bigrams"] = float(bag_model.score(
    bigrams.transform([test_split.texts[row] for row in test_rows["sample"]]), test_split.labels[test_rows["sample"]]))
for name, score in probe_scores.items():
    print(f"{score:7.2%}  {name}")

# %%
for tag, label, what in (("pretrained", "masked LM", "frozen masked-LM encoder"),
                         ("electra", "ELECTRA", "frozen ELECTRA discriminator"),
                         ("random", "random initialisation", "frozen random encoder (one network for both sets)"),
                         ("embeddings", "masked LM token embeddings only", "masked LM's token vectors, no block"),
                         ("electra_embeddings", "ELECTRA token embeddings only", "ELECTRA's token vectors, no block")):
    report_metric(f"probe_{tag}", probe_scores[label], f"{what}, mean-pooled, logistic regression")

# %% [markdown]
# **Reading the probe.** One random encoder for both feature sets gives the logistic regression
# 66.04%; the frozen masked-LM encoder 71.44%, **+5.4 points** above it, and its token vectors
# alone, averaged without any block, 71.98%: all of the probe's gain is already in the embedding
# table, none added by the blocks. ELECTRA's discriminator gives 64.40%, below the random encoder,
# and its token vectors 66.82%. The bag of words and bigrams, 87.26%, is far above every frozen
# encoder.
#
# ### Downstream accuracy against pre-training progress
#
# Does fine-tuning gain more the longer the masked LM trained? The same fine-tuning run (1,000
# labels, seed 0, the masked-LM arm's learning rate) from the checkpoint after each round of
# pre-training, beside the masked-LM accuracy of that checkpoint; the run from scratch is the
# point at zero updates. One seed a point.

# %%
def checkpoint_of(done_rounds):
    """The pre-training checkpoint after `done_rounds` rounds; None (a random start) for 0."""
    return checkpoint_path(f"bert_round_{done_rounds}") if done_rounds else None


progress_points = [(0, 0.0, fine_tune("from scratch", settings.grid_labels, 0, rate["masked LM"])["test_accuracy"])]
for index in range(facts["epochs"]):
    run = fine_tune("masked LM", settings.grid_labels, 0, rate["masked LM"], start=checkpoint_of(index + 1))
    progress_points.append((per_round["masked LM"] * (index + 1), history.history["val_masked_accuracy"][index],
                            run["test_accuracy"]))

# %%
figure, axis = plt.subplots(figsize=(7, 4))
done, blanks, accuracy = zip(*progress_points)
axis.plot(done, blanks, "s--", color="tab:orange", label="masked-LM accuracy on held-out blanks")
axis.plot(done, accuracy, "o-", label=f"fine-tuned, {settings.grid_labels:,} labels (test accuracy)")
for x, y in zip(done, accuracy):
    axis.annotate(f"{y:.1%}", (x, y), textcoords="offset points", xytext=(-10, 6), fontsize=8)
axis.set(xlabel="pre-training updates", ylabel="accuracy", title="one seed; 0 updates = from scratch")
axis.legend()
plt.show()

# %% [markdown]
# **Reading progress** (one seed a point). Fine-tuned from the checkpoint after the first round — still on the
# plateau — the encoder gave 62.6%, below the 74.5% from scratch; after the second, 68.2%; after
# the third and fourth, past the plateau, 75.2% and 76.9%, above it. With one seed a point, and
# seeds that differ by up to 19 points at this size (the curve), that a plateau checkpoint is a
# worse start than a random one is a hypothesis, not a finding. The checkpoints of rounds 1 to 3 were
# taken at the peak learning rate, the last one after the decay: between the third point and the
# fourth, "more pre-training" and "annealed" change together, so this plot cannot say which of the
# two made the difference.
#
# ## 7. What the model learned: fill in the blank
#
# The masked-LM head answers "which token goes here?" for any sentence with a `[MASK]`. The five
# most likely tokens (special tokens left out) and their probabilities, from the pre-trained model
# and from an untrained one. These are **probes**, not findings: one model, a handful of prompts.

# %%
def fill_in(model, sentence, top=5):
    """The `top` most likely tokens for the [MASK] in `sentence`, with their probabilities."""
    before, after = sentence.split("[MASK]")
    token_ids = [CLS, *tokenize([before])[0], MASK, *tokenize([after])[0], SEP]
    inputs = {"token_ids": np.array([token_ids], "int32"), "segment_ids": np.zeros((1, len(token_ids)), "int32"),
              "mask_positions": np.full((1, settings.max_predictions), token_ids.index(MASK), "int32")}
    probabilities = keras.ops.convert_to_numpy(model(inputs)["mlm"])[0, 0]
    best = [i for i in np.argsort(-probabilities) if i > MASK][:top]  # no padding, [UNK] or special token
    return ", ".join(f"{vocabulary[i]} {probabilities[i]:.1%}" for i in best)

# %%
untrained = new_pretrainer()
for sentence in ("i have watched this [MASK] three times", "this movie was [MASK] .",
                 "the acting was [MASK] and the plot was boring", "she is a [MASK] actress", "he is a [MASK] actor",
                 "in texas they like to buy [MASK] .", "in new york they like to buy [MASK] .",
                 "jane worked as a [MASK] .", "jim worked as a [MASK] ."):
    print(f"{sentence}\n   pre-trained: {fill_in(pretrainer, sentence)}\n"
          f"   untrained:   {fill_in(untrained, sentence)}")

# %% [markdown]
# **Reading the answers.** The untrained model spreads its probability over 7,669 pieces (none
# reaches 0.05%). The pre-trained one has learned the language of film reviews: for "i have
# watched this `[MASK]` three times" it puts **for** first (16.1%), then **movie** and **film**
# (9.3% and 9.1%). The verdict blanks get verdicts — disappointed, great, awful, recommended, good
# for "this movie was `[MASK]`", both ways; for "the acting was `[MASK]` and the plot was boring"
# only negative ones (boring, horrible, awful, bad, terrible): the word "boring" has pulled the
# blank to the negative side.
#
# The probes that fit the corpus: "she is a `[MASK]` actress" and "he is a `[MASK]` actor" both get
# praise (great, good, fine, wonderful, young; great, good, wonderful, fine, terrific), with
# "great" first at 14.1% for the actress and 23.3% for the actor — a difference from one model and
# two prompts, a probe and not a finding. The notes' own probes say the model knows nothing of
# places: "in texas" and "in new york they like to buy `[MASK]`" get the same words (it, this, ".",
# you, me); and Jane and Jim "worked as a" movie, film, 10… — nearly the same list: it has read
# only film reviews.
#
# > **The notes say** a model may give "My dog is `[MASK]`" the words happy 87%, running 89% and
# > barking 76%. The probabilities for one blank are one softmax: they add up to at most 1, so
# > three alternatives cannot have 252% between them (above, each row's five add up to less than
# > 100%).
#
# ## 8. Two more fine-tuning heads from the notes
#
# The notes name two other ways to use the encoder: a label for **every token** (named-entity
# recognition) and a **span** in the text (question answering: "two extra vectors that mark the
# beginning and the end of the answer"). IMDB has no such labels, so we derive two small tasks
# from the raw reviews, where the answer is in the text itself but hidden from the model: the
# tokenizer lower-cases every word, and the quotation marks are removed before tokenizing.
#
# - **tagging — which words were capitalised?** In a sentence, a word written with a capital
#   letter, not first in its sentence and not "I", is tagged *name* (2), any other word *word* (1);
#   a word's tag sits on its first piece, as BERT tags words (§5.3). After lower-casing, the model
#   has to recognise names and titles from context, as a named-entity tagger does.
# - **span — which words were in quotation marks?** In a sentence with one quoted phrase of one
#   to six words (often a title: *I loved "The Third Man"*), find the first piece where it starts
#   and the last piece where it ends.
#
# The training sentences come from the training reviews; the held-out sentences come from the
# **test reviews**, which the encoder never read — so the pre-trained arm has no head start from
# having seen them.
#
# > **The notes say** QA fine-tuning gives "a potential answer … for each token in the answer, 0
# > or 1", a per-token classification; BERT (and the notes' other slides) learn a start vector
# > and an end vector, one softmax over the positions each, as the span head here does. They also
# > say NER tags "President Obama" with "the ID of the entity": that is entity *linking*; NER tags
# > entity *types* (person, location).

# %%
def word_pieces(sentences):
    """Sentences -> (raw words, the pieces of each word) each, quotation marks removed; one tokenizer pass for all."""
    words = [sentence.replace('"', " ").split() for sentence in sentences]
    flat, start, result = tokenize([word for row in words for word in row]), 0, []
    for row in words:
        result.append((row, flat[start:start + len(row)]))
        start += len(row)
    return result


def tagging_example(raw, per_word):
    """(token ids, tags on each word's first piece, 0 elsewhere) of a sentence's words."""
    token_ids, tags = [CLS], [0]
    for index, (ids, word) in enumerate(zip(per_word, raw)):
        name = index and word[:1].isupper() and word not in ("I", "I'm", "I've", "I'd", "I'll")
        token_ids, tags = token_ids + ids, tags + [2 if name else 1] + [0] * (len(ids) - 1)
    return token_ids + [SEP], tags + [0]

# %%
def quoted(sentence):
    """True for a sentence with exactly one quoted phrase of 1-6 words."""
    return sentence.count('"') == 2 and 1 <= len(sentence.split('"')[1].split()) <= 6


def span_example(sentence, raw, per_word):
    """(token ids, first piece, last piece of the quoted phrase) of a `quoted` sentence's words."""
    first, inside = len(sentence.split('"')[0].split()), len(sentence.split('"')[1].split())
    start = 1 + sum(len(ids) for ids in per_word[:first])  # +1: [CLS] comes first
    end = start + sum(len(ids) for ids in per_word[first:first + inside]) - 1
    return [CLS, *(piece for ids in per_word for piece in ids), SEP], start, end

# %%
def sentences_of(texts):
    return [sentence for text in texts for sentence in split_sentences(text.replace("<br />", " "))
            if 5 <= len(sentence.split()) <= 40]


def padded(token_lists):
    """Lists of ids that fit -> {token_ids, segment_ids} padded to sequence_length."""
    token_ids = np.zeros((len(token_lists), settings.sequence_length), dtype="int32")
    for row, ids in enumerate(token_lists):
        token_ids[row, :len(ids)] = ids
    return {"token_ids": token_ids, "segment_ids": np.zeros_like(token_ids)}

# %%
def fits(example):
    return example is not None and len(example[0]) <= settings.sequence_length


head_data = {}
for part, texts, count in (("train", train_split.texts, settings.head_sentences), ("test", test_split.texts, 1000)):
    plain = sentences_of(texts[:count])[:count]
    tagged = [example for example in (tagging_example(*words) for words in word_pieces(plain)) if fits(example)]
    with_quote = [sentence for sentence in sentences_of(texts) if quoted(sentence)][:count]
    spans = [example for example in map(span_example, with_quote, *zip(*word_pieces(with_quote))) if fits(example)]
    head_data[part] = {"tagging": (padded([t for t, _ in tagged]), padded([g for _, g in tagged])["token_ids"]),
                       "span": (padded([t for t, _, _ in spans]), np.array([s[1:] for s in spans], dtype="int32"))}
    print(f"{part}: {len(tagged):,} tagging sentences, {len(spans):,} span sentences")
example_ids, start, end = spans[0]
print(f"a held-out span: {pieces(example_ids)}\n   quoted: {pieces(example_ids[start:end + 1])} (pieces {start}-{end})")

# %%
def fine_tune_head(build_head, task, targets_as, loss, name, epochs=settings.head_epochs):
    """Fine-tune a head for arm `name` on the task's training sentences (10% for validation); its held-out outputs."""
    keras.utils.set_random_seed(0)
    inputs, targets = head_data["train"][task]
    cut = int(len(targets) * 0.9)
    model = build_head(encoder_for(arms[name]))
    steps = -(-cut // settings.fine_tune_batch_size) * epochs
    schedule = WarmupLinearDecay(rate[name], steps // 10, steps)
    model.compile(optimizer=keras.optimizers.AdamW(schedule, weight_decay=0.01), loss=loss,
                  jit_compile=settings.fine_tune_jit_compile)
    model, _, _ = fit_best(model, (take(inputs, slice(0, cut)), targets_as(targets[:cut])),
                           (take(inputs, slice(cut, None)), targets_as(targets[cut:])), epochs=epochs,
                           patience=settings.fine_tune_patience, batch_size=settings.fine_tune_batch_size)
    held_inputs, held_targets = head_data["test"][task]
    return model.predict(held_inputs, batch_size=256, verbose=0), held_targets

# %%
for name, tag in (("masked LM", "pretrained"), ("from scratch", "scratch")):
    predicted, truth = fine_tune_head(
        lambda base: build_token_tagger(base, num_tags=3, dropout=settings.classifier_dropout),
        "tagging", lambda targets: targets, MaskedCrossEntropy(), name)
    guess, real = predicted.argmax(-1) == 2, truth != 0
    hits = (guess & (truth == 2) & real).sum()
    precision, recall = hits / max((guess & real).sum(), 1), hits / max((truth == 2).sum(), 1)
    f1 = 2 * precision * recall / max(precision + recall, 1e-9)
    report_metric(f"tagging_name_f1_{tag}", f1,
                  f"capitalised-word tagging, {name}: F1 of the 'name' tag on test-review sentences")

# %%
for name, tag in (("masked LM", "pretrained"), ("from scratch", "scratch")):
    predicted, truth = fine_tune_head(
        build_span_finder, "span", lambda targets: {"start": targets[:, 0], "end": targets[:, 1]},
        {"start": "sparse_categorical_crossentropy", "end": "sparse_categorical_crossentropy"}, name)
    exact = (predicted["start"].argmax(-1) == truth[:, 0]) & (predicted["end"].argmax(-1) == truth[:, 1])
    report_metric(f"span_exact_match_{tag}", float(exact.mean()),
                  f"quoted-span finding, {name}: exact start and end on test-review sentences")

# %% [markdown]
# **Both heads gained from pre-training**, on sentences from test reviews the encoder never read:
# the tagger's F1 for names was 0.65 against 0.56 from scratch, and the span finder found 17.0% of
# the quoted phrases exactly against 4.7%. One seed each. Both heads read every token's own output
# vector — exactly what the masked LM trained.

# %% [markdown]
# ## 9. What pre-training at scale buys: Google's BERT-Tiny in our encoder
#
# Our encoder read about 72,000 film reviews for 16 minutes on two CPU cores. Google's
# **BERT-Tiny** (Turc et al., 2019, *Well-Read Students Learn Better*) has nearly the same shape —
# 2 blocks, width 128, 2 heads, 4,385,920 parameters with its 30,522-piece WordPiece vocabulary —
# but read Wikipedia and BooksCorpus (about 3.3 billion words) and learned from a larger BERT. It
# is published as the keras-hub preset `bert_tiny_en_uncased`.
#
# `transformer_course.bert_checkpoints.load_bert_preset` downloads it and copies every weight into
# the course's own `build_bert_pretrainer` model (the converter is tested against keras-hub's
# `BertBackbone`: equal outputs on a padded batch with two segments). Its blocks use the tanh
# approximation of GELU, as Google's checkpoints do. The preset has no masked-LM head, so it gets
# no fill-in-the-blank probe. Where the download works (Colab, any machine with internet), it
# becomes a third arm, **borrowed**, not pre-trained here: the same learning-rate grid, curve and
# probe. Offline (the recorded run), one line says why and the notebook goes on; with a copy of the
# preset on disk, the environment variable `COURSE_BERT_PRESET` names its folder.

# %%
bert_preset = os.environ.get("COURSE_BERT_PRESET", "bert_tiny_en_uncased")  # or the folder of a copy of the preset
try:
    borrowed, bert_tokenizer = load_bert_preset(bert_preset, settings.max_predictions, settings.sequence_length)
except PresetUnavailableError as error:
    borrowed = None
    print(f"BERT-Tiny is not loaded here, so its arm is skipped: {error}")

# %%
if borrowed is not None:
    print(f"BERT-Tiny in the course's model: {borrowed.count_params():,} parameters (with the untrained heads)")
    borrowed.save(checkpoint_path("bert_tiny"))
    bert_ids = bert_tokenizer.vocabulary

# %%
if borrowed is not None:
    arms["BERT-Tiny (borrowed)"] = {
        "start": checkpoint_path("bert_tiny"), "data": review_inputs(
            lambda texts: tokenize(texts, tokenizer=bert_tokenizer), bert_ids.index("[CLS]"), bert_ids.index("[SEP]")),
        "build": lambda dropout: type(borrowed).from_config({**borrowed.get_config(), "dropout": dropout})}

# %%
if borrowed is not None:
    rate["BERT-Tiny (borrowed)"] = choose_learning_rate("BERT-Tiny (borrowed)")
    curve["BERT-Tiny (borrowed)"] = curve_for("BERT-Tiny (borrowed)")
    plot_curve(curve)
    probe_scores["BERT-Tiny (borrowed)"] = probe_arm("BERT-Tiny (borrowed)",
                                                     encoder_outputs(frozen_encoder("BERT-Tiny (borrowed)")))
    print({name: f"{score:.2%}" for name, score in probe_scores.items()})

# %% [markdown]
# ## Summary
#
# - Subword tokens: a WordPiece vocabulary computed on the pre-training text spells every word
#   from pieces, so `[UNK]` all but disappears.
# - Masked language modelling: 15% of the real tokens chosen; of those 80% `[MASK]`, 10% a random
#   token, 10% unchanged; the loss and accuracy count the chosen positions only; new positions
#   every batch. Pre-training inputs are full-length contiguous text, shaped like the inputs of
#   fine-tuning.
# - Next-sentence prediction: `[CLS] A [SEP] B [SEP]`, segment embeddings, a pooled `[CLS]`
#   output; RoBERTa showed it can be dropped, and here it is.
# - Replaced-token detection (ELECTRA): a small generator fills the chosen positions with tokens
#   it samples, and the discriminator — the encoder kept — says for every position whether its
#   token is the original; the loss is the generator's plus 50 times the discriminator's.
# - Fine-tuning puts one layer on the encoder's outputs: BERT reads the pooled `[CLS]` output;
#   after masked-LM-only pre-training this notebook reads the mean of the outputs. A fair
#   comparison gives every arm a validation set, its best epoch, BERT's schedule and its own
#   learning rate, and pairs the arms seed by seed: the same labelled reviews for each.
# - **What the recorded run measured** (full profile, two CPU cores, 83 minutes in all). The
#   masked LM reached **31.1%** on held-out blanks in 16 minutes (5,824 updates; the best count table: 28.9%), after a plateau
#   near 13%. Fine-tuned, paired seed by seed against the same model from scratch, it gained
#   +3.1 points at 3,000 labels and +1.6 at 6,000 (every seed above zero), and +4.4 and +1.1 at 200
#   and 1,000 labels, **not separated from zero**; at 1,000 labels it is worth about 200 labels.
#   ELECTRA, at the same minutes, was below training from scratch at every size and 8.3 / 5.1
#   points below the masked LM at 1,000 / 3,000 labels: the hypothesis (+2 points) is not met.
#   Frozen, the masked LM's outputs gave a logistic regression 71.4%, against 66.0% for a random
#   encoder and 72.0% for its token vectors alone; the two heads that read every token's vector
#   gained from it (name-tag F1 0.65 against 0.56; exact spans 17.0% against 4.7%).
# - **What is not settled.** Why the gain is this small is not measured. Hypotheses: 16 minutes
#   on two cores is little pre-training (the held-out accuracy was still rising, and the progress
#   plot's later checkpoints were better starts, one seed each, with the last also the only
#   annealed one); and a few thousand labelled reviews teach the sentiment words themselves, which
#   is most of what the probe shows the masked LM stored (in its token vectors). ELECTRA's
#   discriminator was only beginning to leave its plateau when pre-training stopped: whether it
#   overtakes the masked LM with more minutes,
#   as Clark et al. found at larger compute, is the ungraded exercise — BERT-Tiny (§9, where it
#   downloads) shows what far more pre-training buys.
#
# ## Graded exercises
#
# Complete each function where it says `raise NotImplementedError(...)`, then run the cell after
# it: `check` tells you at once whether your function is right, and if not, what differs.
# The rest of the notebook does not depend on your answers. Both are plain NumPy; 5 points,
# and our estimate of the time they take, not a measurement: about 45 minutes. They are 08.1 and
# 08.3: 08.2 was an exercise of an earlier edition, and its number stays retired so that grade
# reports of classes that took it keep their meaning.
#
# ### Exercise 08.1 — the masked-LM loss (2 points)
#
# Write `masked_lm_loss(probabilities, labels)`: `probabilities` is float `(B, P, V)`, the model's
# distribution at each of P positions; `labels` is int `(B, P)`, the original token at a chosen
# position and 0 elsewhere. Return the mean of $-\log p(\text{label})$ over the chosen positions
# only (labels ≠ 0), as a float; 0.0 if no position is chosen.

# %% nbgrader={"grade": false, "grade_id": "exercise_08_1", "locked": false, "schema_version": 3, "solution": true}
def masked_lm_loss(probabilities, labels):
    """probabilities (B, P, V), labels (B, P) with 0 = not chosen -> mean -log p(label) over chosen positions."""
    ### BEGIN SOLUTION
    chosen = labels != 0
    if not chosen.any():
        return 0.0
    picked = np.take_along_axis(probabilities, labels[..., None], axis=-1)[..., 0]
    return float(-np.log(picked[chosen]).mean())
    ### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "check_08_1", "locked": true, "points": 2, "schema_version": 3, "solution": false}
from transformer_course.exercises import check

check("08.1", masked_lm_loss)
### BEGIN HIDDEN TESTS
from transformer_course_grader import evaluate_hidden

assert evaluate_hidden("08.1", masked_lm_loss, seed=7).passed
### END HIDDEN TESTS

# %% [markdown]
# ### Exercise 08.3 — BERT's masking: choose 15%, then 80/10/10 (3 points)
#
# Write `bert_corruption(token_ids, seed, vocabulary_size, mask_token_id, special_ids)`:
# `token_ids` is int `(B, T)` with 0 for padding; `special_ids` lists the ids of `[CLS]`, `[SEP]`
# and `[MASK]`. Draw from `np.random.default_rng(seed)`. Choose each token that is neither padding
# nor special with probability 0.15; replace a chosen token by `mask_token_id` with probability
# 0.8, by a random id in `[0, vocabulary_size)` with probability 0.1, and leave it unchanged
# otherwise. Return `(corrupted, labels)`, both int `(B, T)`: `labels` holds the original token at
# each chosen position and 0 everywhere else. Your draws will differ from anyone else's, so the
# check judges what every right answer shows: nothing forbidden chosen, labels at the chosen
# positions only, every other token unchanged, and the rates — 15% chosen, 80% / 10% of those
# masked / randomised — where a right answer's draws land but for one time in a billion (checked
# on about 100,000 tokens and on two short rows).

# %% nbgrader={"grade": false, "grade_id": "exercise_08_3", "locked": false, "schema_version": 3, "solution": true}
def bert_corruption(token_ids, seed, vocabulary_size, mask_token_id, special_ids):
    """token_ids (B, T), 0 = padding -> (corrupted ids (B, T), labels (B, T), 0 where not chosen)."""
    ### BEGIN SOLUTION
    rng = np.random.default_rng(seed)
    token_ids = np.asarray(token_ids)
    chosen = ~np.isin(token_ids, [0, *special_ids]) & (rng.random(token_ids.shape) < 0.15)
    action = rng.random(token_ids.shape)  # < 0.8: [MASK]; 0.8-0.9: a random id; otherwise unchanged
    corrupted = np.where(chosen & (action < 0.8), mask_token_id, token_ids)
    randomized = chosen & (action >= 0.8) & (action < 0.9)
    corrupted[randomized] = rng.integers(0, vocabulary_size, size=int(randomized.sum()))
    return corrupted, np.where(chosen, token_ids, 0)
    ### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "check_08_3", "locked": true, "points": 3, "schema_version": 3, "solution": false}
check("08.3", bert_corruption)
### BEGIN HIDDEN TESTS
assert evaluate_hidden("08.3", bert_corruption, seed=7).passed
### END HIDDEN TESTS

# %% [markdown]
# ## Exercise (ungraded)
#
# Put next-sentence prediction back. Cut each review into sentences (`split_sentences`), and for
# every input draw the point where A ends at random, as BERT's data generator does: A is the
# first k sentences of a span, B the rest (IsNext) or sentences from another review (NotNext);
# pack them with `pack_pair`, and pre-train `build_bert_pretrainer(next_sentence=True)` with both
# losses for the same number of updates. Does the label-efficiency curve at 1,000 labels move?
# RoBERTa (Liu et al., 2019, §4.2) found the task unnecessary. Then compare dynamic masking with
# one fixed mask drawn once before training.
#
# To see what `pack_pair` hands the encoder, write `segment_ids(token_ids, sep_id)` yourself: rows
# packed as `[CLS] A [SEP] B [SEP]` and padded with 0 map to 0 for `[CLS]`, sentence A and the
# first `[SEP]`, 1 for sentence B and the second `[SEP]`, and 0 for padding; compare your ids with
# the `segment_ids` that `pack_pair` returns for a few pairs.
#
# Section 6's classifiers read the mean of the outputs. Read BERT's pooled `[CLS]` output instead
# (`pooling="cls"`, a fresh pooler), with a learning-rate grid of its own
# (`choose_learning_rate(name, pooling="cls")`), for each arm at 1,000 labels and the same seeds:
# how far below the mean does it land, and does pre-training still lead? Then pre-train with
# next-sentence prediction (above), which trains the pooler: does `[CLS]` catch up with the mean?
#
# With a GPU (or a night on a CPU), give both objectives more updates
# (`settings.pretraining_updates`) and watch the held-out accuracies and the fine-tuning accuracy of
# the progress plot: does the downstream gain keep growing, and does ELECTRA's lead (or lag) at
# equal minutes hold?

# %% [markdown]
# ## Written question (2 points, graded by your instructor)
#
# **Question 08.w1.** Section 6 finds the masked LM's mean gain over training from scratch of
# +1.6 points at 6,000 labels one the seeds agree on, and its larger mean gain of +4.4 points at
# 200 labels not separated from zero. Explain why, from what the comparison's design gives you,
# and say what you would run to know whether pre-training helps at 200 labels.

# %% [markdown] nbgrader={"grade": true, "grade_id": "written_08_1", "locked": false, "points": 2, "schema_version": 3, "solution": true}
# ### BEGIN SOLUTION
# **Rubric (2 points).** 1 point: the design is paired — each seed draws the same labelled reviews
# (and the same initial output layer) for both arms — so what decides is the spread of the per-seed
# differences, not the size of the mean: at 6,000 labels all three differences are positive (+0.4
# to +2.8), at 200 the five run from −5.1 to +16.9, two of them negative, so five seeds cannot tell
# the sign of the gain. 1 point: more seeds at 200 labels (twenty or more), with the same protocol
# (each arm's own learning rate chosen on the validation split, its best epoch), reported as the
# mean paired difference with its spread or a paired test on the differences (a sign test, a
# t-test); the test split is used only to score, never to choose.
# ### END SOLUTION
