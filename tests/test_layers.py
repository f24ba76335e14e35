"""Every layer and model the package registers passes the shared checks of ``layer_checks.py``, on every
backend.

A new layer needs an entry in ``EXAMPLES``, a new model one in ``MODEL_EXAMPLES``:
``test_every_registered_layer_has_an_example`` and its model twin fail until it has one.
"""

import ast
import inspect
from pathlib import Path

import keras
import numpy as np
import pytest
from layer_checks import TENSORFLOW_MODULES, check_layer, check_model, subject_modules

from transformer_course import (
    attention,
    bert,
    electra,
    language_model,
    lora,
    pooling,
    positional,
    post_training,
    seq2seq,
    seq2seq_attention,
    transformer,
    translation,
    vision,
    word_vectors,
)

B, T, S, E, V = 2, 5, 4, 8, 11
rng = np.random.default_rng(0)
FEATURES = rng.normal(size=(B, T, E)).astype("float32")
SOURCE = rng.normal(size=(B, S, E)).astype("float32")
IDS = np.array([[3, 4, 5, 0, 0], [1, 2, 3, 4, 5]], dtype="int32")
STATES = (rng.normal(size=(B, E)).astype("float32"), rng.normal(size=(B, E)).astype("float32"))


def _projection():
    """A built query projection of attention's layout, (E, N, H) = (8, 2, 4), for LoRA to adapt (T fixed, so that
    the symbolic shapes are the eager ones)."""
    layer = keras.layers.EinsumDense("bte,enh->btnh", (T, 2, 4), bias_axes="nh")
    layer.build((None, T, E))
    return layer


def _small_policy():
    """A small Llama-style language model, the policy the post-training layers wrap."""
    return language_model.build_language_model(
        V, T, architecture="llama", embed_dim=E, num_heads=2, intermediate_dim=12, num_layers=1, dropout=0.0
    )


# class -> (make the layer, positional inputs, call keyword arguments)
EXAMPLES = {
    attention.MultiHeadAttention: (lambda: attention.MultiHeadAttention(2, 4), (FEATURES, SOURCE), {}),
    attention.GroupedQueryAttention: (
        lambda: attention.GroupedQueryAttention(4, 4, 2, rotary_max_wavelength=1e4),
        (FEATURES, FEATURES),
        {"use_causal_mask": True},
    ),
    transformer.RMSNorm: (transformer.RMSNorm, (FEATURES,), {}),
    transformer.SwiGLUFeedForward: (lambda: transformer.SwiGLUFeedForward(12), (FEATURES,), {}),
    transformer.LlamaDecoder: (lambda: transformer.LlamaDecoder(12, 4, 2), (FEATURES,), {}),
    pooling.MaskedGlobalMaxPooling1D: (pooling.MaskedGlobalMaxPooling1D, (FEATURES,), {}),
    pooling.LastTokenPooling: (pooling.LastTokenPooling, (FEATURES,), {}),
    pooling.PrependClassToken: (lambda: pooling.PrependClassToken(7), (IDS,), {}),
    pooling.ClassTokenOutput: (pooling.ClassTokenOutput, (FEATURES,), {}),
    positional.PositionalEmbedding: (lambda: positional.PositionalEmbedding(T, V, E), (IDS,), {}),
    positional.TokenEmbedding: (lambda: positional.TokenEmbedding(V, E), (IDS,), {}),
    positional.RelativePositionBias: (
        lambda: positional.RelativePositionBias(2, 3),
        (rng.normal(size=(B, 2, T, T)).astype("float32"),),
        {},
    ),
    positional.SegmentEmbedding: (lambda: positional.SegmentEmbedding(2, E), (FEATURES, (IDS > 2).astype("int32")), {}),
    pooling.GatherPositions: (pooling.GatherPositions, ((FEATURES, np.array([[0, 2], [1, 4]], "int32")),), {}),
    bert.SpanHead: (bert.SpanHead, (FEATURES,), {}),
    post_training.AnswerLogProbabilities: (
        lambda: post_training.AnswerLogProbabilities(_small_policy()),
        (IDS, np.roll(IDS, -1, axis=1)),
        {},
    ),
    post_training.PairLogProbabilities: (
        lambda: post_training.PairLogProbabilities(_small_policy()),
        (
            np.stack([IDS, IDS[::-1]], axis=1),
            np.stack([np.roll(IDS, -1, axis=1)] * 2, axis=1),
            np.stack([IDS > 0, IDS > 2], axis=1),
        ),
        {},
    ),
    seq2seq.LSTMDecoder: (lambda: seq2seq.LSTMDecoder(units=E, n_features=V, output_length=3), (STATES,), {}),
    seq2seq.AttentionLSTMDecoder: (
        lambda: seq2seq.AttentionLSTMDecoder(units=E, n_features=V, output_length=3),
        (SOURCE, STATES),
        {},
    ),
    seq2seq_attention.LuongDotAttention: (seq2seq_attention.LuongDotAttention, (STATES[0], SOURCE), {}),
    seq2seq_attention.LuongGeneralAttention: (seq2seq_attention.LuongGeneralAttention, (STATES[0], SOURCE), {}),
    seq2seq_attention.BahdanauAttention: (lambda: seq2seq_attention.BahdanauAttention(6), (STATES[0], SOURCE), {}),
    transformer.TransformerEncoder: (lambda: transformer.TransformerEncoder(16, 2), (FEATURES,), {}),
    transformer.TransformerDecoder: (lambda: transformer.TransformerDecoder(16, 2), (FEATURES, SOURCE), {}),
    transformer.TokenDistribution: (lambda: transformer.TokenDistribution(V), (FEATURES,), {}),
    transformer.TiedTokenDistribution: (
        lambda: transformer.TiedTokenDistribution(V),
        (rng.normal(size=(B, T, V)).astype("float32"),),
        {},
    ),
    vision.PatchEmbedding: (
        lambda: vision.PatchEmbedding(patch_size=2, embed_dim=E),
        (rng.normal(size=(B, 4, 4, 1)).astype("float32"),),
        {},
    ),
    vision.ClassTokenAndPositions: (vision.ClassTokenAndPositions, (FEATURES,), {}),
    # B drawn at random, not zero: from the paper's start A gets no gradient until B moves.
    lora.LoRA: (lambda: lora.LoRA(_projection(), rank=2, alpha=4.0, b_initializer="random_normal"), (FEATURES,), {}),
    # The generator is certain of each draw, so the outputs do not depend on the random state.
    electra.ReplaceWithSamples: (
        lambda: electra.ReplaceWithSamples(seed=0),
        (
            np.eye(V, dtype="float32")[[[6, 7], [8, 9]]],
            IDS,
            np.array([[0, 2], [1, 4]], "int32"),
            np.array([[3, 0], [2, 5]], "int32"),
        ),
        {},
    ),
}


