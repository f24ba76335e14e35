"""Pooling a sequence of vectors into one: the layers every classifier on an encoder shares.

A Transformer encoder returns one vector per token; a classifier needs one vector per text.
Two ways to pool, both here:

* **global max pooling** (Chollet, "Deep Learning with Python", 2nd ed., §11.4): for each
  feature, its largest value over the real tokens. :class:`MaskedGlobalMaxPooling1D` skips
  padding — ``keras.layers.GlobalMaxPooling1D`` does not, so a padded position could win the max
  and a review's score would depend on how much padding its batch happened to have.
* a **[CLS] token** (Devlin et al., 2019, BERT, §3): :class:`PrependClassToken` puts an extra
  token in front of every sequence; attention lets it gather from the whole text, and its output
  vector is the text's summary (:class:`ClassTokenOutput`). The sentiment classifier (notebook 06),
  BERT (08) and the Vision Transformer (10) use them.
* the **last real token** (Radford et al., 2018, §3.2): in a causal decoder only the last
  position has seen the whole text, so a classifier on a language model reads its vector
  (:class:`LastTokenPooling`; notebook 12 says why its classifier reads the mean instead).
* the vectors at **chosen positions** (:class:`GatherPositions`): what a masked language model's
  head reads (BERT, ELECTRA; notebook 08).
"""

from __future__ import annotations

from . import _quiet_keras  # noqa: F401  (before Keras: TensorFlow's start-up log filtered)

# isort: split
import keras
from keras import ops

from ._validation import check_integer

__all__ = ["MaskedGlobalMaxPooling1D", "LastTokenPooling", "GatherPositions", "PrependClassToken", "ClassTokenOutput"]


@keras.saving.register_keras_serializable(package="transformer_course")
class MaskedGlobalMaxPooling1D(keras.layers.Layer):
    """The largest value of each feature over the real (unmasked) positions.

    Call arguments:
        inputs: float ``(B, T, E)``.
        mask: optional bool ``(B, T)``, True = real token; filled in by Keras from the previous
            layer (``mask_zero`` embeddings, ``PositionalEmbedding``, the course's encoders).
            Without a mask every position counts.

    Returns:
        float ``(B, E)``. A sequence with no real token (an empty text) gives zeros.

    Raises:
        ValueError: for an input that is not rank 3.

    Example:
        >>> import numpy as np
        >>> x = np.array([[[1.0], [5.0], [9.0]]], "float32")  # the 9 sits at a padding position
        >>> keras.ops.convert_to_numpy(MaskedGlobalMaxPooling1D()(x, mask=np.array([[True, True, False]]))).tolist()
        [[5.0]]
    """

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.supports_masking = True

    def call(self, inputs, mask=None):
        if len(inputs.shape) != 3:
            raise ValueError(f"`inputs` must have shape (batch, length, width); received {tuple(inputs.shape)}.")
        if mask is None:
            return ops.max(inputs, axis=1)
        real = ops.expand_dims(ops.cast(mask, "bool"), -1)  # (B, T, 1)
        lowest = ops.full_like(inputs, -3.0e38)  # below any real activation, still finite in float32
        pooled = ops.max(ops.where(real, inputs, lowest), axis=1)  # (B, E)
        return ops.where(ops.any(real, axis=1), pooled, ops.zeros_like(pooled))

    def compute_mask(self, inputs, mask=None):
        return None

    def compute_output_shape(self, inputs_shape):
        return (inputs_shape[0], inputs_shape[2])


@keras.saving.register_keras_serializable(package="transformer_course")
class LastTokenPooling(keras.layers.Layer):
    """The vector of each sequence's last real position: what a causal decoder has read the whole text into.

    With causal attention position t sees positions ≤ t only, so the last real token is the one
    position that has seen everything; GPT's classifier reads it (Radford et al., 2018, §3.2).
    Padding must come after the real tokens (the course's rows are padded on the right).

    Call arguments:
        inputs: float ``(B, T, E)``.
        mask: optional bool ``(B, T)``, True = real token (filled in by Keras from the embedding);
            without one, position T - 1 is read.

    Returns:
        float ``(B, E)``; a row with no real token gives its position 0.

    Raises:
        ValueError: for an input that is not rank 3.

    Example:
        >>> import numpy as np
        >>> x = np.arange(6.0, dtype="float32").reshape(1, 3, 2)
        >>> keras.ops.convert_to_numpy(LastTokenPooling()(x, mask=np.array([[True, True, False]]))).tolist()
        [[2.0, 3.0]]
    """

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.supports_masking = True

    def call(self, inputs, mask=None):
        if len(inputs.shape) != 3:
            raise ValueError(f"`inputs` must have shape (batch, length, width); received {tuple(inputs.shape)}.")
        if mask is None:
            return inputs[:, -1, :]
        last = ops.maximum(ops.sum(ops.cast(mask, "int32"), axis=1) - 1, 0)  # (B,) the last real position
        return ops.take_along_axis(inputs, ops.reshape(last, (-1, 1, 1)), axis=1)[:, 0, :]

    def compute_mask(self, inputs, mask=None):
        return None

    def compute_output_shape(self, inputs_shape):
        return (inputs_shape[0], inputs_shape[2])


