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
# # 02 — Attention for sequence to sequence: Luong dot, Luong general, Bahdanau
#
# [![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.research.google.com/github/transformer-course/transformer-course/blob/v0.1.0/release/02_attention_seq2seq.ipynb)
#
# **Run time:** full profile about 12 min on a 2-core CPU, smoke profile about 25 s (recorded runs). The profile comes from the environment variable `COURSE_PROFILE` (`full` or `smoke`): set it before starting Jupyter, or in Colab run `%env COURSE_PROFILE=smoke` before the first code cell. On Colab, a GPU runtime (Runtime, Change runtime type) trains on the GPU; the recorded times are CPU times. The outputs shown come from the recorded full-profile run; running a cell replaces its output with yours. In the smoke profile, run the exercises and their checks, and the cells whose output does not depend on the profile (shapes, worked examples, equalities with Keras): the accuracies, losses, curves, timings and samples it prints come from tiny data and a few steps and mean nothing; read the recorded ones.
#
# **What you will learn**
# - why one fixed context vector fails on long inputs, seen in notebook 01's measurements;
# - how **attention** gives the decoder a fresh context vector at every step, built from *all*
#   encoder states;
# - three ways to compute the **alignment score** — Luong's dot and general scores and
#   Bahdanau's additive score — and what each costs in parameters;
# - how to read an attention heatmap, and how to turn "the model looks at the right place" into
#   a number;
# - how attention changes the accuracy-versus-length curve.
#
# **Prerequisites:** notebook 01 (the LSTM encoder-decoder and the reversal task).

# %%
import subprocess
import sys

if "google.colab" in sys.modules:  # Colab only: install the course package, keep Colab's TensorFlow/Keras
    subprocess.run([sys.executable, "-m", "pip", "install", "-q",
                    "transformer-course @ git+https://github.com/transformer-course/transformer-course@v0.1.0"],
                   check=True)

import transformer_course as tc

settings = tc.start_notebook("02", seed=42)

# %%
import keras
import matplotlib.pyplot as plt
import numpy as np

from transformer_course import epoch_progress, load_record, progress, report_metric
from transformer_course.metrics import anti_diagonal_attention_mass
from transformer_course.plots import plot_accuracy_by_length, plot_attention, plot_training_curves
from transformer_course.reversal import one_hot_decode, reversal_dataset, score_sequences
from transformer_course.seq2seq import build_attention_encoder_decoder, build_encoder_decoder
from transformer_course.seq2seq_attention import LuongDotAttention
from transformer_course.training import fit_best

# %% [markdown]
# ## 1. Recap: the bottleneck
#
# In notebook 01 the decoder saw the input only through the encoder's final states $(h_S, c_S)$.
# Its recorded full-profile run, retrained at growing lengths over 16 symbols:

# %%
record = load_record("01_seq2seq_lstm")
if record is None:
    print("No recorded full run of notebook 01 here (results/01_seq2seq_lstm.json).")
else:
    metrics = record["metrics"]
    lengths_01 = sorted({int(name.split("_")[2]) for name in metrics if name.startswith("sweep_length_")})
    curves = {kind: [metrics[f"sweep_length_{n}_test_{kind}_accuracy"]["value"] for n in lengths_01]
              for kind in ("element", "sequence")}
    plot_accuracy_by_length(lengths_01, {f"{kind} accuracy": values for kind, values in curves.items()},
                            title="Notebook 01, no attention (recorded run)")

