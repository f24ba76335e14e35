"""Each step of the grader on its own, without a kernel, as nbgrader tests each preprocessor:
reading a submission, restoring locked cells, flagging reaches, inserting the captures and judging
one reply. tests/test_grading.py grades whole submissions through all of them."""

import json
import os

import nbformat
import numpy as np
import pytest

from transformer_course.exercises import EXERCISES
from transformer_course.exercises.values import encode
from transformer_course.grading import grader, protocol
from transformer_course.grading.markup import check_cell, release_notebook, solution_cell

SOLUTION = """def causal_mask(length):
    ### BEGIN SOLUTION
    return np.tril(np.ones((length, length), dtype=bool))
    ### END SOLUTION"""


@pytest.fixture
def release():
    """A released notebook: a lesson cell, exercise 07.1's stub and its locked check cell (with its checksum)."""
    pytest.importorskip("nbgrader")
    source = nbformat.v4.new_notebook()
    source.cells = [nbformat.v4.new_code_cell("import numpy as np"), solution_cell("07.1", SOLUTION),
                    check_cell("07.1", 1, 'check("07.1", causal_mask)')]
    return release_notebook(source)


def copy_of(notebook):
    return nbformat.from_dict(nbformat.reads(nbformat.writes(notebook), as_version=4))


def test_read_submission_reads_a_regular_utf8_file_and_nothing_else(tmp_path):
    good = tmp_path / "good.ipynb"
    good.write_text("{\"cells\": []}", encoding="utf-8")
    assert grader.read_submission(good) == "{\"cells\": []}"
    (tmp_path / "link.ipynb").symlink_to(good)
    os.mkfifo(tmp_path / "fifo.ipynb")  # opened without waiting for a writer
    (tmp_path / "folder.ipynb").mkdir()
    (tmp_path / "latin1.ipynb").write_bytes("José".encode("latin-1"))
    for name, message in (("link.ipynb", "symbolic link"), ("fifo.ipynb", "not a regular file"),
                          ("folder.ipynb", "not a regular file"), ("latin1.ipynb", "not UTF-8")):
        with pytest.raises(grader.SubmissionError, match=message):
            grader.read_submission(tmp_path / name)
    with pytest.raises(grader.SubmissionError, match="larger than"):
        grader.read_submission(good, max_bytes=5)
    with pytest.raises(FileNotFoundError):
        grader.read_submission(tmp_path / "missing.ipynb")


def test_locked_cells_edited_deleted_or_copied_are_restored_and_flagged(release):
    untouched, flags = copy_of(release), []
    grader._restore_locked_cells(untouched, release, flags)
    assert flags == [] and untouched == release

    edited = copy_of(release)
    edited.cells[2].source = "print('full marks')"
    grader._restore_locked_cells(edited, release, flags)
    assert edited.cells[2].source == release.cells[2].source
    assert flags == ["locked cell 'check_07_1' was edited; restored from the release"]

    deleted, flags = copy_of(release), []
    del deleted.cells[2]
    grader._restore_locked_cells(deleted, release, flags)
    assert deleted.cells[-1].source == release.cells[2].source and "was deleted" in flags[0]

    doubled, flags = copy_of(release), []
    doubled.cells.append(copy_of(release).cells[2])
    doubled.cells[-1].source = "pass"
    grader._restore_locked_cells(doubled, release, flags)
    assert "appears 2 times" in flags[0] and "was edited" in flags[1]
    assert doubled.cells[-1].source == release.cells[2].source


def test_a_capture_goes_just_before_each_graded_check_cell_and_nothing_else_moves(release):
    notebook = copy_of(release)
    grader._insert_captures(notebook)
    sources = [cell.source for cell in notebook.cells]
    assert sources == [release.cells[0].source, release.cells[1].source,
                       protocol.capture_code("07.1", EXERCISES["07.1"].function_name), release.cells[2].source]


def test_only_the_students_own_cells_are_read_for_reaches(release):
    notebook = copy_of(release)
    notebook.cells[1].source = "from transformer_course import masks\ncausal_mask = masks.causal_mask"
    notebook.cells.append(nbformat.v4.new_code_cell("x = 1\n" * 200_000))  # too large to parse
    flags = []
    grader._flag_reaches(notebook, release, flags)
    assert len(flags) == 2
    assert flags[0].startswith("cell 2 reaches into the course package") and "too large to read" in flags[1]
    flags = []
    grader._flag_reaches(copy_of(release), release, flags)  # the release's own cells are never flagged
    assert flags == []


def test_one_reply_is_judged_against_the_reference_in_the_graders_process():
    exercise = EXERCISES["07.1"]
    cases = [("length 3", {"length": 3}, "n" * 32, "07.1#0")]
    right = encode(np.tril(np.ones((3, 3), dtype=bool)))
    wrong = encode(np.ones((3, 3), dtype=bool))
    assert grader._judge(exercise, cases, {"07.1#0": f"{'n' * 32} ok __main__ {right}"}, stopped=None).status \
        == "passed"
    verdict = grader._judge(exercise, cases, {"07.1#0": f"{'n' * 32} ok __main__ {wrong}"}, stopped=None)
    assert (verdict.status, verdict.points) == ("failed", 0)
    assert grader._judge(exercise, cases, {}, stopped=None).status == "error"  # no reply at all


