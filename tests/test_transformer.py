import re

import keras
import numpy as np
import pytest
from layer_checks import to_numpy

from transformer_course.masks import keras_mask
from transformer_course.positional import PositionalEmbedding
from transformer_course.transformer import TransformerDecoder, TransformerEncoder

E, F, N = 16, 32, 4


def _mask_of(x):
    return keras_mask(x)


@pytest.fixture
def features():
    return np.random.default_rng(0).normal(size=(2, 6, E)).astype("float32")


@pytest.mark.parametrize("normalize_first", [False, True])
def test_shape_and_parameter_count(features, normalize_first):
    encoder = TransformerEncoder(intermediate_dim=F, num_heads=N, normalize_first=normalize_first)
    assert tuple(encoder(features).shape) == features.shape
    # attention 4(E*E + E), two LayerNorms 2*2E, feed-forward E*F + F + F*E + E
    assert encoder.count_params() == 4 * (E * E + E) + 4 * E + (E * F + F) + (F * E + E)


def test_heads_must_divide_the_width(features):
    with pytest.raises(ValueError, match="`num_heads`=5 must divide the input width 16"):
        TransformerEncoder(intermediate_dim=F, num_heads=5)(features)
    with pytest.raises(ValueError, match="`intermediate_dim` must be a positive integer"):
        TransformerEncoder(intermediate_dim=0, num_heads=2)
    with pytest.raises(ValueError, match="`dropout` must be in"):
        TransformerEncoder(intermediate_dim=F, num_heads=2, dropout=1.5)


def test_padding_mask_propagates_and_matches_an_explicit_one():
    tokens = np.array([[4, 5, 6, 0, 0, 0], [7, 8, 9, 3, 2, 1]])
    embedding = PositionalEmbedding(sequence_length=6, vocabulary_size=10, embed_dim=E)
    encoder = TransformerEncoder(intermediate_dim=F, num_heads=N)
    from_mask_zero = encoder(embedding(tokens))
    np.testing.assert_array_equal(to_numpy(_mask_of(from_mask_zero)), tokens != 0)
    plain = to_numpy(embedding(tokens))  # a NumPy copy carries no Keras mask
    explicit = encoder(plain, padding_mask=tokens != 0)
    np.testing.assert_allclose(to_numpy(explicit)[tokens != 0], to_numpy(from_mask_zero)[tokens != 0], atol=1e-5)


@pytest.mark.parametrize("normalize_first", [False, True])
def test_adding_padding_changes_nothing_for_real_tokens(normalize_first):
    embedding = PositionalEmbedding(sequence_length=8, vocabulary_size=10, embed_dim=E)
    encoder = TransformerEncoder(intermediate_dim=F, num_heads=N, normalize_first=normalize_first)
    short = encoder(embedding(np.array([[4, 5, 6]])))
    padded = encoder(embedding(np.array([[4, 5, 6, 0, 0, 0, 0, 0]])))
    np.testing.assert_allclose(to_numpy(padded)[:, :3], to_numpy(short), atol=1e-5)


@pytest.mark.parametrize("normalize_first", [False, True])
@pytest.mark.parametrize("with_padding", [False, True])
def test_equal_to_keras_hub(features, normalize_first, with_padding):
    keras_hub = pytest.importorskip("keras_hub")
    reference = keras_hub.layers.TransformerEncoder(intermediate_dim=F, num_heads=N, normalize_first=normalize_first)
    ours = TransformerEncoder(intermediate_dim=F, num_heads=N, normalize_first=normalize_first)
    reference(features)
    ours(features)
    assert [w.shape for w in ours.get_weights()] == [w.shape for w in reference.get_weights()]
    ours.set_weights(reference.get_weights())
    padding = np.array([[True] * 4 + [False] * 2, [True] * 6]) if with_padding else None
    expected = to_numpy(reference(features, padding_mask=padding))
    got = to_numpy(ours(features, padding_mask=padding))
    np.testing.assert_allclose(got, expected, atol=1e-5)


# --- the decoder (TransformerDecoder, imported above) -------------------------------------------


@pytest.fixture
def pair():
    generator = np.random.default_rng(1)
    target = generator.normal(size=(2, 5, E)).astype("float32")  # (B, T, E)
    source = generator.normal(size=(2, 7, E)).astype("float32")  # (B, S, E)
    return target, source