# %% [markdown]
# Whole-sequence accuracy collapses as the sequences grow. However long the input, everything
# the decoder knows about it must fit into the same 128 numbers (h and c, 64 units each).
#
# ## 2. Attention: a new context vector at every step
#
# Keep *every* encoder state $\bar h_1, \dots, \bar h_S$ (the LSTM with `return_sequences=True`)
# and let the decoder choose, at each output step $t$, which of them to use. With decoder state
# $h_t$:
#
# 1. an **alignment score** $\operatorname{score}(h_t, \bar h_s)$ for every source position $s$;
# 2. **attention weights** by a softmax over the source positions:
#    $\alpha_{ts} = \dfrac{\exp \operatorname{score}(h_t, \bar h_s)}{\sum_{s'} \exp \operatorname{score}(h_t, \bar h_{s'})}$;
# 3. the **context vector** is the weighted average $c_t = \sum_s \alpha_{ts} \bar h_s$.
#
# The weights are positive and sum to 1, so $c_t$ is a soft choice among the encoder states,
# and every step is free to choose differently.
#
# > **The notes say** "the alignment scores are learnable parameters". They are computed, afresh
# > for every sentence and step, from the two states; what is learned are the parameters of the
# > score function (the weight matrices of the general and Bahdanau scores below; the dot score
# > has none) and the networks that produce the states.
#
# ## 3. Three score functions
#
# | name | $\operatorname{score}(h_t, \bar h_s)$ | parameters | source |
# |---|---|---|---|
# | Luong dot | $h_t^\top \bar h_s$ | none | Luong et al. 2015, §3.1 |
# | Luong general | $h_t^\top W_a \bar h_s$ | $W_a$: $H \times H$ | Luong et al. 2015, §3.1 |
# | Bahdanau (additive) | $v_a^\top \tanh(W_a h_t + U_a \bar h_s)$ | $W_a, U_a$: $A \times H$; $v_a$: $A$ | Bahdanau et al. 2015, §3.1, A.1.2 |
#
# Bahdanau et al. write their score as $v_a^\top \tanh(W_a s_{i-1} + U_a h_j)$: $s_{i-1}$ is the
# decoder's state before step $i$, $h_j$ the encoder's annotation of word $j$ — the form in the
# table, in which $U_a \bar h_s$ does not depend on $t$ and is computed once. The *concatenated*
# form $v_a^\top \tanh(W_a [h_t; \bar h_s])$ is Luong et al.'s third score, "concat" (their §3.1).
# Splitting $W_a$ into the halves that multiply $h_t$ and $\bar h_s$ shows the two are the same
# function; what differs between the papers is which decoder state asks the question (section 4).
#
# A small example by hand: one decoder state and three encoder states.

# %%
# NBVAL_CHECK_OUTPUT
h_t = np.array([1.0, 0.0, 1.0])                  # decoder state, (H,)
h_bar = np.array([[1.0, 0.0, 0.0],               # encoder states, (S, H)
                  [0.0, 1.0, 0.0],
                  [1.0, 1.0, 1.0]])
scores = h_bar @ h_t                             # dot scores, (S,)
weights = np.exp(scores) / np.exp(scores).sum()  # softmax over source positions
context = weights @ h_bar                        # weighted average, (H,)
print("scores :", scores.tolist())
print("weights:", np.round(weights, 4).tolist())
print("context:", np.round(context, 4).tolist())

# %% [markdown]
# The third state matches the query best, so it gets two thirds of the weight, and the context
# vector leans towards it. The package's layer takes a batch, returns the same numbers, and can
# mask source positions (padding): a masked position gets a weight of exactly 0.

# %%
# NBVAL_CHECK_OUTPUT
layer_context, layer_weights = LuongDotAttention()(h_t[None].astype("float32"), h_bar[None].astype("float32"))
np.testing.assert_allclose(layer_weights[0], weights, atol=1e-6)
np.testing.assert_allclose(layer_context[0], context, atol=1e-6)
_, masked_weights = LuongDotAttention()(h_t[None].astype("float32"), h_bar[None].astype("float32"),
                                        mask=np.array([[True, True, False]]))
print("same as by hand; with the third position masked:",
      np.round(np.asarray(masked_weights[0], dtype="float64"), 4).tolist())

