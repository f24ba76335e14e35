"""Training with the best validation epoch kept: early stopping, epoch times, runs that resume.

One helper for every notebook that trains a model::

    model, history, facts = fit_best(model, train, validation, epochs=30, patience=3,
                                     checkpoint=checkpoint_path("classifier"), resume_folder=folder)

``facts`` says how it went: epochs run, the best epoch, seconds in all and to the best epoch,
each epoch's seconds and what stopped training. The returned model holds the weights of the epoch
with the lowest validation loss, whatever stopped training. How much a model trains is always a
number of epochs (or of updates a round): no clock decides it. A time limit only stops a run that
overruns it, loudly (:class:`TrainingTimeLimitError`), and with a ``resume_folder`` the same call
run again continues from the last finished epoch.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from types import MappingProxyType
from typing import NamedTuple

from . import _quiet_keras  # noqa: F401  (before Keras: TensorFlow's start-up log filtered)

# isort: split
import keras
import numpy as np

from ._files import atomic_output, write_text_atomically
from ._ids import PADDING_ID
from ._validation import check_integer, check_positive

__all__ = [
    "fit_best",
    "TrainingTimeLimitError",
    "EpochScores",
    "WindowMeans",
    "WarmupCosineDecay",
    "WarmupLinearDecay",
    "RoundOrder",
    "RowBatches",
    "running_text_chunks",
    "encode_running_text",
    "UpdateBudget",
    "interleaved_timings",
    "equal_minute_budgets",
    "equal_cost_updates",
    "best_on_validation",
    "gradient_of",
]


class RoundOrder:
    """Which rows each batch takes, shuffled, when an epoch may be shorter than a pass over the rows.

    With ``batches_per_epoch`` None, an epoch is one pass (the last batch may be smaller) and every
    epoch draws a new order. Set, an epoch is that many full batches, the next epoch goes on where
    the last one ended, and a batch that runs past the end of a pass takes its last rows from the
    next pass's new order: training cut into rounds of a chosen length. The row-picking half of
    :class:`~transformer_course.pretraining.PretrainingBatches` and
    :class:`RowBatches`.

    Args:
        rows: int >= 1, the number of rows.
        batch_size: int >= 1.
        batches_per_epoch: int >= 1, or None for one pass an epoch.
        rng: ``numpy.random.Generator`` that draws every pass's order.

    Raises:
        ValueError: for a non-positive ``rows``, ``batch_size`` or ``batches_per_epoch``.

    Example:
        >>> order = RoundOrder(5, batch_size=2, batches_per_epoch=2, rng=np.random.default_rng(0))
        >>> len(order), len(order.batch(0))
        (2, 2)
    """

    def __init__(self, rows: int, batch_size: int, batches_per_epoch: int | None, rng: np.random.Generator):
        self.rows = check_integer("rows", rows)
        self.batch_size = check_integer("batch_size", batch_size)
        self.batches_per_epoch = (
            None if batches_per_epoch is None else check_integer("batches_per_epoch", batches_per_epoch)
        )
        self.rng = rng
        self.order, self.start = rng.permutation(self.rows), 0

    def __len__(self):
        return self.batches_per_epoch or -(-self.rows // self.batch_size)

    def batch(self, index: int) -> np.ndarray:
        """The row indices of batch ``index`` of the current epoch: int ``(batch_size,)`` (or fewer, last of a pass)."""
        first = self.start + index * self.batch_size
        while self.batches_per_epoch is not None and len(self.order) < first + self.batch_size:
            self.order = np.concatenate([self.order, self.rng.permutation(self.rows)])  # the next pass
        return self.order[first : first + self.batch_size]

    def get_state(self) -> dict:
        """Where the order stands, as JSON-able data: the generator's state, the drawn order, the start."""
        return {"rng": self.rng.bit_generator.state, "order": self.order.tolist(), "start": int(self.start)}

    def set_state(self, state: dict) -> None:
        """Continue from ``state``, as :meth:`get_state` gave it: the same batches follow."""
        self.rng.bit_generator.state = state["rng"]
        self.order, self.start = np.asarray(state["order"], dtype="int64"), int(state["start"])

    def end_epoch(self) -> None:
        """A new order for the next pass, or (in rounds) move on to where this epoch ended."""
        if self.batches_per_epoch is None:
            self.order = self.rng.permutation(self.rows)
            return
        self.start += self.batches_per_epoch * self.batch_size
        while self.start >= self.rows and len(self.order) > self.rows:  # drop finished passes
            self.order, self.start = self.order[self.rows :], self.start - self.rows


