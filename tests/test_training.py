"""fit_best: the best validation epoch kept whatever stops training; patience, a loud time limit, resuming."""

import itertools
import math

import keras
import numpy as np
import pytest

from transformer_course import checkpoint_path, training
from transformer_course.training import fit_best

X = np.random.default_rng(0).normal(size=(64, 3)).astype("float32")
# Validation labels are the training labels negated: validation loss is lowest early, then rises.
TRAIN, VALIDATION = (X, X.sum(axis=1, keepdims=True)), (X, -X.sum(axis=1, keepdims=True))


def _model():
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1, kernel_initializer="zeros")])
    model.compile(optimizer=keras.optimizers.SGD(0.05), loss="mse")
    return model


def _validation_loss(model):
    return float(model.evaluate(*VALIDATION, verbose=0))


def test_the_best_epoch_is_kept_and_patience_stops_training():
    model, history, facts = fit_best(_model(), TRAIN, VALIDATION, epochs=20, patience=2, batch_size=16)
    losses = history.history["val_loss"]
    assert facts["best_epoch"] == int(np.argmin(losses)) + 1 == 1  # the weights after epoch 1
    assert facts["epochs"] == len(losses) == 3 and facts["stopped_by"] == "patience"
    assert _validation_loss(model) == pytest.approx(min(losses), rel=1e-5)
    assert _validation_loss(model) < losses[-1]
    assert len(facts["epoch_seconds"]) == 3 and facts["seconds_to_best"] <= facts["seconds"]


def test_patience_counts_only_the_epochs_after_start_from_epoch():
    # The validation loss is lowest after epoch 1 and rises after it: patience 2 alone stops after epoch 3;
    # with the first 4 epochs not counted (a warm-up), the run goes on to epoch 4 + 2 = 6 and still keeps epoch 1.
    _, history, facts = fit_best(_model(), TRAIN, VALIDATION, epochs=20, patience=2, start_from_epoch=4, batch_size=16)
    assert facts["epochs"] == len(history.history["val_loss"]) == 6 and facts["stopped_by"] == "patience"
    assert facts["best_epoch"] == 1


def test_a_checkpoint_is_written_and_reloaded(tmp_path):
    path = tmp_path / "best.keras"
    model, history, facts = fit_best(_model(), TRAIN, VALIDATION, epochs=4, patience=10, checkpoint=path, batch_size=16)
    assert path.exists() and facts["stopped_by"] == "epochs" and facts["epochs"] == 4
    assert _validation_loss(model) == pytest.approx(min(history.history["val_loss"]), rel=1e-5)


def test_a_time_limit_never_cuts_training_quietly_it_fails_the_run_loudly():
    ticks = itertools.count(0, 10)  # every epoch takes 10 s on this clock
    clock = lambda: float(next(ticks))  # noqa: E731
    # A 25 s limit: the third epoch ends at 30 s, past it, with epochs still to run: an error, not a shorter run.
    with pytest.raises(
        training.TrainingTimeLimitError, match="time limit of 0.416667 minutes .* after 3 of 20"
    ) as error:
        fit_best(
            _model(), TRAIN, VALIDATION, epochs=20, patience=20, time_limit_minutes=25 / 60, clock=clock, batch_size=16
        )
    assert error.value.epochs_done == 3 and error.value.seconds == 30.0


def test_a_run_that_ends_within_its_time_limit_reports_its_epochs():
    ticks = itertools.count(0, 10)
    clock = lambda: float(next(ticks))  # noqa: E731
    # Three epochs planned, a 25 s limit passed by the last one: it was the last, so the run is complete.
    _, _, facts = fit_best(
        _model(), TRAIN, VALIDATION, epochs=3, patience=3, time_limit_minutes=25 / 60, clock=clock, batch_size=16
    )
    assert facts["epochs"] == 3 and facts["stopped_by"] == "epochs"
    assert facts["epoch_seconds"] == [10.0, 10.0, 10.0] and facts["seconds"] == 30.0