# class -> its example's number of weights, from the architecture (E = 8 wide, V = 11 ids, T = 5 positions).
N, H = 2, 4  # MultiHeadAttention(2, 4): 2 heads of 4; its four projections each carry a bias
ATTENTION = 3 * (E * N * H + N * H) + (N * H * E + E)  # query, key and value kernels and biases; the output
FEED_FORWARD = (E * 16 + 16) + (16 * E + E)  # the encoder and decoder examples' intermediate width 16
WEIGHT_COUNTS = {
    attention.MultiHeadAttention: ATTENTION,
    lora.LoRA: (E * N * H + N * H) + E * 2 + 2 * N * H,  # the frozen projection, then A (8 x 2) and B (2 x 8)
    # 4 query heads and 2 key/value heads of width 4, with biases
    attention.GroupedQueryAttention: (E * 4 * 4 + 4 * 4) + 2 * (E * 2 * 4 + 2 * 4) + (4 * 4 * E + E),
    transformer.RMSNorm: E,  # a scale, no shift
    transformer.SwiGLUFeedForward: 3 * E * 12,  # gate, up (E x 12) and down (12 x E), no biases
    # Llama: heads of width E / 4 = 2, no biases; two RMSNorms; SwiGLU of width 12
    transformer.LlamaDecoder: (E * 4 * 2 + 2 * (E * 2 * 2) + 4 * 2 * E) + 2 * E + 3 * E * 12,
    transformer.TransformerEncoder: ATTENTION + 2 * (2 * E) + FEED_FORWARD,  # two LayerNorms: scale and shift
    transformer.TransformerDecoder: 2 * ATTENTION + 3 * (2 * E) + FEED_FORWARD,  # self- and cross-attention
    positional.PositionalEmbedding: V * E + T * E,
    positional.TokenEmbedding: V * E,
    positional.RelativePositionBias: 2 * (2 * 3 + 1),  # one number per head and offset -3 ... 3
    positional.SegmentEmbedding: 2 * E,
    transformer.TokenDistribution: E * V + V,
    bert.SpanHead: 2 * E,  # a start vector and an end vector, no bias (Devlin et al., 2019, §4.2)
    vision.PatchEmbedding: 2 * 2 * 1 * E + E,  # a 2 x 2 patch of one channel to E, and a bias
    vision.ClassTokenAndPositions: E + (T + 1) * E,  # the [CLS] vector, and a position for it and each token
    **{
        layer: 0
        for layer in (
            pooling.MaskedGlobalMaxPooling1D,
            pooling.LastTokenPooling,
            pooling.PrependClassToken,
            pooling.ClassTokenOutput,
            pooling.GatherPositions,
            seq2seq_attention.LuongDotAttention,
            electra.ReplaceWithSamples,
        )
    },
}