# %% [markdown]
# ## 4. The attention decoder
#
# The encoder now returns its state at every step as well as its final states. The decoder
# starts from the final states, as before, and at each step:
#
# 1. scores every encoder state against its current hidden state $h$, and builds the context
#    vector;
# 2. concatenates the context vector with its input (the previous prediction; zeros at the
#    start) and runs one LSTM step;
# 3. turns the LSTM output into a softmax over the symbols, which is fed back as the next input.
#
# Here the query is the state *before* the LSTM step, as in Bahdanau et al.; Luong et al. attend
# with the state after it. Either way the score functions are the same.
# `build_attention_encoder_decoder` returns the model to train and a second model that shares
# its layers and also returns the attention weights.

# %%
n_timesteps, n_features = settings.n_timesteps_in, settings.n_features
X_train, y_train, X_test, y_test = reversal_dataset(
    settings.train_size, settings.test_size, n_timesteps, n_features, seed=0)
model, attention_model = build_attention_encoder_decoder(n_timesteps, n_features, settings.units, score="dot")
print("inputs", X_train.shape, "-> outputs", model.output_shape, "and weights", attention_model.output_shape[1])

# %% [markdown]
# As in notebook 01, the loop is short enough to write out with the model's own layers and
# compare:

# %%
encoder_lstm, decoder = model.get_layer("encoder_lstm"), model.get_layer("decoder")
encoder_states, h, c = encoder_lstm(X_test[:3])      # (B, S, U), (B, U), (B, U)
step_input = np.zeros((3, n_features), "float32")    # the start symbol
steps = []
for _ in range(n_timesteps):
    context_vector, _ = decoder.attention(h, encoder_states)           # (B, U)
    cell_input = np.concatenate([context_vector, step_input], axis=-1)  # (B, U + F)
    cell_output, (h, c) = decoder.cell(cell_input, [h, c])
    step_input = decoder.output_dense(cell_output)                      # (B, F), fed back
    steps.append(step_input)
np.testing.assert_allclose(np.stack(steps, axis=1), model(X_test[:3]), atol=1e-6)
print("hand-written attention loop == AttentionLSTMDecoder")

# %% [markdown]
# ## 5. Training each score function on the lecture notes' task
#
# Length 4 over 10 columns, 16 units, batch size 10, as in the lecture notes, which report
# 100 % train and test accuracy with the dot score. One training rule for every model in this
# notebook: hold out 10 % of the training data for validation, keep the weights of the epoch with
# the lowest validation loss, and stop once it has not improved for a few epochs. A model is then
# never judged by one unlucky last epoch (in a trial run, the Bahdanau model at length 20 dropped
# from 99.97 % to 67 % test accuracy in a single epoch, a well-known instability of training
# recurrent networks). The test set plays no part in it.

# %%
def train(model, X, y, epochs, batch_size, patience, show_progress=True):
    """Compile `model` and fit it with `fit_best` on the first 90% of (X, y), validating on the last 10%.

    `fit_best` keeps the weights of the epoch with the lowest validation loss and stops after
    `patience` epochs without a lower one. Returns the history and fit_best's facts."""
    model.compile(optimizer="adam", loss="categorical_crossentropy", metrics=["accuracy"])
    held_out = len(X) // 10
    _, history, facts = fit_best(model, (X[:-held_out], y[:-held_out]), (X[-held_out:], y[-held_out:]),
                                 epochs=epochs, patience=patience, batch_size=batch_size,
                                 callbacks=[epoch_progress()] if show_progress else [])
    return history, facts

# %%
trained = {}
for name in ("dot", "general", "bahdanau"):
    model, attention_model = build_attention_encoder_decoder(n_timesteps, n_features, settings.units, score=name)
    history, facts = train(model, X_train, y_train, settings.epochs, settings.batch_size, settings.patience)
    trained[name] = dict(model=model, attention_model=attention_model, history=history, facts=facts,
                         train=score_sequences(model, X_train, y_train), test=score_sequences(model, X_test, y_test))
plot_training_curves({name: run["history"] for name, run in trained.items()});

# %%
print(f"{'score':<10}{'parameters':>11}{'epochs':>8}{'best':>6}{'train elem':>12}{'test elem':>11}{'test seq':>10}"
      f"{'time':>7}")
