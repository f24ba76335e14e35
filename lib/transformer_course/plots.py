"""Plots the notebooks show: training curves, accuracy against length, one-hot grids, attention, an unrolled RNN."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

__all__ = ["plot_training_curves", "plot_accuracy_by_length", "plot_one_hot", "plot_attention", "plot_unrolled_network"]


def _axes(axes, count: int = 1, width: float = 5.0):
    import matplotlib.pyplot as plt

    if axes is not None:
        return axes
    _, created = plt.subplots(1, count, figsize=(width * count, 3.6), squeeze=False)
    return created[0] if count > 1 else created[0][0]


def plot_training_curves(
    histories: Mapping[str, object], metrics: Sequence[str] = ("loss", "accuracy"), log_scale: Sequence[str] = ()
):
    """Plot training curves, one panel a metric, one colour a model: solid training, dashed validation.

    Each model keeps its colour in every panel; the legend names the models by their labels and
    says once which line style is which, rather than printing Keras' keys (``val_loss``).

    Args:
        histories: mapping label -> ``keras.callbacks.History`` (or its ``.history`` dict).
        metrics: names of the logged metrics to plot (the ``"val_"`` variants are drawn dashed
            when logged).
        log_scale: the metrics whose panel gets a logarithmic y axis (a loss whose differences
            are small beside its first epochs).

    Returns:
        The matplotlib axes (one per metric).

    Raises:
        ValueError: if a metric was logged by none of the histories, or ``log_scale`` names a
            metric not in ``metrics``.

    Example:
        >>> axes = plot_training_curves({"a model": {"loss": [1.0, 0.5], "val_loss": [1.1, 0.7]}}, metrics=("loss",))
        >>> training, validation = axes[0].lines[:2]
        >>> training.get_linestyle(), validation.get_linestyle(), training.get_color() == validation.get_color()
        ('-', '--', True)
    """
    from matplotlib.lines import Line2D

    unknown = [metric for metric in log_scale if metric not in metrics]
    if unknown:
        raise ValueError(f"`log_scale` must name metrics in `metrics` {tuple(metrics)}; received {unknown}.")
    axes = np.atleast_1d(_axes(None, len(metrics)))
    for axis, metric in zip(axes, metrics):
        handles, styles = [], set()
        for index, (label, history) in enumerate(histories.items()):
            logs = getattr(history, "history", history)
            colour = f"C{index % 10}"
            for key, style in ((metric, "-"), (f"val_{metric}", "--")):
                if key in logs:
                    axis.plot(np.arange(1, len(logs[key]) + 1), logs[key], style, color=colour)
                    styles.add(style)
            if metric in logs or f"val_{metric}" in logs:
                handles.append(Line2D([], [], color=colour, label=label))
        if not handles:
            raise ValueError(f"`metrics` entry {metric!r} was not logged by any history.")
        handles += [
            Line2D([], [], color="gray", linestyle=style, label=name)
            for style, name in (("-", "training"), ("--", "validation"))
            if style in styles
        ]
        axis.set_xlabel("epoch")
        axis.set_ylabel(metric)
        if metric in log_scale:
            axis.set_yscale("log")
        axis.grid(alpha=0.3)
        axis.legend(handles=handles, fontsize="small")
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
    # Curves often lie on top of each other (several models at 100 %): each gets its own marker,
    # line style and a smaller marker than the one before, so every one stays visible.
    markers, styles = "osD^v<>", ("-", "--", "-.", ":")
    for index, (label, values) in enumerate(accuracies.items()):
        if len(values) != len(lengths):
            raise ValueError(
                f"`accuracies[{label!r}]` must have one value per length ({len(lengths)}); received {len(values)}."
            )
        axis.plot(
            lengths,
            100 * np.asarray(values),
            marker=markers[index % len(markers)],
            linestyle=styles[index % len(styles)],
            markersize=max(3.0, 8.0 - 1.5 * index),
            markerfacecolor="none" if index % 2 else None,
            label=label,
        )
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


def plot_attention(
    weights,
    source_labels=None,
    target_labels=None,
    title: str = "",
    axis=None,
    xlabel: str = "key position (attended to)",
    ylabel: str = "query position (attending)",
    vmax: float | None = 1.0,
    vmin: float | None = 0.0,
):
    """Heatmap of attention weights: one row per query, one column per key.

    Args:
        weights: float array ``(T, S)``; row t is where query t looked (an output step of a
            decoder, a token of a self-attending sequence).
        source_labels: optional S labels for the columns (the keys: input symbols, tokens).
        target_labels: optional T labels for the rows (the queries).
        title: str, the panel title.
        axis: optional matplotlib axis.
        xlabel, ylabel: the axis titles (keys across, queries down).
        vmax: float, the weight drawn brightest; ``None`` scales the colours to the largest
            weight shown (weights spread over hundreds of keys are all small).
        vmin: float, the weight drawn darkest; ``None`` scales the colours to the smallest weight
            shown, so that nearly even weights (all close to 1/S) still show their differences —
            read the colour bar then: its range may be narrow.

    Returns:
        The matplotlib axis.

    Raises:
        ValueError: if ``weights`` is not 2-D or a label list has the wrong length.
    """
    weights = np.asarray(weights)
    if weights.ndim != 2:
        raise ValueError(f"`weights` must have shape (T, S); received shape {weights.shape}.")
    for name, labels, size in (
        ("source_labels", source_labels, weights.shape[1]),
        ("target_labels", target_labels, weights.shape[0]),
    ):
        if labels is not None and len(labels) != size:
            raise ValueError(f"`{name}` must have {size} labels; received {len(labels)}.")
    axis = _axes(axis, width=3.8)
    image = axis.imshow(
        weights,
        cmap="viridis",
        vmin=float(weights.min()) if vmin is None else vmin,
        vmax=float(weights.max()) if vmax is None else vmax,
    )
    for set_ticks, labels, size, rotation in (
        (axis.set_xticks, source_labels, weights.shape[1], 90),
        (axis.set_yticks, target_labels, weights.shape[0], 0),
    ):
        if labels is not None:
            labels = [str(label) for label in labels]
            # Column labels stand side by side: turned upright when they would run together, that is
            # when there are many, or when the longest is wider than about four characters a column.
            crowded = size > 8 or max(map(len, labels), default=0) > 4
            set_ticks(range(size), labels, rotation=rotation if crowded else 0, fontsize="small" if size > 12 else None)
        else:  # positions: every one up to 12, then every 2nd, 5th... so the numbers never collide
            step = 1 if size <= 12 else 2 if size <= 24 else 5 if size <= 60 else max(10, size // 10)
            set_ticks(range(0, size, step))
    axis.set_xlabel(xlabel)
    axis.set_ylabel(ylabel)
    axis.figure.colorbar(image, ax=axis, fraction=0.046, pad=0.04)
    if title:
        axis.set_title(title)
    return axis


def plot_unrolled_network(steps: int = 4, axis=None):
    """Draw a recurrent network unrolled over ``steps`` time steps, with backpropagation through time.

    One box per step (the same cell, the same weights), its input x_t below and its loss L_t
    above; black arrows carry the state h_t forward, red dashed arrows the gradient of
    L = Σ_t L_t back through the states (Werbos, 1990, *Backpropagation through time: what it does
    and how to do it*).

    Args:
        steps: int >= 1, the number of time steps drawn.
        axis: a matplotlib axis to draw on (default: a new figure).

    Returns:
        The matplotlib axis.

    Raises:
        ValueError: if ``steps`` is not a positive integer.

    Example:
        >>> import matplotlib
        >>> matplotlib.use("Agg")
        >>> plot_unrolled_network(3).get_title()
        'unrolled over 3 steps: one cell, one set of weights'
    """
    if isinstance(steps, bool) or not isinstance(steps, (int, np.integer)) or steps < 1:
        raise ValueError(f"`steps` must be a positive integer; received {steps!r}.")
    from matplotlib.patches import FancyBboxPatch

    axis = _axes(axis, width=1.9 * steps + 1.2)
    arrow = {"arrowstyle": "->", "lw": 1.4}
    for t in range(1, steps + 1):
        x = 1.9 * t
        axis.add_patch(
            FancyBboxPatch((x - 0.45, 0.6), 0.9, 0.8, boxstyle="round,pad=0.05", facecolor="#dde8f5", edgecolor="black")
        )
        axis.text(x, 1.0, "cell", ha="center", va="center")
        axis.annotate("", (x, 0.6), (x, 0.0), arrowprops=arrow)
        axis.text(x, -0.2, f"$x_{t}$", ha="center", va="center")
        axis.annotate("", (x, 2.0), (x, 1.4), arrowprops=arrow)
        axis.text(x, 2.2, f"$L_{t}$", ha="center", va="center")
        axis.annotate("", (x - 0.5, 1.1), (x - 1.4, 1.1), arrowprops=arrow)
        axis.text(x - 0.95, 1.25, f"$h_{t - 1}$", ha="center", va="bottom", fontsize="small")
        axis.annotate("", (x - 1.4, 0.85), (x - 0.5, 0.85), arrowprops={**arrow, "color": "red", "linestyle": "--"})
    axis.text(1.9 * steps + 0.9, 1.0, "…", ha="center", va="center")
    axis.text(
        0.3,
        -0.45,
        "red, dashed: the gradient of the loss passed back one step, ∂L/∂h",
        color="red",
        fontsize="small",
        ha="left",
        va="center",
    )
    axis.set(
        xlim=(0.2, 1.9 * steps + 1.2),
        ylim=(-0.5, 2.5),
        title=f"unrolled over {steps} steps: one cell, one set of weights",
    )
    axis.axis("off")
    return axis
