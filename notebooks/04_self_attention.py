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
# # 04 — Self-attention, queries, keys and values, multi-head attention
#
# [![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.research.google.com/github/transformer-course/transformer-course/blob/v0.1.0/release/04_self_attention.ipynb)
#
# **Run time:** full profile about 15 s on a 2-core CPU, smoke profile about 15 s (recorded runs). The profile comes from the environment variable `COURSE_PROFILE` (`full` or `smoke`): set it before starting Jupyter, or in Colab run `%env COURSE_PROFILE=smoke` before the first code cell. On Colab, a GPU runtime (Runtime, Change runtime type) trains on the GPU; the recorded times are CPU times. The outputs shown come from the recorded full-profile run; running a cell replaces its output with yours. In the smoke profile, run the exercises and their checks, and the cells whose output does not depend on the profile (shapes, worked examples, equalities with Keras): the accuracies, losses, curves, timings and samples it prints come from tiny data and a few steps and mean nothing; read the recorded ones.
#
# **What you will learn**
# - why one fixed vector per word is not enough, and how **self-attention** gives each word a
#   vector that depends on its sentence;
# - self-attention written with loops, then as one matrix expression;
# - **queries, keys and values**, traced shape by shape through a worked example;
# - why the scores are divided by $\sqrt{d_k}$ — measured, not asserted;
# - **multi-head attention** built from scratch, then checked number for number against Keras;
# - **masks** for padding and for the future (the causal mask);
# - why attention needs **positional information**, and three ways to give it.
#
# **Prerequisites:** notebook 02 (attention weights, context vectors) and notebook 03 (token ids
# and embeddings).

# %%
import subprocess
import sys

if "google.colab" in sys.modules:  # Colab only: install the course package, keep Colab's TensorFlow/Keras
    subprocess.run([sys.executable, "-m", "pip", "install", "-q",
                    "transformer-course @ git+https://github.com/transformer-course/transformer-course@v0.1.0"],
                   check=True)

import transformer_course as tc

settings = tc.start_notebook("04", seed=42)

# %%
import keras
import matplotlib.pyplot as plt
import numpy as np
from keras.ops import convert_to_numpy  # a tensor as a NumPy array

from transformer_course import (
    attention,  # attention.scaled_dot_product_attention: exercise 04.1 writes its own
    report_metric,
)
from transformer_course.attention import MultiHeadAttention
from transformer_course.masks import attention_mask, causal_mask, keras_mask, padding_mask
from transformer_course.positional import PositionalEmbedding, RelativePositionBias, sinusoidal_encoding


# %% [markdown]
# ## 1. One vector per word is not enough
#
# The notes open with a restaurant review of three sentences and two things one might want from
# it: is it positive, and *does this restaurant serve steak?* Count what it takes to hold it
# with a vector of 1,024 numbers for each word:

# %%
# NBVAL_CHECK_OUTPUT
review = ("The restaurant refused to serve me a ham sandwich because it only cooks vegetarian food. "
          "In the end, they just gave me two slices of bread. Their ambience was just as good as the food and service")
words = review.split()
print(f"{len(words)} words x 1,024 numbers = {len(words) * 1024:,} numbers for one short review")
print(f"a dense layer from those to as many outputs: {(len(words) * 1024) ** 2:,} weights, and another size for "
      "every other review length")

# %% [markdown]
# Two problems follow. The size grows with the text and differs from one review to the next, so
# one layer cannot take them all; the layers of this notebook apply the *same* weights at every
# position, whatever the length. And the answer about steak lives in "only cooks vegetarian
# food", far from "restaurant" and behind "it", which refers back to it: what a word means depends
# on the words around it, and which of them matter depends on the question. Start with the second
# problem.
#
# An embedding table gives a word the same vector in every sentence. "bank" in *the river bank*
# and in *the bank loan* are the same id, so they get the same row:

# %%
# NBVAL_CHECK_OUTPUT
vocabulary = {"the": 2, "river": 3, "bank": 4, "loan": 5}
embedding = keras.layers.Embedding(input_dim=6, output_dim=4)
first = convert_to_numpy(embedding(np.array([[2, 3, 4]])))[0]   # the river bank
second = convert_to_numpy(embedding(np.array([[2, 4, 5]])))[0]  # the bank loan
print("'bank' has the same vector in both sentences:", bool(np.array_equal(first[2], second[1])))

# %% [markdown]
# We want each word's vector to be **mixed with the words around it**, weighted by how relevant
# they are. That is attention again — but now a sequence attends to *itself*.
#
# ## 2. Self-attention, with loops
#
# For each word $i$: score it against every word $j$ with a dot product, scale by $\sqrt{d}$,
# softmax the scores into weights, and replace word $i$ by the weighted sum of all the words.

# %%
def softmax(x, axis=-1):
    """Numerically stable softmax."""
    exponentials = np.exp(x - x.max(axis=axis, keepdims=True))
    return exponentials / exponentials.sum(axis=axis, keepdims=True)


def self_attention_loops(X):
    """Self-attention over the rows of X (T, d), one word at a time; float64 output (T, d)."""
    X = np.asarray(X, dtype="float64")  # integer input (like the notes' example) must not truncate the output
    T, d = X.shape
    output = np.zeros((T, d))
    for i in range(T):
        scores = np.array([X[i] @ X[j] for j in range(T)]) / np.sqrt(d)  # (T,)
        weights = softmax(scores)
        output[i] = sum(weights[j] * X[j] for j in range(T))
    return output