def _rows_model(dropout):
    keras.utils.set_random_seed(0)
    inputs = keras.Input((6,), dtype="int32")
    hidden = keras.layers.Embedding(20, 8)(inputs)
    hidden = keras.layers.Dropout(dropout)(hidden)
    model = keras.Model(inputs, keras.layers.Dense(20)(hidden))
    model.compile(optimizer=keras.optimizers.AdamW(3e-3), loss=keras.losses.SparseCategoricalCrossentropy(True))
    return model


ROWS = np.random.default_rng(1).integers(1, 20, size=(50, 7)).astype("int32")


def _interrupted_after(epochs_done):
    """A callback that raises once ``epochs_done`` epochs have been saved: a kernel killed there."""

    class Interrupt(keras.callbacks.Callback):
        def on_epoch_begin(self, epoch, logs=None):
            if epoch == epochs_done:
                raise KeyboardInterrupt

    return Interrupt()


@pytest.mark.parametrize("checkpoint", [False, True])
def test_a_run_interrupted_anywhere_and_resumed_equals_the_run_never_interrupted(tmp_path, checkpoint):
    # Rounds of 3 batches (RowBatches carries its order across rounds), dropout (a random-seed state), AdamW (an
    # optimizer state), a WindowMeans trace (a callback's state): all must resume where they stood.
    def run(folder, callbacks=()):
        trace = training.WindowMeans("loss", every=2)
        batches = training.RowBatches(ROWS[:, :-1], ROWS[:, 1:], batch_size=8, batches_per_epoch=3, seed=3)
        best = folder / "best.keras" if checkpoint else None
        model, history, facts = fit_best(
            _rows_model(0.2),
            batches,
            (ROWS[:10, :-1], ROWS[:10, 1:]),
            epochs=5,
            patience=5,
            checkpoint=best,
            resume_folder=folder / "state",
            callbacks=[trace, *callbacks],
        )
        return model, history, facts, trace

    whole, whole_history, whole_facts, whole_trace = run(tmp_path / "whole")
    for stop in (1, 3):
        folder = tmp_path / f"stopped after {stop}"
        with pytest.raises(KeyboardInterrupt):
            run(folder, [_interrupted_after(stop)])
        model, history, facts, trace = run(folder)
        assert facts["resumed_epochs"] == stop and facts["epochs"] == 5 and len(facts["epoch_seconds"]) == 5
        # Tolerance: the same operations on the same CPU; 1e-6 relative allows for a different thread order.
        np.testing.assert_allclose(history.history["val_loss"], whole_history.history["val_loss"], rtol=1e-6)
        np.testing.assert_allclose(history.history["loss"], whole_history.history["loss"], rtol=1e-6)
        assert facts["best_epoch"] == whole_facts["best_epoch"]
        assert trace.updates == whole_trace.updates == 15 and len(trace.points) == len(whole_trace.points)
        for resumed, uninterrupted in zip(model.get_weights(), whole.get_weights()):
            np.testing.assert_allclose(resumed, uninterrupted, rtol=1e-5, atol=1e-7)
    # A finished run, called again, trains nothing and returns the same model.
    again, history, facts, _ = run(tmp_path / "whole")
    assert facts["resumed_epochs"] == 5 and history.history["val_loss"] == whole_history.history["val_loss"]
    np.testing.assert_allclose(again.get_weights()[0], whole.get_weights()[0], rtol=1e-6)


def test_a_finished_run_resumed_where_its_checkpoint_is_missing_writes_it_from_the_kept_best_weights(tmp_path):
    # Another clone shares the runs folder (the per-user cache) but not the checkpoint beside its notebook.
    arguments = dict(epochs=6, patience=2, resume_folder=tmp_path / "state", shuffle=False, batch_size=16)
    first, _, facts = fit_best(_model(), TRAIN, VALIDATION, checkpoint=tmp_path / "one" / "best.keras", **arguments)
    assert facts["best_epoch"] == 1 and facts["epochs"] == 3  # the best epoch is not the last: its weights differ
    elsewhere = tmp_path / "another clone" / "best.keras"
    again, _, facts = fit_best(_model(), TRAIN, VALIDATION, checkpoint=elsewhere, **arguments)
    assert facts["resumed_epochs"] == 3 and elsewhere.exists()
    for resumed, original in zip(again.get_weights(), first.get_weights()):
        np.testing.assert_allclose(resumed, original, rtol=1e-6)
    assert _validation_loss(again) == pytest.approx(facts["best_val_loss"], rel=1e-5)