@pytest.mark.parametrize("workers", [1, 2])
def test_a_worker_that_dies_costs_only_the_job_it_held(workers):
    """A job whose worker is aborted (as libzmq aborts its process), killed or ended by an exception becomes
    that job's row; a new worker takes the others, in order."""
    import signal

    from transformer_course.grading.workers import run_jobs

    jobs = [signal.SIGCHLD, signal.SIGABRT, signal.SIGCHLD, signal.SIGKILL, signal.SIGCHLD, -1, signal.SIGCHLD]
    finished = []
    results = run_jobs(signal.raise_signal, jobs, workers, on_death=lambda job, how: f"job {int(job)}: {how}",
                       done=lambda: finished.append(1))
    assert results == [None, "job 6: killed by SIGABRT", None, "job 9: killed by SIGKILL", None,
                       "job -1: exited with status 1", None]  # raise_signal(-1) raises ValueError in the worker
    assert len(finished) == len(jobs)


@pytest.mark.parametrize("workers", [0, -1, 1.5, True])
def test_workers_must_be_a_positive_int(workers):
    from transformer_course.grading.workers import run_jobs

    with pytest.raises(ValueError, match="`workers` must be an int >= 1"):
        run_jobs(abs, [1], workers, on_death=lambda job, how: None)


STUDENT_KERNEL = '''
import functools, os, sys
import numpy as np
sys.path.insert(0, os.getcwd())  # as Jupyter puts the notebook's folder first
with open("norm_helpers.py", "w") as handle:  # %%writefile norm_helpers.py
    handle.write("import numpy as np\\ndef lower(length):\\n"
                 "    return np.tril(np.ones((length, length), dtype=bool))\\n")
import norm_helpers

@functools.lru_cache(maxsize=None)
def _lower_triangle(length):
    return norm_helpers.lower(length)

def causal_mask(length):
    return _lower_triangle(length).copy()

from transformer_course.grading.protocol import _export
_export(globals(), "07.1", "causal_mask", "NONCE")
'''
GRADED_KERNEL = '''
import sys
from transformer_course.grading.protocol import CAPTURED, _load
namespace = {}
_load(namespace, "07.1", sys.stdin.read())
print(namespace[CAPTURED]["07.1"](3).astype(int).tolist())
'''


def test_honest_styles_travel_to_the_graded_kernel(tmp_path):
    """A cached helper and a module the notebook wrote (%%writefile) reach the graded kernel, which has neither
    the notebook's __main__ nor its folder, and give the same answer."""
    import subprocess
    import sys

    (tmp_path / "student").mkdir()
    (tmp_path / "graded").mkdir()
    exported = subprocess.run([sys.executable, "-c", STUDENT_KERNEL], cwd=tmp_path / "student", capture_output=True,
                              text=True, timeout=120)
    line = next(line for line in exported.stdout.splitlines() if line.startswith("NONCE "))
    kind, value = protocol.parse_export(line, "NONCE")
    assert kind == "function", (line[:200], exported.stderr[-2000:])
    loaded = subprocess.run([sys.executable, "-c", GRADED_KERNEL], cwd=tmp_path / "graded", capture_output=True,
                            text=True, timeout=60, input=__import__("base64").b64encode(value).decode("ascii"))
    assert loaded.stdout.strip() == "[[1, 0, 0], [1, 1, 0], [1, 1, 1]]", loaded.stderr[-2000:]


@pytest.mark.tensorflow  # the helper is a tf.function
def test_a_tf_function_helper_is_handed_over_as_its_python_function():
    import pickle

    import tensorflow as tf

    def lower(length):
        return np.tril(np.ones((length, length), dtype=bool))

    helper = tf.function(lower)
    assert protocol._plain(helper) is lower
    rebuilt = pickle.loads(protocol._dumps(lambda length: np.asarray(helper(length))))
    assert rebuilt(2).tolist() == [[True, False], [True, True]]


def test_stubs_left_as_released_are_no_solutions_for_the_similarity_section():
    """Two students who both left an exercise untouched are not near-identical: the stub is not compared."""
    pytest.importorskip("nbgrader")
    source = nbformat.v4.new_notebook(cells=[
        solution_cell("07.1", "def causal_mask(length):\n    ### BEGIN SOLUTION\n    return None\n"
                              "    ### END SOLUTION"),
        solution_cell("07.2", "def greedy_decode(a, b, c, d):\n    ### BEGIN SOLUTION\n    return a\n"
                              "    ### END SOLUTION")])
    release = release_notebook(source)
    answered = nbformat.from_dict(json.loads(json.dumps(release)))
    answered.cells[1].source = "def greedy_decode(a, b, c, d):\n    return [a, b]"
    assert grader._normalised_solutions(release, release) == {}
    assert list(grader._normalised_solutions(answered, release)) == ["07.2"]


def test_every_package_implementation_named_for_the_similarity_section_is_readable():
    from transformer_course.grading.similarity import PACKAGE_IMPLEMENTATIONS, _package_tokens

    for exercise in PACKAGE_IMPLEMENTATIONS:
        assert exercise in EXERCISES and len(_package_tokens(exercise)) > 20, exercise
