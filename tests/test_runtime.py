import subprocess
import sys
import types
from importlib import metadata

import numpy as np
import pytest

from transformer_course.tooling import runtime

pytestmark = pytest.mark.tensorflow  # Keras on TensorFlow: no jax/torch backend session collects it

PREAMBLE = "WARNING: All log messages before absl::InitializeLog() is called are written to STDERR"

# Start-up records as different machines print them: absl's format (TF >= 2.17) and TensorFlow's
# own (TF <= 2.16), on Intel (oneDNN), AMD, and GPU machines (Colab).
INTEL_TF_221 = [
    PREAMBLE,
    "I0000 00:00:1795326692.705483    2294 port.cc:153] oneDNN custom operations are on. You may see "
    "slightly different numerical results due to floating-point round-off errors from different "
    "computation orders. To turn them off, set the environment variable `TF_ENABLE_ONEDNN_OPTS=0`.",
    "I0000 00:00:1795326692.706706    2294 cudart_stub.cc:31] "
    "Could not find cuda drivers on your machine, GPU will not be used.",
    "I0000 00:00:1795326692.771269    2294 cpu_feature_guard.cc:227] This TensorFlow binary is optimized to use "
    "available CPU instructions in performance-critical operations.",
    "To enable the following instructions: AVX2 AVX512F AVX512_VNNI AVX512_BF16 AVX512_FP16 AVX_VNNI FMA, in other "
    "operations, rebuild TensorFlow with the appropriate compiler flags.",
]
AMD_TF_221 = [
    PREAMBLE,
    "I0000 00:00:1795254552.358650    1974 cudart_stub.cc:31] "
    "Could not find cuda drivers on your machine, GPU will not be used.",
]
INTEL_TF_216 = [
    "2024-03-08 10:00:00.123456: I tensorflow/core/util/port.cc:113] oneDNN custom operations are on. "
    "You may see slightly different numerical results due to floating-point round-off errors.",
    "2024-03-08 10:00:00.223456: I tensorflow/core/platform/cpu_feature_guard.cc:210] This TensorFlow binary is "
    "optimized to use available CPU instructions in performance-critical operations.",
    "To enable the following instructions: AVX2 AVX512F FMA, in other operations, rebuild TensorFlow with the "
    "appropriate compiler flags.",
]
GPU_INFO = [
    PREAMBLE,
    "I0000 00:00:1727000000.123456   12345 cuda_executor.cc:1015] successful NUMA node read from SysFS had negative "
    "value (-1), but there must be at least one NUMA node, so returning NUMA node zero.",
    "I0000 00:00:1727000000.223456   12345 gpu_device.cc:2022] "
    "Created device /job:localhost/replica:0/task:0/device:GPU:0 "
    "with 13949 MB memory:  -> device: 0, name: Tesla T4, pci bus id: 0000:00:04.0, compute capability: 7.5",
]
# What must always reach the user: warnings, errors and fatal records in both formats, and
# anything that is not a C++ log record.
GPU_WARNINGS_AND_ERRORS = [
    "E0000 00:00:1727000000.323456   12345 cuda_dnn.cc:8310] Unable to register cuDNN factory: Attempting to "
    "register factory for plugin cuDNN when one has already been registered",
    "W0000 00:00:1727000000.423456   12345 gpu_device.cc:2344] Cannot dlopen some GPU libraries.",
    "2024-03-08 10:00:00.323456: W tensorflow/compiler/tf2tensorrt/utils/py_utils.cc:38] "
    "TF-TRT Warning: Could not find TensorRT",
    "2024-03-08 10:00:00.423456: E tensorflow/core/framework/node_def_util.cc:676] a real error",
    "F0000 00:00:1727000000.523456   12345 logging.cc:10] Check failed: something fatal",
]


@pytest.mark.parametrize(
    "records",
    [INTEL_TF_221, AMD_TF_221, INTEL_TF_216, GPU_INFO],
    ids=["intel-tf2.21", "amd-tf2.21", "intel-tf2.16", "gpu"],
)
def test_startup_info_records_are_dropped_whatever_the_machine(records):
    assert runtime.drop_info_records("\n".join(records) + "\n") == ""


def test_warnings_errors_and_other_lines_are_kept_in_order():
    python_warning = "/usr/lib/python3/site-packages/x.py:12: UserWarning: a Python warning"
    # A line that follows an INFO record and starts no record of its own continues that record,
    # so the plain line here comes first; Python's own warnings and tracebacks are never swallowed.
    mixed = [
        "a line that is no log record",
        *INTEL_TF_221,
        GPU_WARNINGS_AND_ERRORS[0],
        *GPU_INFO,
        *GPU_WARNINGS_AND_ERRORS[1:],
        *INTEL_TF_216,
        python_warning,
        INTEL_TF_216[1],
        "Traceback (most recent call last):",
    ]
    kept = runtime.drop_info_records("\n".join(mixed)).splitlines()
    assert kept == [
        "a line that is no log record",
        *GPU_WARNINGS_AND_ERRORS,
        python_warning,
        "Traceback (most recent call last):",
    ]


def test_a_warning_record_spanning_two_lines_is_kept_whole():
    record = [
        "W0000 00:00:1727000000.1   1 gpu_device.cc:2344] Cannot dlopen some GPU libraries.",
        "Please make sure the missing libraries are installed.",
    ]
    assert runtime.drop_info_records("\n".join(INTEL_TF_221 + record)).splitlines() == record