def test_scores_a_callback_adds_are_in_the_history_and_kept_for_a_resumed_run(tmp_path):
    counted = iter(range(100))
    scores = training.EpochScores(count=lambda: float(next(counted)))
    arguments = dict(epochs=3, patience=3, resume_folder=tmp_path, shuffle=False, batch_size=16)
    _, history, _ = fit_best(_model(), TRAIN, VALIDATION, callbacks=[scores], **arguments)
    assert history.history["count"] == [0.0, 1.0, 2.0]
    _, again, facts = fit_best(_model(), TRAIN, VALIDATION, callbacks=[scores], **arguments)
    assert facts["resumed_epochs"] == 3 and again.history["count"] == [0.0, 1.0, 2.0]


def test_resuming_refuses_data_whose_order_it_cannot_keep(tmp_path):
    with pytest.raises(ValueError, match="arrays that Keras shuffles"):
        fit_best(_model(), TRAIN, VALIDATION, epochs=2, patience=2, resume_folder=tmp_path)
    _, _, facts = fit_best(
        _model(), TRAIN, VALIDATION, epochs=2, patience=2, resume_folder=tmp_path, shuffle=False, batch_size=16
    )
    assert facts["epochs"] == 2
    with pytest.raises(ValueError, match="has 2 epochs, more than `epochs` \\(1\\)"):
        fit_best(_model(), TRAIN, VALIDATION, epochs=1, patience=2, resume_folder=tmp_path, shuffle=False)


def test_a_saved_state_of_another_model_is_refused_with_the_folder_to_clear(tmp_path):
    fit_best(_model(), TRAIN, VALIDATION, epochs=1, patience=1, resume_folder=tmp_path, shuffle=False, batch_size=16)
    wider = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2), keras.layers.Dense(1)])
    wider.compile(optimizer=keras.optimizers.SGD(0.05), loss="mse")
    with pytest.raises(ValueError, match="Clear the folder"):
        fit_best(wider, TRAIN, VALIDATION, epochs=2, patience=2, resume_folder=tmp_path, shuffle=False)


def test_checkpoints_of_the_two_profiles_never_share_a_file(tmp_path):
    smoke = checkpoint_path("model", tmp_path, "smoke")
    full = checkpoint_path("model", tmp_path, "full")
    assert smoke != full and smoke.parent.is_dir() and full.name == "model.keras"
    with pytest.raises(ValueError, match="`name` must be a plain file-name stem"):
        checkpoint_path("../model", tmp_path)


@pytest.mark.parametrize(
    "arguments, message",
    [
        ({"epochs": 0}, "`epochs` must be an integer >= 1; received 0"),
        ({"patience": 1.5}, "`patience` must be an integer >= 1; received 1.5"),
        ({"time_limit_minutes": 0}, "`time_limit_minutes` must be a positive number"),
        ({"start_from_epoch": -1}, "`start_from_epoch` must be an integer >= 0; received -1"),
    ],
)
def test_bad_arguments_are_named(arguments, message):
    with pytest.raises(ValueError, match=message):
        fit_best(_model(), TRAIN, VALIDATION, **{"epochs": 2, "patience": 1, **arguments})


def test_an_uncompiled_model_or_missing_validation_is_refused():
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])
    with pytest.raises(ValueError, match="`model` must be compiled"):
        fit_best(model, TRAIN, VALIDATION, epochs=1, patience=1)
    with pytest.raises(ValueError, match="needs a validation loss"):
        fit_best(_model(), TRAIN, None, epochs=1, patience=1)


