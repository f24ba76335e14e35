"""LSTM encoder-decoder models for sequence-to-sequence tasks (notebooks 01 and 02).

The encoder reads the whole input and hands its final hidden and cell states ``(h, c)`` — the
context vector — to the decoder, which then writes the output one step at a time. With attention
(notebook 02) the decoder also sees every encoder state, through a fresh context vector at each
step.

Shape letters: B batch, T_in input length, T_out output length, F one-hot width (features),
U LSTM units.

References:
    Sutskever, Vinyals and Le, 2014. "Sequence to Sequence Learning with Neural Networks",
    §2 (the encoder-decoder) and §3.3 (reversing the source). https://arxiv.org/abs/1409.3215
    Williams and Zipser, 1989. "A Learning Algorithm for Continually Running Fully Recurrent
    Neural Networks" (teacher forcing).
    Bahdanau, Cho and Bengio, 2015. "Neural Machine Translation by Jointly Learning to Align and
    Translate", §3.1 (a decoder that attends before each step). https://arxiv.org/abs/1409.0473
"""

from __future__ import annotations

from . import _quiet_keras  # noqa: F401  (before Keras: TensorFlow's start-up log filtered)

# isort: split
import keras
import numpy as np
from keras import ops

from ._validation import check_integer
from .seq2seq_attention import BahdanauAttention, LuongDotAttention, LuongGeneralAttention

__all__ = [
    "ATTENTION_SCORES",
    "AttentionLSTMDecoder",
    "build_attention_encoder_decoder",
    "LSTMDecoder",
    "build_encoder_decoder",
    "build_teacher_forcing_encoder_decoder",
    "shift_right",
]

_FEEDBACK_MODES = ("probabilities", "argmax")
ATTENTION_SCORES = ("dot", "general", "bahdanau")