for name, run in trained.items():
    (train_element, _), (test_element, test_sequence), facts = run["train"], run["test"], run["facts"]
    print(f"{name:<10}{run['model'].count_params():>11,}{facts['epochs']:>8}{facts['best_epoch']:>6}"
          f"{100 * train_element:>11.2f}%{100 * test_element:>10.2f}%{100 * test_sequence:>9.2f}%"
          f"{facts['seconds']:>6.0f}s")
for name, run in trained.items():
    report_metric(f"{name}_test_element_accuracy", run["test"][0],
                  f"{name} score, length 4 / 10 features: test element accuracy")
    report_metric(f"{name}_test_sequence_accuracy", run["test"][1],
                  f"{name} score, length 4 / 10 features: test sequence accuracy")

# %% [markdown]
# ## 6. Where does the decoder look?
#
# Each row of a heatmap is one output step (the query); each column one input position (the
# key). To reverse a sequence, output step $t$ must copy input position $S - 1 - t$, so a model
# that attends where it should lights up the **anti-diagonal** (top right to bottom left). The
# same three test sequences, for each of the three models:

# %%
figure, axes = plt.subplots(3, 3, figsize=(12, 10))
for row, (name, run) in zip(axes, trained.items()):
    weights = keras.ops.convert_to_numpy(run["attention_model"](X_test[:3])[1])  # (B, T, S)
    for i, axis in enumerate(row):
        source, target = one_hot_decode(X_test[i]).tolist(), one_hot_decode(y_test[i]).tolist()
        plot_attention(weights[i], source, target, title=f"{name}: {source} -> {target}", axis=axis,
                       xlabel="input symbol (key)", ylabel="output symbol (query)")
figure.tight_layout()

# %% [markdown]
# To turn the pictures into a number, average the weight each output step puts on the one input
# position it has to copy, over the whole test set. Perfect alignment gives 1; attention spread
# evenly gives $1/S$ = 0.25 here.

# %%
uniform = 1 / n_timesteps
for name, run in trained.items():
    _, test_weights = run["attention_model"](X_test)
    mass = anti_diagonal_attention_mass(keras.ops.convert_to_numpy(test_weights))
    print(f"{name:<9} anti-diagonal mass {mass:.3f} = {mass / uniform:.1f} x uniform; "
          f"test sequence accuracy {100 * run['test'][1]:.1f}%")
    report_metric(f"{name}_anti_diagonal_mass", mass, f"{name} score, length 4: mean attention on the anti-diagonal")

# %% [markdown]
# Accuracy and alignment are different things: compare each model's mass with the 0.25 of even
# attention and with its accuracy. Four symbols fit comfortably into the LSTM's state (16 units:
# 16 numbers in h, 16 in c), so at this length the decoder can reverse a sequence without looking back much, and
# a model may get every sequence right with a weak anti-diagonal. The dot score has no weights of
# its own to sharpen its scores; the general and Bahdanau scores do. Longer inputs change that.
#
# ## 7. Longer sequences
#
# Now the comparison that matters: the same budget — data, width, at most the same number of
# epochs, the same training rule — for the model without attention and for each score function,
# at growing lengths over 16 symbols.
#
# The model without attention here is notebook 01's, but its budget is this section's (at most
# `sweep_epochs` epochs, with early stopping), not notebook 01's longer fixed run: its numbers
# below are lower than section 1's at the same lengths for that reason. Compare the four models
# with each other, within this run.

# %%
def train_and_score(length, kind):
    """Train one model (`kind`: "none" or a score name) at `length`; return it and its test accuracies."""
    X_tr, y_tr, X_te, y_te = reversal_dataset(settings.sweep_train_size, settings.sweep_test_size,
                                              length, settings.sweep_n_features, seed=length)
    if kind == "none":
        sweep_model = build_encoder_decoder(length, settings.sweep_n_features, settings.sweep_units)
        attention_sweep_model = sweep_model
    else:
        sweep_model, attention_sweep_model = build_attention_encoder_decoder(
            length, settings.sweep_n_features, settings.sweep_units, score=kind)
    train(sweep_model, X_tr, y_tr, settings.sweep_epochs, settings.sweep_batch_size,
          settings.sweep_patience, show_progress=False)
    return attention_sweep_model, X_te, score_sequences(sweep_model, X_te, y_te)