def test_epoch_scores_land_in_the_history_once_per_epoch():
    from transformer_course.training import EpochScores

    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    model.compile(optimizer="sgd", loss="mse")
    x, y = np.ones((8, 2), "float32"), np.zeros((8, 1), "float32")
    calls = []
    scores = EpochScores(calls=lambda: len(calls.append(1) or calls))
    history = model.fit(x, y, epochs=3, verbose=0, callbacks=[scores])
    assert history.history["calls"] == [1.0, 2.0, 3.0]
    with pytest.raises(ValueError, match="at least one"):
        EpochScores()
    with pytest.raises(ValueError, match="already logged"):
        model.fit(x, y, epochs=1, verbose=0, callbacks=[EpochScores(loss=lambda: 0.0)])


def test_warmup_cosine_decay_rises_then_falls_to_its_floor():
    from transformer_course.training import WarmupCosineDecay

    schedule = WarmupCosineDecay(peak=1e-3, warmup_steps=10, decay_steps=110, final_fraction=0.1)
    rate = lambda step: float(schedule(step))  # noqa: E731
    np.testing.assert_allclose([rate(0), rate(4), rate(9)], [1e-4, 5e-4, 1e-3], rtol=1e-5)
    np.testing.assert_allclose([rate(10), rate(60), rate(110), rate(500)], [1e-3, 5.5e-4, 1e-4, 1e-4], rtol=1e-4)
    assert WarmupCosineDecay.from_config(schedule.get_config()).get_config() == schedule.get_config()
    with pytest.raises(ValueError, match="decay_steps"):
        WarmupCosineDecay(1e-3, 10, 10)


def test_warmup_cosine_decay_can_hold_its_peak_before_decaying():
    from transformer_course.training import WarmupCosineDecay

    schedule = WarmupCosineDecay(peak=1e-3, warmup_steps=10, decay_steps=210, final_fraction=0.1, hold_steps=100)
    rate = lambda step: float(schedule(step))  # noqa: E731
    np.testing.assert_allclose([rate(4), rate(10), rate(60), rate(110)], [5e-4, 1e-3, 1e-3, 1e-3], rtol=1e-5)
    np.testing.assert_allclose([rate(160), rate(210), rate(900)], [5.5e-4, 1e-4, 1e-4], rtol=1e-4)
    assert WarmupCosineDecay.from_config(schedule.get_config()).get_config() == schedule.get_config()
    with pytest.raises(ValueError, match="warmup_steps \\+ hold_steps"):
        WarmupCosineDecay(1e-3, 10, 110, hold_steps=100)
    with pytest.raises(ValueError, match="hold_steps"):
        WarmupCosineDecay(1e-3, 10, 110, hold_steps=-1)


def test_warmup_linear_decay_rises_then_falls_to_zero_and_round_trips():
    from transformer_course.training import WarmupLinearDecay

    schedule = WarmupLinearDecay(2e-4, warmup_steps=10, total_steps=110)
    rates = [float(schedule(step)) for step in (0, 4, 9, 10, 60, 109, 110, 500)]
    np.testing.assert_allclose(rates, [2e-5, 1e-4, 2e-4, 2e-4, 1e-4, 2e-6, 0.0, 0.0], rtol=1e-5, atol=1e-12)
    restored = WarmupLinearDecay.from_config(schedule.get_config())
    assert [float(restored(step)) for step in (3, 70)] == [float(schedule(step)) for step in (3, 70)]
    no_warmup = WarmupLinearDecay(1.0, warmup_steps=0, total_steps=4)
    np.testing.assert_allclose([float(no_warmup(step)) for step in range(5)], [1.0, 0.75, 0.5, 0.25, 0.0])
    for arguments, name in (
        ((0.0, 1, 2), "peak"),
        ((1e-3, -1, 2), "warmup_steps"),
        ((1e-3, 5, 5), "total_steps"),
        ((1e-3, 1, 2.5), "total_steps"),
    ):
        with pytest.raises(ValueError, match=name):
            WarmupLinearDecay(*arguments)


