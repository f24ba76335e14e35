"""A GPT-style language model: a stack of decoder blocks without cross-attention (notebook 09).

* :func:`build_language_model` — token ids in, next-token probabilities at every position out:
  ``PositionalEmbedding`` + ``TransformerDecoder`` blocks with causal self-attention only + an
  output layer tied to the token embedding.

Shape letters: B batch, T sequence length, E model width, V vocabulary.

References:
    Radford et al., 2018, "Improving Language Understanding by Generative Pre-Training", §3.1.
    Press and Wolf, 2017, "Using the Output Embedding to Improve Language Models" (tying).
"""

from __future__ import annotations

from . import _quiet_keras  # noqa: F401  (before Keras: TensorFlow's start-up log filtered)
import keras

from ._validation import check_model_sizes
from .positional import PositionalEmbedding
from .transformer import TiedTokenDistribution, TokenDistribution, TransformerDecoder

__all__ = ["build_language_model"]


def build_language_model(vocab_size: int, sequence_length: int, embed_dim: int = 256, intermediate_dim: int = 1024,
                         num_heads: int = 4, num_layers: int = 2, dropout: float = 0.1, tie_embeddings: bool = True,
                         name: str | None = None) -> keras.Model:
    """A decoder-only Transformer language model, trained to predict every next token at once.

    Args:
        vocab_size: int V, ids ``0 .. V - 1`` (0 = padding).
        sequence_length: int, the longest input T accepted.
        embed_dim, intermediate_dim, num_heads: ints E, F, N (N divides E).
        num_layers: int, decoder blocks.
        dropout: float in [0, 1), inside every block and before the output layer.
        tie_embeddings: bool, the output layer reuses the token embedding table (default True).
        name: optional model name.

    Returns:
        ``keras.Model`` from int ``(B, T)`` token ids to float32 ``(B, T, V)``: at position t,
        P(token t + 1 | tokens ≤ t). Padding (id 0) is masked in self-attention; the causal mask
        keeps every position from seeing later ones. Layers are named ``token_embedding``,
        ``decoder_1`` …, ``output`` (what :class:`transformer_course.generation.CachedLanguageModel`
        reads).

    Raises:
        ValueError: for non-positive sizes, a ``dropout`` outside [0, 1), or ``num_heads`` not
            dividing ``embed_dim``.
    """
    check_model_sizes(embed_dim, num_heads, dropout, vocab_size=vocab_size, sequence_length=sequence_length,
                      num_layers=num_layers)
    token_ids = keras.Input(shape=(None,), dtype="int32", name="token_ids")
    embedding = PositionalEmbedding(sequence_length, vocab_size, embed_dim, name="token_embedding")
    x = embedding(token_ids)
    for index in range(num_layers):
        x = TransformerDecoder(intermediate_dim, num_heads, dropout=dropout, name=f"decoder_{index + 1}")(x)
    x = keras.layers.Dropout(dropout, name="output_dropout")(x)
    if tie_embeddings:
        probabilities = TiedTokenDistribution(vocab_size, name="output", dtype="float32")(embedding(x, reverse=True))
    else:
        probabilities = TokenDistribution(vocab_size, name="output", dtype="float32")(x)
    return keras.Model(token_ids, probabilities, name=name)
