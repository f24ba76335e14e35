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
# # 05 — The Transformer encoder block
#
# [![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.research.google.com/github/transformer-course/transformer-course/blob/v0.1.0/release/05_transformer_encoder.ipynb)
#
# **Run time:** full profile about 5 s on a 2-core CPU, smoke profile about 5 s (recorded runs). The profile comes from the environment variable `COURSE_PROFILE` (`full` or `smoke`): set it before starting Jupyter, or in Colab run `%env COURSE_PROFILE=smoke` before the first code cell. On Colab, a GPU runtime (Runtime, Change runtime type) trains on the GPU; the recorded times are CPU times. The outputs shown come from the recorded full-profile run; running a cell replaces its output with yours. In the smoke profile, run the exercises and their checks, and the cells whose output does not depend on the profile (shapes, worked examples, equalities with Keras): the accuracies, losses, curves, timings and samples it prints come from tiny data and a few steps and mean nothing; read the recorded ones.
#
# **What you will learn**
# - the four ingredients of an encoder block: multi-head self-attention, **residual
#   connections**, **layer normalisation** and a **position-wise feed-forward** network;
# - why residual connections make deep stacks trainable — measured on gradients;
# - which axis LayerNorm normalises, and why Transformers use it instead of BatchNorm;
# - how blocks stack into an encoder, and how many parameters one block has, by hand.
#
# **Prerequisites:** notebook 04 (multi-head attention, masks, positional embeddings).

# %%
import subprocess
import sys

if "google.colab" in sys.modules:  # Colab only: install the course package, keep Colab's TensorFlow/Keras
    subprocess.run([sys.executable, "-m", "pip", "install", "-q",
                    "transformer-course @ git+https://github.com/transformer-course/transformer-course@v0.1.0"],
                   check=True)

import transformer_course as tc

settings = tc.start_notebook("05", seed=42)

# %%
import keras
import matplotlib.pyplot as plt
import numpy as np
import tensorflow as tf
from keras.ops import convert_to_numpy  # a tensor as a NumPy array

from transformer_course import report_metric
from transformer_course.masks import keras_mask
from transformer_course.positional import PositionalEmbedding
from transformer_course.transformer import TransformerEncoder


# %% [markdown]
# ## 1. The block
#
# One encoder block (Vaswani et al. 2017, §3.1) maps a sequence of $T$ vectors of width $E$ to
# another sequence of the same shape, in two sub-layers, each wrapped the same way:
#
# $$
# \begin{aligned}
# x &\leftarrow \operatorname{LayerNorm}\big(x + \operatorname{Dropout}(\operatorname{MultiHeadSelfAttention}(x))\big)\\
# x &\leftarrow \operatorname{LayerNorm}\big(x + \operatorname{Dropout}(\operatorname{FFN}(x))\big),
# \qquad \operatorname{FFN}(x) = W_2\,\operatorname{ReLU}(W_1 x + b_1) + b_2 .
# \end{aligned}
# $$
#
# Attention mixes information **between** positions; the feed-forward network transforms each
# position **on its own**. The rest — the "$x +$" and the LayerNorm — is what lets many such
# blocks be stacked. We look at each piece, then at the package's `TransformerEncoder`.
#
# ## 2. Residual connections
#
# A residual connection adds a sub-layer's input to its output: $y = x + F(x)$. The sub-layer
# only has to learn a *correction* to its input, and the gradient has a direct path back:
# $\partial y / \partial x = I + \partial F / \partial x$ stays close to the identity even when
# $\partial F / \partial x$ is tiny. Measure it on the textbook case: a stack of 20 dense layers
# with sigmoid activations (whose slope is at most 1/4), fitted to a random target, with and
# without residual connections — one backward pass, the gradient norm at every layer.

# %%
def gradient_norms(residual):
    """Per-layer kernel gradient norms of a deep sigmoid stack on one random batch."""
    keras.utils.set_random_seed(0)
    layers = [keras.layers.Dense(settings.width, activation="sigmoid") for _ in range(settings.depth)]
    x = tf.random.normal((settings.batch_size, settings.width), seed=1)
    target = tf.random.normal((settings.batch_size, settings.width), seed=2)
    with tf.GradientTape() as tape:
        h = x
        for layer in layers:
            h = h + layer(h) if residual else layer(h)
        loss = tf.reduce_mean(tf.square(h - target))
    gradients = tape.gradient(loss, [layer.kernel for layer in layers])
    return np.array([float(tf.norm(g)) for g in gradients])