def test_start_notebook_prints_its_settings_and_nothing_on_stderr():
    code = "import transformer_course as tc; s = tc.start_notebook('01', seed=3); print(s.n_features)"
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env={"COURSE_PROFILE": "smoke", "PATH": ""},
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "Profile: smoke (quick check; numbers mean nothing)"
    assert lines[1].startswith("Seed: 3; TensorFlow ")
    assert lines[-1] == "10"
    _assert_no_startup_info(done.stderr)


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
    assert axis.get_xlabel() == "key position (attended to)" and axis.get_ylabel() == "query position (attending)"
    assert [t.get_text() for t in axis.get_xticklabels()] == ["1", "2", "3"]
    long = plots.plot_attention(np.full((20, 20), 0.05), vmax=None)
    assert [int(t) for t in long.get_xticks()] == list(range(0, 20, 2))  # every other position: no collisions
    assert long.images[0].get_clim() == (0.0, 0.05)  # colours scaled to the weights shown
    near_even = np.array([[0.30, 0.34, 0.36], [0.32, 0.33, 0.35]])
    stretched = plots.plot_attention(near_even, vmin=None, vmax=None)
    assert stretched.images[0].get_clim() == (0.30, 0.36)  # both ends from the data: differences visible
    words = plots.plot_attention(np.full((2, 6), 1 / 6), ["she", "doesn't", "like", "to", "eat", "vegetables"])
    assert {t.get_rotation() for t in words.get_xticklabels()} == {90.0}  # long words side by side would run together
    short = plots.plot_attention(np.full((2, 4), 0.25), ["a", "b", "c", "d"])
    assert {t.get_rotation() for t in short.get_xticklabels()} == {0.0}
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


def _assert_no_startup_info(stderr: str) -> None:
    """No INFO record reaches stderr; from TensorFlow 2.20 on, nothing at all does on a CPU machine.

    TensorFlow 2.19 and older log error and warning records at import even where nothing is wrong
    ("Unable to register cuDNN factory", "computation placer already registered"). They carry a
    real severity, so the filter keeps them: warnings and errors always stay visible.
    """
    assert runtime.drop_info_records(stderr) == stderr, stderr
    if tuple(int(part) for part in metadata.version("tensorflow").split(".")[:2]) >= (2, 20):
        assert stderr == ""


def _python(code: str, **environment) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        env={"COURSE_PROFILE": "smoke", "PATH": "", **environment},
    )


def test_importing_the_modules_that_load_tensorflow_prints_nothing_on_stderr():
    done = _python("import transformer_course.text, transformer_course.translation, transformer_course.attention")
    assert done.returncode == 0, done.stderr
    _assert_no_startup_info(done.stderr)


def test_a_notebook_that_needs_tensorflow_says_so_under_another_backend():
    # Decided before Keras is imported, so no JAX is needed to see the message.
    done = _python("import transformer_course as tc; tc.start_notebook('06')", KERAS_BACKEND="jax")
    assert done.returncode != 0
    assert "Notebook 06 needs the TensorFlow backend" in done.stderr and "'jax'" in done.stderr
    assert (
        "tensorflow"
        not in _python(
            "import sys, transformer_course._backend as b; "
            "print(b.configured_keras_backend(), 'tensorflow' in sys.modules)",
            KERAS_BACKEND="jax",
        ).stdout
    )


def test_the_configured_backend_is_read_without_importing_keras(tmp_path, monkeypatch):
    monkeypatch.delenv("KERAS_BACKEND", raising=False)
    monkeypatch.setenv("KERAS_HOME", str(tmp_path))
    if "keras" in sys.modules:
        monkeypatch.delitem(sys.modules, "keras")
    assert runtime.configured_keras_backend() == "tensorflow"
    (tmp_path / "keras.json").write_text('{"backend": "torch"}')
    assert runtime.configured_keras_backend() == "torch"
    monkeypatch.setenv("KERAS_BACKEND", "jax")
    assert runtime.configured_keras_backend() == "jax"


def test_hardware_names_the_gpus_that_jax_or_pytorch_see(monkeypatch):
    """A run on the JAX or PyTorch backend records the GPU it ran on, not only the host's processor."""
    gpu, cpu = (
        types.SimpleNamespace(platform=kind, device_kind=name)
        for kind, name in (("gpu", "NVIDIA H100 80GB HBM3"), ("cpu", "cpu"))
    )
    monkeypatch.delitem(sys.modules, "tensorflow", raising=False)
    monkeypatch.delitem(sys.modules, "torch", raising=False)
    monkeypatch.setitem(sys.modules, "jax", types.SimpleNamespace(devices=lambda: [gpu, gpu]))
    assert runtime.hardware()["accelerator"] == "NVIDIA H100 80GB HBM3, NVIDIA H100 80GB HBM3"
    monkeypatch.setitem(sys.modules, "jax", types.SimpleNamespace(devices=lambda: [cpu]))
    assert runtime.hardware()["accelerator"] is None
    cuda = types.SimpleNamespace(is_available=lambda: True, device_count=lambda: 1, get_device_name=lambda index: "T4")
    monkeypatch.setitem(sys.modules, "torch", types.SimpleNamespace(cuda=cuda))
    assert runtime.hardware()["accelerator"] == "T4"
