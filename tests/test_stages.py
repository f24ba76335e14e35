"""Runs that resume: stages kept in a folder keyed by the settings, and a killed run that goes on where it stood."""

import json
import os
import signal
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from transformer_course import RunStages, profile
from transformer_course.tooling import stages as stages_module
from transformer_course.tooling.stages import clear_runs, runs_directory, settings_key


def test_a_finished_stage_is_read_back_and_not_computed_again(tmp_path, capsys):
    calls = []

    def compute():
        calls.append(1)
        return {"bits": 1.5, "sizes": (1, 2)}

    first = RunStages("09", {"rounds": 3}, "smoke", directory=tmp_path)
    assert first.stage("size 128", compute) == {"bits": 1.5, "sizes": [1, 2]}  # as JSON keeps it, both sittings
    assert first.ran == ["size 128"] and first.done("size 128")
    again = RunStages("09", {"rounds": 3}, "smoke", directory=tmp_path)
    assert again.folder == first.folder
    assert again.stage("size 128", compute) == {"bits": 1.5, "sizes": [1, 2]} and len(calls) == 1
    assert again.skipped == ["size 128"] and not again.done("size 256")
    assert again.report() is None  # a cell ending with it shows the line once, printed
    printed = capsys.readouterr().out
    assert printed == again.summary() + "\n" and "size 128" in printed and "earlier sitting" in printed


def test_a_changed_setting_profile_or_notebook_starts_afresh(tmp_path):
    folder = RunStages("09", {"rounds": 3, "model": {"embed_dim": 64}}, "full", directory=tmp_path).folder
    assert RunStages("09", {"model": {"embed_dim": 64}, "rounds": 3}, "full", directory=tmp_path).folder == folder
    for notebook, settings, profile_name in [
        ("09", {"rounds": 4, "model": {"embed_dim": 64}}, "full"),
        ("09", {"rounds": 3, "model": {"embed_dim": 96}}, "full"),
        ("09", {"rounds": 3, "model": {"embed_dim": 64}}, "smoke"),
        ("11", {"rounds": 3, "model": {"embed_dim": 64}}, "full"),
    ]:
        assert RunStages(notebook, settings, profile_name, directory=tmp_path).folder != folder


def test_the_key_covers_the_package_source(monkeypatch):
    settings = profile("smoke").notebook("09")
    key = settings_key("09", "smoke", settings)
    assert key == settings_key("09", "smoke", settings) and len(key) == 16
    monkeypatch.setattr(stages_module, "_package_fingerprint", lambda: "another version of the package")
    assert settings_key("09", "smoke", settings) != key


def test_settings_give_their_own_profile_and_bad_stages_are_refused(tmp_path):
    stages = RunStages("09", profile("full").notebook("09"), directory=tmp_path)
    assert stages.folder.parent.name == "full"
    with pytest.raises(ValueError, match="`name` must be a non-empty str"):
        stages.stage(" ", dict)
    with pytest.raises(ValueError, match="must return JSON-able data"):
        stages.stage("weights", lambda: np.zeros(3))
    assert not stages.done("weights")  # nothing half-written counts as finished


def test_runs_are_kept_where_course_runs_dir_says_and_cleared_by_notebook(tmp_path, monkeypatch):
    monkeypatch.setenv("COURSE_RUNS_DIR", str(tmp_path / "kept"))
    assert runs_directory() == tmp_path / "kept"
    for notebook in ("08", "09"):
        RunStages(notebook, {"rounds": 1}, "full").stage("a", lambda: 1)
    assert clear_runs("09") == [tmp_path / "kept" / "09"]
    assert RunStages("08", {"rounds": 1}, "full").done("a") and not RunStages("09", {"rounds": 1}, "full").done("a")
    monkeypatch.delenv("COURSE_RUNS_DIR")
    assert runs_directory().name == "runs" and "transformer-course" in str(runs_directory())


