"""The headless runner on small notebooks of its own."""

import hashlib
import json
import re
import tempfile
from pathlib import Path

import nbformat
import pytest

from transformer_course.tooling import cli

PASSING = [
    "import os\nprint('profile:', os.environ['COURSE_PROFILE'])",
    "from transformer_course import report_metric\nreport_metric('answer', 42, 'the answer', headline=True)",
]
FAILING = ["x = 1", "raise ValueError('broken on purpose')", "print('never reached')"]


def _write(folder: Path, name: str, cells: list[str]) -> Path:
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [nbformat.v4.new_markdown_cell("# A test notebook")]
    notebook.cells += [nbformat.v4.new_code_cell(source) for source in cells]
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    path = folder / name
    nbformat.write(notebook, path)
    return path


@pytest.fixture
def project(tmp_path):
    notebooks = tmp_path / "notebooks"
    notebooks.mkdir()
    _write(notebooks, "01_first.ipynb", PASSING)
    _write(notebooks, "02_broken.ipynb", FAILING)
    _write(notebooks, "03_third.ipynb", PASSING)
    return tmp_path


def _digests(folder: Path) -> dict:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in folder.iterdir()}


def test_run_reports_each_notebook_and_continues_after_a_failure(project, capsys):
    notebooks = project / "notebooks"
    before = _digests(notebooks)
    code = cli.main(
        [
            "run",
            "--profile",
            "full",
            "--quiet",
            "--notebooks-dir",
            str(notebooks),
            "--build-dir",
            str(project / "build"),
            "--results-dir",
            str(project / "results"),
        ]
    )
    output = capsys.readouterr().out
    assert code == 1
    table = output.split("\n\n")[0]
    assert "01_first   PASSED" in table and "answer = 42" in table
    assert "02_broken  FAILED" in table
    assert "03_third   PASSED" in table
    assert "FAILED " + str(notebooks / "02_broken.ipynb") in output
    assert "cell 3 of 4" in output and "ValueError" in output and "broken on purpose" in output
    # Sources untouched; executed copies in the build folder, the failing one with its traceback.
    assert _digests(notebooks) == before
    executed = nbformat.read(project / "build" / "01_first.ipynb", 4)
    assert executed.cells[1].outputs[0]["text"] == "profile: full\n"
    broken = nbformat.read(project / "build" / "02_broken.ipynb", 4)
    assert broken.cells[2].outputs[0]["output_type"] == "error"
    # A full-profile run records each passing notebook.
    assert sorted(p.name for p in (project / "results").iterdir()) == ["01_first.json", "03_third.json"]
    record = json.loads((project / "results" / "01_first.json").read_text())
    assert record["profile"] == "full"
    assert record["metrics"]["answer"]["value"] == 42
    assert record["seconds"] > 0 and record["versions"]["keras"] and record["hardware"]["cpu_count"]
    assert "commit" in record


def test_smoke_run_of_chosen_notebooks_writes_no_records(project, capsys):
    code = cli.main(
        [
            "run",
            "03",
            "01_first",
            "--profile",
            "smoke",
            "--quiet",
            "--notebooks-dir",
            str(project / "notebooks"),
            "--build-dir",
            str(project / "build"),
            "--results-dir",
            str(project / "results"),
        ]
    )
    output = capsys.readouterr().out
    assert code == 0
    assert output.index("03_third") < output.index("01_first")  # in the order given
    assert not (project / "results").exists()
    executed = nbformat.read(project / "build" / "03_third.ipynb", 4)
    assert executed.cells[1].outputs[0]["text"] == "profile: smoke\n"


def test_unknown_notebook_lists_the_available_ones(project):
    with pytest.raises(SystemExit, match="NOTEBOOK '07' matches 0 notebooks.*01_first, 02_broken, 03_third"):
        cli.main(["run", "07", "--notebooks-dir", str(project / "notebooks")])


def test_unknown_profile_is_refused(project, capsys):
    with pytest.raises(SystemExit):
        cli.main(["run", "--profile", "fast", "--notebooks-dir", str(project / "notebooks")])
    assert "invalid choice: 'fast'" in capsys.readouterr().err


def test_a_dead_kernel_fails_only_its_notebook(tmp_path, capsys):
    notebooks = tmp_path / "notebooks"
    notebooks.mkdir()
    _write(notebooks, "01_dies.ipynb", ["import os\nos._exit(1)"])
    _write(notebooks, "02_fine.ipynb", PASSING)
    code = cli.main(
        [
            "run",
            "--profile",
            "smoke",
            "--quiet",
            "--notebooks-dir",
            str(notebooks),
            "--build-dir",
            str(tmp_path / "build"),
            "--results-dir",
            str(tmp_path / "results"),
        ]
    )
    output = capsys.readouterr().out
    assert code == 1
    assert re.search(r"01_dies\s+FAILED", output) and re.search(r"02_fine\s+PASSED", output)
    assert "cell 2 of 2" in output and "DeadKernelError" in output


def test_a_relative_data_directory_means_where_the_command_was_typed(tmp_path, monkeypatch, capsys):
    notebooks = tmp_path / "notebooks"
    notebooks.mkdir()
    _write(
        notebooks,
        "01_where.ipynb",
        ["from transformer_course.datasets import cache_directory\nprint(cache_directory())"],
    )
    (tmp_path / "cache").mkdir()
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("COURSE_DATA_DIR", "cache")  # relative to tmp_path, not to notebooks/
    assert (
        cli.main(
            [
                "run",
                "--profile",
                "smoke",
                "--quiet",
                "--notebooks-dir",
                "notebooks",
                "--build-dir",
                "build",
                "--results-dir",
                "results",
            ]
        )
        == 0
    )
    executed = nbformat.read(tmp_path / "build" / "01_where.ipynb", 4)
    assert executed.cells[1].outputs[0]["text"].strip() == str((tmp_path / "cache").resolve())


