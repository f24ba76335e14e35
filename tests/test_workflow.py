"""The grading workflow's steps, run here as far as they can run: the plan's script, the seed's way to the shards."""

import os
import subprocess
from pathlib import Path

import pytest

yaml = pytest.importorskip("yaml")

from transformer_course_grader.cli import main, read_seed_file  # noqa: E402

WORKFLOW = Path(__file__).resolve().parents[1] / ".github" / "workflows" / "grade.yml"


@pytest.fixture(scope="module")
def jobs():
    return yaml.safe_load(WORKFLOW.read_text(encoding="utf-8"))["jobs"]


def _run_plan(jobs, tmp_path, shards):
    step = next(step for step in jobs["plan"]["steps"] if step.get("id") == "plan")
    outputs = tmp_path / "github_output"
    outputs.write_text("")
    environment = {
        **os.environ,
        "GITHUB_OUTPUT": str(outputs),
        **{name: value.replace("${{ inputs.shards }}", shards) for name, value in step["env"].items()},
    }
    done = subprocess.run(["bash", "-c", step["run"]], cwd=tmp_path, env=environment, capture_output=True, text=True)
    return done, outputs.read_text()


def test_the_plan_draws_one_seed_into_a_file_and_lists_the_shards(jobs, tmp_path):
    done, outputs = _run_plan(jobs, tmp_path, "3")
    assert done.returncode == 0, done.stderr
    assert read_seed_file(tmp_path / "seed.txt") >= 0
    assert "shards=[1, 2, 3]" in outputs and "seed" not in outputs  # the seed is no job output
    upload = next(step for step in jobs["plan"]["steps"] if step.get("uses", "").startswith("actions/upload-artifact"))
    assert upload["with"]["path"] == "seed.txt"


def test_the_plan_refuses_a_number_of_shards_that_is_not_one_or_more(jobs, tmp_path):
    assert _run_plan(jobs, tmp_path, "0")[0].returncode != 0
    assert _run_plan(jobs, tmp_path, "four")[0].returncode != 0


def test_every_shard_reads_the_plans_seed_file_and_no_input_is_pasted_into_a_script(jobs):
    upload = next(step for step in jobs["plan"]["steps"] if step.get("uses", "").startswith("actions/upload-artifact"))
    download = next(
        step for step in jobs["grade"]["steps"] if step.get("uses", "").startswith("actions/download-artifact")
    )
    assert download["with"]["name"] == upload["with"]["name"]
    grade = next(step for step in jobs["grade"]["steps"] if "transformer-course-grader grade" in step.get("run", ""))
    assert f"--seed-file {download['with']['path']}/seed.txt" in grade["run"]
    for job in jobs.values():
        for step in job["steps"]:
            assert "${{" not in step.get("run", ""), f"an expression pasted into a script: {step.get('name')}"


@pytest.mark.parametrize("text", ["", "\n", "12ab", "-3", "1 2"])
def test_an_empty_or_malformed_seed_file_is_refused_before_anything_is_graded(tmp_path, capsys, text):
    seed = tmp_path / "seed.txt"
    seed.write_text(text)
    (tmp_path / "submissions").mkdir()
    assert main(["grade", str(tmp_path / "submissions"), "--out", str(tmp_path / "out"), "--seed-file", str(seed)]) == 2
    assert "seed file" in capsys.readouterr().err and not (tmp_path / "out").exists()


def test_a_seed_file_holds_one_integer():
    import tempfile

    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as handle:
        handle.write(" 123456\n")
    assert read_seed_file(handle.name) == 123456
    os.unlink(handle.name)


def test_the_site_workflow_publishes_the_site_its_test_read():
    """The Pages workflow builds with the command tests/test_website.py runs, tests that very folder in a
    browser that must be there, and publishes it, for a release tag."""
    workflow = yaml.safe_load((WORKFLOW.parent / "site.yml").read_text(encoding="utf-8"))
    steps = workflow["jobs"]["build"]["steps"]
    runs = [step.get("run", "") for step in steps]
    assert any("transformer-course site --output build/site" in run for run in runs)
    test = next(step for step in steps if "tests/test_website.py" in step.get("run", ""))
    assert test["env"]["COURSE_SITE_DIR"] == "build/site" and test["env"]["COURSE_REQUIRE_BROWSER"]
    published = next(step for step in steps if step.get("uses", "").startswith("actions/upload-pages-artifact"))
    assert published["with"]["path"] == "build/site"
    assert runs.index(next(run for run in runs if "tests/test_website.py" in run)) < steps.index(published)
    assert workflow[True]["push"]["tags"] == ["v*"]  # YAML reads the key `on` as True


def test_every_push_is_linted_and_unit_tested_at_the_pinned_versions():
    """The checks workflow runs on push and pull request; its ruff and pre-commit's are requirements.txt's;
    its unit tests are the nox sessions' (tests/ and grader/tests/, less the two files that run every notebook)."""
    import re

    root = WORKFLOW.parents[2]
    workflow = yaml.safe_load((WORKFLOW.parent / "checks.yml").read_text(encoding="utf-8"))
    triggers = workflow[True]  # YAML 1.1 reads the key `on` as True
    assert "push" in triggers and "pull_request" in triggers
    pinned = re.search(r"^ruff==(\S+)$", (root / "requirements.txt").read_text(encoding="utf-8"), re.M).group(1)
    lint = " ".join(step.get("run", "") for step in workflow["jobs"]["lint"]["steps"])
    assert "grep -E '^ruff==' requirements.txt" in lint and "ruff check ." in lint and "ruff format --check ." in lint
    hooks = yaml.safe_load((root / ".pre-commit-config.yaml").read_text(encoding="utf-8"))["repos"]
    assert [(repo["rev"], [hook["id"] for hook in repo["hooks"]]) for repo in hooks] == [
        (f"v{pinned}", ["ruff", "ruff-format"])
    ]
    tests = next(step["run"] for step in workflow["jobs"]["unit-tests"]["steps"] if "pytest" in step.get("run", ""))
    unit_tests = re.search(
        r"^UNIT_TESTS = \[(.*?)\]$", (root / "noxfile.py").read_text(encoding="utf-8"), re.M | re.S
    ).group(1)
    assert tests.split("pytest -q ", 1)[1].split() == re.findall(r'"([^"]+)"', unit_tests)
