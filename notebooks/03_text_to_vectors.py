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
# # 03 — From text to vectors
#
# [![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.research.google.com/github/transformer-course/transformer-course/blob/v0.1.0/release/03_text_to_vectors.ipynb)
#
# **Run time:** full profile about 4 min on a 2-core CPU, smoke profile about 20 s (recorded runs). The profile comes from the environment variable `COURSE_PROFILE` (`full` or `smoke`): set it before starting Jupyter, or in Colab run `%env COURSE_PROFILE=smoke` before the first code cell. On Colab, a GPU runtime (Runtime, Change runtime type) trains on the GPU; the recorded times are CPU times. The outputs shown come from the recorded full-profile run; running a cell replaces its output with yours. In the smoke profile, run the exercises and their checks, and the cells whose output does not depend on the profile (shapes, worked examples, equalities with Keras): the accuracies, losses, curves, timings and samples it prints come from tiny data and a few steps and mean nothing; read the recorded ones.
#
# **What you will learn**
# - the steps between a raw string and the integers a model reads: standardisation,
#   tokenisation, a vocabulary, padding and truncation;
# - word, character and subword tokens, and what each costs;
# - byte-pair encoding from scratch: a vocabulary learned merge by merge, on bytes as GPT-2's;
# - how to build a vectoriser in plain Python, and how Keras' `TextVectorization` does the same;
# - why a vocabulary's order among equally frequent words is a choice, not a fact;
# - one-hot vectors against learned embeddings, and why an embedding lookup *is* a matrix
#   product;
# - word vectors learned from context alone (skip-gram with negative sampling): neighbours,
#   analogies measured, and why one vector per word is not enough.
#
# **Prerequisites:** Python strings and dictionaries; NumPy.
#
# Data: the IMDB Large Movie Review Dataset — Maas et al., 2011, *Learning Word Vectors for
# Sentiment Analysis*, ACL-HLT, pp. 142–150 (no explicit license; cite the paper).

# %%
import subprocess
import sys

if "google.colab" in sys.modules:  # Colab only: install the course package, keep Colab's TensorFlow/Keras
    subprocess.run([sys.executable, "-m", "pip", "install", "-q",
                    "transformer-course @ git+https://github.com/transformer-course/transformer-course@v0.1.0"],
                   check=True)

import transformer_course as tc

settings = tc.start_notebook("03", seed=42)

# %%
import re
import string
import time
from collections import Counter

import keras
import matplotlib.pyplot as plt
import numpy as np

from transformer_course import report_metric
from transformer_course.bpe import BytePairEncoding
from transformer_course.datasets import load_imdb

# %% [markdown]
# ## 1. Standardisation
#
# Before splitting text into tokens, remove differences that should not matter: here, letter
# case and punctuation. "The fox!" and "the fox" then become the same tokens. (What "should not
# matter" depends on the task: for translation, in notebook 07, we will keep Spanish ¿ and ¡.)

# %%
# NBVAL_CHECK_OUTPUT
def standardize(text):
    """Lower-case `text` and delete ASCII punctuation."""
    return re.sub(f"[{re.escape(string.punctuation)}]", "", text.lower())


print(standardize("The quick, brown Fox! Isn't it?"))

# %% [markdown]
# ## 2. Tokenisation: words, characters, subwords
#
# | tokens | vocabulary | sequence length | unknown words |
# |---|---|---|---|
# | words | large (tens of thousands) | short | common: every unseen word is `[UNK]` |
# | characters | tiny (about a hundred) | long (5–6× words) | none, but meaning must be rebuilt from letters |
# | subwords | chosen (e.g. 30,000) | in between | rare: an unseen word splits into known pieces |
#
# > **The notes say** "unigram or word-level tokenization" for a vocabulary of whole words.
# > *Unigram* names a subword method, not that: the unigram language-model tokeniser (Kudo, 2018,
# > *Subword Regularization*, §3.2) starts from many candidate pieces and repeatedly drops those
# > whose loss lowers the training text's likelihood least, so it belongs in the table's last row
# > beside BPE and WordPiece (it is SentencePiece's default). Whole words are word-level tokens.
#
# Subword tokenisers (BPE, WordPiece) learn pieces from data. The idea fits in a few lines:
# split a word greedily into the longest pieces found in a vocabulary (WordPiece marks a piece
# that continues a word with `##`).

# %%
pieces = {"un", "play", "believ", "##believ", "##able", "##ing", "##s", "##er"}  # a toy vocabulary