@keras.saving.register_keras_serializable(package="transformer_course")
class GatherPositions(keras.layers.Layer):
    """The vectors at chosen positions of each sequence: ``(B, T, E), (B, P) -> (B, P, E)``.

    Call arguments:
        inputs: list ``[sequence, positions]``: float ``(B, T, E)`` and int ``(B, P)`` indices
            into T.

    Returns:
        float ``(B, P, E)``; no mask.

    Example:
        >>> import numpy as np
        >>> sequence = np.arange(12, dtype="float32").reshape(1, 4, 3)  # position t holds 3t, 3t + 1, 3t + 2
        >>> keras.ops.convert_to_numpy(GatherPositions()([sequence, np.array([[3, 0]])])).tolist()
        [[[9.0, 10.0, 11.0], [0.0, 1.0, 2.0]]]
    """

    def call(self, inputs):
        sequence, positions = inputs
        return ops.take_along_axis(sequence, ops.expand_dims(ops.cast(positions, "int32"), -1), axis=1)

    def compute_mask(self, inputs, mask=None):
        return None

    def compute_output_shape(self, inputs_shape):
        sequence_shape, positions_shape = inputs_shape
        return (sequence_shape[0], positions_shape[1], sequence_shape[2])


@keras.saving.register_keras_serializable(package="transformer_course")
class PrependClassToken(keras.layers.Layer):
    """Put a ``[CLS]`` token id in front of every sequence of token ids.

    Args:
        token_id: int, the id used for ``[CLS]``; give it a row of its own in the embedding
            table (``vocabulary_size`` for a vocabulary of ids ``0 .. vocabulary_size - 1``).

    Call arguments:
        inputs: int ``(B, T)`` token ids, 0 = padding.

    Returns:
        int ``(B, T + 1)``; column 0 is ``token_id``, so it is never padding.

    Raises:
        ValueError: for a ``token_id`` that is not a positive integer.

    Example:
        >>> import numpy as np
        >>> keras.ops.convert_to_numpy(PrependClassToken(7)(np.array([[5, 3, 0]]))).tolist()
        [[7, 5, 3, 0]]
    """

    def __init__(self, token_id, **kwargs):
        super().__init__(**kwargs)
        self.token_id = check_integer("token_id", token_id)

    def call(self, inputs):
        column = ops.full((ops.shape(inputs)[0], 1), self.token_id, dtype=inputs.dtype)
        return ops.concatenate([column, inputs], axis=1)

    def compute_output_spec(self, inputs):
        # The ids keep their integer dtype (a shape alone would make Keras assume the float compute dtype).
        length = None if inputs.shape[1] is None else inputs.shape[1] + 1
        return keras.KerasTensor((inputs.shape[0], length), dtype=inputs.dtype)

    def get_config(self):
        return {**super().get_config(), "token_id": self.token_id}


@keras.saving.register_keras_serializable(package="transformer_course")
class ClassTokenOutput(keras.layers.Layer):
    """The output vector at position 0 (the ``[CLS]`` token): ``(B, T, E) -> (B, E)``.

    Example:
        >>> import numpy as np
        >>> keras.ops.convert_to_numpy(ClassTokenOutput()(np.arange(6, dtype="float32").reshape(1, 3, 2))).tolist()
        [[0.0, 1.0]]
    """

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.supports_masking = True

    def call(self, inputs, mask=None):
        return inputs[:, 0, :]

    def compute_mask(self, inputs, mask=None):
        return None

    def compute_output_shape(self, inputs_shape):
        return (inputs_shape[0], inputs_shape[2])