# %% [markdown]
# The loops compute every pair of dot products, which is one matrix product: $X X^\top$. So
# self-attention in one line is
# $$\operatorname{SelfAttention}(X) = \operatorname{softmax}\!\left(\frac{X X^\top}{\sqrt d}\right) X .$$

# %%
# NBVAL_CHECK_OUTPUT
X = np.random.default_rng(0).normal(size=(5, 8))  # 5 words, width 8
vectorised = softmax(X @ X.T / np.sqrt(8)) @ X       # (T, T) weights times (T, d)
print("loops == matrices:", np.allclose(self_attention_loops(X), vectorised))
print("shapes: X", X.shape, "-> X X^T", (X @ X.T).shape, "-> output", vectorised.shape)

# %% [markdown]
# The lecture notes' three words, *How*, *Are*, *You*, with their 4-dimensional embeddings, through
# the same plain self-attention (scaled by $\sqrt 4 = 2$). The embeddings are integers; the loop
# works in floats, so nothing is rounded away:

# %%
# NBVAL_CHECK_OUTPUT
how_are_you = np.array([[1, 2, 3, 4], [2, 4, 8, 7], [1, 2, 1, 2]])  # How, Are, You: (T, d) = (3, 4)
with np.printoptions(precision=4, suppress=True):  # plain decimals, no 1e-04 notation
    print("scores X X^T / 2:\n", how_are_you @ how_are_you.T / 2)
    print("weights:\n", softmax(how_are_you @ how_are_you.T / 2))
    print("output:\n", self_attention_loops(how_are_you))

# %% [markdown]
# "Are" has the longest embedding, so its dot product with every word, itself included, is the
# largest, and after the softmax every row puts nearly all its weight on it: all three outputs
# come out close to *Are*'s own vector $[2, 4, 8, 7]$. Plain self-attention can only mix the input
# vectors by their raw similarity — which is why the next section adds learned projections.
#
# > **The notes say** the output for the first word "could be dominated by the actual word
# > itself". It can be, when a word's vector is the one most similar to it; here it is not: *How*
# > puts nearly all its weight on *Are* (the weights' first row), and so does every other word.
# > What dominates is the vector with the largest dot products, not the word's own.

# %% [markdown]
# ## 3. Queries, keys and values
#
# Plain self-attention has no parameters: for fixed inputs the weights are fixed. Three learned
# matrices give each word three roles:
#
# - a **query** $q = x W^Q$ — what this word is looking for;
# - a **key** $k = x W^K$ — what this word offers to be found by;
# - a **value** $v = x W^V$ — what this word hands over when it is attended to.
#
# $$\operatorname{Attention}(Q, K, V) = \operatorname{softmax}\!\left(\frac{Q K^\top}{\sqrt{d_k}}\right) V,
# \qquad Q = X W^Q,\; K = X W^K,\; V = X W^V .$$
#
# The lecture notes' example: three words with 4-dimensional embeddings and their $W^Q$
# ($d_{model} = 4$, $d_k = 3$):

# %%
# NBVAL_CHECK_OUTPUT
X = np.array([[1, 2, 3, 4],     # How
              [2, 4, 8, 7],     # Are
              [1, 2, 1, 2]])    # You            (T, d_model) = (3, 4)
W_Q = np.array([[1, 1, 1],
                [0, 0, 0],
                [2, 1, 1],
                [3, 2, 4]])     #                (d_model, d_k) = (4, 3)
Q = X @ W_Q                     #                (T, d_k) = (3, 3)
print("Q =\n", Q)
assert Q.tolist() == [[19, 12, 20], [39, 24, 38], [9, 6, 10]]

# %% [markdown]
# > **The notes say** the "Query matrix" is the 3 × 4 matrix of rows [1, 2, 3, 4], [2, 4, 8, 7],
# > [1, 2, 1, 2]: that is $X$ itself, the three embeddings. The queries are $X W^Q$, the 3 × 3
# > matrix above — as the notes' own shape line says, (3 × 4) times (4 × 3) gives 3 × 3.

# %% [markdown]
# The notes stop at $W^Q$. To finish the computation we choose small $W^K$ and $W^V$ of our own
# and follow every shape:

# %%
# NBVAL_CHECK_OUTPUT
W_K = np.array([[0, 1, 0], [1, 0, 0], [0, 0, 1], [1, 0, 1]]) / 10  # (d_model, d_k), our choice
W_V = np.array([[1, 0], [0, 1], [1, 1], [0, 0]])                  # (d_model, d_v), our choice
K, V = X @ W_K, X @ W_V                                            # (T, d_k), (T, d_v)
scores = Q @ K.T                                                   # (T, T)
weights = softmax(scores / np.sqrt(3))                             # (T, T), rows sum to 1
output = weights @ V                                               # (T, d_v)
for name, value in [("K", K), ("scores", scores), ("weights", weights), ("output", output)]:
    print(f"{name} {value.shape}:\n", np.round(value, 3))