# %%
plain, residual = gradient_norms(residual=False), gradient_norms(residual=True)
layers_axis = np.arange(1, settings.depth + 1)
plt.figure(figsize=(7, 3.4))
plt.semilogy(layers_axis, plain, "o-", label="plain stack")
plt.semilogy(layers_axis, residual, "o-", label="with residual connections")
plt.xticks(layers_axis[::2] if settings.depth > 12 else layers_axis)  # whole layer numbers only
plt.xlabel("layer (1 = nearest the input)"); plt.ylabel("gradient norm of the kernel"); plt.legend();
print(f"layer 1: plain {plain[0]:.1e}, residual {residual[0]:.1e}; "
      f"top layer: plain {plain[-1]:.1e}, residual {residual[-1]:.1e}")
report_metric("first_layer_gradient_orders_of_magnitude", np.log10(residual[0] / plain[0]),
              f"log10 of the layer-1 gradient norm, residual / plain, {settings.depth} sigmoid layers", headline=True)

# %% [markdown]
# In the plain stack every layer multiplies the gradient by a sigmoid slope of at most 1/4, so
# by the time it reaches the first layers it has all but vanished: those layers cannot learn
# (the **vanishing gradient**). With residual connections the first layer still receives a
# usable gradient, within two orders of magnitude of the top layer's instead of a dozen. This is why
# the Transformer, ResNets and most deep networks since wrap their sub-layers this way.
# (Careful initialisation is the other half of the story — see the exercise.)
#
# ## 3. LayerNorm, not BatchNorm
#
# Both subtract a mean and divide by a standard deviation, then apply a learned scale and shift.
# They differ in **which numbers** they average over. Take a batch of 2 sequences of 3 tokens
# with 4 features:

# %%
# NBVAL_CHECK_OUTPUT
x = np.arange(24, dtype="float32").reshape(2, 3, 4) ** 1.5   # (B, T, E), uneven on purpose
layer_normalization = keras.layers.LayerNormalization(epsilon=1e-5)
batch_normalization = keras.layers.BatchNormalization(axis=-1, epsilon=1e-5)
by_layer = convert_to_numpy(layer_normalization(x))
by_batch = convert_to_numpy(batch_normalization(x, training=True))
print("LayerNorm: each token has mean 0 and std 1 over its 4 features:",
      np.allclose(by_layer.mean(-1), 0, atol=1e-5), np.allclose(by_layer.std(-1), 1, atol=1e-2))
print("BatchNorm: each feature has mean 0 and std 1 over the 6 tokens of the batch:",
      np.allclose(by_batch.mean((0, 1)), 0, atol=1e-5), np.allclose(by_batch.std((0, 1)), 1, atol=1e-2))
print("BatchNorm, each token's mean over its features (not 0):\n", np.round(by_batch.mean(-1).astype("float64"), 2))

# %% [markdown]
# **LayerNorm** normalises each token over its own $E$ features: every token is treated alone,
# whatever else is in the batch. **BatchNorm** normalises each feature over all tokens of all
# sequences in the batch. For text that is a poor fit: the statistics change with batch
# composition and sequence length, padding tokens would leak into them, and at inference the
# model must fall back to running averages. LayerNorm behaves the same in training and
# inference, for a batch of one, and ignores what the other sequences contain.
#
# > **The notes say** $\operatorname{LayerNorm}(x) = \gamma \odot \frac{x - \mu}{\sigma + \epsilon} + \beta$.
# > Keras, PyTorch and the paper that introduced it (Ba et al., 2016) put ε under the root,
# > $\frac{x - \mu}{\sqrt{\sigma^2 + \epsilon}}$, as the exercise below does; the two differ
# > noticeably only when a token's features barely vary, where ε under the root keeps the
# > division away from zero by √ε rather than ε.
#
# ## 4. The feed-forward network works position by position
#
# The same two dense layers are applied to every position separately. So running them on the
# whole sequence equals running them on each token alone, and changing one token changes only
# that token's output:

