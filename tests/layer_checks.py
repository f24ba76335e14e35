"""The checks every layer and model of the course passes, after keras-hub's ``run_layer_test``, cut to what we
rely on. They use ``keras.ops`` only and run on every backend.

:func:`check_layer` builds a layer from its arguments and runs it on example inputs, then checks:

1. **config round trip**: ``from_config(get_config())`` gives the same config;
2. **symbolic and eager shapes**: the layer called on ``keras.Input``s gives the shapes (batch aside)
   and dtypes that the eager call gives;
3. **``.keras`` save/load**: a model around the layer, saved and loaded, gives the same outputs;
4. **one training step**: where the layer has weights, one SGD step on a fixed random linear read-out of
   its float outputs moves every one of them by more than rounding (a weight no gradient reaches is a
   bug), but an attention key bias, whose gradient is zero by construction and which stays put;
5. **a dtype policy**: built under ``mixed_bfloat16``, the layer keeps its weights in float32,
   computes in bfloat16, and gives finite outputs.

The inputs are a tuple of positional arguments, each an array or a tuple of arrays.

:func:`check_model` does the same for a model of the course (a ``keras.Model`` built from its
arguments): config round trip, the same weights (count and shapes) when rebuilt from its config,
equal outputs after a ``.keras`` save and load, and one training step that moves every weight.
"""

from __future__ import annotations

import importlib
import importlib.util
import pkgutil

import keras
import numpy as np
from keras import ops

import transformer_course


def to_numpy(x):
    """A backend tensor (or array) as a NumPy array."""
    return ops.convert_to_numpy(x)


# The subject modules that import TensorFlow when imported (tf.data pipelines, TextVectorization): on another
# backend, where TensorFlow need not be installed, the contract leaves them out. A test keeps the list true.
TENSORFLOW_MODULES = ("text",)


def subject_modules() -> list:
    """Every public module at the package's top level: the subject, not the tooling, exercises or grading
    (the :data:`TENSORFLOW_MODULES` only where TensorFlow is installed)."""
    with_tensorflow = importlib.util.find_spec("tensorflow") is not None
    return [
        importlib.import_module(f"transformer_course.{info.name}")
        for info in pkgutil.iter_modules(transformer_course.__path__)
        if not info.ispkg and not info.name.startswith("_") and (with_tensorflow or info.name not in TENSORFLOW_MODULES)
    ]


def _symbolic(value):
    value = np.asarray(value)
    return keras.Input(shape=value.shape[1:], dtype=str(value.dtype))


def _outputs(result):
    return list(result) if isinstance(result, (tuple, list)) else [result]


def check_layer(make_layer, inputs: tuple, call_kwargs: dict | None = None, tmp_path=None, atol: float = 1e-6) -> None:
    """Run the four checks of the module docstring on ``make_layer()`` and ``inputs``.

    Args:
        make_layer: callable returning a fresh layer.
        inputs: tuple of positional call arguments (arrays, or tuples of arrays), batch first.
        call_kwargs: keyword arguments of every call (not tensors).
        tmp_path: a folder for the ``.keras`` file (pytest's ``tmp_path``).
        atol: tolerance of the save/load equality.
    """
    call_kwargs = call_kwargs or {}
    keras.utils.set_random_seed(0)  # the same weights and read-out on every run: a check that passes, always does
    layer = make_layer()
    eager = _outputs(layer(*keras.tree.map_structure(ops.convert_to_tensor, inputs), **call_kwargs))

    # 1. config round trip
    config = layer.get_config()
    assert type(layer).from_config(config).get_config() == config

    # 2. symbolic shapes and dtypes equal the eager ones
    symbolic_inputs = keras.tree.map_structure(_symbolic, inputs)
    symbolic = _outputs(make_layer()(*symbolic_inputs, **call_kwargs))
    assert len(symbolic) == len(eager)
    for traced, computed in zip(symbolic, eager, strict=True):
        assert tuple(traced.shape[1:]) == tuple(computed.shape[1:]), (traced.shape, computed.shape)
        assert keras.backend.standardize_dtype(traced.dtype) == keras.backend.standardize_dtype(computed.dtype)

    # 3. a model around the layer, saved and loaded, gives the same outputs
    flat_inputs = keras.tree.flatten(symbolic_inputs)
    model = keras.Model(flat_inputs, symbolic)
    arrays = [np.asarray(value) for value in keras.tree.flatten(inputs)]
    before = [to_numpy(value) for value in _outputs(model(arrays))]
    path = tmp_path / f"{type(layer).__name__}.keras"
    model.save(path)
    loaded = keras.models.load_model(path)
    after = [to_numpy(value) for value in _outputs(loaded(arrays))]
    for first, second in zip(before, after, strict=True):
        np.testing.assert_allclose(first, second, atol=atol)

    # 5. a dtype policy (checked before step 4, which returns early for layers without weights)
    _check_mixed_precision(make_layer, inputs, call_kwargs)

    # 4. one training step moves every weight
    floats = [value for value in symbolic if "float" in keras.backend.standardize_dtype(value.dtype)]
    if not model.trainable_weights or not floats:
        return
    _check_one_step_moves_every_weight(flat_inputs, floats, arrays, len(arrays[0]))


