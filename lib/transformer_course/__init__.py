"""transformer-course: from the LSTM encoder-decoder to attention and the Transformer.

The package has three parts:

* **the subject** — what the course teaches, one module a concept: ``masks``, ``attention``,
  ``positional``, ``rotary``, ``transformer``, ``pooling``, the models (``seq2seq``,
  ``classifier``, ``translation``, ``language_model``, ``pretraining``, ``bert`` and ``electra``,
  ``vision``), ``word_vectors``, ``decoding``, ``generation``, ``bpe``, ``text``, ``training``,
  ``parallel``, ``metrics``, ``plots``, ``datasets``;
* **the exercises** — ``exercises``: the catalogue and students' ``check`` (the grader, which
  releases and grades, is a distribution of its own, ``transformer_course_grader``, that imports
  this package; nothing here imports it);
* **the machinery** — the ``tooling`` subpackage: run profiles (``tooling.profiles``), notebook
  start-up and hardware records (``tooling.runtime``), result records (``tooling.results``), the
  headless runner, the command line, publishing and the website.

The rule: **no subject module imports** ``tooling`` or ``exercises``, nothing outside ``tooling``
imports ``tooling``, and no module imports the grader (``tests/test_tooling.py`` reads every import). A reader who opens
``masks.py`` finds the mask and nothing of notebook start-up, git or progress bars; the quiet
TensorFlow import the layer modules share is ``_backend`` (standard library only).

What a notebook calls is also available here, imported from ``tooling`` on first use:
:func:`start_notebook`, :func:`profile`, :func:`report_metric`, :func:`load_record`,
:func:`checkpoint_path`, :func:`progress`, :func:`epoch_progress`. Importing the package is cheap:
TensorFlow loads only when a module that needs it is imported (``seq2seq``) or when a notebook
calls :func:`start_notebook`.
"""

from importlib import import_module

__version__ = "0.1.0"

# Name -> the module that defines it; imported when first asked for (PEP 562).
_NOTEBOOK_HELPERS = {
    "start_notebook": "tooling.runtime",
    "progress": "tooling.runtime",
    "epoch_progress": "tooling.runtime",
    "profile": "tooling.profiles",
    "checkpoint_path": "tooling.profiles",
    "RunStages": "tooling.stages",
    "PROFILE_NAMES": "tooling.profiles",
    "Profile": "tooling.profiles",
    "Settings": "tooling.profiles",
    "report_metric": "tooling.results",
    "load_record": "tooling.results",
}

__all__ = [*_NOTEBOOK_HELPERS, "__version__"]


def __getattr__(name: str):
    if name in _NOTEBOOK_HELPERS:
        return getattr(import_module(f".{_NOTEBOOK_HELPERS[name]}", __name__), name)
    raise AttributeError(f"module 'transformer_course' has no attribute {name!r}")


def __dir__():
    return sorted([*globals(), *_NOTEBOOK_HELPERS])