def test_window_means_recover_each_window_from_the_running_means_keras_logs():
    from transformer_course.training import WindowMeans

    trace = WindowMeans("masked_accuracy", every=2)
    for epoch, values in enumerate(([1.0, 2.0, 3.0, 4.0, 5.0], [10.0, 20.0, 30.0, 40.0])):
        trace.on_epoch_begin(epoch)
        for batch, _ in enumerate(values):
            trace.on_train_batch_end(batch, {"masked_accuracy": np.mean(values[: batch + 1])})  # Keras' running mean
    # epoch 1: windows (1, 2) and (3, 4), update 5 left over; epoch 2 starts afresh: (10, 20), (30, 40)
    assert trace.updates == 9
    np.testing.assert_allclose([update for update, _ in trace.points], [2, 4, 7, 9])
    np.testing.assert_allclose([mean for _, mean in trace.points], [1.5, 3.5, 15.0, 35.0])
    with pytest.raises(ValueError, match="every"):
        WindowMeans("loss", every=0)


def test_gradient_of_matches_a_hand_derivative_for_one_value_and_a_list():
    from transformer_course.training import gradient_of

    x = np.array([[1.0, -2.0], [0.5, 3.0]], dtype="float32")
    np.testing.assert_allclose(
        keras.ops.convert_to_numpy(gradient_of(lambda v: keras.ops.sum(v**3), x)), 3 * x**2, rtol=1e-6
    )
    first, second = gradient_of(lambda pair: keras.ops.sum(pair[0] * pair[1]), [x, 2 * x])
    np.testing.assert_allclose(keras.ops.convert_to_numpy(first), 2 * x, rtol=1e-6)
    np.testing.assert_allclose(keras.ops.convert_to_numpy(second), x, rtol=1e-6)


def test_gradient_of_reaches_a_recurrent_layers_initial_state():
    """d(sum of h_1)/d h_0 for a SimpleRNN of one step with no input: U^T (1 - h_1^2), by hand."""
    from transformer_course.training import gradient_of

    layer = keras.layers.SimpleRNN(3)
    inputs = np.zeros((1, 1, 2), dtype="float32")
    start = np.array([[0.1, -0.2, 0.3]], dtype="float32")
    layer(inputs, initial_state=[start])
    recurrent = keras.ops.convert_to_numpy(layer.cell.recurrent_kernel)
    bias = keras.ops.convert_to_numpy(layer.cell.bias)
    h1 = np.tanh(start @ recurrent + bias)
    expected = (1 - h1**2) @ recurrent.T
    gradient = gradient_of(lambda state: keras.ops.sum(layer(inputs, initial_state=[state])), start)
    np.testing.assert_allclose(keras.ops.convert_to_numpy(gradient), expected, rtol=1e-5, atol=1e-6)


def test_gradient_of_refuses_a_function_that_is_not_scalar():
    from transformer_course.training import gradient_of

    with pytest.raises(ValueError, match="must return a scalar"):
        gradient_of(lambda v: v * 2, np.ones(3, dtype="float32"))


# --- the notebooks' harness: equal minutes, a tuning grid, running text -----------------------------------------