class RowBatches(keras.utils.PyDataset):
    """Shuffled batches of (inputs, targets) rows, in "epochs" of a chosen number of batches.

    Training on a token budget rather than in whole passes: each epoch is ``batches_per_epoch``
    full batches, the next epoch goes on where the last one ended, and a new shuffled pass begins
    whenever one runs out. With rounds shorter than a pass, :func:`~transformer_course.training.fit_best`
    validates (and can stop or checkpoint) several times a pass. Works with every Keras backend.

    Args:
        inputs, targets: int ``(R, L)`` each, e.g. from :func:`running_text_chunks`; or a
            classifier's rows, int ``(R, L)`` token ids and ``(R,)`` labels (float labels stay float32).
        batch_size: int >= 1.
        batches_per_epoch: int >= 1, or None for one pass over the rows an epoch (the last batch
            may be smaller).
        seed: int >= 0, seeds the order.

    Yields:
        ``(inputs, targets)``: int32 ``(batch_size, L)`` each (labels: ``(batch_size,)``, int32 or
        float32 as given).

    Raises:
        ValueError: for targets that are not one per row or per token, or a non-positive
            ``batch_size`` or ``batches_per_epoch``.

    Example:
        >>> batches = RowBatches(np.ones((10, 4)), np.ones((10, 4)), batch_size=4, batches_per_epoch=2)
        >>> len(batches), batches[0][0].shape
        (2, (4, 4))
    """

    def __init__(self, inputs, targets, batch_size: int, batches_per_epoch: int | None = None, seed: int = 0, **kwargs):
        super().__init__(**kwargs)
        self.inputs, targets = np.asarray(inputs, "int32"), np.asarray(targets)
        self.targets = targets.astype("float32" if np.issubdtype(targets.dtype, np.floating) else "int32")
        one_a_row_or_a_token = (self.inputs.shape, self.inputs.shape[:1])
        if self.inputs.ndim != 2 or not len(self.inputs) or self.targets.shape not in one_a_row_or_a_token:
            raise ValueError(
                f"`inputs` must have shape (rows, length), rows >= 1, and `targets` the same shape or (rows,) (one "
                f"label a row); received {self.inputs.shape} and {self.targets.shape}."
            )
        self.rounds = RoundOrder(
            len(self.inputs),
            batch_size,
            batches_per_epoch,
            np.random.default_rng(check_integer("seed", seed, minimum=0)),
        )

    def __len__(self):
        return len(self.rounds)

    def __getitem__(self, index):
        rows = self.rounds.batch(index)
        return self.inputs[rows], self.targets[rows]

    def on_epoch_end(self):
        self.rounds.end_epoch()

    def get_state(self) -> dict:
        """The order's state (JSON-able): :func:`fit_best` keeps it so that a resumed run takes the same batches."""
        return self.rounds.get_state()

    def set_state(self, state: dict) -> None:
        """Continue from a state :meth:`get_state` gave."""
        self.rounds.set_state(state)


