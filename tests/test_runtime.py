import subprocess
import sys

import numpy as np
import pytest

from transformer_course import runtime


def test_import_noise_filter_drops_only_the_no_gpu_lines():
    noise = [
        "WARNING: All log messages before absl::InitializeLog() is called are written to STDERR",
        "I0000 00:00:1795254552.358650    1974 cudart_stub.cc:31] Could not find cuda drivers on your machine, GPU will not be used.",
    ]
    kept = ["E0000 something real went wrong", "WARNING: a different warning"]
    assert all(runtime._IMPORT_NOISE.match(line) for line in noise)
    assert not any(runtime._IMPORT_NOISE.match(line) for line in kept)


def test_start_notebook_prints_its_settings_and_nothing_on_stderr():
    code = "import transformer_course as tc; s = tc.start_notebook('01', seed=3); print(s.n_features)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env={"COURSE_PROFILE": "smoke", "PATH": ""}, timeout=120)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "Profile: smoke (quick check; numbers mean nothing)"
    assert lines[1].startswith("Seed: 3; TensorFlow ")
    assert lines[-1] == "10"
    assert done.stderr == ""


def test_environment_description():
    assert runtime.hardware()["cpu_count"] >= 1
    versions = runtime.library_versions()
    assert versions["keras"] and versions["tensorflow"] and versions["python"]
    commit = runtime.git_commit("/")
    assert set(commit) == {"commit", "dirty"}


def test_plots_check_their_inputs():
    from transformer_course import plots

    axis = plots.plot_accuracy_by_length([4, 8], {"model": [1.0, 0.5]})
    assert [round(y) for y in axis.lines[0].get_ydata()] == [100, 50]
    with pytest.raises(ValueError, match="one value per length"):
        plots.plot_accuracy_by_length([4, 8], {"model": [1.0]})
    with pytest.raises(ValueError, match="was not logged"):
        plots.plot_training_curves({"m": {"loss": [1.0, 0.5]}}, metrics=("accuracy",))
    with pytest.raises(ValueError, match=r"shape \(T, F\)"):
        plots.plot_one_hot(np.zeros((2, 3, 4)))


def test_attention_heatmap_labels_are_checked():
    from transformer_course import plots

    axis = plots.plot_attention(np.eye(3)[::-1], [1, 2, 3], [3, 2, 1])
    assert axis.get_xlabel() == "input position (symbol)"
    assert [t.get_text() for t in axis.get_xticklabels()] == ["1", "2", "3"]
    with pytest.raises(ValueError, match="`source_labels` must have 3 labels"):
        plots.plot_attention(np.eye(3), [1, 2])
    with pytest.raises(ValueError, match=r"shape \(T, S\)"):
        plots.plot_attention(np.ones(3))


def test_git_commit_ignores_the_results_folder_only(tmp_path):
    def git(*args):
        subprocess.run(["git", "-C", str(tmp_path), *args], check=True, capture_output=True)

    git("init", "-q")
    (tmp_path / "results").mkdir()
    (tmp_path / "notebooks").mkdir()
    (tmp_path / "results" / "01.json").write_text("{}")
    (tmp_path / "code.py").write_text("x = 1\n")
    git("add", "-A")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "start")
    clean = runtime.git_commit(tmp_path / "notebooks", ignore=(tmp_path / "results",))
    assert len(clean["commit"]) == 40 and clean["dirty"] is False
    (tmp_path / "results" / "01.json").write_text('{"new": 1}')
    assert runtime.git_commit(tmp_path / "notebooks", ignore=(tmp_path / "results",))["dirty"] is False
    assert runtime.git_commit(tmp_path / "notebooks")["dirty"] is True
    (tmp_path / "code.py").write_text("x = 2\n")
    assert runtime.git_commit(tmp_path / "notebooks", ignore=(tmp_path / "results",))["dirty"] is True