def subword_tokenize(word):
    """Greedy longest-match split of `word` into `pieces`; `[UNK]` if no split exists."""
    tokens, start = [], 0
    while start < len(word):
        for end in range(len(word), start, -1):
            piece = word[start:end] if start == 0 else "##" + word[start:end]
            if piece in pieces:
                tokens.append(piece)
                start = end
                break
        else:
            return ["[UNK]"]
    return tokens

# %%
# NBVAL_CHECK_OUTPUT
sentence = "unbelievable players"
print("words     :", sentence.split())
print("characters:", list(sentence.replace(" ", "")))
print("subwords  :", [piece for word in sentence.split() for piece in subword_tokenize(word)])

# %% [markdown]
# ## 3. A vocabulary, from scratch
#
# The lecture notes' example: build a vocabulary of at most 6 entries from three sentences, then
# encode a new one. Index 0 is reserved for **padding**, index 1 for **`[UNK]`** (out of
# vocabulary), and the remaining 4 entries go to the most frequent words.
#
# > **The notes say** "using 6 as max tokens we would use 5 most frequent tokens", and list five
# > (*the, fox, quick, jumps, brown*). Six entries minus padding and `[UNK]` leave room for
# > **four** words, and the notes' own vocabulary table holds four (*the, fox, quick, jumps*):
# > "brown" is not in it.

# %%
corpus = ["the quick brown fox", "jumps over the lazy dog", "the fox is quick"]
sentence = "the fox jumps over the moon"
counts = Counter(word for text in corpus for word in standardize(text).split())
print(counts.most_common())

# %% [markdown]
# "the" (3) is first, "quick" and "fox" (2 each) come next — but in which order? And only one of
# the six words seen once fits. Counting does not decide; a **tie-breaking rule** does. Our
# vectoriser makes the rule an argument: by default, ties keep the order in which words were
# first seen (as `Counter.most_common` does).

# %%
def build_vocabulary(texts, max_tokens, tie_order=None):
    """["", "[UNK]"] then the most frequent words; ties broken by `tie_order`, else first seen."""
    counts = Counter(word for text in texts for word in standardize(text).split())
    order = list(tie_order or []) + [word for word in counts if word not in (tie_order or [])]
    words = sorted(counts, key=lambda word: (-counts[word], order.index(word)))
    return ["", "[UNK]"] + words[: max_tokens - 2]


def text_to_ids(text, vocabulary, length=None):
    """Word ids of `text`; unknown words -> 1; truncated or padded with 0 to `length` if given."""
    index = {word: i for i, word in enumerate(vocabulary)}
    ids = [index.get(word, 1) for word in standardize(text).split()]
    return ids if length is None else ids[:length] + [0] * (length - len(ids))

# %% [markdown]
# The notes' vocabulary is *the, fox, quick, jumps*: among the ties it puts "fox" before "quick"
# and picks "jumps" from the words seen once, without stating a rule. Given that order, our
# vectoriser reproduces their result exactly; with first-seen order it gives another, equally
# valid one:

# %%
# NBVAL_CHECK_OUTPUT
notes_vocabulary = build_vocabulary(corpus, 6, tie_order=["the", "fox", "quick", "jumps"])
first_seen_vocabulary = build_vocabulary(corpus, 6)
print("notes' order:", notes_vocabulary, "->", text_to_ids(sentence, notes_vocabulary))
print("first seen  :", first_seen_vocabulary, "->", text_to_ids(sentence, first_seen_vocabulary))
assert text_to_ids(sentence, notes_vocabulary) == [2, 3, 5, 1, 2, 1]  # the lecture notes' answer
print("padded to 8 :", text_to_ids(sentence, notes_vocabulary, length=8))
print("truncated 4 :", text_to_ids(sentence, notes_vocabulary, length=4))

# %% [markdown]
# ## 4. The same with Keras' `TextVectorization`
#
# `TextVectorization` standardises (lower case, strip punctuation), splits on whitespace, builds
# the vocabulary with `adapt`, and maps words to ids with the same conventions: 0 for padding,
# 1 for `[UNK]`.

# %%
# NBVAL_CHECK_OUTPUT
vectorizer = keras.layers.TextVectorization(max_tokens=6)
vectorizer.adapt(corpus)
print("Keras vocabulary:", [str(word) for word in vectorizer.get_vocabulary()])
print("Keras ids       :", keras.ops.convert_to_numpy(vectorizer([sentence]))[0].tolist())