# %%
# NBVAL_CHECK_OUTPUT
hidden, output = keras.layers.Dense(32, activation="relu"), keras.layers.Dense(16)
sequence = np.random.default_rng(0).normal(size=(1, 5, 16)).astype("float32")   # (B, T, E)
whole = convert_to_numpy(output(hidden(sequence)))                               # (B, T, E)
one_by_one = np.stack([convert_to_numpy(output(hidden(sequence[:, t]))) for t in range(5)], axis=1)
print("whole sequence == each position alone:", np.allclose(whole, one_by_one, atol=1e-6))
changed = sequence.copy(); changed[0, 2] += 1.0
difference = np.abs(convert_to_numpy(output(hidden(changed))) - whole).max(axis=-1)[0]
print("positions whose output changed:", np.flatnonzero(difference > 1e-6).tolist())

# %% [markdown]
# ## 5. The package's `TransformerEncoder`
#
# `TransformerEncoder(intermediate_dim, num_heads, dropout, normalize_first=False)` puts the pieces
# together. The head width is `key_dim = E // num_heads` (not `E`, a common tutorial mistake
# that multiplies the attention parameters by the number of heads), and `normalize_first=True`
# gives the **pre-norm** variant, $x \leftarrow x + F(\operatorname{LayerNorm}(x))$, which
# trains deep stacks more stably. It reads the padding mask that `PositionalEmbedding` attaches,
# so no token attends to padding, and passes it on:

# %%
# NBVAL_CHECK_OUTPUT
tokens = np.array([[12, 7, 431, 5, 0, 0]])                     # one review, two padding tokens
embedded = PositionalEmbedding(sequence_length=6, vocabulary_size=500, embed_dim=32)(tokens)
encoder = TransformerEncoder(intermediate_dim=64, num_heads=4)
encoded, weights = encoder(embedded, return_attention_scores=True)
print("in", tuple(embedded.shape), "-> out", tuple(encoded.shape), "; heads x T x T:", tuple(weights.shape)[1:])
print("attention on padding:", float(convert_to_numpy(weights)[0, :, :4, 4:].max()))
print("mask passed on:", convert_to_numpy(keras_mask(encoded))[0].tolist())

# %% [markdown]
# The block is short enough to write out. Below, one post-norm block by hand with the layer's own
# sub-layers — `attention`, `attention_norm`, `feedforward_hidden`, `feedforward_output`,
# `feedforward_norm` — and the same padding mask. (Dropout is off outside training, so it does
# not appear.) It must give what `encoder` gave:

# %%
# NBVAL_CHECK_OUTPUT
x = convert_to_numpy(embedded)        # (B, T, E)
key_mask = (tokens != 0)[:, None, :]  # (B, 1, T): no query attends to padding
# 1. attention sub-layer
x = convert_to_numpy(encoder.attention_norm(x + encoder.attention(x, x, attention_mask=key_mask)))
# 2. feed-forward
x = convert_to_numpy(encoder.feedforward_norm(x + encoder.feedforward_output(encoder.feedforward_hidden(x))))
same = np.allclose(x[0, :4], convert_to_numpy(encoded)[0, :4], atol=1e-5)
print("by hand == TransformerEncoder:", same, "(real tokens)")

# %% [markdown]
# The tests check that this layer matches `keras_hub.layers.TransformerEncoder` number for number
# when given the same weights, that adding padding to a review changes nothing for its real
# tokens, and that it survives a save and reload.
#
# ## 6. Parameters, by hand
#
# With width $E$ and feed-forward width $F$, one block holds:
#
# | part | parameters |
# |---|---|
# | attention: $W^Q, W^K, W^V, W^O$ and biases | $4(E^2 + E)$ |
# | two LayerNorms (scale and shift) | $2 \cdot 2E$ |
# | feed-forward $W_1, b_1$ and $W_2, b_2$ | $EF + F + FE + E$ |
#
# The number of heads does not appear: it splits $E$, it does not add to it. For the original
# Transformer's base model, $E = 512$, $F = 2048$, 8 heads:

# %%
# NBVAL_CHECK_OUTPUT
def block_parameters(E, F):
    """Parameters of one encoder block, from the table above."""
    return 4 * (E * E + E) + 2 * 2 * E + (E * F + F + F * E + E)