def _check_mixed_precision(make_layer, inputs, call_kwargs) -> None:
    """Under ``mixed_bfloat16``: float32 weights, bfloat16 compute, finite outputs."""
    original = keras.config.dtype_policy()
    keras.config.set_dtype_policy("mixed_bfloat16")
    try:
        layer = make_layer()
        outputs = _outputs(layer(*keras.tree.map_structure(ops.convert_to_tensor, inputs), **call_kwargs))
    finally:
        keras.config.set_dtype_policy(original)
    assert layer.compute_dtype == "bfloat16" and layer.variable_dtype == "float32", layer.dtype_policy
    assert all(keras.backend.standardize_dtype(weight.dtype) == "float32" for weight in layer.weights)
    for value in outputs:
        if "float" in keras.backend.standardize_dtype(value.dtype):
            assert np.isfinite(to_numpy(ops.cast(value, "float32"))).all(), f"{type(layer).__name__}: not finite"


def _flat_outputs(result) -> list:
    """A model's outputs (a tensor, a list or a dict) as a list of NumPy arrays, in a fixed order."""
    return [to_numpy(value) for value in keras.tree.flatten(result)]


def check_model(make_model, inputs, tmp_path, atol: float = 1e-6) -> None:
    """Run the model checks of the module docstring on ``make_model()`` and ``inputs``.

    Args:
        make_model: callable returning a fresh model of the course (functional, with ``inputs``).
        inputs: what the model is called on: an array, or a dict of arrays by input name.
        tmp_path: a folder for the ``.keras`` file.
        atol: tolerance of the save/load equality.
    """
    keras.utils.set_random_seed(0)  # the same weights and read-out on every run: a check that passes, always does
    model = make_model()
    before = _flat_outputs(model(inputs))

    # 1. config round trip, and the same weights when rebuilt from it
    config = model.get_config()
    rebuilt = type(model).from_config(config)
    assert rebuilt.get_config() == config
    assert [tuple(weight.shape) for weight in rebuilt.weights] == [tuple(weight.shape) for weight in model.weights]

    # 2. saved and loaded: the same class, the same outputs
    path = tmp_path / f"{type(model).__name__}.keras"
    model.save(path)
    loaded = keras.models.load_model(path)
    assert type(loaded) is type(model) and len(loaded.weights) == len(model.weights)
    for first, second in zip(before, _flat_outputs(loaded(inputs)), strict=True):
        np.testing.assert_allclose(first, second, atol=atol)

    # 3. one training step moves every weight
    floats = [
        value for value in keras.tree.flatten(model.outputs) if "float" in keras.backend.standardize_dtype(value.dtype)
    ]
    _check_one_step_moves_every_weight(model.inputs, floats, inputs, len(keras.tree.flatten(inputs)[0]))


# A weight "moves" when one step changes it by more than this: real gradients of the examples move every
# weight by 2e-5 or more under SGD(1.0), float rounding moves a weight with no gradient by about 1e-8.
MOVED = 1e-6
# Weights whose gradient is zero by construction, by the end of their path: an attention key bias adds
# q·b to every score of a query, and softmax is invariant to that (its update is rounding, on any CPU).
NO_GRADIENT_BY_CONSTRUCTION = ("key_bias",)


def _check_one_step_moves_every_weight(inputs, floats, arrays, batch: int) -> None:
    """One SGD(1.0) step on a fixed random linear read-out of the float outputs moves every weight by more than
    :data:`MOVED`, but those of :data:`NO_GRADIENT_BY_CONSTRUCTION`, which stay within it.

    A linear read-out (a fixed random vector along the last axis, summed over the others), not the outputs'
    mean square: after a LayerNorm or a softmax the mean square is (nearly) constant, its gradients are
    rounding, and whether rounding moves a weight depends on the CPU's vector units.
    """
    rng = np.random.default_rng(0)

    def read_out(value):
        axes = tuple(range(1, len(value.shape)))
        if not axes:
            return value
        if value.shape[-1] is None:
            return ops.mean(ops.square(value), axis=axes)
        weights = rng.standard_normal(value.shape[-1]).astype("float32")
        return ops.sum(value * ops.cast(weights, value.dtype), axis=axes)

    trainer = keras.Model(inputs, sum(read_out(value) for value in floats))  # (B,)
    trainer.compile(optimizer=keras.optimizers.SGD(1.0), loss=lambda _, read: ops.mean(read))
    start = [to_numpy(weight) for weight in trainer.trainable_weights]
    trainer.train_on_batch(arrays, np.zeros(batch, "float32"))
    for weight, value in zip(trainer.trainable_weights, start, strict=True):
        moved = float(np.max(np.abs(to_numpy(weight) - value)))
        if weight.path.endswith(NO_GRADIENT_BY_CONSTRUCTION):
            assert moved <= MOVED, f"{weight.path} has no gradient by construction, yet moved by {moved:.2g}"
        else:
            assert moved > MOVED, f"no gradient reached {weight.path} (it moved by {moved:.2g})"