def test_decoder_shape_and_parameter_count(pair):
    target, source = pair
    decoder = TransformerDecoder(intermediate_dim=F, num_heads=N)
    assert tuple(decoder(target, source).shape) == target.shape
    # self-attention and cross-attention 2 * 4(E*E + E), three LayerNorms 3*2E, feed-forward
    assert decoder.count_params() == 8 * (E * E + E) + 6 * E + (E * F + F) + (F * E + E)


@pytest.mark.parametrize("normalize_first", [False, True])
def test_no_information_flows_from_later_target_tokens(pair, normalize_first):
    target, source = pair
    decoder = TransformerDecoder(intermediate_dim=F, num_heads=N, normalize_first=normalize_first)
    changed = target.copy()
    changed[:, 3:] = np.random.default_rng(9).normal(size=changed[:, 3:].shape)
    before, after = to_numpy(decoder(target, source)), to_numpy(decoder(changed, source))
    np.testing.assert_allclose(after[:, :3], before[:, :3], atol=1e-5)
    assert not np.allclose(after[:, 3:], before[:, 3:])


def test_source_padding_changes_nothing(pair):
    target, source = pair
    decoder = TransformerDecoder(intermediate_dim=F, num_heads=N)
    padded = np.concatenate([source, np.full((2, 3, E), 7.0, "float32")], axis=1)  # 3 padding positions
    mask = np.array([[True] * 7 + [False] * 3] * 2)
    np.testing.assert_allclose(
        to_numpy(decoder(target, padded, encoder_padding_mask=mask)), to_numpy(decoder(target, source)), atol=1e-5
    )
    _, weights = decoder(target, padded, encoder_padding_mask=mask, return_attention_scores=True)
    assert to_numpy(weights)[..., 7:].max() < 1e-6


def test_cross_attention_uses_the_source_mask_from_mask_zero():
    source_tokens = np.array([[5, 6, 7, 0, 0, 0, 0]])  # 3 real source tokens
    target_tokens = np.array([[1, 2, 3, 4, 5]])  # 5 real target tokens
    source = PositionalEmbedding(7, 10, E)(source_tokens)
    target = PositionalEmbedding(5, 10, E)(target_tokens)
    _, weights = TransformerDecoder(intermediate_dim=F, num_heads=N)(target, source, return_attention_scores=True)
    weights = to_numpy(weights)  # (B, N, T, S)
    assert weights[..., 3:].max() < 1e-6  # no target position looks at source padding
    assert weights[..., :3].min() > 0  # and every one looks at the real source tokens


def test_a_decoder_with_cross_attention_needs_an_encoder_sequence(pair):
    target, source = pair
    decoder = TransformerDecoder(intermediate_dim=F, num_heads=N)
    decoder(target, source)
    with pytest.raises(ValueError, match="`encoder_sequence` is required"):
        decoder(target)


def test_a_decoder_only_block_refuses_an_encoder_sequence(pair):
    target, source = pair
    decoder = TransformerDecoder(intermediate_dim=F, num_heads=N)
    decoder(target)
    with pytest.raises(ValueError, match="no cross-attention"):
        decoder(target, source)


def test_decoder_only_block_shape_parameters_and_causality(pair):
    target, _ = pair
    decoder = TransformerDecoder(intermediate_dim=F, num_heads=N)
    output = to_numpy(decoder(target))
    assert output.shape == target.shape
    # self-attention 4(E*E + E), two LayerNorms 2*2E, feed-forward: no cross-attention weights
    assert decoder.count_params() == 4 * (E * E + E) + 4 * E + (E * F + F) + (F * E + E)
    changed = target.copy()
    changed[:, 3:] += 1.0
    np.testing.assert_allclose(to_numpy(decoder(changed))[:, :3], output[:, :3], atol=1e-5)


@pytest.mark.parametrize("normalize_first", [False, True])
def test_decoder_only_block_equal_to_keras_hub(pair, normalize_first):
    keras_hub = pytest.importorskip("keras_hub")
    target, _ = pair
    reference = keras_hub.layers.TransformerDecoder(intermediate_dim=F, num_heads=N, normalize_first=normalize_first)
    ours = TransformerDecoder(intermediate_dim=F, num_heads=N, normalize_first=normalize_first)
    reference(target)
    ours(target)
    ours.set_weights(reference.get_weights())
    np.testing.assert_allclose(to_numpy(ours(target)), to_numpy(reference(target)), atol=1e-5)


