"""LoRA written out on each projection's whole matrix: equal to Keras' own where the two coincide, the per-head
difference where they do not, frozen weights, the merge."""

import inspect

import keras
import numpy as np
import pytest
from keras import ops

from transformer_course.language_model import LanguageModel, language_model_classifier
from transformer_course.lora import LoRA, add_lora, lora_weights, merge_lora

IDS = np.array([[3, 4, 5, 6, 0, 0], [7, 8, 9, 10, 11, 12]], dtype="int32")


def numpy(x):
    return np.asarray(ops.convert_to_numpy(x))


def projection(equation, output_shape, input_shape, bias_axes=None, seed=0):
    keras.utils.set_random_seed(seed)
    layer = keras.layers.EinsumDense(equation, output_shape, bias_axes=bias_axes)
    layer.build(input_shape)
    return layer


def llama():
    keras.utils.set_random_seed(0)
    return LanguageModel(
        20, 8, embed_dim=16, intermediate_dim=24, num_heads=4, num_layers=2, dropout=0.0, architecture="llama",
        num_key_value_heads=2,
    )  # fmt: skip


def test_on_the_output_projection_lora_equals_keras_enable_lora_with_the_same_matrices():
    # (N, H, E) = (4, 8, 32): Keras' A is (N, H, r), B (r, E): the matrix A (N·H, r) B (r, E) of the paper.
    alpha = 6.0 if "lora_alpha" in inspect.signature(keras.layers.EinsumDense.enable_lora).parameters else 3.0
    ours = LoRA(projection("btnh,nhe->bte", (None, 32), (None, None, 4, 8), "e"), rank=3, alpha=alpha)
    ours.build()
    theirs = projection("btnh,nhe->bte", (None, 32), (None, None, 4, 8), "e")
    theirs.enable_lora(3, **({"lora_alpha": alpha} if alpha != 3.0 else {}))  # older Keras: alpha = rank
    rng = np.random.default_rng(0)
    a, b = rng.normal(size=(32, 3)).astype("float32"), rng.normal(size=(3, 32)).astype("float32")
    ours.lora_a.assign(a)
    ours.lora_b.assign(b)
    theirs.lora_kernel_a.assign(a.reshape(4, 8, 3))
    theirs.lora_kernel_b.assign(b)
    x = rng.normal(size=(2, 5, 4, 8)).astype("float32")
    np.testing.assert_allclose(numpy(ours(x)), numpy(theirs(x)), atol=1e-4)  # float32 sums of 32 products
    np.testing.assert_allclose(numpy(ours.merged_kernel()), numpy(theirs.kernel), atol=1e-5)


def test_on_the_query_projection_one_change_of_rank_r_against_keras_one_per_head():
    # The query kernel (E, N, H) = (32, 4, 8): ours learns A (E, r), B (r, N·H), a change of rank <= r of the
    # E x N·H matrix; Keras' A (E, N, r) and B (r, H) give each head its own A: rank up to N·r.
    rng = np.random.default_rng(1)
    ours = LoRA(projection("bte,enh->btnh", (None, 4, 8), (None, None, 32), "nh"), rank=2)
    ours.build()
    ours.lora_b.assign(rng.normal(size=(2, 32)).astype("float32"))
    change = numpy(ours.merged_kernel()) - numpy(ours.projection.kernel)
    assert [tuple(w.shape) for w in ours.trainable_weights] == [(32, 2), (2, 32)]
    assert np.linalg.matrix_rank(change.reshape(32, 32), tol=1e-4) == 2
    theirs = projection("bte,enh->btnh", (None, 4, 8), (None, None, 32))
    theirs.enable_lora(2)
    assert tuple(theirs.lora_kernel_a.shape) == (32, 4, 2) and tuple(theirs.lora_kernel_b.shape) == (2, 8)
    theirs.lora_kernel_b.assign(rng.normal(size=(2, 8)).astype("float32"))
    keras_change = numpy(theirs.kernel) - numpy(theirs._kernel)
    assert np.linalg.matrix_rank(keras_change.reshape(32, 32), tol=1e-4) == 8  # N·r = 4·2