@keras.saving.register_keras_serializable(package="transformer_course")
class LSTMDecoder(keras.layers.Layer):
    """An LSTM decoder that writes ``output_length`` steps, one at a time.

    At each step one ``LSTMCell`` step is followed by a dense softmax over the ``n_features``
    symbols. The layer runs in one of two modes:

    * **free-running** (``decoder_inputs=None``): the first input is all zeros (a start symbol
      that is no one-hot vector), and each later input is the decoder's own previous prediction.
      ``feedback="probabilities"`` feeds back the softmax output itself, which keeps the loop
      differentiable so the model can be trained this way (the lecture notes' model);
      ``feedback="argmax"`` feeds back the one-hot vector of the most likely symbol, which matches
      what a teacher-forced model saw in training.
    * **teacher forcing** (``decoder_inputs`` given): the input at step ``t`` is
      ``decoder_inputs[:, t]``, normally the true target shifted right by one step
      (see :func:`shift_right`), whatever the decoder predicted before.

    Args:
        units: int, the LSTM width U; must match the encoder's state width.
        n_features: int, the one-hot width F of inputs and outputs.
        output_length: int, how many steps T_out to write.
        feedback: str, ``"probabilities"`` (default) or ``"argmax"``: what the free-running
            mode feeds back.
        **kwargs: passed to ``keras.layers.Layer`` (``name``, ``dtype``, ...).

    Call arguments:
        states: tuple ``(state_h, state_c)``, each float32 of shape ``(B, U)``: the encoder's
            final hidden and cell states, the context vector.
        decoder_inputs: optional float32 ``(B, T_out, F)``: teacher-forcing inputs. ``None``
            runs free.

    Returns:
        float32 ``(B, T_out, F)``: a probability distribution over the F symbols at each step.

    Raises:
        ValueError: for a non-positive ``units``, ``n_features`` or ``output_length``, an unknown
            ``feedback``, or ``decoder_inputs`` whose shape is not ``(B, T_out, F)``.

    Example:
        >>> decoder = LSTMDecoder(units=16, n_features=10, output_length=4)
        >>> h = c = keras.ops.zeros((2, 16))
        >>> tuple(decoder((h, c)).shape)
        (2, 4, 10)
    """

    def __init__(self, units, n_features, output_length, feedback="probabilities", **kwargs):
        super().__init__(**kwargs)
        self.units = check_integer("units", units)
        self.n_features = check_integer("n_features", n_features)
        self.output_length = check_integer("output_length", output_length)
        if feedback not in _FEEDBACK_MODES:
            raise ValueError(f"`feedback` must be one of {_FEEDBACK_MODES}; received {feedback!r}.")
        self.feedback = feedback
        self.cell = keras.layers.LSTMCell(self.units, name="lstm_cell", dtype=self.dtype_policy)
        self.output_dense = keras.layers.Dense(
            self.n_features, activation="softmax", name="output_dense", dtype=self.dtype_policy
        )

    def build(self, states_shape, decoder_inputs_shape=None):
        self.cell.build((None, self.n_features))
        self.output_dense.build((None, self.units))
        super().build(states_shape)

    def call(self, states, decoder_inputs=None):
        state_h, state_c = states  # (B, U) each
        if decoder_inputs is not None:
            expected = (self.output_length, self.n_features)
            if tuple(decoder_inputs.shape[1:]) != expected:
                raise ValueError(
                    f"`decoder_inputs` must have shape (batch, {expected[0]}, {expected[1]}); "
                    f"received {tuple(decoder_inputs.shape)}."
                )
        batch_size = ops.shape(state_h)[0]
        step_input = ops.zeros((batch_size, self.n_features), dtype=state_h.dtype)  # (B, F)
        outputs = []
        for step in range(self.output_length):
            if decoder_inputs is not None:
                step_input = decoder_inputs[:, step, :]  # teacher forcing: the true previous symbol
            cell_output, (state_h, state_c) = self.cell(step_input, [state_h, state_c])
            probabilities = self.output_dense(cell_output)  # (B, F)
            outputs.append(probabilities)
            if self.feedback == "probabilities":
                step_input = probabilities
            else:
                step_input = ops.one_hot(ops.argmax(probabilities, axis=-1), self.n_features, dtype=probabilities.dtype)
        return ops.stack(outputs, axis=1)  # (B, T_out, F)

    def compute_output_shape(self, states_shape, decoder_inputs_shape=None):
        batch_size = states_shape[0][0]
        return (batch_size, self.output_length, self.n_features)

    def get_config(self):
        config = super().get_config()
        config.update(
            units=self.units,
            n_features=self.n_features,
            output_length=self.output_length,
            feedback=self.feedback,
        )
        return config