@pytest.mark.parametrize("normalize_first", [False, True])
@pytest.mark.parametrize("with_padding", [False, True])
def test_decoder_equal_to_keras_hub(pair, normalize_first, with_padding):
    keras_hub = pytest.importorskip("keras_hub")
    target, source = pair
    reference = keras_hub.layers.TransformerDecoder(intermediate_dim=F, num_heads=N, normalize_first=normalize_first)
    ours = TransformerDecoder(intermediate_dim=F, num_heads=N, normalize_first=normalize_first)
    reference(target, source)
    ours(target, source)
    assert [w.shape for w in ours.get_weights()] == [w.shape for w in reference.get_weights()]
    ours.set_weights(reference.get_weights())
    masks = {}
    if with_padding:
        masks = dict(
            decoder_padding_mask=np.array([[True] * 3 + [False] * 2, [True] * 5]),
            encoder_padding_mask=np.array([[True] * 7, [True] * 4 + [False] * 3]),
        )
    np.testing.assert_allclose(
        to_numpy(ours(target, source, **masks)), to_numpy(reference(target, source, **masks)), atol=1e-5
    )


def _sublayers(layer):
    return [sublayer for sublayer in layer._flatten_layers(include_self=False)]


@pytest.mark.parametrize("block", ["encoder", "decoder"])
def test_every_sublayer_takes_the_blocks_dtype_policy(features, block):
    block_class = TransformerEncoder if block == "encoder" else TransformerDecoder
    layer = block_class(F, N, dropout=0.1, dtype="mixed_bfloat16")
    output = layer(features, features) if block == "decoder" else layer(features)
    assert {sublayer.dtype_policy.name for sublayer in _sublayers(layer)} == {"mixed_bfloat16"}
    assert keras.backend.standardize_dtype(output.dtype) == "bfloat16"


def test_a_training_step_under_mixed_bfloat16_stays_finite():
    from transformer_course.metrics import masked_accuracy, masked_loss
    from transformer_course.translation import build_translation_model

    keras.mixed_precision.set_global_policy("mixed_bfloat16")
    try:
        keras.utils.set_random_seed(0)
        model = build_translation_model(30, 40, 8, 9, embed_dim=16, intermediate_dim=32, num_heads=2, num_layers=2)
        # Eagerly: the same operations in bfloat16, without the 20 s a first traced step costs here.
        model.compile(optimizer="adam", loss=masked_loss, metrics=[masked_accuracy], run_eagerly=True)
        generator = np.random.default_rng(0)
        inputs = {"source_ids": generator.integers(1, 30, (4, 8)), "target_ids": generator.integers(1, 40, (4, 9))}
        inputs["source_ids"][:, 6:] = 0  # with padding, so the masks run in bfloat16 too
        labels = generator.integers(1, 40, (4, 9))
        losses = [float(model.train_on_batch(inputs, labels)[0]) for _ in range(3)]
        probabilities = to_numpy(model(inputs))
    finally:
        keras.mixed_precision.set_global_policy("float32")
    assert all(np.isfinite(losses))
    assert probabilities.dtype == np.float32 and np.all(np.isfinite(probabilities))
    np.testing.assert_allclose(probabilities.sum(axis=-1), 1.0, atol=1e-3)


@pytest.mark.parametrize("rate", [1.0, -0.1, 1.5, True, "0.1", None])
def test_every_dropout_and_smoothing_rate_is_checked_one_way(rate):
    """One check (`_validation.check_rate`) and one message wherever a rate in [0, 1) is taken."""
    from transformer_course.attention import MultiHeadAttention
    from transformer_course.classifier import build_sentiment_classifier
    from transformer_course.metrics import MaskedCrossEntropy
    from transformer_course.transformer import TransformerDecoder

    makers = {
        "dropout": [
            lambda: MultiHeadAttention(num_heads=2, key_dim=4, dropout=rate),
            lambda: TransformerEncoder(intermediate_dim=F, num_heads=2, dropout=rate),
            lambda: TransformerDecoder(intermediate_dim=F, num_heads=2, dropout=rate),
            lambda: build_sentiment_classifier(
                vocabulary_size=50, sequence_length=8, embed_dim=8, num_heads=2, dropout=rate
            ),
        ],
        "label_smoothing": [lambda: MaskedCrossEntropy(label_smoothing=rate)],
    }
    for name, constructors in makers.items():
        for construct in constructors:
            message = rf"^`{name}` must be in \[0, 1\); received {re.escape(repr(rate))}\.$"
            with pytest.raises(ValueError, match=message):
                construct()