def test_lora_starts_as_the_projection_and_refuses_what_it_cannot_adapt():
    query = projection("bte,enh->btnh", (None, 4, 8), (None, None, 32))
    adapted = LoRA(query, rank=4)
    x = np.random.default_rng(2).normal(size=(2, 3, 32)).astype("float32")
    np.testing.assert_allclose(numpy(adapted(x)), numpy(query(x)), rtol=0, atol=1e-6)  # B = 0: W itself
    assert not any(weight.trainable for weight in query.weights) and adapted.scale == 1.0
    dense = keras.layers.Dense(5)
    dense.build((None, 7))
    assert LoRA(dense, rank=2, alpha=8).scale == 4.0
    with pytest.raises(ValueError, match="`projection` must be built first"):
        LoRA(keras.layers.Dense(5), rank=2)
    with pytest.raises(TypeError, match="must be a keras.layers.Dense or EinsumDense; received LayerNormalization"):
        LoRA(keras.layers.LayerNormalization(), rank=2)
    with pytest.raises(ValueError, match="`rank` must be"):
        LoRA(dense, rank=0)
    with pytest.raises(ValueError, match="`alpha` must be a positive number; received -1"):
        LoRA(dense, rank=2, alpha=-1)
    swapped = projection("bte,hne->btnh", (None, 4, 8), (None, None, 32))
    with pytest.raises(ValueError, match="received the equation 'bte,hne->btnh'"):
        LoRA(swapped, rank=2)


def test_an_adapted_language_model_trains_only_its_lora_matrices_and_the_head():
    model = llama()
    frozen = {weight.path: numpy(weight) for weight in model.weights}
    adapters = add_lora(model, rank=2, feedforward=True, seed=0)
    assert len(adapters) == 2 * (4 + 3)  # per block: query, key, value, output; gate, up, down
    classifier = language_model_classifier(model)
    trainable = {id(weight) for weight in classifier.trainable_weights}
    head = classifier.get_layer("class_output").weights
    assert trainable == {id(weight) for weight in lora_weights(model) + head}
    classifier.compile(optimizer=keras.optimizers.SGD(0.5), loss="binary_crossentropy")
    classifier.train_on_batch(IDS, np.array([[0.0], [1.0]], "float32"))
    for weight in model.weights:
        if weight.path in frozen:
            np.testing.assert_array_equal(numpy(weight), frozen[weight.path], err_msg=weight.path)
    assert any(np.abs(numpy(adapter.lora_b)).max() > 0 for adapter in adapters)
    with pytest.raises(ValueError, match="already has LoRA layers"):
        add_lora(model, rank=2)
    with pytest.raises(ValueError, match="must be a LanguageModel with architecture='llama'; received LanguageModel"):
        add_lora(LanguageModel(20, 8, embed_dim=16, intermediate_dim=24, num_heads=4), rank=2)


def test_rank_stabilized_lora_scales_by_the_square_root_of_the_rank():
    # rsLoRA (Kalajdzievski, 2023): α / √r, so at one α the change's scale no longer falls as 1 / r.
    dense = keras.layers.Dense(5)
    dense.build((None, 7))
    assert [LoRA(dense, rank=r, alpha=8, rank_stabilized=True).scale for r in (1, 4, 16)] == [8.0, 4.0, 2.0]
    assert [LoRA(dense, rank=r, alpha=8).scale for r in (1, 4, 16)] == [8.0, 2.0, 0.5]
    adapted = LoRA(dense, rank=4, alpha=8, rank_stabilized=True, b_initializer="ones")
    adapted.build()
    x = np.random.default_rng(4).normal(size=(3, 7)).astype("float32")
    plain = numpy(adapted.lora_a) @ numpy(adapted.lora_b)
    np.testing.assert_allclose(numpy(adapted(x)), x @ (numpy(dense.kernel) + 4.0 * plain) + numpy(dense.bias),
                               atol=1e-4)  # fmt: skip
    again = LoRA.from_config(adapted.get_config())
    assert again.rank_stabilized and again.scale == 4.0
    assert {adapter.scale for adapter in add_lora(llama(), rank=4, alpha=8.0, rank_stabilized=True)} == {4.0}


def test_merging_folds_every_change_into_its_kernel_and_gives_the_same_outputs(tmp_path):
    model = llama()
    adapters = add_lora(model, rank=3, alpha=6.0, feedforward=True, seed=1)
    rng = np.random.default_rng(3)
    for adapter in adapters:
        adapter.lora_b.assign(rng.normal(scale=0.1, size=tuple(adapter.lora_b.shape)).astype("float32"))
    merged = merge_lora(model)
    assert not lora_weights(merged) and len(merged.weights) == len(model.weights) - 2 * len(adapters)
    np.testing.assert_allclose(numpy(merged(IDS)), numpy(model(IDS)), atol=1e-5)
    assert not np.allclose(numpy(merged(IDS)), numpy(llama()(IDS)), atol=1e-4)  # the changes are in it
    merged.save(tmp_path / "merged.keras")  # a plain language model again
    np.testing.assert_allclose(numpy(keras.models.load_model(tmp_path / "merged.keras")(IDS)), numpy(merged(IDS)),
                               atol=1e-6)  # fmt: skip
    with pytest.raises(ValueError, match="has no LoRA layers to merge"):
        merge_lora(llama())