# %%
kinds = ("none", "dot", "general", "bahdanau")
runs = [(length, kind) for length in settings.sweep_lengths for kind in kinds]
sweep, longest = {}, {}
for length, kind in progress(runs, desc="models"):
    sweep_model, X_te, sweep[length, kind] = train_and_score(length, kind)
    if length == max(settings.sweep_lengths) and kind != "none":
        longest[kind] = (sweep_model, X_te)
for length in settings.sweep_lengths:
    print(f"length {length:2d}: " + ", ".join(
        f"{kind} {100 * sweep[length, kind][0]:6.2f}% / {100 * sweep[length, kind][1]:6.2f}%" for kind in kinds))

# %%
lengths = list(settings.sweep_lengths)
figure, axes = plt.subplots(1, 2, figsize=(11, 3.8))
for column, (axis, kind_of_accuracy) in enumerate(zip(axes, ("element", "sequence"))):
    plot_accuracy_by_length(lengths, {
        ("no attention" if kind == "none" else f"{kind} attention"): [sweep[n, kind][column] for n in lengths]
        for kind in kinds}, title=f"test {kind_of_accuracy} accuracy, {settings.sweep_n_features} features", axis=axis)
figure.tight_layout()

# %%
for (length, kind), (element, sequence) in sweep.items():
    label = "no attention" if kind == "none" else f"{kind} attention"
    report_metric(f"sweep_length_{length}_{kind}_test_element_accuracy", element,
                  f"length {length} / {settings.sweep_n_features} features, {label}: test element accuracy",
                  headline=(length == 20 and kind == "dot"))
    report_metric(f"sweep_length_{length}_{kind}_test_sequence_accuracy", sequence,
                  f"length {length} / {settings.sweep_n_features} features, {label}: test sequence accuracy")

# %% [markdown]
# At the longest length the heatmaps show how attention holds up: step $t$ looks mostly at
# input position $S - 1 - t$, the symbol it has to copy. Some weight spills onto the neighbours.
# The encoder is an LSTM that reads left to right, so its state at position $s + 1$ still carries
# the symbol at $s$, and a mix of the two is as good as the exact position. The anti-diagonal
# mass measures how sharp the band is, not whether the answer is right.
#
# Attention does not guarantee success, though. In the recorded run the general score's model at
# length 20 follows the anti-diagonal sharply down to step 14 of the example shown, then stays on
# input positions 3 and 4 for the last five steps, which should each move one place left: its
# test sequence accuracy is far below the other two (the table above).
# Within a fixed budget of epochs, a recurrent model with attention can still settle on a
# solution that is only partly right; another seed or more epochs may get past it.

# %%
length = max(settings.sweep_lengths)
figure, axes = plt.subplots(1, 3, figsize=(15, 4.4))
for axis, (kind, (sweep_model, X_te)) in zip(axes, longest.items()):
    long_weights = keras.ops.convert_to_numpy(sweep_model(X_te)[1])  # (N, T, S)
    mass = anti_diagonal_attention_mass(long_weights)
    plot_attention(long_weights[0], title=f"{kind}, length {length}: anti-diagonal mass {mass:.3f}", axis=axis,
                   xlabel="input position (key)", ylabel="output step (query)")
    report_metric(f"sweep_length_{length}_{kind}_anti_diagonal_mass", mass,
                  f"length {length}, {kind} attention: mean attention on the anti-diagonal")
figure.tight_layout()