@keras.saving.register_keras_serializable(package="transformer_course")
class AttentionLSTMDecoder(keras.layers.Layer):
    """An LSTM decoder that attends over every encoder state before each step.

    At output step t, with decoder state ``(h, c)`` (the encoder's final states at t = 0):

    1. score every encoder state against ``h`` and softmax the scores into attention weights;
    2. the context vector is the weighted sum of the encoder states;
    3. one ``LSTMCell`` step reads ``[context; previous output]`` (all zeros at t = 0);
    4. a dense softmax gives the step's distribution, which is fed back as the next input.

    The query is the state *before* the step, as in Bahdanau et al. (2015); Luong et al. (2015)
    score the state after it. The score functions themselves are interchangeable.

    Args:
        units: int, the LSTM width U; must match the encoder's width for the dot score.
        n_features: int, the one-hot width F of the outputs.
        output_length: int, how many steps T_out to write.
        score: str, ``"dot"``, ``"general"`` or ``"bahdanau"`` (see
            :mod:`transformer_course.seq2seq_attention`).
        attention_units: int, the Bahdanau attention width A; defaults to ``units``. Ignored by
            the other scores.
        **kwargs: passed to ``keras.layers.Layer``.

    Call arguments:
        encoder_outputs: float32 ``(B, S, U)``, the encoder's hidden state at every source step.
        states: tuple ``(state_h, state_c)``, float32 ``(B, U)`` each, the encoder's final states.
        encoder_mask: optional bool ``(B, S)`` from the **source** sequence; True = may attend.

    Returns:
        ``(probabilities, attention_weights)``: float32 ``(B, T_out, F)`` and ``(B, T_out, S)``;
        row t of the weights is where step t looked, summing to 1 over unmasked positions.

    Raises:
        ValueError: for a non-positive size or an unknown ``score``.

    Example:
        >>> decoder = AttentionLSTMDecoder(units=8, n_features=5, output_length=3)
        >>> states = (np.zeros((2, 8), "float32"), np.zeros((2, 8), "float32"))
        >>> predictions, weights = decoder(np.ones((2, 4, 8), "float32"), states)  # 4 encoder outputs
        >>> tuple(predictions.shape), tuple(weights.shape)
        ((2, 3, 5), (2, 3, 4))
    """

    def __init__(self, units, n_features, output_length, score="dot", attention_units=None, **kwargs):
        super().__init__(**kwargs)
        self.units = check_integer("units", units)
        self.n_features = check_integer("n_features", n_features)
        self.output_length = check_integer("output_length", output_length)
        if score not in ATTENTION_SCORES:
            raise ValueError(f"`score` must be one of {ATTENTION_SCORES}; received {score!r}.")
        self.score = score
        self.attention_units = check_integer("attention_units", units if attention_units is None else attention_units)
        if score == "dot":
            self.attention = LuongDotAttention(name="attention", dtype=self.dtype_policy)
        elif score == "general":
            self.attention = LuongGeneralAttention(name="attention", dtype=self.dtype_policy)
        else:
            self.attention = BahdanauAttention(self.attention_units, name="attention", dtype=self.dtype_policy)
        self.cell = keras.layers.LSTMCell(self.units, name="lstm_cell", dtype=self.dtype_policy)
        self.output_dense = keras.layers.Dense(
            self.n_features, activation="softmax", name="output_dense", dtype=self.dtype_policy
        )

    def build(self, encoder_outputs_shape, states_shape=None, encoder_mask_shape=None):
        self.attention.build((None, self.units), encoder_outputs_shape)
        self.cell.build((None, encoder_outputs_shape[-1] + self.n_features))
        self.output_dense.build((None, self.units))
        super().build(encoder_outputs_shape)

    def call(self, encoder_outputs, states, encoder_mask=None):
        state_h, state_c = states  # (B, U) each
        batch_size = ops.shape(state_h)[0]
        step_input = ops.zeros((batch_size, self.n_features), dtype=state_h.dtype)  # start symbol
        outputs, weights = [], []
        for _ in range(self.output_length):
            context, step_weights = self.attention(state_h, encoder_outputs, mask=encoder_mask)  # (B, U), (B, S)
            cell_input = ops.concatenate([context, step_input], axis=-1)  # (B, U + F)
            cell_output, (state_h, state_c) = self.cell(cell_input, [state_h, state_c])
            probabilities = self.output_dense(cell_output)  # (B, F)
            outputs.append(probabilities)
            weights.append(step_weights)
            step_input = probabilities  # feed the prediction back
        return ops.stack(outputs, axis=1), ops.stack(weights, axis=1)

    def compute_output_shape(self, encoder_outputs_shape, states_shape=None, encoder_mask_shape=None):
        batch_size, source_length = encoder_outputs_shape[0], encoder_outputs_shape[1]
        return (
            (batch_size, self.output_length, self.n_features),
            (batch_size, self.output_length, source_length),
        )

    def get_config(self):
        config = super().get_config()
        config.update(
            units=self.units,
            n_features=self.n_features,
            output_length=self.output_length,
            score=self.score,
            attention_units=self.attention_units,
        )
        return config