# %% [markdown]
# Read row by row: every word, "How" included, puts nearly all its weight on "Are", whose key
# matches every query best, so every output is nearly "Are"'s value. With embeddings of integers
# this large the scores lie far apart even after scaling, and the softmax is close to a hard
# choice — the saturation that section 4 measures. Sizes never depend on the vocabulary, only on
# the sentence length $T$ and the widths $d_{model}, d_k, d_v$; the $T \times T$ score matrix is
# why attention's cost grows with the square of the length.
#
# ## 4. Why divide by $\sqrt{d_k}$?
#
# > **The notes say** the scores are divided by $\sqrt{n}$ with $n$ the *sequence length*, "to
# > penalize longer sequences", and correct a worked table's "score / 8" to "score / 3, since
# > n = 3". The divisor is $\sqrt{d_k}$, the width of the queries and keys (Vaswani et al., 2017,
# > §3.2.1), whatever the sentence length. With the paper's $d_k = 64$ it is 8, so the table's
# > "score / 8" was right; "/ 3" would also be the wrong root ($\sqrt 3 \approx 1.7$).
#
# If the entries of $q$ and $k$ have mean 0 and variance 1, their dot product is a sum of $d_k$
# such products: its variance is $d_k$. Large scores push the softmax towards a single 1 and
# zeros elsewhere, where its gradient vanishes. Measure it: random queries and 10 random keys
# at growing widths, with and without the scaling.

# %%
generator = np.random.default_rng(1)
rows = []
for width in settings.scaling_widths:
    q = generator.normal(size=(settings.scaling_samples, 1, width))
    k = generator.normal(size=(settings.scaling_samples, 10, width))
    raw = (q @ k.transpose(0, 2, 1))[:, 0]  # (samples, 10) dot products
    rows.append((width, raw.std(), softmax(raw).max(-1).mean(), softmax(raw / np.sqrt(width)).max(-1).mean()))
print(f"{'d_k':>6}{'score std':>11}{'max weight, raw':>17}{'max weight, scaled':>20}")
for width, spread, raw_max, scaled_max in rows:
    print(f"{width:>6}{spread:>11.1f}{raw_max:>17.3f}{scaled_max:>20.3f}")

# %%
widths = [row[0] for row in rows]
plt.figure(figsize=(6, 3.4))
plt.semilogx(widths, [row[2] for row in rows], "o-", label="softmax(q·k)")
plt.semilogx(widths, [row[3] for row in rows], "o-", label="softmax(q·k / √d_k)")
plt.axhline(0.1, color="grey", linestyle=":", label="uniform over 10 keys")
plt.xlabel("d_k"); plt.ylabel("mean largest weight"); plt.ylim(0, 1.05); plt.legend();
report_metric("max_weight_unscaled_largest_width", rows[-1][2],
              f"mean largest softmax weight, d_k={widths[-1]}, unscaled", headline=True)
report_metric("max_weight_scaled_largest_width", rows[-1][3],
              f"mean largest softmax weight, d_k={widths[-1]}, scaled by sqrt(d_k)")

# %% [markdown]
# The spread of the raw scores grows like $\sqrt{d_k}$ and the unscaled softmax saturates: at
# large widths nearly all weight lands on one key. Divided by $\sqrt{d_k}$ the scores keep unit
# spread at every width, and the weights stay soft enough to learn from.
#
# The package's `attention.scaled_dot_product_attention(query, key, value, mask=None)` returns the output
# and the weights, and gives the same numbers as the formula:

# %%
# NBVAL_CHECK_OUTPUT
package_output, package_weights = attention.scaled_dot_product_attention(Q.astype("float32"), K.astype("float32"),
                                                                         V.astype("float32"))
print("package == by hand:", np.allclose(convert_to_numpy(package_output), output, atol=1e-4),
      np.allclose(convert_to_numpy(package_weights), weights, atol=1e-5))

# %% [markdown]
# ## 5. Multi-head attention
#
# One attention can only average one way. **Multi-head attention** runs $N$ attentions side by
# side, each in its own $H$-dimensional subspace ($H = E / N$), and concatenates their outputs:
#
# 1. project $X$ with $W^Q, W^K, W^V$ of shape $(E, N, H)$ → per-head $Q, K, V$ of shape $(N, T, H)$;
# 2. scaled dot-product attention in each head → $(N, T, H)$;
# 3. concatenate the heads → $(T, N \cdot H)$ and project with $W^O$ back to $(T, E)$.
#
# The total cost is about that of one full-width head, and each head can learn a different
# relation (one may follow syntax, another coreference).
#
# **Notation, from here to notebook 10.** Section 3 used the paper's names; from here on shapes
# are written with one letter per axis, as in the package's docstrings, and each letter means one
# thing in every notebook:
#
# | letter | what it counts | the paper's name | argument in code |
# |---|---|---|---|
# | $B$ | sequences in a batch | | `batch_size` |
# | $T$ | query positions: the sequence that attends (the target) | $n$ | |
# | $S$ | key/value positions: the sequence attended to (the source); $S = T$ in self-attention | | |
# | $E$ | model width | $d_{model}$ | `embed_dim` |
# | $N$ | attention heads | $h$ | `num_heads` |
# | $H$ | head width, $H = E / N$ | $d_k = d_v = d_{model} / h$ | `key_dim` |
# | $F$ | feed-forward width (notebook 05) | $d_{ff}$ | `intermediate_dim` |
# | $D$ | stacked blocks, the depth (notebook 05) | $N$ | `num_layers` |
# | $L$ | positions a key/value cache holds (notebooks 07, 09) | | `max_length` |
# | $M$ | patches of one image (notebook 10) | $N$ in the ViT paper | |
# | $P$ | patch side, in pixels (notebook 10) | $P$ | `patch_size` |
#
# The Transformer paper's $N$ is the number of stacked blocks and the ViT paper's the number of
# patches; here $N$ is always heads, and an image's height and width are written out in words.
#
# > **The notes say** $X$ is $D \times N$, one **column** per word, and
# > $\mathbf{SA}[X] = V[X] \cdot \operatorname{Softmax}[K[X]^\top Q[X]]$ with the softmax over each
# > column. The course, as the paper and Keras, puts one **row** per word, $X$ of shape $(T, E)$,
# > and takes the softmax over each row of $Q K^\top$: the same computation transposed. Read the
# > notes' formulas with every matrix transposed and their order reversed.
#
# From scratch, for one sentence:

# %%
def multi_head_attention(X, W_Q, b_Q, W_K, b_K, W_V, b_V, W_O, b_O):
    """Multi-head self-attention of X (T, E); kernels (E, N, H), W_O (N, H, E)."""
    Q = np.einsum("te,enh->nth", X, W_Q) + b_Q[:, None]   # (N, T, H): split into heads
    K = np.einsum("te,enh->nth", X, W_K) + b_K[:, None]
    V = np.einsum("te,enh->nth", X, W_V) + b_V[:, None]
    H = Q.shape[-1]
    weights = softmax(Q @ K.transpose(0, 2, 1) / np.sqrt(H))  # (N, T, T)
    heads = weights @ V                                       # (N, T, H)
    return np.einsum("nth,nhe->te", heads, W_O) + b_O, weights  # concatenate + W_O: (T, E)

# %% [markdown]
# Keras' `MultiHeadAttention` stores its weights in exactly this layout, and so does the
# package's from-scratch layer. Copy Keras' weights into ours and into the function above, and
# all three agree:

# %%
# NBVAL_CHECK_OUTPUT
E, N = 8, 2
sentence = np.random.default_rng(2).normal(size=(1, 5, E)).astype("float32")  # (B, T, E)
keras_layer = keras.layers.MultiHeadAttention(num_heads=N, key_dim=E // N)
our_layer = MultiHeadAttention(num_heads=N, key_dim=E // N)
keras_output, keras_weights = keras_layer(sentence, sentence, return_attention_scores=True)
our_layer(sentence, sentence)
our_layer.set_weights(keras_layer.get_weights())
our_output, our_weights = our_layer(sentence, sentence, return_attention_scores=True)
scratch_output, scratch_weights = multi_head_attention(sentence[0], *keras_layer.get_weights())
print("weights:", [tuple(w.shape) for w in keras_layer.get_weights()])
print("ours == Keras:", np.allclose(convert_to_numpy(our_output), convert_to_numpy(keras_output), atol=1e-5),
      np.allclose(convert_to_numpy(our_weights), convert_to_numpy(keras_weights), atol=1e-5))
print("from scratch == Keras:", np.allclose(scratch_output, convert_to_numpy(keras_output)[0], atol=1e-5))

# %% [markdown]
# A common mistake (several well-known tutorials make it, and so does the notes' code:
# `MultiHeadAttention(num_heads=num_heads, key_dim=embed_dim)`) is `key_dim=embed_dim`, which
# makes every head as wide as the model and multiplies the attention parameters by $N$. With
# `key_dim = embed_dim // num_heads` the layer above has $4 (E \cdot E + E)$ parameters:

# %%
# NBVAL_CHECK_OUTPUT
print("4 x (E*E + E) =", 4 * (E * E + E), "; count_params() =", our_layer.count_params())
too_wide = MultiHeadAttention(num_heads=N, key_dim=E)
too_wide(sentence, sentence)
print("with key_dim=E:", too_wide.count_params(), "parameters")

# %% [markdown]
# ## 6. Masks
#
# The course uses one mask contract everywhere (`transformer_course.masks`): a boolean mask,
# **True = may attend / is a real token**; padding masks `(B, T)`, attention masks `(B, T, S)`,
# the causal mask `(T, T)`; masks combine with AND.
#
# - A **padding mask** stops every word from attending to padding.
# - A **causal mask** stops word $t$ from attending to words after it: a decoder that writes
#   left to right must not peek at the answer.
#
# > **The notes say** the future is masked because seeing it "could give away too much
# > information, becoming expensive". Cost has nothing to do with it: at inference the future
# > words do not exist yet, and in training (teacher forcing, notebook 07) they are the very
# > answers the decoder must predict, so attending to them would let it copy the next word instead
# > of learning to predict it — a model that then fails when it generates.
#
# > **The notes say** a mask "sets some neurons to 0 (as we do in Dropout)". It does neither. An
# > attention mask acts on the **scores**, before the softmax: a forbidden score is replaced by a
# > very negative number, so its weight comes out exactly 0 and the row's other weights still sum
# > to 1. And it is not random: it is fixed by the data (where the padding is, which positions
# > lie in the future), and applies at inference as in training. Dropout zeroes random
# > activations, in training only.

# %%
tokens = np.array([[5, 7, 3, 9, 0, 0]])  # four words, two padding
padding = padding_mask(tokens)                                   # (B, T)
both = attention_mask(padding, padding, causal=True)             # (B, T, T)
figure, axes = plt.subplots(1, 3, figsize=(11, 3.2))
key_padding = np.broadcast_to(convert_to_numpy(padding)[0], (6, 6))  # every query, masked keys
for axis, (title, mask) in zip(axes, [("padding (keys)", key_padding), ("causal", convert_to_numpy(causal_mask(6))),
                                      ("padding AND causal", convert_to_numpy(both)[0])]):
    axis.imshow(mask, cmap="Greys_r", vmin=0, vmax=1)
    axis.set_title(title); axis.set_xlabel("key position"); axis.set_ylabel("query position")
figure.tight_layout()

# %% [markdown]
# White means "may attend". Now check the two promises: no weight on padding or the future, and
# changing a later word never changes an earlier output.

# %%
# NBVAL_CHECK_OUTPUT
embedded = keras.layers.Embedding(10, E)(tokens)  # (B, T, E)
layer = MultiHeadAttention(num_heads=N, key_dim=E // N)
out, w = layer(embedded, embedded, query_mask=padding, value_mask=padding,
               use_causal_mask=True, return_attention_scores=True)
w = convert_to_numpy(w)[0]                                             # (N, T, T)
print("largest weight on the future:", float(w[:, ~np.tril(np.ones((6, 6), bool))].max()))
print("largest weight on padding (real queries):", float(w[:, :4, 4:].max()))
changed = convert_to_numpy(embedded).copy(); changed[0, 3] += 5.0      # change word 3 only
out_changed = layer(changed, changed, use_causal_mask=True)
print("outputs 0-2 unchanged:", np.allclose(convert_to_numpy(layer(embedded, embedded, use_causal_mask=True))[0, :3],
                                          convert_to_numpy(out_changed)[0, :3], atol=1e-6))

# %% [markdown]
# ## 7. Position
#
# Self-attention compares every word with every other word, but nothing in it says *where* a
# word is. Shuffle the words and the outputs are shuffled the same way — the layer cannot tell
# "dog bites man" from "man bites dog":
#
# > **The notes say** that after scrambling the sequence "the output of attention would stay the
# > same". Each *word's* output stays the same; the output *sequence* comes out scrambled in the
# > same way (attention is permutation-**equivariant**, as the check below shows). What is lost is
# > any dependence on position.

# %%
# NBVAL_CHECK_OUTPUT
X = np.random.default_rng(3).normal(size=(1, 5, E)).astype("float32")
permutation = np.array([3, 0, 4, 1, 2])
plain = convert_to_numpy(our_layer(X, X))[0]
shuffled = convert_to_numpy(our_layer(X[:, permutation], X[:, permutation]))[0]
print("attention(shuffled X) == shuffled attention(X):", np.allclose(shuffled, plain[permutation], atol=1e-5))

# %% [markdown]
# The fix is to add position information to each embedding. The original Transformer adds a
# fixed **sinusoidal encoding**: pairs of dimensions hold $\sin(t \omega_i)$ and $\cos(t \omega_i)$
# with frequencies $\omega_i = 1/10000^{2i/d}$ from one cycle per $2\pi$ positions down to one per
# $2\pi \cdot 10000$. The notes' picture, 50 positions by 128 dimensions:

# %%
table = sinusoidal_encoding(50, 128).astype("float64")  # (positions, dimensions)
plt.figure(figsize=(8, 3.6))
plt.pcolormesh(table, cmap="RdBu", vmin=-1, vmax=1)
plt.xlabel("dimension"); plt.ylabel("position"); plt.colorbar(label="value")
plt.title("sinusoidal positional encoding, 50 positions x 128 dimensions");

# %% [markdown]
# Check a few values against the formula by hand. Position 0 is $(0, 1, 0, 1, \dots)$; at
# position 1 the first pair is $(\sin 1, \cos 1)$; in 128 dimensions the second pair has
# frequency $10000^{-2/128} = 0.8660$:

# %%
# NBVAL_CHECK_OUTPUT
print("position 0, dims 0-3:", np.round(table[0, :4], 4).tolist())
print("position 1, dims 0-1:", np.round(table[1, :2], 4).tolist(),
      "; sin 1, cos 1 =", round(np.sin(1), 4), round(np.cos(1), 4))
frequency = 10000 ** (-2 / 128)
print("position 1, dims 2-3:", np.round(table[1, 2:4], 4).tolist(), "; by hand:",
      round(np.sin(frequency), 4), round(np.cos(frequency), 4))
print("position 7, dim 0:", round(float(table[7, 0]), 4), "; sin 7 =", round(np.sin(7), 4))

# %% [markdown]
# The whole encoding of one position, position 3, in $d = 128$ dimensions: the first pairs turn
# fast ($\sin 3, \cos 3$, ...), the last ones barely move from $(0, 1)$.

# %%
# NBVAL_CHECK_OUTPUT
print(np.array2string(table[3], precision=3, suppress_small=True, max_line_width=100, threshold=200))

# %% [markdown]
# **Why sines and cosines can encode order at all.** The notes ask it, and list what a positional
# encoding must do: give every position its own vector; keep the same distance between two
# positions whatever the sentence's length; carry on to sequences longer than any seen; stay
# bounded; and be deterministic. Each, checked on the course's own table, for 2,000 positions (40
# times the picture's):

# %%
long = sinusoidal_encoding(2000, 128).astype("float64")  # positions 0-1999
squared = (long ** 2).sum(axis=1)
distance = np.sqrt(np.maximum(squared[:, None] + squared[None, :] - 2 * long @ long.T, 0))  # (2000, 2000)
print(f"1. unique: the two closest of 2,000 positions are {distance[~np.eye(2000, dtype=bool)].min():.2f} apart")
print("2. the distance from t to t + k, over every t:", ", ".join(
    f"k = {k}: {np.diag(distance, k).min():.3f} to {np.diag(distance, k).max():.3f}" for k in (1, 5, 50)))
print("   position t's vector is the same in a sentence of 50 or 2,000:",
      np.allclose(sinusoidal_encoding(50, 128), sinusoidal_encoding(2000, 128)[:50]))
print("3. any position has one: the formula needs only t (2 above holds up to t = 1,999, far past 50)")
print(f"4. bounded: every value in [{long.min():.0f}, {long.max():.0f}], every vector of length "
      f"{np.linalg.norm(long, axis=1).min():.3f} to {np.linalg.norm(long, axis=1).max():.3f} (√64 = 8)")
print("5. deterministic: no parameter, no randomness; two calls equal:",
      np.array_equal(sinusoidal_encoding(2000, 128), sinusoidal_encoding(2000, 128)))

# %% [markdown]
# Why criterion 2 holds is the answer to the notes' question. Moving $k$ positions turns each pair
# of dimensions $(\sin t\omega_i, \cos t\omega_i)$ by the angle $k\omega_i$, whatever $t$ is:
# $\mathrm{PE}(t + k) = R_k\,\mathrm{PE}(t)$, with $R_k$ one $2 \times 2$ rotation per pair
# (the angle-sum formulas). So a fixed linear map takes any position to the one $k$ later, and a
# dot product sees only the offset: $\mathrm{PE}(s) \cdot \mathrm{PE}(t) = \sum_i \cos((s - t)\omega_i)$.
# Numerically:

# %%
def rotation(k, dimensions=128):
    """The (d, d) matrix R_k with PE(t + k) = R_k PE(t) for every t: one 2 x 2 rotation per pair of dimensions."""
    matrix = np.zeros((dimensions, dimensions))
    for i, frequency in enumerate(10000 ** (-np.arange(0, dimensions, 2) / dimensions)):
        cos, sin = np.cos(k * frequency), np.sin(k * frequency)
        matrix[2 * i:2 * i + 2, 2 * i:2 * i + 2] = [[cos, sin], [-sin, cos]]
    return matrix


for k in (1, 7, 300):
    error = np.abs(long[k:] - long[:-k] @ rotation(k).T).max()
    print(f"PE(t + {k}) = R_{k} PE(t) for all t up to {1999 - k}: largest difference {error:.1e} (float32 table)")
dots = long[:1000] @ long[:1000].T
print("PE(s)·PE(t) depends on s - t alone (every diagonal constant):",
      max(np.ptp(np.diag(dots, k)) for k in range(0, 1000, 37)) < 1e-3)

# %% [markdown]
# Notebook 11's **rotary position embedding** (RoFormer, Su et al., 2021) uses this rotation
# directly: instead of adding $\mathrm{PE}(t)$ to the input, it rotates each query and key by its
# position's angles, so the score $q_s \cdot k_t$ depends on the offset $s - t$ by construction.

# %% [markdown]
# Two alternatives. A **learned position embedding** (BERT) is a second embedding table indexed
# by position, added to the token embedding; `PositionalEmbedding` does this and passes the
# padding mask on, so attention layers after it ignore the padding:

# %%
# NBVAL_CHECK_OUTPUT
positional = PositionalEmbedding(sequence_length=6, vocabulary_size=10, embed_dim=E)
vectors = positional(tokens)                                      # (B, T, E)
print("token + position:", tuple(vectors.shape), "; padding mask:",
      convert_to_numpy(keras_mask(vectors))[0].tolist())
shuffled_tokens = tokens[:, [1, 0, 2, 3, 4, 5]]
print("order now changes the vectors:", not np.allclose(convert_to_numpy(positional(shuffled_tokens))[0, 0],
                                                         convert_to_numpy(vectors)[0, 1]))

# %% [markdown]
# > **The notes say**, in their table of relative offsets for four words, "−3, −2, 1, 0, 1, 2,
# > 3": the third is −1 (their own list above the table has it right). With $T$ words the offsets
# > run from $-(T - 1)$ to $T - 1$, $2T - 1$ of them; the layer below clips them at a maximum
# > distance (2 here: five entries, −2 to +2).
#
# A **relative position bias** (Shaw et al. 2018; T5) encodes not where a word is but how far
# apart two words are: one learned number per head and offset $s - t$ (clipped at a maximum
# distance), added to the attention scores before the softmax. The same offset means the same
# thing anywhere in a sentence of any length. With a maximum distance of 2 and a table whose
# entries we set by hand to $-|s - t|$ — "prefer nearby words":

# %%
# NBVAL_CHECK_OUTPUT
relative = RelativePositionBias(num_heads=1, max_distance=2)
relative.table.assign(np.array([[-2.0, -1.0, 0.0, -1.0, -2.0]]))  # offsets -2, -1, 0, +1, +2
print("bias (T=5):\n", convert_to_numpy(relative.bias(5))[0])
uniform_scores = np.zeros((1, 1, 5, 5), "float32")               # attention with no preference
word_2 = convert_to_numpy(keras.ops.softmax(relative(uniform_scores), axis=-1))[0, 0, 2].astype("float64")
print("weights of word 2:", np.round(word_2, 3).tolist())

# %% [markdown]
# ## Summary
#
# - Self-attention replaces each word's vector by a weighted average of all the words in its
#   sentence: $\operatorname{softmax}(Q K^\top / \sqrt{d_k})\, V$.
# - Queries, keys and values are three learned projections of the same embeddings; the score
#   matrix is $T \times T$.
# - Without the $1/\sqrt{d_k}$ scaling, wide heads saturate the softmax (measured above).
# - Multi-head attention splits the width into $N$ heads of $E/N$, attends in each, concatenates
#   and projects with $W^O$ — and our layer equals Keras' to $10^{-5}$.
# - Masks (True = may attend) keep attention off padding and, in a decoder, off the future.
# - Attention alone ignores order; sinusoidal encodings, learned position embeddings or relative
#   position biases put it back.
#
# ## Graded exercises
#
# Complete each function where it says `raise NotImplementedError(...)`, then run the cell after
# it: `check` tells you at once whether your function is right, and if not, what differs.
# The rest of the notebook does not depend on your answers. Six exercises, 12 points; our
# estimate of the time they take, not a measurement: about 90 minutes (04.5 the longest, about
# 30).
#
# ### Exercise 04.1 — scaled dot-product attention with a mask (3 points)
#
# Write `scaled_dot_product_attention(query, key, value, mask=None)` in NumPy for arrays of shape
# `(..., T, d)`, `(..., S, d)`, `(..., S, d_v)`, and an optional bool `mask` that broadcasts to
# `(..., T, S)` (True = may attend). Return `(output, weights)`, shapes `(..., T, d_v)` and
# `(..., T, S)`. Masked positions must get weight exactly 0; a row with no allowed position gets
# all-zero weights (and a zero output). Subtract the row maximum before `exp` for stability.

# %% nbgrader={"grade": false, "grade_id": "exercise_04_1", "locked": false, "schema_version": 3, "solution": true}
def scaled_dot_product_attention(query, key, value, mask=None):
    """(output (..., T, d_v), weights (..., T, S)) = softmax(Q Kᵀ / √d) V, masked positions weighted 0."""
    ### BEGIN SOLUTION
    scores = query @ np.swapaxes(key, -1, -2) / np.sqrt(query.shape[-1])
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
    peak = np.max(scores, axis=-1, keepdims=True)
    weights = np.exp(scores - np.where(np.isfinite(peak), peak, 0.0))
    total = weights.sum(axis=-1, keepdims=True)
    weights = np.divide(weights, total, out=np.zeros_like(weights), where=total > 0)
    return weights @ value, weights
    ### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "check_04_1", "locked": true, "points": 3, "schema_version": 3, "solution": false}
from transformer_course.exercises import check

check("04.1", scaled_dot_product_attention)
### BEGIN HIDDEN TESTS
from transformer_course_grader import evaluate_hidden

assert evaluate_hidden("04.1", scaled_dot_product_attention, seed=7).passed
### END HIDDEN TESTS

# %% [markdown]
# ### Exercise 04.2 — splitting into heads (1 point)
#
# Write `split_heads(x, num_heads)`: `(B, T, E)` → `(B, N, T, E/N)`, head n holding features
# `n·E/N … (n+1)·E/N − 1` of every position.

# %% nbgrader={"grade": false, "grade_id": "exercise_04_2", "locked": false, "schema_version": 3, "solution": true}
def split_heads(x, num_heads):
    """(B, T, E) -> (B, N, T, E // N)."""
    ### BEGIN SOLUTION
    batch, length, width = x.shape
    return x.reshape(batch, length, num_heads, width // num_heads).transpose(0, 2, 1, 3)
    ### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "check_04_2", "locked": true, "points": 1, "schema_version": 3, "solution": false}
check("04.2", split_heads)
### BEGIN HIDDEN TESTS
assert evaluate_hidden("04.2", split_heads, seed=7).passed
### END HIDDEN TESTS

# %% [markdown]
# ### Exercise 04.3 — merging heads (1 point)
#
# Write `merge_heads(x)`, the inverse of `split_heads`: `(B, N, T, H)` → `(B, T, N·H)`.

# %% nbgrader={"grade": false, "grade_id": "exercise_04_3", "locked": false, "schema_version": 3, "solution": true}
def merge_heads(x):
    """(B, N, T, H) -> (B, T, N * H)."""
    ### BEGIN SOLUTION
    batch, heads, length, head_width = x.shape
    return x.transpose(0, 2, 1, 3).reshape(batch, length, heads * head_width)
    ### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "check_04_3", "locked": true, "points": 1, "schema_version": 3, "solution": false}
check("04.3", merge_heads)
### BEGIN HIDDEN TESTS
assert evaluate_hidden("04.3", merge_heads, seed=7).passed
### END HIDDEN TESTS

# %% [markdown]
# ### Exercise 04.4 — the sinusoidal positional encoding (2 points)
#
# Write `positional_encoding_table(length, depth)`: the float table `(length, depth)` of section
# 7, `P[t, 2i] = sin(t / 10000^(2i/depth))` and `P[t, 2i + 1] = cos(t / 10000^(2i/depth))` for
# positions `t = 0 … length − 1` and an even `depth`. The first public case is the notes' example:
# positions 0 to 3 in 128 dimensions (row 3 is the one printed in section 7).

# %% nbgrader={"grade": false, "grade_id": "exercise_04_4", "locked": false, "schema_version": 3, "solution": true}
def positional_encoding_table(length, depth):
    """float (length, depth): sine in the even columns, cosine in the odd ones, one frequency per pair."""
    ### BEGIN SOLUTION
    angles = np.arange(length)[:, None] / 10000 ** (np.arange(0, depth, 2) / depth)  # (T, depth / 2)
    table = np.zeros((length, depth))
    table[:, 0::2], table[:, 1::2] = np.sin(angles), np.cos(angles)
    return table
    ### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "check_04_4", "locked": true, "points": 2, "schema_version": 3, "solution": false}
check("04.4", positional_encoding_table)
### BEGIN HIDDEN TESTS
assert evaluate_hidden("04.4", positional_encoding_table, seed=7).passed
### END HIDDEN TESTS

# %% [markdown]
# ### Exercise 04.5 — multi-head attention from its weights (3 points)
#
# Write `multi_head_attention_forward(query, value, weights, mask=None)`: the whole layer of
# section 5 for a batch, with the keys computed from `value` as Keras' layer does when no `key`
# is given. `query` is float `(B, T, E)`, `value` `(B, S, E)`; `weights` is a dict in Keras'
# `MultiHeadAttention` layout: `"query_kernel"`, `"key_kernel"`, `"value_kernel"` `(E, N, H)`,
# `"query_bias"`, `"key_bias"`, `"value_bias"` `(N, H)`, `"output_kernel"` `(N, H, E)` and
# `"output_bias"` `(E,)`, with N heads of width H (read N and H from the kernel's shape);
# `mask` is None or bool `(B, T, S)`, True = may attend (every query keeps at least one key).
# Return the output `(B, T, E)`. You may reuse your `scaled_dot_product_attention` and
# `merge_heads`.

# %% nbgrader={"grade": false, "grade_id": "exercise_04_5", "locked": false, "schema_version": 3, "solution": true}
def multi_head_attention_forward(query, value, weights, mask=None):
    """query (B, T, E), value (B, S, E), Keras' weights, mask (B, T, S) or None -> output (B, T, E)."""
    ### BEGIN SOLUTION
    def project(x, name):  # (B, L, E) -> (B, N, L, H)
        return np.einsum("ble,enh->bnlh", x, weights[f"{name}_kernel"]) + weights[f"{name}_bias"][:, None, :]

    q, k, v = project(query, "query"), project(value, "key"), project(value, "value")
    heads, _ = scaled_dot_product_attention(q, k, v, None if mask is None else mask[:, None])  # (B, N, T, H)
    return np.einsum("bnth,nhe->bte", heads, weights["output_kernel"]) + weights["output_bias"]
    ### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "check_04_5", "locked": true, "points": 3, "schema_version": 3, "solution": false}
check("04.5", multi_head_attention_forward)
### BEGIN HIDDEN TESTS
assert evaluate_hidden("04.5", multi_head_attention_forward, seed=7).passed
### END HIDDEN TESTS

# %% [markdown]
# ### Exercise 04.6 — the self-attention mask of a padded batch (2 points)
#
# Write `self_attention_mask(token_ids, causal)`, the mask section 6 drew, in NumPy: `token_ids`
# is int `(B, T)` with `0` as padding, `causal` a bool. Return the bool mask `(B, T, T)`, True =
# may attend: entry `[b, i, j]` is True when positions `i` and `j` of sequence `b` both hold real
# tokens (a padded query attends to nothing, as `attention_mask` makes it) and, when `causal`,
# `j ≤ i`. The first public case is section 6's batch, `[[5, 7, 3, 9, 0, 0]]`, causal.

# %% nbgrader={"grade": false, "grade_id": "exercise_04_6", "locked": false, "schema_version": 3, "solution": true}
def self_attention_mask(token_ids, causal):
    """int (B, T), 0 = padding, and a bool -> bool (B, T, T): query i may attend key j."""
    ### BEGIN SOLUTION
    real = np.asarray(token_ids) != 0                          # (B, T)
    mask = real[:, :, None] & real[:, None, :]                 # both real: (B, T, T)
    if causal:
        mask &= np.tril(np.ones((real.shape[1],) * 2, bool))   # key j <= query i
    return mask
    ### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "check_04_6", "locked": true, "points": 2, "schema_version": 3, "solution": false}
check("04.6", self_attention_mask)
### BEGIN HIDDEN TESTS
assert evaluate_hidden("04.6", self_attention_mask, seed=7).passed
### END HIDDEN TESTS

# %% [markdown]
# ## Exercise (ungraded)
#
# Extend `multi_head_attention` with a `mask` argument (True = may attend) and check it against
# `our_layer` with `use_causal_mask=True`. Then use `RelativePositionBias` inside your function:
# add its bias to the scores before the softmax.