def test_executed_copies_keep_no_info_records_and_kernels_keep_their_temporary_files(tmp_path):
    """Records a machine logs after start-up (XLA, oneDNN) never reach an executed copy; warnings do.

    The kernel writes C++-style records to the notebook's stderr, where Jupyter and Colab show
    TensorFlow's, and makes a temporary file, as TensorFlow's autograph does for every traced
    function.
    """
    notebooks = tmp_path / "notebooks"
    notebooks.mkdir()
    info = "I0000 00:00:1795326692.705483    2294 device_compiler.h:188] Compiled cluster using XLA!"
    warning = "W0000 00:00:1795326692.705483    2294 gpu_device.cc:2344] Cannot dlopen some GPU libraries."
    cells = [
        f"import os, sys, tempfile\nsys.stderr.write({info!r} + '\\n' + {warning!r} + '\\n')",
        "import time; time.sleep(0.5)\n"
        "handle = tempfile.NamedTemporaryFile(prefix='__autograph_generated_file', suffix='.py', delete=False)\n"
        "print(os.path.dirname(handle.name))",
    ]
    _write(notebooks, "01_logs.ipynb", cells)
    cli.main(
        [
            "run",
            "--profile",
            "smoke",
            "--quiet",
            "--notebooks-dir",
            str(notebooks),
            "--build-dir",
            str(tmp_path / "build"),
            "--results-dir",
            str(tmp_path / "results"),
        ]
    )
    executed = nbformat.read(tmp_path / "build" / "01_logs.ipynb", as_version=4)
    stderr = "".join(
        o.get("text", "")
        for c in executed.cells
        if c.cell_type == "code"
        for o in c.outputs
        if o.get("name") == "stderr"
    )
    assert info not in stderr and warning in stderr
    kernel_temporary = Path(executed.cells[2].outputs[0]["text"].strip())
    assert kernel_temporary != Path(tempfile.gettempdir()) and not kernel_temporary.exists()


def test_progress_bars_are_stored_as_their_last_drawing():
    import nbformat

    from transformer_course.tooling.runner import clean_outputs, collapse_progress_bars

    assert collapse_progress_bars("\r0epoch [00:00]\r  0%| 0/3\r100%| 3/3\r\nafter\n") == "100%| 3/3\nafter\n"
    cell = nbformat.v4.new_code_cell("fit()")
    cell.outputs = [
        nbformat.v4.new_output("stream", name="stdout", text=text)
        for text in ("\r0epoch [00:00]", "\r  0%| 0/60", "\r 50%| 30/60", "\r100%| 60/60", "\n60 epochs\n")
    ]
    cell.outputs.append(nbformat.v4.new_output("stream", name="stderr", text="W warning\n"))
    notebook = nbformat.v4.new_notebook(cells=[cell])
    clean_outputs(notebook)
    assert [(output["name"], output["text"]) for output in notebook.cells[0].outputs] == [
        ("stdout", "100%| 60/60\n60 epochs\n"),
        ("stderr", "W warning\n"),
    ]


@pytest.mark.parametrize(
    "profile, flags, expected", [("full", [], 14400), ("smoke", [], 900), ("full", ["--timeout", "60"], 60)]
)
def test_a_full_profile_cell_may_train_for_an_hour_and_a_smoke_cell_may_not_hang(
    project, monkeypatch, profile, flags, expected
):
    received = {}

    def fake_run(paths, profile_name, build_dir, results_dir, timeout, progress):
        received["timeout"] = timeout
        return []

    monkeypatch.setattr(cli, "run_notebooks", fake_run)
    monkeypatch.setattr(cli, "summary_table", lambda runs: "")
    cli.main(["run", "01", "--profile", profile, "--notebooks-dir", str(project / "notebooks"), *flags])
    assert received["timeout"] == expected
    from transformer_course import load_record

    # Notebook 07's training cell fits where TensorFlow's steps are 4.4 times slower than on the recording machine.
    recorded = load_record("07_transformer_translation")["metrics"]["training_minutes"]["value"]
    assert cli.CELL_TIMEOUTS["full"] > 4.4 * recorded * 60


def test_runs_where_and_clear_name_and_remove_the_kept_stages(tmp_path, monkeypatch, capsys):
    from transformer_course import RunStages

    monkeypatch.setenv("COURSE_RUNS_DIR", str(tmp_path / "kept"))
    for notebook in ("08", "09"):
        RunStages(notebook, {"rounds": 1}, "full").stage("a", lambda: 1)
    assert cli.main(["runs", "where"]) == 0 and capsys.readouterr().out.strip() == str(tmp_path / "kept")
    assert cli.main(["runs", "clear", "09"]) == 0 and "removed" in capsys.readouterr().out
    assert not (tmp_path / "kept" / "09").exists() and (tmp_path / "kept" / "08").exists()
    assert cli.main(["runs", "clear"]) == 0 and not (tmp_path / "kept" / "08").exists()
    assert cli.main(["runs", "clear"]) == 0 and "no kept stages" in capsys.readouterr().out