def _lengths(n_timesteps_in, n_timesteps_out) -> tuple[int, int]:
    """Validate the input length and the output length, which defaults to the input length."""
    n_timesteps_in = check_integer("n_timesteps_in", n_timesteps_in)
    if n_timesteps_out is None:
        return n_timesteps_in, n_timesteps_in
    return n_timesteps_in, check_integer("n_timesteps_out", n_timesteps_out)


def _encoder(n_timesteps_in: int, n_features: int, units: int):
    encoder_inputs = keras.Input(shape=(n_timesteps_in, n_features), name="encoder_inputs")
    encoder_lstm = keras.layers.LSTM(units, return_state=True, name="encoder_lstm")
    _, state_h, state_c = encoder_lstm(encoder_inputs)  # (B, U) each: the context vector
    return encoder_inputs, (state_h, state_c)


def build_encoder_decoder(
    n_timesteps_in: int,
    n_features: int,
    units: int,
    n_timesteps_out: int | None = None,
    name: str = "lstm_encoder_decoder",
) -> keras.Model:
    """The free-running LSTM encoder-decoder of the lecture notes (uncompiled).

    Encoder ``LSTM(units, return_state=True)`` → context ``(h, c)`` → :class:`LSTMDecoder` that
    starts from a zero input and feeds its own softmax output back at every step, in training
    and at inference alike.

    Args:
        n_timesteps_in: int, input length T_in.
        n_features: int, one-hot width F.
        units: int, LSTM width U of encoder and decoder.
        n_timesteps_out: int, output length T_out; defaults to ``n_timesteps_in``.
        name: str, the model's name.

    Returns:
        A ``keras.Model`` mapping float32 ``(B, T_in, F)`` one-hot inputs to float32
        ``(B, T_out, F)`` probabilities.

    Raises:
        ValueError: if any size is not a positive integer.

    Example:
        >>> build_encoder_decoder(n_timesteps_in=4, n_features=5, units=8).output_shape
        (None, 4, 5)
    """
    n_timesteps_in, n_timesteps_out = _lengths(n_timesteps_in, n_timesteps_out)
    encoder_inputs, states = _encoder(n_timesteps_in, n_features, units)
    decoder = LSTMDecoder(units, n_features, n_timesteps_out, feedback="probabilities", name="decoder")
    return keras.Model(encoder_inputs, decoder(states), name=name)


def build_teacher_forcing_encoder_decoder(
    n_timesteps_in: int,
    n_features: int,
    units: int,
    n_timesteps_out: int | None = None,
    name: str = "teacher_forcing_encoder_decoder",
) -> tuple[keras.Model, keras.Model]:
    """An LSTM encoder-decoder trained with teacher forcing, and its step-by-step inference model.

    Both models share every layer (so training one trains the other). The training model's
    decoder reads the true previous symbol at each step; the inference model's decoder has no
    targets, so it starts from a zero input and feeds back the one-hot of its own most likely
    symbol.

    Args:
        n_timesteps_in: int, input length T_in.
        n_features: int, one-hot width F.
        units: int, LSTM width U.
        n_timesteps_out: int, output length T_out; defaults to ``n_timesteps_in``.
        name: str, prefix of the two models' names.

    Returns:
        ``(training_model, inference_model)``:

        * ``training_model``: inputs ``[encoder_inputs (B, T_in, F), decoder_inputs
          (B, T_out, F)]`` — ``decoder_inputs = shift_right(targets)`` — to ``(B, T_out, F)``
          probabilities;
        * ``inference_model``: ``encoder_inputs (B, T_in, F)`` to ``(B, T_out, F)``
          probabilities, decoding one step at a time.

    Raises:
        ValueError: if any size is not a positive integer.

    Example:
        >>> training_model, inference_model = build_teacher_forcing_encoder_decoder(4, 5, 8)
        >>> training_model.output_shape, inference_model.output_shape
        ((None, 4, 5), (None, 4, 5))
    """
    n_timesteps_in, n_timesteps_out = _lengths(n_timesteps_in, n_timesteps_out)
    encoder_inputs, states = _encoder(n_timesteps_in, n_features, units)
    decoder_inputs = keras.Input(shape=(n_timesteps_out, n_features), name="decoder_inputs")
    decoder = LSTMDecoder(units, n_features, n_timesteps_out, feedback="argmax", name="decoder")
    training_model = keras.Model(
        [encoder_inputs, decoder_inputs],
        decoder(states, decoder_inputs=decoder_inputs),
        name=f"{name}_training",
    )
    inference_model = keras.Model(encoder_inputs, decoder(states), name=f"{name}_inference")
    return training_model, inference_model