# %% [markdown]
# Keras breaks the ties its own way, so its ids differ from both of ours — and none of the three
# is wrong. The words in a tie are equally frequent, so the data gives no reason to prefer one;
# every library picks some deterministic order (first seen, alphabetical, hash order, whatever
# its counting code happens to produce). What matters is that the **same** vocabulary is used
# for training and for every prediction afterwards: an id means nothing without its vocabulary.
#
# ## 5. Output modes
#
# `output_mode` decides what comes out. `"int"` keeps the order (a sequence of ids, for models
# that read sequences); `"multi_hot"` and `"tf_idf"` give one vector of vocabulary size per text,
# a **bag of words** that forgets order (the baseline of notebook 06).

# %%
# NBVAL_CHECK_OUTPUT
for mode in ("int", "multi_hot", "tf_idf"):
    layer = keras.layers.TextVectorization(max_tokens=6, output_mode=mode)
    layer.adapt(corpus)
    values = np.round(keras.ops.convert_to_numpy(layer([sentence]))[0].astype("float64"), 3)
    print(f"{mode:<9}", [str(word) for word in layer.get_vocabulary()], "->", values.tolist())

# %% [markdown]
# In the bag-of-words modes there is no padding index, so the vocabulary shifts by one:
# index 0 counts the unknown words. `tf_idf` weighs each count by how rare the word is across
# the adapted texts, so "the", present in every sentence, counts for less.
#
# ## 6. Real text: IMDB reviews
#
# 25,000 training reviews (the full profile uses all of them). How long are they, in words?

# %%
train, _ = load_imdb()
texts = train.texts[: settings.imdb_reviews]
lengths = np.array([len(standardize(text).split()) for text in texts])
print(f"{len(texts):,} reviews; words per review: median {np.median(lengths):.0f}, "
      f"90th percentile {np.percentile(lengths, 90):.0f}, longest {lengths.max():,}")

# %%
cut = settings.output_sequence_length
within = float(np.mean(lengths <= cut))
plt.figure(figsize=(7, 3.4))
plt.hist(lengths, bins=100, range=(0, 1500), color="tab:blue")
plt.axvline(cut, color="tab:red", linestyle="--", label=f"{cut} tokens: {100 * within:.1f} % of reviews fit")
plt.xlabel("words per review (after standardisation)")
plt.ylabel("reviews")
plt.legend();

# %%
report_metric("reviews_within_600_tokens", within,
              "IMDB training reviews that fit in 600 tokens", headline=True)

# %% [markdown]
# The distribution has a long tail: a cut at 600 keeps most reviews whole and truncates only the
# longest, while keeping every batch a fixed, affordable size. Now a vocabulary of the 20,000
# most frequent words, adapted on the **training** texts only (the test set must not influence
# anything the model uses):

# %%
imdb_vectorizer = keras.layers.TextVectorization(
    max_tokens=settings.max_tokens, output_sequence_length=settings.output_sequence_length)
imdb_vectorizer.adapt(texts)
vocabulary = [str(word) for word in imdb_vectorizer.get_vocabulary()]
print(f"vocabulary size {len(vocabulary):,}; most frequent:", vocabulary[2:14])
ids = keras.ops.convert_to_numpy(imdb_vectorizer(texts[:1]))[0]
print("first review -> ids of shape", ids.shape, ":", ids[:12].tolist(), "...")
print("unknown words in it:", int((ids == 1).sum()), "of", int((ids > 0).sum()))

# %%
all_ids = keras.ops.convert_to_numpy(imdb_vectorizer(texts[:2000]))
coverage = float(np.mean(all_ids[all_ids > 0] != 1))
report_metric("vocabulary_coverage", coverage,
              "share of known words in the first 2,000 vectorised training reviews (20,000-word vocabulary)")

# %% [markdown]
# Notice "br" among the most frequent words: the reviews contain HTML line breaks `<br />`, and
# stripping punctuation leaves "br". Notebook 06 removes them with a custom standardisation —
# a reminder to look at the data before trusting a default.
#
# ## 7. Byte-pair encoding, from scratch
#
# The toy subword tokeniser of section 2 needed its pieces handed to it. **Byte-pair encoding**
# (BPE; Sennrich et al., 2016, *Neural Machine Translation of Rare Words with Subword Units*,
# §3.1) learns them: start from single symbols, count every pair of neighbouring symbols in the
# training text, merge the most frequent pair into one new symbol everywhere, and repeat. Each
# merge adds one token to the vocabulary, so the vocabulary size is a number you choose. To
# encode new text, apply the learned merges in the order they were learned.
#
# GPT-2 runs BPE on **bytes** (Radford et al., 2019, §2.2): the 256 byte values are the starting
# symbols, so every string — any script, any emoji — can be spelled, and no `[UNK]` is ever
# needed. It first cuts the text into words with their leading space, runs of digits and runs of
# punctuation, and never merges across those cuts. `transformer_course.bpe.BytePairEncoding`
# implements all of it in plain Python (its tests check it token for token against Hugging
# Face's `tokenizers`). Ties between equally frequent pairs go to the pair of older tokens: the
# lower id of its first token, then of its second (a byte's id is its value; a merged token's id
# says when it was made, after every byte).
#
# Sennrich et al.'s own example corpus — *low* 5 times, *lower* 2, *newest* 6, *widest* 3 — and
# the vocabulary growing one merge at a time:

# %%
# NBVAL_CHECK_OUTPUT
corpus = ["low"] * 5 + ["lower"] * 2 + ["newest"] * 6 + ["widest"] * 3
toy = BytePairEncoding.train(corpus, num_merges=8)
for count in range(len(toy.merges) + 1):
    step = BytePairEncoding(toy.merges[:count])
    spelled = "  ".join("·".join(step.token(i) for i in step.encode(word))
                        for word in ("low", "lower", "newest", "widest"))
    merge = ("start: bytes" if not count
             else "merge {}: {} + {}".format(count, *(part.decode() for part in toy.merges[count - 1])))
    print(f"{merge:<20} {spelled}")

# %% [markdown]
# "e" + "s" and "s" + "t" both occur 9 times (in *newest* and *widest*); the tie goes to "e" + "s",
# whose first token has the lower id (both are bytes: "e" is 101, "s" 115), and "es" + "t"
# follows at once. After eight merges the four words take one to
# three tokens each.
#
# Now the same on the IMDB training reviews, 8,000 merges (a vocabulary of 8,256 tokens), and
# three ways of cutting the notes' own example words — forms of one root, a French family, a
# Hebrew one — with a rare word, a misspelling and an emoji. Whole words come from a
# vocabulary of the 8,256 most frequent words, so the two vocabularies have the same size:

# %%
reviews = [text.replace("<br />", " ") for text in texts]
imdb_bpe = BytePairEncoding.train(reviews, num_merges=settings.bpe_merges, progress=True)
same_size = keras.layers.TextVectorization(max_tokens=imdb_bpe.vocabulary_size)
same_size.adapt(texts)
known = set(same_size.get_vocabulary()[2:])


def shown(token_id):
    """A token's bytes as text: a space as ␣, a byte that is only part of a character as \\xNN."""
    return imdb_bpe.vocabulary[token_id].decode("utf-8", errors="backslashreplace").replace(" ", "␣")


print(f"BPE vocabulary {imdb_bpe.vocabulary_size:,} tokens; the first ten merges learned:",
      " ".join(shown(i) for i in range(256, 266)))
for word in "Walk Walks Walked walking Journée journal journaliste שלם תשלום flightless definately 🎬".split():
    as_word = standardize(word) if standardize(word) in known else "[UNK]"
    print(f"{word:<12} word: {as_word:<10} characters: {len(word):>2}   "
          f"BPE: {' · '.join(shown(i) for i in imdb_bpe.encode(' ' + word))}")

# %% [markdown]
# `␣` marks a space: each word is encoded with the space before it, as it stands in running text,
# and most tokens begin a word with their space. The first merges are the most frequent pairs of
# the reviews, so they build the commonest words first. A byte-level token can also hold part of
# a character: the Hebrew letters and the emoji take two and four bytes each in UTF-8, and a token
# that holds only some of them prints those bytes as `\xNN` here; decoding the whole sequence
# gives the text back.
#
# What the three cost in sequence length, on the same reviews (characters counted after the
# same `<br />` replacement; words after standardisation):

# %%
sample_reviews = reviews[:2000]
word_ids = keras.ops.convert_to_numpy(same_size(texts[:2000]))
lengths_by_kind = {"words": (word_ids > 0).sum(axis=1),
                   "BPE tokens": np.array([len(imdb_bpe.encode(text)) for text in sample_reviews]),
                   "characters": np.array([len(text) for text in sample_reviews])}
unknown = float((word_ids == 1).sum() / (word_ids > 0).sum())
for kind, counts in lengths_by_kind.items():
    print(f"{kind:<11} per review: median {np.median(counts):6.0f}   90th percentile {np.percentile(counts, 90):6.0f}")
print(f"words outside the {imdb_bpe.vocabulary_size:,}-word vocabulary ([UNK]): {unknown:.2%}; "
      "BPE tokens that are [UNK]: none")
plt.figure(figsize=(7, 3.2))
plt.hist(list(lengths_by_kind.values()), bins=np.geomspace(10, 10_000, 61), label=list(lengths_by_kind),
         histtype="step")
