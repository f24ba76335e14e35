"""Every docstring example in the package runs as a doctest, and every public layer, model and
model builder has one: the example a reader copies is one that works."""

import doctest
import inspect

import keras
import pytest
from layer_checks import subject_modules

pytestmark = pytest.mark.tensorflow  # Keras on TensorFlow: no jax/torch backend session collects it

MODULES = subject_modules()


@pytest.mark.parametrize("module", MODULES, ids=lambda module: module.__name__.rsplit(".", 1)[-1])
def test_the_docstring_examples_run(module):
    results = doctest.testmod(
        module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE, report=False, verbose=False
    )
    assert results.failed == 0, f"{results.failed} of {results.attempted} examples failed (run doctest for details)"


def _needs_an_example(value) -> bool:
    """A public layer or model class, or a ``build_*`` function."""
    if inspect.isclass(value):
        return issubclass(value, keras.layers.Layer)  # keras.Model is a Layer too
    return inspect.isfunction(value) and value.__name__.startswith("build_")


def test_every_public_layer_model_and_builder_has_an_example():
    missing = [
        f"{module.__name__}.{name}"
        for module in MODULES
        for name in getattr(module, "__all__", ())
        if getattr(getattr(module, name), "__module__", None) == module.__name__
        and _needs_an_example(getattr(module, name))
        and ">>>" not in (getattr(module, name).__doc__ or "")
    ]
    assert not missing, f"give these an Example section: {missing}"
