"""Plots the notebooks show: training curves, accuracy against length, one-hot grids, attention."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

__all__ = ["plot_training_curves", "plot_accuracy_by_length", "plot_one_hot", "plot_attention"]


def _axes(axes, count: int = 1, width: float = 5.0):
    import matplotlib.pyplot as plt

    if axes is not None:
        return axes
    _, created = plt.subplots(1, count, figsize=(width * count, 3.6), squeeze=False)
    return created[0] if count > 1 else created[0][0]


def plot_training_curves(histories: Mapping[str, object], metrics: Sequence[str] = ("loss", "accuracy")):
    """Plot training curves, one panel a metric, one line a model.

    Args:
        histories: mapping label -> ``keras.callbacks.History`` (or its ``.history`` dict).
        metrics: names of the logged metrics to plot (``"val_"`` variants are added when logged).

    Returns:
        The matplotlib axes (one per metric).

    Raises:
        ValueError: if a metric was logged by none of the histories.
    """
    axes = _axes(None, len(metrics))
    axes = np.atleast_1d(axes)
    for axis, metric in zip(axes, metrics):
        plotted = False
        for label, history in histories.items():
            logs = getattr(history, "history", history)
            for key, style in ((metric, "-"), (f"val_{metric}", "--")):
                if key in logs:
                    epochs = np.arange(1, len(logs[key]) + 1)
                    axis.plot(epochs, logs[key], style, label=f"{label} ({key})")
                    plotted = True
        if not plotted:
            raise ValueError(f"`metrics` entry {metric!r} was not logged by any history.")
        axis.set_xlabel("epoch")
        axis.set_ylabel(metric)
        axis.grid(alpha=0.3)
        axis.legend(fontsize="small")
    return axes


def plot_accuracy_by_length(
    lengths: Sequence[int], accuracies: Mapping[str, Sequence[float]], title: str = "", axis=None
):
    """Accuracy against sequence length, one line a model or metric.

    Args:
        lengths: the sequence lengths (x axis).
        accuracies: mapping label -> accuracies in [0, 1], one per length.
        title: str, the panel title.
        axis: optional matplotlib axis to draw on.

    Returns:
        The matplotlib axis.

    Raises:
        ValueError: if a series has not one value per length.
    """
    axis = _axes(axis)
    for label, values in accuracies.items():
        if len(values) != len(lengths):
            raise ValueError(
                f"`accuracies[{label!r}]` must have one value per length ({len(lengths)}); "
                f"received {len(values)}."
            )
        axis.plot(lengths, 100 * np.asarray(values), "o-", label=label)
    axis.set_xticks(list(lengths))
    axis.set_xlabel("sequence length")
    axis.set_ylabel("test accuracy (%)")
    axis.set_ylim(0, 102)
    axis.grid(alpha=0.3)
    axis.legend()
    if title:
        axis.set_title(title)
    return axis


def plot_one_hot(encoded, title: str = "", axis=None):
    """Show a ``(T, F)`` one-hot matrix as a grid: rows are time steps, columns symbols.

    Returns:
        The matplotlib axis.

    Raises:
        ValueError: if ``encoded`` is not two-dimensional.
    """
    encoded = np.asarray(encoded)
    if encoded.ndim != 2:
        raise ValueError(f"`encoded` must have shape (T, F); received shape {encoded.shape}.")
    axis = _axes(axis, width=3.5)
    axis.imshow(encoded, cmap="Greys", vmin=0, vmax=1)
    axis.set_xticks(range(encoded.shape[1]))
    axis.set_yticks(range(encoded.shape[0]))
    axis.set_xlabel("symbol")
    axis.set_ylabel("time step")
    if title:
        axis.set_title(title)
    return axis


def plot_attention(weights, source_labels=None, target_labels=None, title: str = "", axis=None):
    """Heatmap of attention weights: one row per output step, one column per input position.

    Args:
        weights: float array ``(T, S)``; row t is where output step t looked.
        source_labels: optional S labels for the columns (the input symbols).
        target_labels: optional T labels for the rows (the output symbols).
        title: str, the panel title.
        axis: optional matplotlib axis.

    Returns:
        The matplotlib axis.

    Raises:
        ValueError: if ``weights`` is not 2-D or a label list has the wrong length.
    """
    weights = np.asarray(weights)
    if weights.ndim != 2:
        raise ValueError(f"`weights` must have shape (T, S); received shape {weights.shape}.")
    for name, labels, size in (("source_labels", source_labels, weights.shape[1]),
                               ("target_labels", target_labels, weights.shape[0])):
        if labels is not None and len(labels) != size:
            raise ValueError(f"`{name}` must have {size} labels; received {len(labels)}.")
    axis = _axes(axis, width=3.8)
    image = axis.imshow(weights, cmap="viridis", vmin=0, vmax=1)
    axis.set_xticks(range(weights.shape[1]), source_labels if source_labels is not None else None)
    axis.set_yticks(range(weights.shape[0]), target_labels if target_labels is not None else None)
    axis.set_xlabel("input position" + (" (symbol)" if source_labels is not None else ""))
    axis.set_ylabel("output step" + (" (symbol)" if target_labels is not None else ""))
    axis.figure.colorbar(image, ax=axis, fraction=0.046, pad=0.04)
    if title:
        axis.set_title(title)
    return axis