plt.xscale("log")  # equal widths for equal ratios: words and BPE tokens, a third apart, separate
plt.xlabel("tokens per review (log scale)"); plt.ylabel("reviews"); plt.legend();

# %%
report_metric("bpe_tokens_per_review_median", float(np.median(lengths_by_kind["BPE tokens"])),
              f"median BPE tokens per IMDB review ({imdb_bpe.vocabulary_size:,}-token byte-level BPE)")
report_metric("unknown_words_same_size", unknown,
              f"words that are [UNK] with a {imdb_bpe.vocabulary_size:,}-word vocabulary")

# %% [markdown]
# BPE sits between the two: about a third more tokens than words (a median of 234 against 171),
# because rare words split into pieces, and a quarter of the characters' 954 — with nothing lost
# to `[UNK]`, where the same-sized word vocabulary loses 7.8% of the words. In the recorded run
# the 8,000 merges took about 10 seconds. Notebook 08 uses BERT's WordPiece tokens, a close
# cousin: a word is cut by the greedy longest match of section 2, and 08's vocabulary is built by
# TensorFlow Text's BERT vocabulary learner, which works top down from whole words (the original
# WordPiece trainer, which merges the pair that most raises the training text's likelihood, was
# never released). Notebook 09's language model reads BPE tokens.
#
# ## 8. From ids to vectors: one-hot or learned embeddings
#
# | | one-hot | learned embedding |
# |---|---|---|
# | size | vocabulary size (20,000) | chosen, small (e.g. 32–512) |
# | values | a single 1, the rest 0 (sparse) | real numbers (dense) |
# | similarity | every pair of words equally far apart | similar words can end up close |
# | where from | fixed by the vocabulary | learned with the model |
#
# An `Embedding` layer is a table with one row per id. Looking up a row is the same as
# multiplying the one-hot vector by the table — the lookup just skips the multiplications by 0:

# %%
# NBVAL_CHECK_OUTPUT
embedding = keras.layers.Embedding(input_dim=6, output_dim=3)
ids = np.array([[2, 3, 5, 1, 2, 1]])                           # the notes' sentence, (B, T)
looked_up = keras.ops.convert_to_numpy(embedding(ids))         # (B, T, E)
table = keras.ops.convert_to_numpy(embedding.embeddings)       # (V, E)
one_hot = np.eye(6, dtype="float32")[ids]                      # (B, T, V)
print("lookup", looked_up.shape, "== one-hot", one_hot.shape, "@ table", table.shape, ":",
      np.allclose(looked_up, one_hot @ table))

# %% [markdown]
# Padding must not count as a word. With `mask_zero=True` the embedding also produces a
# **padding mask** — True for real tokens, False for padding — that later layers (attention,
# pooling) use to ignore the padded positions:

# %%
# NBVAL_CHECK_OUTPUT
masked_embedding = keras.layers.Embedding(input_dim=6, output_dim=3, mask_zero=True)
padded = np.array([text_to_ids(sentence, notes_vocabulary, length=8)])
print("ids :", padded[0].tolist())
print("mask:", keras.ops.convert_to_numpy(masked_embedding.compute_mask(padded))[0].tolist())

# %% [markdown]
# ## 9. Word vectors from context: skip-gram
#
# An embedding learned inside a model (section 8) ends up arranged for that model's task. Word
# vectors can also be learned from raw text alone, from the idea that a word is known by the
# words around it. **Skip-gram** (Mikolov et al., 2013a, *Efficient Estimation of Word
# Representations in Vector Space*, §3.2) gives every word a vector and trains it to predict the
# words within `window` positions of it; CBOW, its twin, predicts a word from its context. With
# **negative sampling** (Mikolov et al., 2013b, §2.2) each prediction becomes a yes/no question:
# for a centre word $w$ and a real neighbour $c$, plus $k$ words $n_1 \dots n_k$ drawn at random
# (counts to the power 3/4), the model maximises
#
# $$\log \sigma(u_c \cdot v_w) + \sum_{i=1}^{k} \log \sigma(-u_{n_i} \cdot v_w),$$
#
# with $v$ the centre-word table (the word vectors kept) and $u$ a second, context-word table.
# The training pairs of a sentence, window 2:

# %%
from transformer_course import epoch_progress
from transformer_course.word_vectors import (
    SkipGram,
    SkipGramBatches,
    analogy,
    nearest_words,
    noise_distribution,
    skipgram_pairs,
)

sentence = "the quick brown fox jumps".split()
word_ids = {word: index + 1 for index, word in enumerate(sentence)}
pairs = skipgram_pairs([word_ids[word] for word in sentence], window=2)
print(len(pairs), "pairs:", ", ".join(f"({sentence[centre - 1]}, {sentence[context - 1]})"
                                     for centre, context in pairs))