# A run as a notebook makes one: a training run of four rounds (fit_best keeps each), then three sweep points (each
# a stage). KILL_AT names the event (the start of a round after the first, or a stage's end) at which the process
# kills itself with SIGKILL: no clean-up, no Python exit handlers, as a killed kernel.
_SCRIPT = textwrap.dedent(
    """
    import json, os, signal, sys
    import keras, numpy as np
    from transformer_course import RunStages
    from transformer_course.training import RowBatches, fit_best

    kill_at, events = int(os.environ.get("KILL_AT", "-1")), [0]

    def event():
        events[0] += 1
        if events[0] == kill_at:
            os.kill(os.getpid(), signal.SIGKILL)

    class Killer(keras.callbacks.Callback):
        def on_epoch_begin(self, epoch, logs=None):  # the rounds before it are done and kept
            if epoch:
                event()

    def model(width):
        inputs = keras.Input((6,), dtype="int32")
        hidden = keras.layers.Dropout(0.1)(keras.layers.Embedding(20, width)(inputs))
        built = keras.Model(inputs, keras.layers.Dense(20)(hidden))
        built.compile(optimizer=keras.optimizers.AdamW(3e-3), loss=keras.losses.SparseCategoricalCrossentropy(True))
        return built

    keras.utils.set_random_seed(0)
    rows = np.random.default_rng(1).integers(1, 20, size=(60, 7)).astype("int32")
    stages = RunStages("99", {"rounds": 4}, "smoke", directory=sys.argv[1])
    batches = RowBatches(rows[:, :-1], rows[:, 1:], batch_size=8, batches_per_epoch=3, seed=0)
    trained, history, facts = fit_best(model(8), batches, (rows[:10, :-1], rows[:10, 1:]), epochs=4, patience=4,
                                       callbacks=[Killer()], resume_folder=stages.folder_for("training"))
    record = {"validation": history.history["val_loss"], "weights": float(np.sum(trained.get_weights()[0]))}

    def sweep_point(width):
        keras.utils.set_random_seed(width)
        point = model(width)
        point.fit(rows[:, :-1], rows[:, 1:], batch_size=20, epochs=1, shuffle=False, verbose=0)
        return float(point.evaluate(rows[:10, :-1], rows[:10, 1:], verbose=0))

    for width in (4, 8, 16):
        record[f"width {width}"] = stages.stage(f"width {width}", lambda: sweep_point(width))
        event()
    record["resumed_epochs"], record["skipped"] = facts["resumed_epochs"], stages.skipped
    print(json.dumps(record))
    """
)


def _run(script, folder, kill_at=None):
    import keras

    environment = {**os.environ, "KERAS_BACKEND": keras.backend.backend(), "CUDA_VISIBLE_DEVICES": ""}
    if kill_at is not None:
        environment["KILL_AT"] = str(kill_at)
    return subprocess.run([sys.executable, str(script), str(folder)], capture_output=True, text=True, env=environment,
                          timeout=300)  # fmt: skip


def test_a_run_killed_at_several_points_and_resumed_gives_the_record_of_a_run_never_killed(tmp_path):
    script = tmp_path / "run.py"
    script.write_text(_SCRIPT)
    whole = _run(script, tmp_path / "whole")
    assert whole.returncode == 0, whole.stderr[-2000:]
    expected = json.loads(whole.stdout.strip().splitlines()[-1])
    # Killed after round 2 of 4; then, resumed, after the first sweep point (the third event of that sitting: rounds
    # 3 and 4, then the point); then resumed to the end.
    folder = tmp_path / "killed"
    for kill_at in (2, 3):
        killed = _run(script, folder, kill_at)
        assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
    resumed = _run(script, folder)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    record = json.loads(resumed.stdout.strip().splitlines()[-1])
    assert record["resumed_epochs"] == 4 and record["skipped"] == ["width 4"]
    # The same operations on the same CPU, in another process: equal to 1e-6 relative (thread order may differ).
    np.testing.assert_allclose(record["validation"], expected["validation"], rtol=1e-6)
    for key in ("weights", "width 4", "width 8", "width 16"):
        assert record[key] == pytest.approx(expected[key], rel=1e-6)
