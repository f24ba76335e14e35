"""transformer-course: from the LSTM encoder-decoder to attention and the Transformer.

Importing the package is cheap: TensorFlow loads only when a module that needs it is imported
(``seq2seq``) or when a notebook calls :func:`start_notebook`.
"""

from .profiles import PROFILE_NAMES, Profile, Settings, profile
from .runtime import start_notebook

__version__ = "0.1.0"

__all__ = ["PROFILE_NAMES", "Profile", "Settings", "profile", "start_notebook", "__version__"]
# changed