# %% [markdown]
# On the IMDB reviews, with the 20,000-word vocabulary of section 6 (pairs with `[UNK]` left
# out): `word_vector_reviews` reviews, window `window`, `negatives` noise words per real pair,
# vectors of width `word_vector_dim`, one pass.

# %%
review_ids = keras.ops.convert_to_numpy(imdb_vectorizer(texts[:settings.word_vector_reviews]))
review_pairs = skipgram_pairs(review_ids, settings.window)
review_pairs = review_pairs[(review_pairs != 1).all(axis=1)]  # [UNK] stands for many words: no pair
counts = np.bincount(review_ids.ravel(), minlength=len(vocabulary))
counts[1] = 0
batches = SkipGramBatches(review_pairs, noise_distribution(counts), settings.negatives, settings.word_vector_batch,
                          seed=0)
keras.utils.set_random_seed(0)
word_model = SkipGram(len(vocabulary), settings.word_vector_dim)
word_model.compile(optimizer=keras.optimizers.Adam(settings.word_vector_learning_rate), loss="binary_crossentropy")
started = time.perf_counter()
word_model.fit(batches, epochs=1, verbose=0, callbacks=[epoch_progress()])
print(f"{len(review_pairs):,} pairs from {len(review_ids):,} reviews, {len(batches):,} batches: "
      f"{(time.perf_counter() - started) / 60:.1f} min")

# %%
vectors, index = word_model.word_vectors(), {word: i for i, word in enumerate(vocabulary)}
for word in ("good", "terrible", "actor", "funny", "horror", "music", "star", "play"):
    neighbours = nearest_words(vectors, vectors[index[word]], 6, exclude=(index[word],))
    print(f"{word:>9} -> " + ", ".join(f"{vocabulary[i]} ({cosine:.2f})" for i, cosine in neighbours))

# %% [markdown]
# **Analogies.** "a is to b as c is to ?" is answered by the word nearest to
# $v_b - v_a + v_c$ (the three question words left out; Mikolov et al., 2013c, §4, with the
# famous king − man + woman ≈ queen). Measured here: the expected answer's rank among the ten
# nearest words.

# %%
questions = [("man", "woman", "actor", "actress"), ("he", "she", "his", "her"), ("man", "woman", "king", "queen"),
             ("man", "woman", "uncle", "aunt"), ("good", "best", "bad", "worst"), ("movie", "movies", "film", "films")]
found = []
for a, b, c, expected in questions:
    answers = [vocabulary[i] for i, _ in analogy(vectors, index[a], index[b], index[c], count=10)]
    found.append(expected in answers)
    rank = answers.index(expected) + 1 if expected in answers else "not in the ten"
    print(f"{b} − {a} + {c} -> {', '.join(answers[:3]):<32} '{expected}': rank {rank}")
report_metric("analogies_in_top_10", float(np.mean(found)), f"skip-gram vectors: share of {len(questions)} "
              "analogies whose expected word is among the ten nearest")

# %% [markdown]
# **Reading the run** (the recorded full run). One pass over 20.7 million pairs took 3.7 minutes.
# The neighbours are words used in the same places: terrible → horrible, lousy, dreadful, awful;
# actor → actress, comedian, villain; music → cinematography, photography, editing, the parts of
# a film a review grades. Sharing contexts is not sharing meaning: good's neighbours include bad
# (0.75), and funny's nearest is scary, because reviews put opposites in the same slots ("the
# acting was good", "the acting was bad"). Five of the six analogies put the expected word first
# (actress, her, aunt, worst, films). king − man + woman gives author, barker, phil, and no queen
# in the ten; our guess, not checked, is that in film reviews "king" is more often a name
# (Stephen King, King Kong) than a monarch.
#
# > **The notes say** Word2Vec captures relationships "like (man + uncle) − aunt = woman". As
# > written the offsets point the wrong way: uncle − aunt is the male-minus-female direction, so
# > (man + uncle) − aunt is man moved further toward male, not woman. The relationship is
# > uncle − man + woman ≈ aunt (equivalently aunt − woman + man ≈ uncle), the form measured
# > above. The notes' own expression, on our vectors, lands among words for men — bloke, guy,
# > dude — with woman seventh, close to man, as the arithmetic says:

# %%
units = vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
notes_expression = units[index["man"]] + units[index["uncle"]] - units[index["aunt"]]
nearest = nearest_words(units, notes_expression, 5, exclude=(index["man"], index["uncle"], index["aunt"]))
print("(man + uncle) − aunt ->", ", ".join(f"{vocabulary[i]} ({cosine:.2f})" for i, cosine in nearest))
print("rank of 'woman':", next((rank for rank, (i, _) in enumerate(
    nearest_words(units, notes_expression, 50, exclude=(index["man"], index["uncle"], index["aunt"])), 1)
    if vocabulary[i] == "woman"), "not in the 50 nearest"))

# %% [markdown]
# **One vector a word is not enough.** Skip-gram gives "play" one vector whether it is a stage
# play or what an actor does: its neighbours above are all verbs (perform, imitate, compete), the
# noun lost in the average. "star" sits among icon and maverick; the star of a rating is nowhere.
# A river bank and a savings bank would share a vector too. **ELMo** (Peters et al., 2018, *Deep Contextualized Word Representations*,
# §3) gives each occurrence its own vector: a forward and a backward LSTM language model read the
# sentence, and a token's vector is a learned mix of their layers at its position — so it depends
# on the words around it. (The notes spell it "EIMo" and say it starts from Word2Vec vectors; its
# first layer is built from the word's characters, §3.4 of the paper.) Self-attention does the
# same with every word in view at once: the encoder of notebook 05 returns one vector per token
# *in its context*, and notebook 08 pre-trains one on these reviews.

# %% [markdown]
# ## Summary
#
# - Text becomes numbers in steps: standardise, tokenise, look up in a vocabulary (0 = padding,
#   1 = `[UNK]`), then pad or truncate to a fixed length.
# - Words, characters and subwords trade vocabulary size against sequence length and unknown
#   words.
# - Byte-pair encoding learns its subwords: merge the most frequent neighbouring pair, again and
#   again; on bytes, as GPT-2 does, it spells any text and never needs `[UNK]`.
# - Ties in word frequency are broken by a rule each implementation chooses: the notes, our
#   default and Keras give three different, equally valid vocabularies. Keep the vocabulary with
#   the model.
# - A learned embedding is a dense table; a lookup equals one-hot times the table, and
#   `mask_zero` marks the padding for later layers.
# - Word vectors can be learned from raw text: skip-gram with negative sampling puts words that
#   share contexts close together, and offsets between vectors can carry relationships — one
#   vector a word, whatever its sense, which contextual models (ELMo, then the Transformer) fix.
#
# ## Graded exercises
#
# Complete each function where it says `raise NotImplementedError(...)`, then run the cell after
# it: `check` tells you at once whether your function is right, and if not, what differs.
# The rest of the notebook does not depend on your answers. Four exercises, 8 points; our
# estimate of the time they take, not a measurement: about 75 minutes.
#
# ### Exercise 03.1 — vectorising with a vocabulary (2 points)
#
# Write `vectorize(text, vocabulary)`: standardise `text` as in section 1 (lower case, ASCII
# punctuation removed), split on whitespace, and map each word to its position in the list
# `vocabulary` (index 0 is padding, 1 is `[UNK]`); a word not in the vocabulary gets 1. Return
# an int64 NumPy array with one id per word.

# %% nbgrader={"grade": false, "grade_id": "exercise_03_1", "locked": false, "schema_version": 3, "solution": true}
def vectorize(text, vocabulary):
    """int64 (n_words,): the id of each word of `text` in `vocabulary`, 1 for unknown words."""
    ### BEGIN SOLUTION
    index = {word: position for position, word in enumerate(vocabulary)}
    words = text.lower().translate(str.maketrans("", "", string.punctuation)).split()
    return np.array([index.get(word, 1) for word in words], dtype="int64")
    ### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "check_03_1", "locked": true, "points": 2, "schema_version": 3, "solution": false}
from transformer_course.exercises import check

check("03.1", vectorize)
### BEGIN HIDDEN TESTS
from transformer_course_grader import evaluate_hidden

assert evaluate_hidden("03.1", vectorize, seed=7).passed
### END HIDDEN TESTS

# %% [markdown]
# ### Exercise 03.2 — one merge step of byte-pair encoding (2 points)
#
# Write `merge_step(words, counts)`: `words` is a list of str, each a word spelled as symbols
# separated by single spaces (`"n e w es t"`); `counts` is a list of int, how often each word
# occurs. Count every pair of neighbouring symbols, each occurrence weighted by its word's count;
# take the most frequent pair (if several are equally frequent, the one that comes first when
# the pairs are compared as tuples of two str — not the one counted first; the package compares
# token ids instead, which agrees on single ASCII characters, as in Sennrich's corpus, and can differ
# once a merged token ties with a byte); merge it in every
# word, scanning left to right so that `"a a a"` becomes `"aa a"`. Return `(pair, merged)`: the pair as `"first second"`, and the
# list of merged words in the same spelling.

