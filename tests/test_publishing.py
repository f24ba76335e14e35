"""The publication setting: one place in pyproject.toml, stamped by `release` everywhere a link is."""

import shutil
from pathlib import Path

import nbformat
import pytest

from transformer_course.tooling.publishing import Publication, publication, publication_targets, stamp
from transformer_course_grader.cli import main  # `release` stamps the setting

pytestmark = pytest.mark.tensorflow  # Keras on TensorFlow: no jax/torch backend session collects it

ROOT = Path(__file__).resolve().parents[1]


def test_links_and_install_line_follow_the_setting():
    setting = Publication("https://github.com/someone/course-fork", "v2.3.0")
    assert setting.colab_link("04_self_attention.ipynb") == (
        "https://colab.research.google.com/github/someone/course-fork/blob/v2.3.0/release/04_self_attention.ipynb"
    )
    assert setting.requirement == "transformer-course @ git+https://github.com/someone/course-fork@v2.3.0"
    old = (
        "[badge](https://colab.research.google.com/github/a/b/blob/main/notebooks/04_self_attention.ipynb)\n"
        '"transformer-course @ git+https://github.com/a/b@v0.0.1"'
    )
    assert stamp(old, setting) == (f'[badge]({setting.colab_link("04_self_attention.ipynb")})\n"{setting.requirement}"')
    assert stamp(stamp(old, setting), setting) == stamp(old, setting)


def test_the_website_and_kaggle_addresses_follow_the_setting():
    setting = Publication("https://github.com/Some-Org/deep-course", "v2.0.1")
    assert setting.site_address == "https://some-org.github.io/deep-course/"
    assert (
        Publication("https://github.com/Some-Org/some-org.github.io", "v1").site_address
        == "https://some-org.github.io/"
    )
    assert setting.kaggle_link("04_self_attention.ipynb") == (
        "https://kaggle.com/kernels/welcome?src=https://github.com/Some-Org/deep-course/blob/v2.0.1/release/"
        "04_self_attention.ipynb"
    )


@pytest.mark.parametrize("repository", ["https://gitlab.com/a/b", "github.com/a/b", ""])
def test_a_setting_colab_cannot_open_is_refused_by_name(repository):
    with pytest.raises(ValueError, match=r"`repository` must be a GitHub address.*\[project.urls\] Repository"):
        Publication(repository, "v1.0.0")


def test_the_stamped_files_are_the_numbered_notebooks_their_scripts_and_the_readme(tmp_path):
    root = tmp_path / "course"
    (root / "notebooks").mkdir(parents=True)
    for name in ["02_b.ipynb", "01_a.ipynb", "01_a.py", "scratch.ipynb", "1_short.py"]:
        (root / "notebooks" / name).write_text("")
    assert publication_targets(root / "notebooks") == (None, [])  # no pyproject.toml: not a checkout
    (root / "pyproject.toml").write_text("")
    (root / "README.md").write_text("")
    found_root, files = publication_targets(root / "notebooks")
    assert found_root == root.resolve()
    assert [path.name for path in files] == ["01_a.ipynb", "02_b.ipynb", "01_a.py", "README.md"]


def test_the_checkout_setting_and_the_installed_one_agree():
    assert publication(ROOT) == publication(None)
    assert publication(ROOT).ref == "v" + __import__("transformer_course").__version__


def test_release_stamps_a_changed_setting_into_sources_readme_and_release(tmp_path, capsys):
    """A maintainer who moves the course edits pyproject.toml and runs `release`; nothing else."""
    (tmp_path / "notebooks").mkdir()
    for name in ("04_self_attention.ipynb", "04_self_attention.py"):
        shutil.copy(ROOT / "notebooks" / name, tmp_path / "notebooks" / name)
    shutil.copy(ROOT / "README.md", tmp_path / "README.md")
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    moved = pyproject.replace(
        'Repository = "https://github.com/transformer-course/transformer-course"',
        'Repository = "https://github.com/a-university/attention-course"',
    )
    assert moved != pyproject
    (tmp_path / "pyproject.toml").write_text(moved, encoding="utf-8")
    arguments = ["release", "--notebooks-dir", str(tmp_path / "notebooks"), "--out", str(tmp_path / "release")]
    assert main([*arguments, "--check"]) == 1
    assert "disagree with https://github.com/a-university/attention-course" in capsys.readouterr().err
    assert main(arguments) == 0
    assert main([*arguments, "--check"]) == 0
    link = "https://colab.research.google.com/github/a-university/attention-course/blob/v0.1.0/release/04_self_attention.ipynb"
    for path in (
        "README.md",
        "notebooks/04_self_attention.py",
        "notebooks/04_self_attention.ipynb",
        "release/04_self_attention.ipynb",
    ):
        text = (tmp_path / path).read_text(encoding="utf-8")
        assert link in text and "github.com/transformer-course" not in text, path
    released = nbformat.read(tmp_path / "release" / "04_self_attention.ipynb", as_version=4)
    install = "transformer-course @ git+https://github.com/a-university/attention-course@v0.1.0"
    assert install in released.cells[1].source


def test_the_run_time_line_comes_from_the_recorded_runs(tmp_path):
    import json

    from transformer_course.tooling.publishing import RUN_TIME, Publication, run_time_line, stamp

    assert run_time_line("07_x", tmp_path).startswith("**Run time:** full profile not yet recorded (recorded runs)")
    record = {"seconds": 3061.6, "hardware": {"cpu_count": 2, "accelerator": None}}
    (tmp_path / "07_x.json").write_text(json.dumps(record))
    (tmp_path / "smoke").mkdir()
    (tmp_path / "smoke" / "seconds.json").write_text(json.dumps({"07_x": {"seconds": 31.2}}))
    line = run_time_line("07_x", tmp_path)
    assert line.startswith("**Run time:** full profile about 51 min on a 2-core CPU, smoke profile about 30 s")
    assert "COURSE_PROFILE" in line and '"' not in line and "\\\\" not in line
    setting = Publication("https://github.com/owner/course", "v1.0.0")
    notebook_json = '["# Title\\n", "**Run time:** old text\\n", "next line"]'
    assert stamp(notebook_json, setting, line) == notebook_json.replace("**Run time:** old text", line)
    assert RUN_TIME.findall(stamp("# **Run time:** x\n# more\n", setting, line)) == [line]


def test_smoke_times_are_recorded_beside_the_records_not_among_them(tmp_path):
    from transformer_course.tooling.results import load_records
    from transformer_course.tooling.runner import NotebookRun, record_smoke_times

    runs = [
        NotebookRun(path=Path("notebooks/01_a.ipynb"), status="passed", seconds=12.34),
        NotebookRun(path=Path("notebooks/02_b.ipynb"), status="failed", seconds=1.0),
    ]
    path = record_smoke_times(runs, tmp_path)
    import json

    table = json.loads(path.read_text())
    assert list(table) == ["01_a"] and table["01_a"]["seconds"] == 12.3
    assert load_records(tmp_path) == []