# %% [markdown]
# ## Summary
#
# - Attention replaces the one fixed context vector with a new one at every output step: a
#   softmax-weighted average of all encoder states.
# - The weights come from an alignment score between the decoder state and each encoder state:
#   Luong's dot (no parameters), Luong's general ($h_t^\top W_a \bar h_s$) or Bahdanau's additive
#   score ($v_a^\top \tanh(W_a h_t + U_a \bar h_s)$).
# - Attention weights can be looked at. On long reversal sequences they form the anti-diagonal
#   band the task calls for, and the mean weight on the anti-diagonal measures how sharp it is.
# - With the same training budget the model without attention falls apart as the sequences grow,
#   while attention keeps most models near 100 % — the recorded run's general-score model at
#   length 20 being the exception its heatmap explains. The numbers and curves above come from
#   this run.
#
# Attention here still sits on top of an LSTM that reads the input in order. Notebook 04 drops
# the recurrence and lets every position attend to every other: **self-attention**.
#
# ## Graded exercises
#
# Complete each function where it says `raise NotImplementedError(...)`, then run the cell after
# it: `check` tells you at once whether your function is right, and if not, what differs.
# The rest of the notebook does not depend on your answers. Two exercises, 5 points; our
# estimate of the time they take, not a measurement: about 40 minutes.
#
# Both functions score **one** decoder state against every encoder state, in NumPy: `query` is
# the decoder state $h_t$, shape `(H,)`; `keys` holds the encoder states $\bar h_s$ as rows,
# shape `(S, H)`. Each returns the alignment scores, shape `(S,)`, one per source position —
# before the softmax.
#
# ### Exercise 02.1 — Luong's general score (2 points)
#
# Write `luong_general_score(query, keys, weight)` with `weight` of shape `(H, H)`:
# `score[s] = keys[s] @ weight @ query`. (This is the layout `LuongGeneralAttention` uses: its
# `W_a` is a bias-free `Dense` layer applied to the encoder states, and its kernel is `weight`.)

# %% nbgrader={"grade": false, "grade_id": "exercise_02_1", "locked": false, "schema_version": 3, "solution": true}
def luong_general_score(query, keys, weight):
    """query (H,), keys (S, H), weight (H, H) -> scores (S,): keys[s] @ weight @ query."""
    ### BEGIN SOLUTION
    return keys @ (weight @ query)
    ### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "check_02_1", "locked": true, "points": 2, "schema_version": 3, "solution": false}
from transformer_course.exercises import check

check("02.1", luong_general_score)
### BEGIN HIDDEN TESTS
from transformer_course_grader import evaluate_hidden

assert evaluate_hidden("02.1", luong_general_score, seed=7).passed
### END HIDDEN TESTS

# %% [markdown]
# ### Exercise 02.2 — Bahdanau's additive score (3 points)
#
# Write `bahdanau_score(query, keys, query_weight, keys_weight, v)`: project the decoder state
# with `query_weight` `(H, A)` and every encoder state with `keys_weight` `(H, A)`, add them,
# apply tanh, and take the dot product with `v` `(A,)`:
# `score[s] = tanh(query @ query_weight + keys[s] @ keys_weight) @ v`. Do it for all $S$ positions
# at once, without a Python loop.

# %% nbgrader={"grade": false, "grade_id": "exercise_02_2", "locked": false, "schema_version": 3, "solution": true}
def bahdanau_score(query, keys, query_weight, keys_weight, v):
    """query (H,), keys (S, H), query_weight (H, A), keys_weight (H, A), v (A,) -> scores (S,)."""
    ### BEGIN SOLUTION
    return np.tanh(query @ query_weight + keys @ keys_weight) @ v
    ### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "check_02_2", "locked": true, "points": 3, "schema_version": 3, "solution": false}
check("02.2", bahdanau_score)
### BEGIN HIDDEN TESTS
assert evaluate_hidden("02.2", bahdanau_score, seed=7).passed
### END HIDDEN TESTS

# %% [markdown]
# ## Exercise (ungraded)
#
# Repeat the lecture notes' exercise — 20 steps, 16 features — with the notes' width of 16 units
# instead of 64, for the model without attention and for the dot score. Compare with what you
# found in notebook 01. Then swap the reversal for another permutation, for example rotating the
# sequence by three places: what do the heatmaps look like now?
