"""Imported before Keras by every module of the package that uses it.

With the TensorFlow backend, importing Keras imports TensorFlow, whose C++ start-up INFO records
(which differ by CPU, build and GPU driver) would reach the user's stderr. Importing TensorFlow
here first, through :func:`transformer_course._backend.import_tensorflow_quietly`, keeps them out
and leaves warnings and errors visible. With another backend nothing is imported here, so the
layer modules need no TensorFlow.
"""

from ._backend import configured_keras_backend, import_tensorflow_quietly

if configured_keras_backend() == "tensorflow":
    try:
        import_tensorflow_quietly()
    except ImportError:
        pass  # Keras itself raises the clear error: the TensorFlow backend needs TensorFlow.