def running_text_chunks(token_ids, chunk_length: int, separator_id: int) -> tuple[np.ndarray, np.ndarray]:
    """Join texts into one running text and cut it into training rows for next-token prediction.

    Every text's real tokens (padding, id 0, dropped) are followed by ``separator_id``, the texts
    are joined end to end, and the stream is cut into rows of ``chunk_length`` inputs; each
    row's targets are the same tokens moved one place left, so row r's last target is row r + 1's
    first input. No row is padded except the last, whose missing targets are 0 (padding, which
    the masked loss and metrics skip).

    Args:
        token_ids: int ``(N, T)`` padded with 0, or a list of 1-D int sequences.
        chunk_length: int L >= 1, tokens a row reads.
        separator_id: int > 0, the id written after every text (an end-of-text token), so the
            model sees where one text stops and the next begins.

    Returns:
        ``(inputs, targets)``: int32 ``(R, L)`` each, R = ceil((tokens - 1) / L), where tokens
        counts the real tokens and separators.

    Raises:
        ValueError: for a non-positive ``chunk_length`` or ``separator_id``, or texts that hold
            fewer than 2 tokens in all.
    """
    chunk_length = check_integer("chunk_length", chunk_length)
    separator_id = check_integer("separator_id", separator_id)
    pieces = []
    for row in token_ids:
        row = np.asarray(row, dtype="int64").ravel()
        pieces.extend([row[row != PADDING_ID], [separator_id]])
    stream = np.concatenate(pieces) if pieces else np.zeros(0, "int64")
    if len(stream) < 2:
        raise ValueError(
            f"`token_ids` must hold at least 2 tokens in all (separators included); received {len(stream)}."
        )
    rows = -(-(len(stream) - 1) // chunk_length)
    padded = np.zeros(rows * chunk_length + 1, dtype="int32")
    padded[: len(stream)] = stream
    inputs = padded[:-1].reshape(rows, chunk_length)
    targets = padded[1:].reshape(rows, chunk_length)
    return inputs, targets


def encode_running_text(
    encode: Callable[[str], list[int]],
    texts: Iterable[str],
    chunk_length: int,
    separator_id: int,
    description: str | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Raw texts -> next-token training rows: each text encoded, then :func:`running_text_chunks`.

    What notebooks 09 and 11 do to every split of their running text: a tokenizer's ``encode``
    on each text (with a progress bar when ``description`` is given), ``separator_id`` after
    every text, rows of ``chunk_length``.

    Args:
        encode: callable str -> list of int ids > 0 (e.g. ``BytePairEncoding.encode``).
        texts: iterable of str.
        chunk_length: int L >= 1.
        separator_id: int > 0, written after every text (``<|endoftext|>``).
        description: str, the progress bar's label; None shows none.

    Returns:
        ``(inputs, targets)``: int32 ``(R, L)`` each, as :func:`running_text_chunks`.

    Raises:
        ValueError: as :func:`running_text_chunks` (a non-positive size or id, or fewer than 2
            tokens in all).

    Example:
        >>> inputs, targets = encode_running_text(lambda text: [ord(c) - 96 for c in text], ["ab", "c"], 2, 27)
        >>> inputs.tolist(), targets.tolist()
        ([[1, 2], [27, 3]], [[2, 27], [3, 27]])
    """
    if description is not None:
        from ._progress import progress

        texts = progress(texts, desc=description)
    return running_text_chunks([encode(text) for text in texts], chunk_length, separator_id)


class UpdateBudget(NamedTuple):
    """One arm's share of an equal-minutes comparison (:func:`equal_minute_budgets`).

    Attributes:
        seconds_per_update: float, the median of the arm's timed updates, in seconds.
        updates_per_round: int >= 1, updates between two validations.
        updates: int, ``updates_per_round * rounds``: the arm's whole schedule.
    """

    seconds_per_update: float
    updates_per_round: int
    updates: int


def interleaved_timings(functions: Mapping[str, Callable[[int], object]], repeats: int) -> dict[str, list[float]]:
    """Time several functions by turns: each called once untimed, then ``repeats`` timed calls each, interleaved.

    ``function(0)`` runs first for every function, untimed (it compiles, fills caches); then the
    functions take turns, ``function(1)``, ``function(2)``, … each timed with
    ``time.perf_counter``, so that a busy moment of the machine slows every function alike. Report
    the median of each list: one slow call then moves nothing. For speed comparisons in
    notebooks (an int8 model's generation against the float one's, each arm's update); a
    measurement, never a test's pass condition.

    Args:
        functions: dict of name -> callable(int), the int the call's index (a batch to take, say).
        repeats: int >= 1, timed calls each.

    Returns:
        dict of name -> list of ``repeats`` seconds, in the order of ``functions``.

    Raises:
        ValueError: for no functions or a non-positive ``repeats``.

    Example:
        >>> calls = []
        >>> times = interleaved_timings({"a": calls.append, "b": calls.append}, repeats=2)
        >>> calls, [len(seconds) for seconds in times.values()]
        ([0, 0, 1, 1, 2, 2], [2, 2])
    """
    if not functions:
        raise ValueError("`functions` must name at least one function; received none.")
    repeats = check_integer("repeats", repeats)
    for function in functions.values():
        function(0)  # compiles: not timed
    times: dict[str, list[float]] = {name: [] for name in functions}
    for index in range(1, repeats + 1):
        for name, function in functions.items():
            started = time.perf_counter()
            function(index)
            times[name].append(time.perf_counter() - started)
    return times


def equal_minute_budgets(
    steps: Mapping[str, Callable[[int], object]], minutes: float, rounds: int, timing_steps: int
) -> dict[str, UpdateBudget]:
    """Give every arm of a comparison the same minutes: time each arm's update, then count its updates.

    Each arm's ``step(index)`` makes one update on batch ``index``. Each is called once on batch 0
    first, untimed (it compiles), then the arms take turns, ``timing_steps`` timed updates each on
    batches 1, 2, … (:func:`interleaved_timings`): a busy moment of the machine slows every arm
    alike. An arm's time is the median of its timings (one slow update does not move it), and its budget is
    as many updates as fit in ``minutes``, rounded down to ``rounds`` equal rounds (at least one
    update a round). The comparison is then at equal compute in wall-clock terms: an arm that is
    slower per update pays for it with fewer updates.

    Args:
        steps: dict of arm name -> callable(int) making one update (its result is ignored).
        minutes: float > 0, each arm's training minutes.
        rounds: int >= 1, validations in a run (the schedule is cut into this many rounds).
        timing_steps: int >= 1, timed updates an arm.

    Returns:
        dict of arm name -> :class:`UpdateBudget`, in the order of ``steps``.

    Raises:
        ValueError: for no arms, a non-positive ``minutes``, ``rounds`` or ``timing_steps``.

    Example:
        >>> budgets = equal_minute_budgets({"a": lambda i: None, "b": lambda i: None}, minutes=0.5, rounds=4,
        ...                                timing_steps=3)
        >>> list(budgets), budgets["a"].updates == 4 * budgets["a"].updates_per_round
        (['a', 'b'], True)
    """
    if not steps:
        raise ValueError("`steps` must name at least one arm; received none.")
    minutes = check_positive("minutes", minutes)
    rounds, timing_steps = check_integer("rounds", rounds), check_integer("timing_steps", timing_steps)
    times = interleaved_timings(steps, timing_steps)
    budgets = {}
    for name, values in times.items():
        seconds = float(np.median(values))
        per_round = max(1, int(minutes * 60 / max(seconds, 1e-9)) // rounds)
        budgets[name] = UpdateBudget(seconds, per_round, per_round * rounds)
    return budgets


def equal_cost_updates(reference_updates: int, relative_costs: Mapping[str, float], rounds: int) -> dict[str, int]:
    """Updates per round for every arm of an equal-compute comparison, from costs measured once.

    Equal compute without a clock in the run: the reference arm (cost 1) makes ``reference_updates``
    updates, and an arm whose update costs ``c`` reference updates makes ``reference_updates / c``,
    rounded down to ``rounds`` equal rounds. The costs are measured once, on the machine that records
    the course (:func:`interleaved_timings`, ``benchmarks/update_costs.py``), and stored in the
    profile: every machine then trains the same amounts, and a slower one only takes longer.

    Args:
        reference_updates: int >= 1, the reference arm's updates.
        relative_costs: dict of arm name -> float > 0, an update's cost in reference updates (the
            reference arm's is 1).
        rounds: int >= 1, validations in a run.

    Returns:
        dict of arm name -> int >= 1, updates a round, in the order of ``relative_costs``.

    Raises:
        ValueError: for no arms, a non-positive cost, or a non-positive ``reference_updates`` or ``rounds``.

    Example:
        >>> equal_cost_updates(5824, {"masked LM": 1.0, "ELECTRA": 1.216}, rounds=4)
        {'masked LM': 1456, 'ELECTRA': 1197}
    """
    if not relative_costs:
        raise ValueError("`relative_costs` must name at least one arm; received none.")
    reference_updates, rounds = check_integer("reference_updates", reference_updates), check_integer("rounds", rounds)
    per_round = {}
    for name, cost in relative_costs.items():
        check_positive(f"relative_costs[{name!r}]", cost)
        per_round[name] = max(1, int(reference_updates / cost) // rounds)
    return per_round


def best_on_validation(grid: Iterable, score: Callable[[object], float], *, higher_is_better: bool, description=None):
    """Try every setting of a grid and keep the one with the best validation score.

    The tuning step of every fair comparison: each arm gets its own grid, scored on held-out
    data only (never the test split). Ties go to the first setting of the grid.

    Args:
        grid: iterable of settings (learning rates, say), tried in order.
        score: callable setting -> float, the validation score of a run at that setting (a
            memoised run function lets the chosen run be reused, not trained again).
        higher_is_better: bool, True for an accuracy, False for a loss.
        description: str, the progress bar's label; None shows none.

    Returns:
        ``(best, scores)``: the chosen setting, and dict setting -> score in grid order.

    Raises:
        ValueError: for an empty grid, or a score that is not a finite number (a diverged run
            must be scored, e.g. as ``inf`` loss, not hidden: NaN is refused).

    Example:
        >>> best_on_validation([1, 2, 3], lambda width: (width - 2) ** 2, higher_is_better=False)
        (2, {1: 1.0, 2: 0.0, 3: 1.0})
    """
    grid = list(grid)
    if not grid:
        raise ValueError("`grid` must hold at least one setting; received none.")
    if description is not None:
        from ._progress import progress

        tried = progress(grid, desc=description)
    else:
        tried = grid
    scores = {}
    for setting in tried:
        value = float(score(setting))
        if math.isnan(value):
            raise ValueError(f"`score` must return a number; received NaN for the setting {setting!r}.")
        scores[setting] = value
    best = (max if higher_is_better else min)(grid, key=scores.__getitem__)
    return best, scores


@keras.saving.register_keras_serializable(package="transformer_course")
class WarmupCosineDecay(keras.optimizers.schedules.LearningRateSchedule):
    """A learning rate that rises linearly, optionally holds its peak, then falls along a half cosine.

    ``rate(step) = peak · (step + 1) / warmup_steps`` for the first ``warmup_steps`` (steps counted
    from 0, so the first update already moves); then ``peak`` for
    ``hold_steps`` more; then ``final + (peak - final) · (1 + cos(π · progress)) / 2`` with
    progress going from 0 to 1 over the remaining steps up to ``decay_steps``; ``final`` after
    that. Warm-up keeps Adam's early, poorly estimated steps small (Vaswani et al., 2017, §5.3 warm
    up too); the decay lets training settle in the end (Loshchilov and Hutter, 2017, SGDR). Holding
    the peak first ("warm-up, stable, decay": Hu et al., 2024, *MiniCPM*) keeps the rate high
    for a training run that must first leave a plateau, as masked language modelling must.

    Args:
        peak: float > 0, the highest learning rate.
        warmup_steps: int >= 0.
        decay_steps: int > ``warmup_steps + hold_steps``, the step at which the rate reaches
            ``final``.
        final_fraction: float in [0, 1], ``final = final_fraction · peak``.
        hold_steps: int >= 0, steps at the peak between warm-up and decay. Defaults to 0.

    Raises:
        ValueError: naming the argument, for values outside those ranges.
    """

    def __init__(
        self, peak: float, warmup_steps: int, decay_steps: int, final_fraction: float = 0.05, hold_steps: int = 0
    ):
        if not peak > 0:
            raise ValueError(f"`peak` must be a positive learning rate; received {peak!r}.")
        if isinstance(warmup_steps, bool) or not isinstance(warmup_steps, int) or warmup_steps < 0:
            raise ValueError(f"`warmup_steps` must be an integer >= 0; received {warmup_steps!r}.")
        if isinstance(hold_steps, bool) or not isinstance(hold_steps, int) or hold_steps < 0:
            raise ValueError(f"`hold_steps` must be an integer >= 0; received {hold_steps!r}.")
        before_decay = warmup_steps + hold_steps
        if isinstance(decay_steps, bool) or not isinstance(decay_steps, int) or decay_steps <= before_decay:
            raise ValueError(
                f"`decay_steps` must be an integer above warmup_steps + hold_steps ({before_decay}); "
                f"received {decay_steps!r}."
            )
        if not 0.0 <= final_fraction <= 1.0:
            raise ValueError(f"`final_fraction` must be in [0, 1]; received {final_fraction!r}.")
        self.peak, self.final_fraction = float(peak), float(final_fraction)
        self.warmup_steps, self.decay_steps = warmup_steps, decay_steps
        self.hold_steps = hold_steps

    def __call__(self, step):
        step = keras.ops.cast(step, "float32")
        warmup = keras.ops.minimum(1.0, (step + 1.0) / max(self.warmup_steps, 1))
        decay_start = self.warmup_steps + self.hold_steps
        progress = keras.ops.clip((step - decay_start) / (self.decay_steps - decay_start), 0.0, 1.0)
        cosine = 0.5 * (1.0 + keras.ops.cos(math.pi * progress))
        decayed = self.final_fraction + (1.0 - self.final_fraction) * cosine
        return self.peak * keras.ops.where(step < self.warmup_steps, warmup, decayed)

    def get_config(self):
        return {
            "peak": self.peak,
            "warmup_steps": self.warmup_steps,
            "decay_steps": self.decay_steps,
            "final_fraction": self.final_fraction,
            "hold_steps": self.hold_steps,
        }


@keras.saving.register_keras_serializable(package="transformer_course")
class WarmupLinearDecay(keras.optimizers.schedules.LearningRateSchedule):
    """BERT's fine-tuning schedule: a linear rise to ``peak``, then a linear fall to 0.

    ``rate(step) = peak · (step + 1) / warmup_steps`` for the first ``warmup_steps``; then
    ``peak · (total_steps - step) / (total_steps - warmup_steps)``, and 0 from ``total_steps``
    on (Devlin et al., 2019, §A.2, and Google's ``optimization.py``: warm-up, then polynomial
    decay of power 1). With early stopping, set ``total_steps`` to the epoch cap's updates: a run
    that stops early has simply not reached the end of its schedule.

    Args:
        peak: float > 0, the highest learning rate.
        warmup_steps: int >= 0.
        total_steps: int > ``warmup_steps``, the step at which the rate reaches 0.

    Returns (when called with ``step``, an int or int tensor): a float32 scalar tensor.

    Raises:
        ValueError: naming the argument, for values outside those ranges.

    Example:
        >>> schedule = WarmupLinearDecay(1e-3, warmup_steps=10, total_steps=110)
        >>> [round(float(schedule(step)), 6) for step in (0, 9, 10, 60, 110)]
        [0.0001, 0.001, 0.001, 0.0005, 0.0]
    """

    def __init__(self, peak: float, warmup_steps: int, total_steps: int):
        if not (isinstance(peak, (int, float)) and not isinstance(peak, bool) and peak > 0):
            raise ValueError(f"`peak` must be a positive learning rate; received {peak!r}.")
        if isinstance(warmup_steps, bool) or not isinstance(warmup_steps, int) or warmup_steps < 0:
            raise ValueError(f"`warmup_steps` must be an integer >= 0; received {warmup_steps!r}.")
        if isinstance(total_steps, bool) or not isinstance(total_steps, int) or total_steps <= warmup_steps:
            raise ValueError(
                f"`total_steps` must be an integer above warmup_steps ({warmup_steps}); received {total_steps!r}."
            )
        self.peak, self.warmup_steps, self.total_steps = float(peak), warmup_steps, total_steps

    def __call__(self, step):
        step = keras.ops.cast(step, "float32")
        warmup = keras.ops.minimum(1.0, (step + 1.0) / max(self.warmup_steps, 1))
        decay = keras.ops.clip((self.total_steps - step) / (self.total_steps - self.warmup_steps), 0.0, 1.0)
        return self.peak * keras.ops.where(step < self.warmup_steps, warmup, decay)

    def get_config(self):
        return {"peak": self.peak, "warmup_steps": self.warmup_steps, "total_steps": self.total_steps}


class EpochScores(keras.callbacks.Callback):
    """Scores the model your way after every epoch and adds the numbers to the training history.

    Keras logs the loss and metrics of the model being trained. When what matters is another
    model that shares its layers (the inference model of a teacher-forced decoder, which feeds
    back its own predictions), score that one here: ``history.history[name]`` then holds one
    number per epoch, and :func:`fit_best`'s ``callbacks`` take it.

    Args:
        **scores: ``name=function``; each function takes no argument and returns a float.

    Raises:
        ValueError: if no score is given, or a name clashes with a Keras log (``loss``,
            ``val_loss``...) — checked when training logs it.
    """

    def __init__(self, **scores):
        super().__init__()
        if not scores:
            raise ValueError("EpochScores needs at least one `name=function`; received none.")
        self.scores = scores

    def on_epoch_end(self, epoch, logs=None):
        if logs is None:
            return
        for name, function in self.scores.items():
            if name in logs:
                raise ValueError(f"EpochScores: {name!r} is already logged by Keras; choose another name.")
            logs[name] = float(function())


class WindowMeans(keras.callbacks.Callback):
    """The mean of a training metric over every window of ``every`` updates, as training goes.

    Keras logs a running mean since the start of the epoch; the mean of one window is recovered
    from two running means: ``(mean_now · n_now − mean_before · n_before) / (n_now − n_before)``.
    A window never spans two epochs (the running mean restarts with each).

    Args:
        metric: str, the metric's name in the training logs (``"masked_accuracy"``, ``"loss"``).
        every: int >= 1, updates a window.

    Attributes:
        points: list of ``(update, window mean)``, ``update`` counted from the first update of
            training (1-based) at the window's end.
        updates: int, updates seen so far.

    Example:
        >>> trace = WindowMeans("loss", every=100)  # then model.fit(..., callbacks=[trace]); trace.points
    """

    def __init__(self, metric: str, every: int):
        super().__init__()
        self.metric, self.every = metric, check_integer("every", every)
        self.updates, self.points = 0, []

    def on_epoch_begin(self, epoch, logs=None):
        self._last = (0, 0.0)  # (batches, running mean) at the previous point of this epoch

    def get_state(self) -> dict:
        """The updates and points so far (JSON-able): :func:`fit_best` keeps them for a resumed run."""
        return {"updates": self.updates, "points": [list(point) for point in self.points]}

    def set_state(self, state: dict) -> None:
        """Continue from a state :meth:`get_state` gave."""
        self.updates, self.points = int(state["updates"]), [tuple(point) for point in state["points"]]

    def on_train_batch_end(self, batch, logs=None):
        self.updates += 1
        if (batch + 1) % self.every == 0:
            seen, mean = batch + 1, float(logs[self.metric])
            self.points.append((self.updates, (mean * seen - self._last[1] * self._last[0]) / (seen - self._last[0])))
            self._last = (seen, mean)


class TrainingTimeLimitError(RuntimeError):
    """Training ran past its time limit: raised by :func:`fit_best`, never a silent cut.

    How much a model learns is set in epochs and updates; a time limit is only a guard for a run on a
    machine far slower than planned. With a ``resume_folder``, the epochs finished so far are kept, and the
    same call run again (with a longer limit, or none) continues from them.

    Attributes:
        epochs_done: int, epochs finished when the limit was passed.
        seconds: float, seconds of training in this call.
    """

    def __init__(self, message: str, epochs_done: int, seconds: float):
        super().__init__(message)
        self.epochs_done, self.seconds = epochs_done, seconds


_STATE_FILE = "state.json"


class _BestEpoch(keras.callbacks.Callback):
    """Times epochs, keeps the best validation loss, stops on patience, guards the time limit, saves for resuming."""

    def __init__(
        self,
        patience: int,
        limit_seconds: float | None,
        checkpoint: Path | None,
        clock: Callable,
        start_from_epoch: int = 0,
        resume_folder: Path | None = None,
        resumable: Mapping[str, object] = MappingProxyType({}),
        resumed: dict | None = None,
    ):
        super().__init__()
        self.patience, self.limit_seconds, self.checkpoint, self.clock = patience, limit_seconds, checkpoint, clock
        self.start_from_epoch, self.resume_folder, self.resumable = start_from_epoch, resume_folder, resumable
        self.best_loss, self.best_epoch, self.best_weights = math.inf, None, None
        self.durations, self.stopped_by, self.logged = [], "epochs", {}
        self.resumed, self.finished, self.saved_files = resumed, False, None
        if resumed is not None:
            self.best_loss, self.best_epoch = resumed["best_loss"], resumed["best_epoch"]
            self.durations, self.stopped_by = list(resumed["epoch_seconds"]), resumed["stopped_by"]
            self.logged = {key: list(values) for key, values in resumed["history"].items()}
            self.finished = resumed["finished"]
            self.saved_files = {key: resumed[key] for key in ("variables", "best")}

    def on_train_begin(self, logs=None):
        self.start = self.last_end = self.clock()
        if self.resumed is not None:  # after Keras has built the model and its optimizer, and reset the data
            _restore_variables(self.model, self.resume_folder / self.resumed["variables"])
            best_file = self.resume_folder / self.resumed["best"]
            if best_file.exists():  # always kept beside the state, so a resumed run needs no checkpoint file
                with np.load(best_file) as best:
                    self.best_weights = [best[f"arr_{index}"] for index in range(len(best.files))]
            for name, thing in self.resumable.items():
                thing.set_state(self.resumed["resumable"][name])

    def on_epoch_end(self, epoch, logs=None):
        now = self.clock()
        self.durations.append(now - self.last_end)
        self.last_end = now
        logs = logs or {}
        loss = logs.get("val_loss")
        if loss is None:
            raise ValueError(
                "fit_best needs a validation loss each epoch (`validation` data); `val_loss` was not logged."
            )
        if loss < self.best_loss:
            self.best_loss, self.best_epoch = float(loss), epoch
            self.best_weights = self.model.get_weights()
            if self.checkpoint is not None:
                self.model.save(self.checkpoint)
        last_planned = epoch + 1 >= self.params.get("epochs", math.inf)  # ends training by its number of epochs
        if not last_planned and epoch - max(self.best_epoch, self.start_from_epoch - 1) >= self.patience:
            self.stopped_by, self.model.stop_training = "patience", True  # patience counted after the first ones
        self.finished = last_planned or self.model.stop_training

    def after_callbacks(self, epoch: int, logs: dict) -> None:
        """After every other callback's ``on_epoch_end`` (their scores are in ``logs``): log, save, check the limit."""
        for key, value in logs.items():
            self.logged.setdefault(key, []).append(float(value))
        if self.resume_folder is not None:
            self._save(epoch)
        seconds = self.last_end - self.start
        if self.limit_seconds is not None and seconds > self.limit_seconds and not self.finished:
            kept = (
                f" Its {epoch + 1} finished epochs are kept in {self.resume_folder}: run the same call again (with a "
                "longer `time_limit_minutes`, or None) to continue from them."
                if self.resume_folder is not None
                else " Nothing is kept (no `resume_folder`)."
            )
            raise TrainingTimeLimitError(
                f"Training passed its time limit of {self.limit_seconds / 60:g} minutes ({seconds / 60:.1f} minutes "
                f"after {epoch + 1} of {self.params.get('epochs')} epochs): this machine is slower than the run was "
                f"sized for.{kept}",
                epoch + 1,
                seconds,
            )

    def _save(self, epoch: int) -> None:
        """The state after ``epoch``: variables (model, optimizer), the best weights, then the JSON naming them."""
        folder, previous = self.resume_folder, self.saved_files
        names = {"variables": f"variables-{epoch + 1}.npz", "best": f"best-{epoch + 1}.npz"}
        with atomic_output(folder / names["variables"]) as temporary, open(temporary, "wb") as handle:
            np.savez(handle, *[keras.ops.convert_to_numpy(v) for v in _all_variables(self.model)])
        with atomic_output(folder / names["best"]) as temporary, open(temporary, "wb") as handle:
            np.savez(handle, *self.best_weights)
        state = {
            "epochs_done": epoch + 1,
            "finished": self.finished,
            "best_loss": self.best_loss,
            "best_epoch": self.best_epoch,
            "epoch_seconds": self.durations,
            "stopped_by": self.stopped_by,
            "history": self.logged,
            "resumable": {name: thing.get_state() for name, thing in self.resumable.items()},
            **names,
        }
        write_text_atomically(folder / _STATE_FILE, json.dumps(state))
        if previous is not None:  # the files of the epoch before, now replaced
            for key in ("variables", "best"):
                if previous[key] != names[key]:
                    (folder / previous[key]).unlink(missing_ok=True)
        self.saved_files = names


class _AfterCallbacks(keras.callbacks.Callback):
    """The last callback of an epoch: hands the epoch's complete logs to :class:`_BestEpoch`."""

    def __init__(self, best: _BestEpoch):
        super().__init__()
        self.best = best

    def on_epoch_end(self, epoch, logs=None):
        self.best.after_callbacks(epoch, logs or {})


class _TorchRandomState:
    """PyTorch's global random state, which Keras' layers draw from on that backend when they were given no seed
    (``Dropout()``): kept with a resumed run's state, as the layers' own seed states are (in their variables)."""

    @staticmethod
    def get_state() -> list:
        import torch

        return torch.get_rng_state().tolist()

    @staticmethod
    def set_state(state: list) -> None:
        import torch

        torch.set_rng_state(torch.tensor(state, dtype=torch.uint8))


def _all_variables(model) -> list:
    """Every variable a resumed run needs: the model's (weights and random-seed states) and its optimizer's."""
    optimizer = getattr(model, "optimizer", None)
    return [*model.variables, *(optimizer.variables if optimizer is not None else [])]


def _restore_variables(model, path: Path) -> None:
    optimizer = getattr(model, "optimizer", None)
    if optimizer is not None and not optimizer.built:  # Keras builds it at the first update: too late here
        optimizer.build(model.trainable_variables)
    variables = _all_variables(model)
    with np.load(path) as saved:
        if len(saved.files) != len(variables):
            raise ValueError(
                f"The saved state {path} holds {len(saved.files)} variables but the model and its optimizer have "
                f"{len(variables)}: it was saved from another model. Clear the folder {path.parent} to start afresh."
            )
        for index, variable in enumerate(variables):
            value = saved[f"arr_{index}"]
            if tuple(value.shape) != tuple(variable.shape):
                raise ValueError(
                    f"The saved state {path} does not fit this model (variable {variable.path}: shape "
                    f"{tuple(value.shape)} saved, {tuple(variable.shape)} here). Clear the folder {path.parent} "
                    "to start afresh."
                )
            variable.assign(value)


def _read_state(folder: Path) -> dict | None:
    path = folder / _STATE_FILE
    return json.loads(path.read_text(encoding="utf-8")) if path.exists() else None


def fit_best(
    model,
    train,
    validation,
    epochs: int,
    patience: int,
    checkpoint: str | Path | None = None,
    time_limit_minutes: float | None = None,
    callbacks=(),
    clock: Callable = time.perf_counter,
    start_from_epoch: int = 0,
    resume_folder: str | Path | None = None,
    **fit_arguments,
):
    """Fit ``model`` and return it with the weights of its best validation-loss epoch.

    Training stops after ``epochs`` or after ``patience`` epochs without a lower validation loss,
    whichever comes first: the amount of training never depends on the machine's speed. Patience
    counts only the epochs after the first ``start_from_epoch`` (a learning-rate warm-up: a run
    cannot stop before its rate has reached its peak), as Keras'
    ``EarlyStopping(start_from_epoch=...)``; the best epoch is looked for from the first.

    **Resuming.** With ``resume_folder``, the state after every epoch is saved there (the model's
    and the optimizer's variables, random-seed states included; the best epoch and its weights; the
    logs so far; and the state of ``train`` and of each callback that has ``get_state`` and
    ``set_state``, as :class:`RowBatches` and :class:`WindowMeans` have). Run the same call again
    after an interruption (a closed tab, a killed kernel) and training continues from the last
    finished epoch, on the same batches; a finished run returns at once. Keras'
    ``BackupAndRestore`` does the first half of this; it keeps neither the data's order nor the
    best epoch. The folder must belong to this one run: clear it when a setting changes
    (:class:`~transformer_course.tooling.stages.RunStages` gives a folder keyed by the settings).

    Args:
        model: a compiled ``keras.Model``.
        train: training data as ``model.fit`` takes it: a ``tf.data.Dataset`` of batches, a
            ``keras.utils.PyDataset``, or a tuple ``(x, y)`` of arrays. To resume, a source
            with ``get_state``/``set_state`` (:class:`RowBatches`, or fixed batches with
            ``shuffle=False``).
        validation: validation data as ``model.fit``'s ``validation_data`` takes it.
        epochs: int >= 1, the most epochs to run.
        patience: int >= 1, epochs without a lower validation loss before stopping.
        checkpoint: path of a ``.keras`` file to save the best epoch to and reload from (see
            :func:`transformer_course.checkpoint_path`); None keeps the best weights in memory only. With
            ``resume_folder`` the best weights are kept there too, so a finished run resumed where its
            checkpoint file is missing (another clone, a deleted file) writes the checkpoint again from them.
        time_limit_minutes: float > 0, a guard: if an epoch ends past this many wall-clock minutes
            (counted in this call) before training is done, :class:`TrainingTimeLimitError` is
            raised, never a quiet stop. None (the default) for no limit.
        callbacks: more Keras callbacks (a progress bar, a learning-rate schedule).
        clock: the clock in seconds (tests pass a fake one).
        start_from_epoch: int >= 0, epochs that patience does not count (0: every epoch counts).
        resume_folder: a folder for the state after each epoch (created), or None to keep none.
        **fit_arguments: passed to ``model.fit`` (``batch_size``, ``verbose``...; ``verbose``
            defaults to 0).

    Returns:
        ``(model, history, facts)``: the model with its best weights (reloaded from
        ``checkpoint`` when one is given), a Keras ``History`` holding every epoch's logs (those
        of a resumed run's earlier calls too), and a dict with ``epochs`` (int, epochs run),
        ``best_epoch`` (int, 1-based), ``best_val_loss`` (float), ``seconds`` and
        ``seconds_to_best`` (float, wall-clock from the start of training to the end of the last
        and of the best epoch, summed over the calls of a resumed run; the first epoch includes
        compiling the model), ``epoch_seconds`` (list of float), ``stopped_by`` (``"epochs"`` or
        ``"patience"``) and ``resumed_epochs`` (int, epochs taken from ``resume_folder``, 0 for a
        fresh run).

    Raises:
        ValueError: naming the argument, for a model that is not compiled, ``epochs`` or
            ``patience`` below 1, a negative ``start_from_epoch``, a ``time_limit_minutes`` that
            is not positive, or a ``resume_folder`` with training data that cannot resume;
            when no validation loss is logged; or when the saved state does not fit the model.
        TrainingTimeLimitError: when training passes ``time_limit_minutes``.

    Example:
        >>> model, history, facts = fit_best(model, RowBatches(x, y, 32, batches_per_epoch=100), (vx, vy),
        ...                                  epochs=12, patience=12, resume_folder="runs/09/training")  # doctest: +SKIP
    """
    if not getattr(model, "compiled", False):
        raise ValueError("`model` must be compiled before fit_best (model.compile(optimizer=..., loss=...)).")
    for name, value in (("epochs", epochs), ("patience", patience)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"`{name}` must be an integer >= 1; received {value!r}.")
    if isinstance(start_from_epoch, bool) or not isinstance(start_from_epoch, int) or start_from_epoch < 0:
        raise ValueError(f"`start_from_epoch` must be an integer >= 0; received {start_from_epoch!r}.")
    if time_limit_minutes is not None and not (
        isinstance(time_limit_minutes, (int, float))
        and not isinstance(time_limit_minutes, bool)
        and time_limit_minutes > 0
    ):
        raise ValueError(
            f"`time_limit_minutes` must be a positive number of minutes or None; received {time_limit_minutes!r}."
        )
    checkpoint = None if checkpoint is None else Path(checkpoint)
    if checkpoint is not None:
        checkpoint.parent.mkdir(parents=True, exist_ok=True)
    x, y = train if isinstance(train, tuple) else (train, None)
    resumable, resumed = {}, None
    if resume_folder is not None:
        resume_folder = Path(resume_folder)
        resume_folder.mkdir(parents=True, exist_ok=True)
        if hasattr(x, "get_state") and hasattr(x, "set_state"):
            resumable["train"] = x
            # The source draws its own order; Keras would also shuffle the order of each epoch's batches with
            # Python's global `random`, whose state a resumed run does not share.
            fit_arguments.setdefault("shuffle", False)
        elif isinstance(train, tuple) and fit_arguments.get("shuffle", True):
            raise ValueError(
                "`resume_folder` needs training data that resumes on the same batches: a source with get_state and "
                "set_state (RowBatches), or arrays with shuffle=False; received arrays that Keras shuffles."
            )
        elif not isinstance(train, tuple):
            raise ValueError(
                f"`resume_folder` needs training data with get_state and set_state (RowBatches); received "
                f"{type(x).__name__}, whose place in its order cannot be saved."
            )
        for index, callback in enumerate(callbacks):
            if hasattr(callback, "get_state") and hasattr(callback, "set_state"):
                resumable[f"callback {index}"] = callback
        if keras.backend.backend() == "torch":
            resumable["torch random state"] = _TorchRandomState()
        resumed = _read_state(resume_folder)
        if resumed is not None and resumed["epochs_done"] > epochs:
            raise ValueError(
                f"The saved state in {resume_folder} has {resumed['epochs_done']} epochs, more than `epochs` "
                f"({epochs}): it belongs to another run. Clear the folder to start afresh."
            )
    done = 0 if resumed is None else resumed["epochs_done"]
    best = _BestEpoch(
        patience,
        None if time_limit_minutes is None else 60.0 * time_limit_minutes,
        checkpoint,
        clock,
        start_from_epoch,
        resume_folder,
        resumable,
        resumed,
    )
    fit_arguments.setdefault("verbose", 0)
    history = model.fit(
        x,
        y,
        validation_data=validation,
        epochs=done if best.finished else epochs,
        initial_epoch=done,
        callbacks=[best, *callbacks, _AfterCallbacks(best)],
        **fit_arguments,
    )
    history.history, history.epoch = best.logged, list(range(len(best.durations)))
    if best.best_weights is not None:
        model.set_weights(best.best_weights)
    if checkpoint is not None:
        if not checkpoint.exists():  # a finished run resumed where its checkpoint file was never written
            if best.best_weights is None:
                raise ValueError(
                    f"The best epoch's checkpoint {checkpoint} is missing and {resume_folder} holds no best weights "
                    "to write it from. Clear the folder (`transformer-course runs clear <notebook>`) to train afresh."
                )
            model.save(checkpoint)
        model = keras.models.load_model(checkpoint)
    ends = np.cumsum(best.durations).tolist()
    facts = {
        "epochs": len(best.durations),
        "best_epoch": best.best_epoch + 1,
        "best_val_loss": best.best_loss,
        "seconds": ends[-1],
        "seconds_to_best": ends[best.best_epoch],
        "epoch_seconds": list(best.durations),
        "stopped_by": best.stopped_by,
        "resumed_epochs": done,
    }
    return model, history, facts


def gradient_of(function: Callable, values):
    """The gradient of a scalar ``function(values)`` with respect to ``values``, on any Keras backend.

    Keras 3 has no backend-neutral gradient call; this one dispatches to the backend's own automatic
    differentiation: ``tf.GradientTape`` (TensorFlow), ``jax.grad`` (JAX) or ``torch.autograd.grad``
    (PyTorch). Used to measure how much gradient reaches an input or a state (notebook 01's
    backpropagation through time).

    Args:
        function: callable taking ``values`` and returning a scalar tensor, built from ``keras.ops``
            and Keras layers (any backend's ops work on their own backend).
        values: one float array or tensor, or a list of them (any shapes).

    Returns:
        The gradient in the structure of ``values``: one tensor, or a list of tensors, each the shape
        of its value (backend tensors; ``keras.ops.convert_to_numpy`` turns them into arrays).

    Raises:
        ValueError: if ``function`` does not return a scalar.
        NotImplementedError: on a backend other than these three.

    Example:
        >>> import numpy as np
        >>> gradient = gradient_of(lambda x: keras.ops.sum(x ** 2), np.array([1.0, -2.0], "float32"))
        >>> keras.ops.convert_to_numpy(gradient).tolist()
        [2.0, -4.0]
    """
    backend = keras.backend.backend()
    as_list = isinstance(values, (list, tuple))
    tensors = [keras.ops.convert_to_tensor(value) for value in (values if as_list else [values])]

    def scalar(arguments):
        result = function(list(arguments) if as_list else arguments[0])
        if tuple(keras.ops.shape(result)) != ():
            raise ValueError(f"`function` must return a scalar; it returned shape {tuple(keras.ops.shape(result))}.")
        return result

    if backend == "tensorflow":
        import tensorflow as tf

        with tf.GradientTape() as tape:
            tape.watch(tensors)
            result = scalar(tensors)
        gradients = tape.gradient(result, tensors)
    elif backend == "jax":
        import jax

        gradients = list(jax.grad(scalar)(tensors))
    elif backend == "torch":
        import torch

        tensors = [tensor.detach().requires_grad_(True) for tensor in tensors]
        gradients = list(torch.autograd.grad(scalar(tensors), tensors))
    else:
        raise NotImplementedError(f"gradient_of supports the tensorflow, jax and torch backends; received {backend!r}.")
    return gradients if as_list else gradients[0]