# %% nbgrader={"grade": false, "grade_id": "exercise_03_2", "locked": false, "schema_version": 3, "solution": true}
def merge_step(words, counts):
    """words: symbols separated by spaces, counts: their frequencies -> ("a b", the words with a+b merged)."""
    ### BEGIN SOLUTION
    pairs = Counter()
    for word, count in zip(words, counts):
        symbols = word.split(" ")
        for pair in zip(symbols, symbols[1:]):
            pairs[pair] += count
    first, second = min(pairs, key=lambda pair: (-pairs[pair], pair))
    whole = re.compile(rf"(?<!\S){re.escape(first)} {re.escape(second)}(?!\S)")  # whole symbols, left to right
    return f"{first} {second}", [whole.sub(first + second, word) for word in words]
    ### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "check_03_2", "locked": true, "points": 2, "schema_version": 3, "solution": false}
check("03.2", merge_step)
### BEGIN HIDDEN TESTS
assert evaluate_hidden("03.2", merge_step, seed=7).passed
### END HIDDEN TESTS

# %% [markdown]
# ### Exercise 03.3 — encoding a word by merge rank (2 points)
#
# Training learns merges; encoding applies them. Write `encode_word(word, merges)`: `word` is a
# str, `merges` a list of str `"first second"` in the order they were learned (rank 0 first, as
# `merge_step` found them). Start from the word's characters; while some pair of neighbouring
# symbols is a learned merge, merge the pair of **lowest rank** — every occurrence of it, left to
# right — and look again. Return the list of symbols (str), which spell the word when joined.
# The leftmost mergeable pair is not always the right one: in a word where a later merge comes
# first, the earlier merge must still go first.

# %% nbgrader={"grade": false, "grade_id": "exercise_03_3", "locked": false, "schema_version": 3, "solution": true}
def encode_word(word, merges):
    """word: str, merges: ["a b", ...] in the order learned -> the word's symbols (list of str)."""
    ### BEGIN SOLUTION
    ranks = {tuple(merge.split(" ")): rank for rank, merge in enumerate(merges)}
    symbols = list(word)
    while len(symbols) > 1:
        best = min(zip(symbols, symbols[1:]), key=lambda pair: ranks.get(pair, len(ranks)))
        if best not in ranks:
            break
        merged, index = [], 0
        while index < len(symbols):
            if tuple(symbols[index:index + 2]) == best:
                merged.append(best[0] + best[1])
                index += 2
            else:
                merged.append(symbols[index])
                index += 1
        symbols = merged
    return symbols
    ### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "check_03_3", "locked": true, "points": 2, "schema_version": 3, "solution": false}
check("03.3", encode_word)
### BEGIN HIDDEN TESTS
assert evaluate_hidden("03.3", encode_word, seed=7).passed
### END HIDDEN TESTS

# %% [markdown]
# ### Exercise 03.4 — the skip-gram pairs of a sentence (2 points)
#
# Write `skipgram_pairs_of(token_ids, window)`: `token_ids` is a list of int ids (one sentence, no
# padding), `window` an int ≥ 1. Return the list of `(centre, context)` tuples of section 9: for
# each position i from left to right, the ids at positions i − `window` … i + `window` other than
# i itself that lie inside the sentence, from left to right.

# %% nbgrader={"grade": false, "grade_id": "exercise_03_4", "locked": false, "schema_version": 3, "solution": true}
def skipgram_pairs_of(token_ids, window):
    """token_ids: list of int, window >= 1 -> [(centre, context), ...] in sentence order."""
    ### BEGIN SOLUTION
    pairs = []
    for centre in range(len(token_ids)):
        for context in range(max(0, centre - window), min(len(token_ids), centre + window + 1)):
            if context != centre:
                pairs.append((token_ids[centre], token_ids[context]))
    return pairs
    ### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "check_03_4", "locked": true, "points": 2, "schema_version": 3, "solution": false}
check("03.4", skipgram_pairs_of)
### BEGIN HIDDEN TESTS
assert evaluate_hidden("03.4", skipgram_pairs_of, seed=7).passed
### END HIDDEN TESTS

# %% [markdown]
# ## Exercise (ungraded)
#
# Add a `tie_order="alphabetical"` option to `build_vocabulary`. Which ids does the notes'
# sentence get? Then adapt the IMDB vectoriser with a custom `standardize` function that also
# removes `<br />`, and check that "br" leaves the vocabulary.
