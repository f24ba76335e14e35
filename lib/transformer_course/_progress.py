"""Text progress bars (``tqdm``) that read well live and in a saved notebook."""

from __future__ import annotations

import sys

__all__ = ["progress", "epoch_progress"]


def progress(iterable=None, **kwargs):
    """A text progress bar on stdout (``tqdm``) that reads well live and in a saved notebook.

    Args:
        iterable: what to loop over, as with ``tqdm``.
        **kwargs: passed to ``tqdm.tqdm`` (``desc``, ``total``, ...).
    """
    from tqdm import tqdm

    kwargs.setdefault("file", sys.stdout)
    kwargs.setdefault("ncols", 90)
    kwargs.setdefault("mininterval", 1.0)
    return tqdm(iterable, **kwargs)


def epoch_progress():
    """A Keras callback showing one text progress bar over all epochs, with the latest loss.

    Returns:
        A ``tqdm.keras.TqdmCallback``; pass it in ``fit(..., verbose=0, callbacks=[...])``.
    """
    from tqdm import tqdm
    from tqdm.keras import TqdmCallback

    return TqdmCallback(verbose=0, tqdm_class=tqdm, file=sys.stdout, ncols=110, mininterval=1.0)