base = TransformerEncoder(intermediate_dim=2048, num_heads=8)
base.build((None, None, 512))
print(f"by hand: {block_parameters(512, 2048):,}   count_params(): {base.count_params():,}")
assert block_parameters(512, 2048) == base.count_params()

# %% [markdown]
# ## 7. Stacking blocks
#
# An encoder is $D$ such blocks in a row (the depth; $D = 6$ in the paper, which calls it $N$), each
# with **its own** weights:
# the same architecture, learning different things. The output of one is the input of the next,
# so the shape never changes and the padding mask travels all the way through.

# %%
# NBVAL_CHECK_OUTPUT
stack = [TransformerEncoder(intermediate_dim=64, num_heads=4, name=f"encoder_{i}") for i in range(6)]
x = embedded
for block in stack:
    x = block(x)                                               # (B, T, E) every time
shared = any(a is b for i, block in enumerate(stack) for a in block.weights
             for other in stack[i + 1:] for b in other.weights)
print("output", tuple(x.shape), "; any weight shared between blocks:", shared)
print("parameters: 6 x", f"{block_parameters(32, 64):,}", "=", f"{sum(b.count_params() for b in stack):,}")
print("mask after 6 blocks:", convert_to_numpy(keras_mask(x))[0].tolist())

# %% [markdown]
# ## Summary
#
# - An encoder block is self-attention (between positions) and a feed-forward network (within
#   each position), each wrapped in dropout, a residual connection and LayerNorm.
# - Residual connections give the gradient a direct path: in a 20-layer sigmoid stack the first
#   layer's gradient is many orders of magnitude larger with them (measured above).
# - LayerNorm normalises each token over its features, so it does not depend on the batch, the
#   sequence length or padding; BatchNorm normalises each feature over the batch.
# - One block has $4(E^2+E) + 4E + 2EF + F + E$ parameters, whatever the number of heads; a
#   stack repeats it with fresh weights.
#
# Notebook 06 puts a stack of these blocks to work on IMDB reviews.
#
# ## Graded exercises
#
# Complete each function where it says `raise NotImplementedError(...)`, then run the cell after
# it: `check` tells you at once whether your function is right, and if not, what differs.
# The rest of the notebook does not depend on your answers. Three exercises, 7 points; our
# estimate of the time they take, not a measurement: about 60 minutes (05.3 the longest, about
# 35).
#
# ### Exercise 05.1 — layer normalisation (2 points)
#
# Write `layer_norm(x, gamma, beta, epsilon=1e-5)` in NumPy: normalise each position of `x`
# `(..., E)` over its E features (mean 0, variance 1, using the biased variance), then scale by
# `gamma` and shift by `beta` (both `(E,)`).

# %% nbgrader={"grade": false, "grade_id": "exercise_05_1", "locked": false, "schema_version": 3, "solution": true}
def layer_norm(x, gamma, beta, epsilon=1e-5):
    """gamma * (x - mean) / sqrt(var + epsilon) + beta, statistics over the last axis."""
    ### BEGIN SOLUTION
    mean = x.mean(axis=-1, keepdims=True)
    variance = x.var(axis=-1, keepdims=True)
    return gamma * (x - mean) / np.sqrt(variance + epsilon) + beta
    ### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "check_05_1", "locked": true, "points": 2, "schema_version": 3, "solution": false}
from transformer_course.exercises import check

check("05.1", layer_norm)
### BEGIN HIDDEN TESTS
from transformer_course_grader import evaluate_hidden

assert evaluate_hidden("05.1", layer_norm, seed=7).passed
### END HIDDEN TESTS

# %% [markdown]
# ### Exercise 05.2 — the position-wise feed-forward network (2 points)
#
# Write `feed_forward(x, w1, b1, w2, b2)`: `ReLU(x W₁ + b₁) W₂ + b₂` applied to every position of
# `x` `(B, T, E)`, with `w1` `(E, F)`, `b1` `(F,)`, `w2` `(F, E)`, `b2` `(E,)`.

# %% nbgrader={"grade": false, "grade_id": "exercise_05_2", "locked": false, "schema_version": 3, "solution": true}
def feed_forward(x, w1, b1, w2, b2):
    """(B, T, E) -> (B, T, E): the same two dense layers at every position."""
    ### BEGIN SOLUTION
    return np.maximum(x @ w1 + b1, 0.0) @ w2 + b2
    ### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "check_05_2", "locked": true, "points": 2, "schema_version": 3, "solution": false}