def build_attention_encoder_decoder(
    n_timesteps_in: int,
    n_features: int,
    units: int,
    score: str = "dot",
    attention_units: int | None = None,
    n_timesteps_out: int | None = None,
    name: str | None = None,
) -> tuple[keras.Model, keras.Model]:
    """An LSTM encoder-decoder with attention, feeding back its own predictions (uncompiled).

    Encoder ``LSTM(units, return_sequences=True, return_state=True)`` → every encoder state and
    the final ``(h, c)`` → :class:`AttentionLSTMDecoder`.

    Args:
        n_timesteps_in: int, input length S.
        n_features: int, one-hot width F.
        units: int, LSTM width U of encoder and decoder.
        score: str, ``"dot"``, ``"general"`` or ``"bahdanau"``.
        attention_units: int, the Bahdanau attention width; defaults to ``units``.
        n_timesteps_out: int, output length T_out; defaults to ``n_timesteps_in``.
        name: str, the model's name; defaults to ``"attention_<score>"``.

    Returns:
        ``(model, attention_model)``, sharing every layer: ``model`` maps float32
        ``(B, S, F)`` inputs to ``(B, T_out, F)`` probabilities (train this one);
        ``attention_model`` returns ``[probabilities, attention_weights (B, T_out, S)]``.

    Raises:
        ValueError: if a size is not a positive integer or ``score`` is unknown.

    Example:
        >>> model, attention_model = build_attention_encoder_decoder(4, 5, 8)
        >>> model.output_shape, attention_model.output_shape
        ((None, 4, 5), [(None, 4, 5), (None, 4, 4)])
    """
    n_timesteps_in, n_timesteps_out = _lengths(n_timesteps_in, n_timesteps_out)
    name = name or f"attention_{score}"
    encoder_inputs = keras.Input(shape=(n_timesteps_in, n_features), name="encoder_inputs")
    encoder_lstm = keras.layers.LSTM(units, return_sequences=True, return_state=True, name="encoder_lstm")
    encoder_outputs, state_h, state_c = encoder_lstm(encoder_inputs)  # (B, S, U), (B, U), (B, U)
    decoder = AttentionLSTMDecoder(
        units, n_features, n_timesteps_out, score=score, attention_units=attention_units, name="decoder"
    )
    probabilities, weights = decoder(encoder_outputs, (state_h, state_c))
    model = keras.Model(encoder_inputs, probabilities, name=name)
    attention_model = keras.Model(encoder_inputs, [probabilities, weights], name=f"{name}_with_weights")
    return model, attention_model


def shift_right(targets) -> np.ndarray:
    """Teacher-forcing decoder inputs: the targets delayed by one step, starting from zeros.

    Args:
        targets: array ``(B, T_out, F)``, the one-hot targets.

    Returns:
        float32 ``(B, T_out, F)``: ``out[:, 0]`` is all zeros (the start symbol) and
        ``out[:, t] = targets[:, t - 1]`` for ``t >= 1``.

    Raises:
        ValueError: if ``targets`` is not rank 3.
    """
    targets = np.asarray(targets, dtype="float32")
    if targets.ndim != 3:
        raise ValueError(f"`targets` must have shape (batch, steps, features); received shape {targets.shape}.")
    shifted = np.zeros_like(targets)
    shifted[:, 1:] = targets[:, :-1]
    return shifted