# class -> (make the model, its inputs); every model small and without dropout, so outputs are deterministic.
MODEL_EXAMPLES = {
    language_model.LanguageModel: (
        lambda: language_model.LanguageModel(
            V,
            T,
            embed_dim=E,
            intermediate_dim=16,
            num_heads=2,
            num_layers=2,
            dropout=0.0,
            normalize_first=True,
            final_norm=True,
        ),
        IDS,
    ),
    translation.TranslationModel: (
        lambda: translation.TranslationModel(
            V, V + 2, S, T, embed_dim=E, intermediate_dim=16, num_heads=2, num_layers=2, dropout=0.0
        ),
        {"source_ids": IDS[:, :S], "target_ids": IDS[:, ::-1].copy()},
    ),
    bert.BertPretrainer: (
        lambda: bert.BertPretrainer(V, T, 2, embed_dim=E, num_heads=2, intermediate_dim=16, num_layers=2, dropout=0.0),
        {
            "token_ids": IDS,
            "segment_ids": (IDS > 2).astype("int32"),
            "mask_positions": np.array([[1, 2], [0, 4]], "int32"),
        },
    ),
    word_vectors.SkipGram: (
        lambda: word_vectors.SkipGram(V, E),
        {"centre": np.array([3, 4], "int32"), "context": np.array([[4, 5, 1], [3, 2, 7]], "int32")},
    ),
    vision.VisionTransformer: (
        lambda: vision.VisionTransformer(
            4, 1, 2, 3, embed_dim=E, num_heads=2, intermediate_dim=16, num_layers=2, dropout=0.0
        ),
        rng.normal(size=(B, 4, 4, 1)).astype("float32"),
    ),
}
# Models the contract leaves to their own tests, with the reason.
NOT_IN_THE_CONTRACT = {
    "Translator": "strings in and out through TextVectorization, TensorFlow only "
    "(tests/test_translation.py round-trips it)",
    "ElectraPretrainer": "its discriminator reads random draws, so two calls differ "
    "(tests/test_electra.py rebuilds it from its config and trains it)",
}


def _registered(kind):
    """Every public class of the subject modules that is a ``kind`` and that the package registers for ``.keras``
    files (Layer: layers that are not models)."""
    found = set()
    for module in subject_modules():
        for name, value in vars(module).items():
            if (
                inspect.isclass(value)
                and value.__module__ == module.__name__
                and not name.startswith("_")
                and issubclass(value, kind)
                and (kind is keras.Model or not issubclass(value, keras.Model))
                and keras.saving.get_registered_object(keras.saving.get_registered_name(value)) is value
            ):
                found.add(value)
    return found


def _registered_layers():
    return _registered(keras.layers.Layer)


def test_every_registered_layer_has_an_example():
    missing = sorted(layer.__name__ for layer in _registered_layers() - set(EXAMPLES))
    assert not missing, f"add these layers to EXAMPLES: {missing}"


@pytest.mark.parametrize("layer_class", list(EXAMPLES), ids=lambda layer_class: layer_class.__name__)
def test_layer_passes_the_shared_checks(layer_class, tmp_path):
    make_layer, inputs, call_kwargs = EXAMPLES[layer_class]
    check_layer(make_layer, inputs, call_kwargs, tmp_path)


@pytest.mark.parametrize("layer_class", list(WEIGHT_COUNTS), ids=lambda layer_class: layer_class.__name__)
def test_a_layers_weights_are_as_many_as_its_architecture_says(layer_class):
    make_layer, inputs, call_kwargs = EXAMPLES[layer_class]
    layer = make_layer()
    layer(*keras.tree.map_structure(keras.ops.convert_to_tensor, inputs), **call_kwargs)
    assert layer.count_params() == WEIGHT_COUNTS[layer_class]


def test_every_registered_model_has_an_example():
    missing = sorted(
        model.__name__
        for model in _registered(keras.Model) - set(MODEL_EXAMPLES)
        if model.__name__ not in NOT_IN_THE_CONTRACT
    )
    assert not missing, f"add these models to MODEL_EXAMPLES: {missing}"


@pytest.mark.parametrize("model_class", list(MODEL_EXAMPLES), ids=lambda model_class: model_class.__name__)
def test_model_passes_the_shared_checks(model_class, tmp_path):
    make_model, inputs = MODEL_EXAMPLES[model_class]
    check_model(make_model, inputs, tmp_path, atol=1e-5)


def test_the_modules_left_out_on_other_backends_are_exactly_those_that_import_tensorflow():
    """Read from what runs at import: a top-level `import tensorflow` or `import_tensorflow_quietly()` call."""
    importing = set()
    for path in Path(translation.__file__).parent.glob("[!_]*.py"):
        for statement in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(statement, (ast.FunctionDef, ast.ClassDef)):
                continue  # runs when called, not at import
            for node in ast.walk(statement):
                modules = (
                    [alias.name for alias in node.names]
                    if isinstance(node, ast.Import)
                    else [node.module or ""]
                    if isinstance(node, ast.ImportFrom)
                    else []
                )
                called = isinstance(node, ast.Call) and getattr(node.func, "id", None) == "import_tensorflow_quietly"
                if called or any(module.split(".")[0] == "tensorflow" for module in modules):
                    importing.add(path.stem)
    assert importing == set(TENSORFLOW_MODULES)