check("05.2", feed_forward)
### BEGIN HIDDEN TESTS
assert evaluate_hidden("05.2", feed_forward, seed=7).passed
### END HIDDEN TESTS

# %% [markdown]
# ### Exercise 05.3 — an encoder block from its weights, post- and pre-norm (3 points)
#
# Write `encoder_block(x, weights, mask=None, normalize_first=False)`: one Transformer encoder
# block (section 1; the package's `TransformerEncoder`) on `x` float `(B, T, E)`, in NumPy.
# `weights` is a dict of dicts: `"attention"` (the multi-head attention weights in Keras' layout, as in exercise 04.5),
# `"attention_norm"` and `"feedforward_norm"` (each `{"gamma": (E,), "beta": (E,)}`) and
# `"feedforward"` (`"hidden_kernel"` `(E, F)`, `"hidden_bias"` `(F,)`, `"output_kernel"`
# `(F, E)`, `"output_bias"` `(E,)`, with ReLU between them). `mask` is None or the padding mask,
# bool `(B, T)`, True = real token: no query attends to a padding key. Post-norm
# (`normalize_first=False`): `x ← LayerNorm(x + F(x))` for the attention, then for the
# feed-forward network; pre-norm: `x ← x + F(LayerNorm(x))`. LayerNorm's epsilon is 1e-5.
# Return `(B, T, E)`. Reuse `layer_norm` and `feed_forward`; paste your
# `multi_head_attention_forward` (and `scaled_dot_product_attention`) from notebook 04 into this
# cell. `show_case("05.3")` (from `transformer_course.exercises`) prints the first public case:
# its inputs, the weights' names and shapes, and the output expected.

# %% nbgrader={"grade": false, "grade_id": "exercise_05_3", "locked": false, "schema_version": 3, "solution": true}
def encoder_block(x, weights, mask=None, normalize_first=False):
    """x (B, T, E), the block's weights, padding mask (B, T) or None -> (B, T, E)."""
    ### BEGIN SOLUTION
    def attend(h):  # multi-head self-attention, keys never at padding
        def project(name):  # (B, T, E) -> (B, N, T, H)
            parameters = weights["attention"]
            return np.einsum("bte,enh->bnth", h, parameters[f"{name}_kernel"]) + parameters[f"{name}_bias"][:, None]

        q, k, v = project("query"), project("key"), project("value")
        scores = q @ k.transpose(0, 1, 3, 2) / np.sqrt(q.shape[-1])  # (B, N, T, T)
        if mask is not None:
            scores = np.where(mask[:, None, None, :], scores, -np.inf)
        scores = np.exp(scores - scores.max(axis=-1, keepdims=True))
        heads = scores / scores.sum(axis=-1, keepdims=True) @ v
        return np.einsum("bnth,nhe->bte", heads, weights["attention"]["output_kernel"]) \
            + weights["attention"]["output_bias"]

    def feed(h):
        parameters = weights["feedforward"]
        return feed_forward(h, parameters["hidden_kernel"], parameters["hidden_bias"], parameters["output_kernel"],
                            parameters["output_bias"])

    for sublayer, norm in ((attend, weights["attention_norm"]), (feed, weights["feedforward_norm"])):
        if normalize_first:
            x = x + sublayer(layer_norm(x, norm["gamma"], norm["beta"]))
        else:
            x = layer_norm(x + sublayer(x), norm["gamma"], norm["beta"])
    return x
    ### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "check_05_3", "locked": true, "points": 3, "schema_version": 3, "solution": false}
check("05.3", encoder_block)
### BEGIN HIDDEN TESTS
assert evaluate_hidden("05.3", encoder_block, seed=7).passed
### END HIDDEN TESTS

# %% [markdown]
# ## Exercise (ungraded)
#
# Repeat the gradient experiment with `tanh` instead of sigmoid. With Keras' default Glorot
# initialisation, which was designed for tanh, a plain stack keeps far more of its gradient —
# how much? Then try pre-norm blocks, $h \leftarrow h + \operatorname{Dense}(\operatorname{LayerNorm}(h))$. Then
# count the parameters of a block with $E = 768$, $F = 3072$ (BERT-base) by hand and check your
# answer with `count_params()`.