def test_equal_minute_budgets_time_the_arms_interleaved_and_give_the_slower_fewer_updates(monkeypatch):
    # A clock that advances by each arm's own cost: "slow" costs 3 s an update, "fast" 1 s (the median
    # ignores one stalled update of 100 s), so in 2 minutes "fast" gets 120 updates and "slow" 40, in 4 rounds.
    now, calls = [0.0], []
    costs = {"fast": iter([1.0, 100.0, 1.0]), "slow": iter([3.0, 3.0, 3.0])}
    monkeypatch.setattr(training.time, "perf_counter", lambda: now[0])

    def step_of(name):
        def step(index):
            calls.append((name, index))
            if index:  # batch 0 compiles, untimed
                now[0] += next(costs[name])

        return step

    budgets = training.equal_minute_budgets({"fast": step_of("fast"), "slow": step_of("slow")}, 2, 4, 3)
    assert calls == [("fast", 0), ("slow", 0), ("fast", 1), ("slow", 1), ("fast", 2), ("slow", 2), ("fast", 3),
                     ("slow", 3)]  # fmt: skip
    assert budgets == {"fast": (1.0, 30, 120), "slow": (3.0, 10, 40)}
    assert budgets["slow"].updates_per_round == 10
    slowest = training.equal_minute_budgets({"crawl": lambda index: now.__setitem__(0, now[0] + 600)}, 1, 4, 1)
    assert slowest["crawl"] == (600.0, 1, 4)  # at least one update a round
    with pytest.raises(ValueError, match="`minutes` must be a positive number; received 0"):
        training.equal_minute_budgets({"a": step_of("fast")}, 0, 4, 3)
    with pytest.raises(ValueError, match="`steps` must name at least one arm"):
        training.equal_minute_budgets({}, 1, 4, 3)


def test_best_on_validation_keeps_the_best_setting_scores_each_once_and_refuses_nan():
    tried = []

    def accuracy(rate):
        tried.append(rate)
        return {1e-4: 0.7, 3e-4: 0.8, 1e-3: 0.8}[rate]

    best, scores = training.best_on_validation([1e-4, 3e-4, 1e-3], accuracy, higher_is_better=True)
    assert best == 3e-4 and tried == [1e-4, 3e-4, 1e-3] and list(scores) == tried  # a tie: the first
    assert training.best_on_validation([1, 2], lambda x: x, higher_is_better=False)[0] == 1
    diverged = training.best_on_validation([1, 2], lambda x: math.inf if x == 2 else 0.5, higher_is_better=False)
    assert diverged == (1, {1: 0.5, 2: math.inf})  # a diverged run is scored, and shown
    with pytest.raises(ValueError, match="NaN for the setting 2"):
        training.best_on_validation([1, 2], lambda x: math.nan if x == 2 else 0.5, higher_is_better=False)
    with pytest.raises(ValueError, match="`grid` must hold at least one setting"):
        training.best_on_validation([], lambda x: x, higher_is_better=True)


def test_encode_running_text_encodes_every_text_and_puts_the_separator_after_each():
    seen = []

    def encode(text):
        seen.append(text)
        return [ord(character) - 96 for character in text]

    inputs, targets = training.encode_running_text(encode, iter(["abc", "d", "ef"]), 3, 27, description="texts")
    assert seen == ["abc", "d", "ef"]
    np.testing.assert_array_equal(inputs, [[1, 2, 3], [27, 4, 27], [5, 6, 27]])
    np.testing.assert_array_equal(targets, [[2, 3, 27], [4, 27, 5], [6, 27, 0]])
    with pytest.raises(ValueError, match="`separator_id`"):
        training.encode_running_text(encode, ["ab"], 3, 0)


def test_interleaved_timings_compile_first_untimed_then_take_turns(monkeypatch):
    now, calls = [0.0], []
    monkeypatch.setattr(training.time, "perf_counter", lambda: now[0])

    def costing(name, seconds):
        def function(index):
            calls.append((name, index))
            now[0] += 50.0 if index == 0 else seconds  # the untimed first call may take any time

        return function

    times = training.interleaved_timings({"int8": costing("int8", 2.0), "float32": costing("float32", 1.0)}, 3)
    assert calls[:2] == [("int8", 0), ("float32", 0)] and calls[2:4] == [("int8", 1), ("float32", 1)]
    assert times == {"int8": [2.0, 2.0, 2.0], "float32": [1.0, 1.0, 1.0]}
    with pytest.raises(ValueError, match="`repeats` must be"):
        training.interleaved_timings({"a": calls.append}, 0)
    with pytest.raises(ValueError, match="`functions` must name at least one function"):
        training.interleaved_timings({}, 3)
