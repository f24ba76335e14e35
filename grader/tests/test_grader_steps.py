"""Each step of the grader on its own, without a kernel, as nbgrader tests each preprocessor:
reading a submission, restoring locked cells, flagging reaches, finding the statements a graded
function needs, refusing code built at run time and judging one reply. grader/tests/test_grading.py grades
whole submissions through all of them."""

import json
import os
from pathlib import Path

import nbformat
import numpy as np
import pytest
from solutions import check_cell, solution_cell

from transformer_course.exercises import EXERCISES
from transformer_course.exercises.values import encode
from transformer_course_grader import grader
from transformer_course_grader.markup import release_notebook

ROOT = Path(__file__).resolve().parents[2]

SOLUTION = """def causal_mask(length):
    ### BEGIN SOLUTION
    return np.tril(np.ones((length, length), dtype=bool))
    ### END SOLUTION"""


@pytest.fixture
def release():
    """A released notebook: a lesson cell, exercise 07.1's stub and its locked check cell (with its checksum)."""
    pytest.importorskip("nbgrader")
    source = nbformat.v4.new_notebook()
    source.cells = [
        nbformat.v4.new_code_cell("import numpy as np"),
        solution_cell("07.1", SOLUTION),
        check_cell("07.1", 1, 'check("07.1", causal_mask)'),
    ]
    return release_notebook(source)


def copy_of(notebook):
    return nbformat.from_dict(nbformat.reads(nbformat.writes(notebook), as_version=4))


def test_read_submission_reads_a_regular_utf8_file_and_nothing_else(tmp_path):
    good = tmp_path / "good.ipynb"
    good.write_text('{"cells": []}', encoding="utf-8")
    assert grader.read_submission(good) == '{"cells": []}'
    (tmp_path / "link.ipynb").symlink_to(good)
    os.mkfifo(tmp_path / "fifo.ipynb")  # opened without waiting for a writer
    (tmp_path / "folder.ipynb").mkdir()
    (tmp_path / "latin1.ipynb").write_bytes("José".encode("latin-1"))
    for name, message in (
        ("link.ipynb", "symbolic link"),
        ("fifo.ipynb", "not a regular file"),
        ("folder.ipynb", "not a regular file"),
        ("latin1.ipynb", "not UTF-8"),
    ):
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


def test_the_program_of_a_function_is_what_it_needs_as_its_check_cell_sees_it(release):
    from transformer_course.exercises.slicing import program_for

    cells = [
        "import numpy as np\nimport transformer_course as tc\nsettings = tc.start_notebook('07')",
        "SIZE = 3\nmodel = tc.build(settings)\nSCALE = SIZE * 2",
        "%%writefile helpers.py\nimport numpy as np\ndef ones(n):\n    return np.ones((n, n))\n",
        "import functools, helpers\n@functools.cache\ndef lower(n):\n    return np.tril(helpers.ones(n)) * SCALE",
        "def causal_mask(length):\n    return lower(length) > 0",
        "check('07.1', causal_mask)",
        "causal_mask = tc.masks.causal_mask  # after the check: not what is graded",
    ]
    program = program_for(cells, check_cell=5, function_name="causal_mask")
    assert [(unit.cell, unit.text.splitlines()[0]) for unit in program.units] == [
        (0, "import numpy as np"),
        (1, "SIZE = 3"),
        (1, "SCALE = SIZE * 2"),
        (
            2,
            "get_ipython().run_cell_magic('writefile', 'helpers.py', 'import numpy as np\\ndef ones(n):\\n    "
            "return np.ones((n, n))\\n')",
        ),
        (3, "import functools, helpers"),
        (3, "@functools.cache"),
        (4, "def causal_mask(length):"),
    ]
    assert program.writefiles() == {"helpers.py": cells[2].split("\n", 1)[1]}
    assert program.package_import is None and program.missing is None
    # A name a top-level statement reads is its binding before that statement; a body's, before the check.
    cells = ["x = 1", "y = x + 1", "x = 5", "def f():\n    return x + y", "g = f"]
    assert [unit.text for unit in program_for(cells, 5, "g").units] == [
        "x = 1",
        "y = x + 1",
        "x = 5",
        "def f():\n    return x + y",
        "g = f",
    ]
    assert [unit.text for unit in program_for(cells[:2] + cells[3:], 4, "f").units] == [
        "x = 1",
        "y = x + 1",
        "def f():\n    return x + y",
    ]
    wrapper = program_for(
        ["from transformer_course import masks", "def f(n):\n    return masks.causal_mask(n)"], 2, "f"
    )
    assert wrapper.package_import == (0, "transformer_course.masks")
    inner = program_for(["def f(n):\n    import transformer_course.masks as m\n    return m.causal_mask(n)"], 1, "f")
    assert inner.package_import == (0, "transformer_course.masks")
    broken = program_for(["def f(n)\n    return n", "f"], 1, "f")
    assert (
        broken.missing == "`f` is not defined in any cell before its check: cell 1 does not parse "
        "(SyntaxError: expected ':')"
    )


GUARDED = """
import sys
from transformer_course_grader import guard, protocol
guard.install(protocol._trusted_folders(), {"helpers.py": "def ones(n):\\n    return [1] * n\\n"}, sys.argv[1])
sys.path.insert(0, sys.argv[1])
statement = compile(sys.stdin.read(), "<cell 4>", "exec")
try:
    exec(statement, {"__name__": "__main__"})
    print("ran")
except Exception as error:
    print(type(error).__name__, error)
"""


FROZEN_REFUSED = "ImportError Frozen object named 'runpy' is invalid"


@pytest.mark.parametrize(
    "statement, outcome",
    [
        ("import marshal\nmarshal.loads(marshal.dumps((lambda: 0).__code__))", "(marshal.loads)"),
        ("(lambda: 0).__code__.replace(co_name='f')", "(code.__new__)"),
        ("exec('x = 1')", "(compile, of <string>)"),
        ("eval(compile('1', 'x', 'eval'))", "(compile, of x)"),
        ("import runpy\nopen('copied.py', 'w').write('x = 1')\nrunpy.run_path('copied.py')", "(compile, of copied.py)"),
        ("open('sneaky.py', 'w').write('x = 1')\nimport sneaky", "(compile, of"),
        (
            "import pickle\npickle.loads(b'\\x80\\x04c' + b'transformer_course.masks\\ncausal_mask\\n.')",
            "graded code may not import the course package or its grader (transformer_course.masks)",
        ),
        ("import ctypes\nctypes.string_at(id(1), 8)", "graded code may not call ctypes.string_at"),
        # The frozen-module loader unmarshals only the interpreter's own modules, never bytes it is handed
        # (it reports the hook's refusal as an ImportError of its own: no code object comes back).
        ("import _imp, marshal\n_imp.get_frozen_object('runpy', marshal.dumps((lambda: 0).__code__))", FROZEN_REFUSED),
        (
            "import _frozen_importlib as b, _imp, marshal\n"
            "b._call_with_frames_removed(_imp.get_frozen_object, 'runpy', marshal.dumps((lambda: 0).__code__))",
            FROZEN_REFUSED,
        ),
        # Honest: the standard library imported afresh (its own files), namedtuple at call time of a
        # library that builds code, and a module the notebook wrote, imported with exactly its text.
        ("import json.tool, colorsys\ncolorsys.rgb_to_hsv(1, 0, 0)", "ran"),
        # Frozen standard-library modules, which Python 3.13 unmarshals when they are first imported.
        ("import runpy, zipimport, importlib.util\nimportlib.util.find_spec('json')", "ran"),
        (
            "open('helpers.py', 'w').write('def ones(n):\\n    return [1] * n\\n')\nimport helpers\nhelpers.ones(2)",
            "ran",
        ),
        # The standard library's class factories build their methods' code: not the submission's.
        (
            "from dataclasses import dataclass, field\n@dataclass\nclass P:\n    x: int = 0\n"
            "    ys: list = field(default_factory=list)\nP(1)",
            "ran",
        ),
        ("from collections import namedtuple\nP = namedtuple('P', 'x y')\nP(1, 2)", "ran"),
        ("from typing import NamedTuple\nclass P(NamedTuple):\n    x: int\nP(1)", "ran"),
        ("import enum\nclass Kind(enum.Enum):\n    PAD = 0\nKind.PAD", "ran"),
        # NumPy reads a saved array's header with ast.literal_eval: a syntax tree, no code.
        ("import numpy as np\nnp.save('w.npy', np.arange(3))\nassert np.load('w.npy').sum() == 3", "ran"),
        ("import ast\nast.literal_eval('{1: (2, 3)}')", "ran"),
        (
            "import ast\ntree = ast.parse('x = 1')\nexec(compile(tree, 'built', 'exec'))",
            "may not build code at run time (compile",
        ),
    ],
)
def test_the_graded_kernels_hook_refuses_code_built_at_run_time_and_nothing_honest(tmp_path, statement, outcome):
    import subprocess
    import sys

    run = subprocess.run(
        [sys.executable, "-c", GUARDED, str(tmp_path)],
        input=statement,
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=60,
    )
    assert outcome in run.stdout, (run.stdout, run.stderr[-2000:])
    assert outcome in ("ran", FROZEN_REFUSED) or "graded code may not" in run.stdout


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
    cases = [("length 3", {"length": 3}, "n" * 32, "07.1#0", False)]
    right = encode(np.tril(np.ones((3, 3), dtype=bool)))
    wrong = encode(np.ones((3, 3), dtype=bool))
    assert (
        grader._judge(exercise, cases, {"07.1#0": f"{'n' * 32} ok __main__ {right}"}, stopped=None).status == "passed"
    )
    verdict = grader._judge(exercise, cases, {"07.1#0": f"{'n' * 32} ok __main__ {wrong}"}, stopped=None)
    assert (verdict.status, verdict.points) == ("failed", 0)
    assert grader._judge(exercise, cases, {}, stopped=None).status == "error"  # no reply at all


@pytest.mark.parametrize("workers", [1, 2])
def test_a_worker_that_dies_costs_only_the_job_it_held(workers):
    """A job whose worker is aborted (as libzmq aborts its process), killed or ended by an exception becomes
    that job's row; a new worker takes the others, in order."""
    import signal

    from transformer_course_grader.workers import run_jobs

    jobs = [signal.SIGCHLD, signal.SIGABRT, signal.SIGCHLD, signal.SIGKILL, signal.SIGCHLD, -1, signal.SIGCHLD]
    finished = []
    results = run_jobs(
        signal.raise_signal,
        jobs,
        workers,
        on_death=lambda job, how: f"job {int(job)}: {how}",
        done=lambda: finished.append(1),
    )
    assert results == [
        None,
        "job 6: killed by SIGABRT",
        None,
        "job 9: killed by SIGKILL",
        None,
        "job -1: exited with status 1",
        None,
    ]  # raise_signal(-1) raises ValueError in the worker
    assert len(finished) == len(jobs)


@pytest.mark.parametrize("workers", [0, -1, 1.5, True])
def test_workers_must_be_a_positive_int(workers):
    from transformer_course_grader.workers import run_jobs

    with pytest.raises(ValueError, match="`workers` must be an int >= 1"):
        run_jobs(abs, [1], workers, on_death=lambda job, how: None)


@pytest.mark.parametrize(
    "release_path", sorted((ROOT / "release").glob("[0-9][0-9]_*.ipynb")), ids=lambda path: path.name[:2]
)
def test_what_grading_needs_of_each_release_reaches_a_grading_process(release_path):
    """Every released notebook's facts are worked out once and sent to the workers: they must pickle."""
    import pickle

    release = nbformat.read(release_path, as_version=4)
    facts = grader.release_facts(release)
    copied = pickle.loads(pickle.dumps(facts))
    assert [exercise.id for exercise in copied.exercises] == [exercise.id for exercise in grader._exercises_of(release)]
    assert copied.items == facts.items and copied.stubs == facts.stubs


def test_stubs_left_as_released_are_no_solutions_for_the_similarity_section():
    """Two students who both left an exercise untouched are not near-identical: the stub is not compared."""
    pytest.importorskip("nbgrader")
    source = nbformat.v4.new_notebook(
        cells=[
            solution_cell(
                "07.1", "def causal_mask(length):\n    ### BEGIN SOLUTION\n    return None\n    ### END SOLUTION"
            ),
            solution_cell(
                "07.2", "def greedy_decode(a, b, c, d):\n    ### BEGIN SOLUTION\n    return a\n    ### END SOLUTION"
            ),
        ]
    )
    release = release_notebook(source)
    answered = nbformat.from_dict(json.loads(json.dumps(release)))
    answered.cells[1].source = "def greedy_decode(a, b, c, d):\n    return [a, b]"
    exercises = [EXERCISES["07.1"], EXERCISES["07.2"]]
    stubs = grader._normalised_solutions(grader._programs(release, exercises), {})
    assert grader._normalised_solutions(grader._programs(release, exercises), stubs) == {}
    assert list(grader._normalised_solutions(grader._programs(answered, exercises), stubs)) == ["07.2"]


def test_every_package_twin_in_the_registry_is_readable_by_the_similarity_section():
    from transformer_course_grader.references import REGISTRY
    from transformer_course_grader.similarity import _package_tokens

    twins = [exercise for exercise, registration in REGISTRY.items() if registration.twin]
    assert len(twins) >= 14
    for exercise in twins:
        assert exercise in EXERCISES and _package_tokens(exercise), exercise
        assert all(len(form) > 20 for form in _package_tokens(exercise)), exercise


def _similarity_to_the_package(cells: list, exercise_id: str) -> float:
    """How much of the closest known answer to ``exercise_id`` the program of ``cells`` holds."""
    from transformer_course.exercises.slicing import program_for
    from transformer_course_grader.similarity import containment, known_answers, normalise, program_text, strip_no_ops

    program = program_for([*cells, "check()"], len(cells), EXERCISES[exercise_id].function_name)
    tokens = normalise(strip_no_ops(program_text(program)))
    return max(containment(answer, tokens) for _, answer in known_answers(exercise_id))


def test_every_exercise_has_a_known_answer_to_compare_with():
    """The package's implementation where there is one, the grader's reference and the instructor's solution."""
    from transformer_course_grader.similarity import known_answers

    for exercise_id in EXERCISES:
        sources = {where for where, _ in known_answers(exercise_id)}
        assert "the instructor's solution" in sources, (exercise_id, sources)
        assert "the grader's reference" in sources or exercise_id == "08.3", (exercise_id, sources)  # a wrapper


def test_a_copy_padded_with_statements_that_change_nothing_or_carrying_extra_helpers_is_still_a_copy():
    """The two copies that went unlisted before (0.67 and 0.53 similarity): a reference padded with no-op
    statements, and one carrying a helper of its own beside it."""
    import inspect

    from transformer_course_grader import references

    source = inspect.getsource(references._causal_reference).replace("_causal_reference", "causal_mask")
    header, body = source.split("\n", 1)
    padded = header + "\n" + "".join(f"    unused_{n} = {n}\n    pass\n" for n in range(12)) + body
    assert _similarity_to_the_package(["import numpy as np", padded], "07.1") >= 0.99
    helper = "def _shape(n):\n    total = 0\n    for i in range(n):\n        total += i * i - 1\n    return total, n"
    assert _similarity_to_the_package(["import numpy as np", helper, source], "07.1") >= 0.99
    greedy = inspect.getsource(references.REGISTRY["07.2"].reference)
    name = references.REGISTRY["07.2"].reference.__name__
    assert _similarity_to_the_package(["import numpy as np", greedy.replace(name, "greedy_decode")], "07.2") >= 0.9


def test_a_copy_whose_every_name_read_passes_through_an_identity_helper_is_still_a_copy():
    import ast
    import inspect

    from transformer_course_grader import references

    source = inspect.getsource(references._causal_reference).replace("_causal_reference", "causal_mask")

    class Wrap(ast.NodeTransformer):  # every name read becomes same(name)
        def visit_Name(self, node):
            if isinstance(node.ctx, ast.Load) and node.id not in ("np", "range", "len"):
                return ast.Call(ast.Name("same", ast.Load()), [node], [])
            return node

    wrapped = ast.unparse(ast.fix_missing_locations(Wrap().visit(ast.parse(source))))
    assert wrapped.count("same(") >= 3
    helper = 'def same(value):\n    """The value itself."""\n    return value'
    assert _similarity_to_the_package(["import numpy as np", helper, wrapped], "07.1") >= 0.99
    assert _similarity_to_the_package(["import numpy as np", "same = lambda value: value", wrapped], "07.1") >= 0.99


@pytest.mark.parametrize("exercise_id", sorted(EXERCISES))
def test_no_function_of_the_students_exercises_package_computes_an_answer(exercise_id):
    """The students' exercises package holds data and judges only: no function of any of its modules, called on a
    public case's arguments, gives an output the exercise accepts. The usual mistakes come to the check as data."""
    import importlib
    import inspect
    import pkgutil

    from transformer_course import exercises
    from transformer_course.exercises import public_cases

    modules = [exercises] + [
        importlib.import_module(f"{exercises.__name__}.{module.name}")
        for module in pkgutil.iter_modules(exercises.__path__)
    ]
    functions = {
        f"{module.__name__}.{name}": function
        for module in modules
        for name, function in vars(module).items()
        if inspect.isfunction(function) and function.__module__ == module.__name__
    }
    assert len(modules) >= 7 and len(functions) > 50
    for label, arguments, expected in public_cases(exercise_id):
        for name, function in functions.items():
            try:
                inspect.signature(function).bind(**arguments)
            except TypeError:
                continue  # it does not take these arguments
            try:
                with np.errstate(all="ignore"):
                    received = function(**arguments)
            except Exception:  # noqa: BLE001 - a function that cannot take them computes nothing here
                continue
            assert EXERCISES[exercise_id].judge(arguments, received, expected) is not None, (name, label)


def test_every_exercise_with_usual_mistakes_carries_their_outputs_on_the_public_cases():
    """Each exercise the grader knows usual mistakes of has, on some public case, the outputs of each as data, and
    none of those outputs is the right answer there."""
    from transformer_course.exercises import public_cases, public_mistakes
    from transformer_course.exercises.hints import equal_at
    from transformer_course_grader.references import MISTAKES

    assert len(MISTAKES) >= 35
    for exercise_id in MISTAKES:
        stored = public_mistakes(exercise_id)
        assert any(stored), exercise_id
        for (_, _, expected), mistakes in zip(public_cases(exercise_id), stored):
            for message, output, where, atol in mistakes:
                assert not equal_at(expected, output, atol, where), (exercise_id, message)


def test_a_copy_whose_comprehensions_became_loops_and_statements_moved_is_still_a_copy():
    """03.1's reference with its comprehensions written as loops is still the whole answer (0.66 before
    comprehensions read as loops), and listed with two independent statements swapped too; an honest answer
    stays below the threshold."""
    import inspect

    from transformer_course_grader import references
    from transformer_course_grader.similarity import SIMILARITY_THRESHOLD

    helper = inspect.getsource(references._standardize)
    loops = (
        "def vectorize(text, vocabulary):\n    lookup = {}\n"
        "    for place, token in enumerate(vocabulary):\n        lookup[token] = place\n"
        "    ids = []\n    for token in _standardize(text).split():\n        ids.append(lookup.get(token, 1))\n"
        "    return np.array(ids, dtype='int64')"
    )
    imports = "import string\nimport numpy as np"
    assert _similarity_to_the_package([imports, helper, loops], "03.1") >= 0.99
    reordered = loops.replace("    lookup = {}\n", "    ids = []\n    lookup = {}\n", 1).replace(
        "    ids = []\n    for token", "    for token"
    )
    assert reordered != loops
    assert _similarity_to_the_package([imports, helper, reordered], "03.1") >= SIMILARITY_THRESHOLD
    honest = (
        "def vectorize(text, vocabulary):\n    words = text.lower().split()\n"
        "    return np.array([vocabulary.index(w) if w in vocabulary else 1 for w in words])"
    )
    assert _similarity_to_the_package(["import numpy as np", honest], "03.1") < SIMILARITY_THRESHOLD


def test_copies_of_the_package_are_listed_however_they_are_spread_or_renamed():
    """A copy pasted below the untouched stub, one under other names and import aliases, and one with its
    helpers in other cells: each is as close to the package's own implementation as the package itself."""
    import inspect
    import re

    import transformer_course.decoding as decoding
    import transformer_course.masks as masks

    stub = "def causal_mask(length):\n    raise NotImplementedError('Exercise 07.1')"
    body = inspect.getsource(masks.causal_mask)
    assert _similarity_to_the_package([stub, "from keras import ops\n" + body], "07.1") == 1.0
    renamed = re.sub(r"\bops\.", "keras.ops.", body).replace("rows", "r").replace("columns", "c")
    renamed = renamed.replace("key_length", "width").replace("def causal_mask", "def causal_mask")
    assert _similarity_to_the_package(["import keras", stub, renamed], "07.1") >= 0.9
    source = inspect.getsource(decoding)
    helpers = [
        inspect.getsource(decoding._probabilities),
        inspect.getsource(decoding._start),
        inspect.getsource(decoding._decode),
    ]
    copied = [
        "from collections.abc import Callable\nimport numpy as np\nPADDING_ID = 0",
        "def check_integer(name, value):\n    return int(value)",
        *helpers,
        inspect.getsource(decoding.greedy_decode),
    ]
    assert "def _decode" in source and _similarity_to_the_package(copied, "07.2") >= 0.8
    honest = (
        "def greedy_decode(next_token_probabilities, start_ids, end_id, max_length):\n"
        "    decoded = np.asarray(start_ids)[:, None]\n"
        "    for _ in range(max_length):\n"
        "        decoded = np.concatenate([decoded, next_token_probabilities(decoded).argmax(-1)[:, None]], 1)\n"
        "    return decoded"
    )
    assert _similarity_to_the_package(["import numpy as np", honest], "07.2") < 0.5


def _program_texts(cells, function_name="f"):
    from transformer_course.exercises.slicing import program_for

    program = program_for([*cells, "check()"], len(cells), function_name)
    assert program.missing is None and program.package_import is None, (program.missing, program.package_import)
    return [unit.text for unit in program.units]


def test_a_star_import_comes_with_a_function_that_reads_a_name_it_may_bind():
    assert _program_texts(["from numpy import *", "def f(n):\n    return tril(ones((n, n), dtype=bool))"]) == [
        "from numpy import *",
        "def f(n):\n    return tril(ones((n, n), dtype=bool))",
    ]
    # After the name's last explicit binding only: an earlier star import is shadowed by it.
    assert _program_texts(
        ["from math import *", "import numpy as np", "from numpy import *", "def f(n):\n    return np.eye(n)"]
    ) == ["import numpy as np", "from numpy import *", "def f(n):\n    return np.eye(n)"]
    # A star import of a module the notebook wrote comes with the statement that wrote it.
    written = "%%writefile helpers.py\ndef lower(n):\n    return n\n"
    texts = _program_texts([written, "from helpers import *", "def f(n):\n    return lower(n)"])
    assert texts[1:] == ["from helpers import *", "def f(n):\n    return lower(n)"] and "writefile" in texts[0]
    # The course package's exports are known: a star import of a module that does not bind `np` is left out...
    assert _program_texts(
        ["import numpy as np", "from transformer_course.plots import *", "def f(n):\n    return np.eye(n)"]
    ) == ["import numpy as np", "def f(n):\n    return np.eye(n)"]
    # ...and one that binds the name the function reads is the package's code.
    from transformer_course.exercises.slicing import program_for

    program = program_for(
        ["from transformer_course.masks import *", "def f(n):\n    return causal_mask(n)", "c"], 2, "f"
    )
    assert program.package_import == (0, "transformer_course.masks.*")


@pytest.mark.parametrize("magics", ["%%time\n", "%%capture output\n", "%%capture\n%%time\n", "%%timeit -n1 -r1\n"])
def test_a_cell_magic_that_runs_its_body_as_python_is_read_as_that_body(magics):
    from transformer_course.exercises.slicing import parse_cells

    cell = magics + "import numpy as np\ndef f(n):\n    return np.eye(n)"
    assert _program_texts([cell]) == ["import numpy as np", "def f(n):\n    return np.eye(n)"]
    lines = magics.count("\n")
    assert [unit.line for unit in parse_cells([cell]).units] == [lines + 1, lines + 2]  # the cell's own numbers
    assert _program_texts(["%%writefile other.txt\nnot python", cell])[0] == "import numpy as np"


@pytest.mark.parametrize(
    "writer",
    [
        "open('helpers.py', 'w').write({text!r})",
        "open('helpers.py', mode='w').write({text!r})",
        "with open('helpers.py', 'w') as file:\n    file.write({text!r})",
        "from pathlib import Path\nPath('helpers.py').write_text({text!r})",
        "import pathlib\npathlib.Path('helpers.py').write_text({text!r})",
    ],
)
def test_a_module_written_with_open_comes_with_the_function_that_imports_it(writer):
    from transformer_course.exercises.slicing import program_for

    text = "import numpy as np\ndef lower(n):\n    return np.tril(np.ones((n, n), dtype=bool))\n"
    cells = [writer.format(text=text), "import helpers\ndef f(n):\n    return helpers.lower(n)", "check()"]
    program = program_for(cells, 2, "f")
    assert program.writefiles() == {"helpers.py": text}
    assert any("helpers.py" in unit.text for unit in program.units)


def test_a_global_counter_keeps_its_initial_value():
    cells = ["calls = 0", "def f(n):\n    global calls\n    calls += 1\n    return n + calls"]
    assert _program_texts(cells) == cells
    # A function that only reads a global another function sets brings that function and the initial value.
    cells = ["state = None", "def remember(x):\n    global state\n    state = x", "def f(n):\n    return state"]
    assert _program_texts(cells) == cells


def test_the_slicer_is_bounded_in_statements_and_time():
    """20,000 statements read in a few seconds (it was 83 s: each name's binding was searched linearly); more
    are refused with the reason; a budget stops a long reading."""
    from transformer_course.exercises.slicing import MAX_STATEMENTS, SlicingTooLong, parse_cells, program_for

    many = "\n".join(f"x{number} = x{number - 1} + 1" if number else "x0 = 0" for number in range(MAX_STATEMENTS - 1))
    parsed = parse_cells([many, "def f(n):\n    return n + x100"])
    assert len(program_for(parsed, 2, "f").units) == 102
    with pytest.raises(SlicingTooLong, match="more than 20,000 top-level statements"):
        parse_cells([many + "\ny = 1\nz = 2"])
    with pytest.raises(SlicingTooLong, match="took more than 0 s"):
        parse_cells(["x = 1", "y = 2"], budget_seconds=0)


@pytest.mark.parametrize(
    "source, reason",
    [
        # The hook's own globals, from sys.modules or from a refused call's traceback.
        ("import sys\nguard = sys.modules['transformer_course_grader.guard']", "uses sys.modules"),
        ("try:\n    exec('1')\nexcept Exception as error:\n    frame = error.__traceback__.tb_frame", "calls exec()"),
        ("def f(error):\n    return error.__traceback__.tb_frame.f_back.f_globals", "reads .__traceback__"),
        # A builtin swapped by name, the builtins reached through a namespace.
        ("import builtins\nbuiltins.open = lambda *a: None", "imports builtins"),
        ("globals()['__builtins__'].open = print", "calls globals()"),
        ("namespace = {}\nnamespace['__builtins__'] = None", "names __builtins__"),
        # An import-system finder serving a module from a written file.
        ("import sys\nsys.meta_path.insert(0, object())", "uses sys.meta_path"),
        ("from sys import meta_path", "imports sys.meta_path"),
        ("import importlib.machinery", "imports importlib.machinery"),
        ("open('_decimal.py', 'w').write(TEXT)", "opens a file for writing"),
        ("open(NAME, 'w').write(TEXT)", "opens a file for writing"),
        # A helper's code swapped through a closure or a function's attributes.
        ("def f():\n    pass\nf.__code__ = g.__code__", "reads .__code__"),
        ("cell = helper.__closure__[0]", "reads .__closure__"),
        ("def f(x):\n    return x\nf = type(f)(g.__code__, {})", "reads .__code__"),
        # Code carried as data, however it is unpacked and run.
        ("import zlib\nSOURCE = zlib.decompress(b'" + "x" * 5000 + "')", "holds a constant of 5,000 characters"),
        ("import marshal", "imports marshal"),
        ("import pickle\npickle.loads(DATA)", "imports pickle"),
        ("import ctypes", "imports ctypes"),
        ("eval(TEXT)", "calls eval()"),
        ("compile(TEXT, 'x', 'exec')", "calls compile()"),
        ("getattr(module, 'ex' + 'ec')", "calls getattr() with a name computed"),
        ("getattr(dataclasses, '_create_fn')", "calls getattr() on _create_fn"),
        ("import dataclasses\nmake = dataclasses._create_fn", "reads dataclasses._create_fn"),
        ("from dataclasses import _create_fn", "imports _create_fn from dataclasses"),
        ("class Point:\n    __annotations__ = {'x=print(1)#': int}", "uses __annotations__"),
        ("import subprocess", "imports subprocess"),
        ("import os\nos.system('python -c 1')", "uses os.system"),
        # What a list of refused words let through, refused by the allow-list:
        # Reached through an allowed module's non-public names, or a module outside the list.
        ("import os\nmodules = os.sys.modules", "imports os, which graded code may not use"),
        # Refused as a module on Python 3.11 and 3.12 (dataclasses imports builtins), as not public on 3.13.
        ("import dataclasses\ndataclasses.builtins.exec('1')", "uses dataclasses.builtins: "),
        ("from numpy import *\nconvert = ctypeslib.as_ctypes", "uses numpy.ctypeslib.as_ctypes: the module"),
        ("from numpy import ctypeslib", "imports numpy.ctypeslib, which loads files or code"),
        ("import numpy as np\nview = np.lib.npyio", "uses numpy.lib.npyio: the module numpy.lib"),
        ("import numpy as np\nview = np.lib.stride_tricks.as_strided", "uses numpy.lib.stride_tricks.as_strided"),
        ("import numpy as np\nW = np.load('w.npy', allow_pickle=True)", "calls numpy.load with pickles allowed"),
        ("import typing\nhints = typing.get_type_hints(f)", "uses typing.get_type_hints, which loads"),
        # Attributes read by a computed name, however it is spelled.
        ("import operator\nget = operator.attrgetter('tb_' + 'frame')", "uses operator.attrgetter"),
        ("def f():\n    pass\nobject.__setattr__(f, '__co' + 'de__', f)", "calls .__setattr__() with a name computed"),
        ("import functools\nread = functools.partial(getattr, 1)", "uses getattr without calling it"),
        ("def f(x):\n    return '{0.__class__}'.format(x)", "holds a format template whose field reads a private"),
        ("T = '{0'\nT += '.x}'\ndef f(x):\n    return T.format(x)", "formats a template that is not a literal"),
        # A library module handed around as a value, where its names can no longer be read.
        ("import numpy as np\ndef helper(module):\n    return module.lib\nhelper(np)", "uses the module np as a value"),
        ("import numpy as np\nalias = np", "uses the module np as a value"),
        # Built-ins outside the list, the interpreter's internals as names and attributes.
        ("answer = input()", "uses input, a built-in which graded code may not use"),
        ("x = __graded_functions__", "uses __graded_functions__, the interpreter's internals"),
        ("def g():\n    yield 1\nframe = g().gi_frame", "reads .gi_frame, the interpreter's internals"),
        ("def f(x):\n    return x._secret", "reads x._secret, a private name your code does not define"),
        # A name is the program's own only in the scopes where Python binds it.
        ("def g():\n    eval = len\ndef f():\n    return eval('1')", "calls eval(), which runs code built from data"),
        ("class A:\n    exec = len\n    def m(self):\n        return exec('1')", "calls exec()"),
    ],
)
def test_the_source_policy_refuses_what_builds_code_or_reaches_internals(source, reason):
    from transformer_course.exercises.policy import problems_in

    problems = problems_in(source)
    assert any(problem.reason.startswith(reason) for problem in problems), problems


@pytest.mark.parametrize(
    "source",
    [
        "from dataclasses import dataclass, field\n@dataclass\nclass Beam:\n    ids: list = "
        "field(default_factory=list)",
        "from collections import namedtuple\nBeam = namedtuple('Beam', 'ids score')",
        "from typing import NamedTuple\nclass Beam(NamedTuple):\n    ids: list\n    score: float",
        "import enum\nclass Kind(enum.Enum):\n    PAD = 0",
        "calls = 0\ndef f(x):\n    global calls\n    calls += 1\n    return x",
        "import functools\n@functools.lru_cache(maxsize=None)\ndef table(n):\n    return n",
        "from numpy import *\ndef f(n):\n    return tril(ones((n, n)))",
        "def clean(text):\n    return text.replace('a', 'b').lower()",
        "class Cache:\n    def __init__(self):\n        self._items = {}\n"
        "    def get(self, key):\n        return self._items[key]",
        "import sys\nEPSILON = sys.float_info.epsilon",
        "import math, itertools\nLOG2 = math.log(2)\nPAIRS = list(itertools.combinations(range(3), 2))",
        "if __name__ == '__main__':\n    print('run')",
        "with open('notes.txt', 'w') as file:\n    file.write('scratch')",
        "print(getattr(model, 'name', None))",
        # Honest code the allow-list must know: the protocol's special names, a frozen dataclass's own setter, a
        # literal format template, a parameter named like a refused built-in, the allowed libraries' public names.
        "class Refused(Exception):\n    def __init__(self, message):\n        super().__init__(message)",
        "from dataclasses import dataclass\n@dataclass(frozen=True)\nclass Pair:\n    left: int\n"
        "    def __post_init__(self):\n        object.__setattr__(self, 'right', self.left + 1)",
        "ROW = '{:>5} {:.3f}'\ndef f(x):\n    return ROW.format(x.shape[0], x.mean()) + '{}'.format(type(x).__name__)",
        "def f(input, vars=None):\n    return input + 1",
        "import numpy as np\ndef f(x):\n    return np.linalg.norm(np.random.default_rng(0).random(3)) + np.sum(x)",
        "import numpy.linalg as linear\nfrom numpy.random import default_rng\ndef f(x):\n"
        "    return linear.norm(x) + default_rng(0).random()",
        "import re, string\nWORD = re.compile(r'\\w+')\ndef f(text):\n"
        "    return WORD.findall(text.translate(str.maketrans('', '', string.punctuation)))",
        "from scipy.special import logsumexp\nimport scipy.stats as stats\ndef f(x):\n"
        "    return logsumexp(x) + stats.norm.cdf(0.0)",
        "class Key:\n    __slots__ = ('a',)\n    __hash__ = None",
        "def f(xs):\n    return [y for x in xs if (y := 2 * x)]",
        "best = lambda xs, k=3: sorted(xs, key=lambda v: -v)[:k]",
        "import numpy as np\nWEIGHTS = np.load('weights.npy')",
        "import numpy as np\nfrom numpy.lib.stride_tricks import sliding_window_view\ndef f(x):\n"
        "    return np.lib.stride_tricks.sliding_window_view(x, 2) + sliding_window_view(x, 2)",
        "from collections import Counter\nfrom heapq import nlargest\ndef f(words):\n"
        "    return nlargest(2, Counter(words).items(), key=lambda item: item[1])",
    ],
)
def test_the_source_policy_lets_every_honest_style_through(source):
    from transformer_course.exercises.policy import problems_in

    assert problems_in(source) == []


def test_the_allow_list_reads_a_program_as_a_whole():
    """A name one statement binds is the program's own in the others: an alias from another cell still stands
    for its module, a function's private attribute set in another cell is the student's own."""
    from transformer_course.exercises.policy import program_problems

    imports, uses = "import numpy as np", "def f():\n    return np.ctypeslib"
    assert program_problems([imports, uses])[1][0].reason.startswith("uses numpy.ctypeslib, which loads")
    assert program_problems([imports, "def f(x):\n    return np.tril(x)"]) == [[], []]
    cache = "class Table:\n    def __init__(self):\n        self._rows = {}"
    assert program_problems([cache, "def rows(table):\n    return table._rows"]) == [[], []]
    assert program_problems(["import mine", "def f():\n    return mine._helper()"], written={"mine"}) == [[], []]


def test_every_instructors_solution_passes_the_source_policy():
    """The course's own solutions (notebooks/) as the grader reads them: no exercise of theirs is refused."""
    refused = {}
    for path in sorted((Path(__file__).resolve().parents[2] / "notebooks").glob("[0-9][0-9]_*.ipynb")):
        notebook = nbformat.read(path, as_version=4)
        facts = grader.release_facts(notebook)
        programs = grader._programs(notebook, facts.exercises)
        refused |= {
            exercise.id: why
            for exercise in facts.exercises
            if (why := grader._not_graded(exercise, programs[exercise.id]))
        }
    assert not refused


def test_a_notebook_under_a_near_name_is_graded_and_named(tmp_path):
    """A browser's ``(1)``, Jupyter's ``-Copy1``, Colab's ``Copy of``: the one there is graded and named; two
    candidates are both named; an exact name wins and its twin is named; none lists what the folder holds."""
    from transformer_course_grader.grader import locate_submission

    release_name = "04_self_attention.ipynb"
    for near in ("04_self_attention (1).ipynb", "04_self_attention-Copy1.ipynb", "Copy of 04_Self_Attention.ipynb"):
        folder = tmp_path / near.replace(" ", "_")
        folder.mkdir()
        (folder / near).write_text("{}", encoding="utf-8")
        path, notes = locate_submission(folder / release_name)
        assert path == folder / near and notes == [f"graded {near}, under the release's name {release_name}"]
    both = tmp_path / "both"
    both.mkdir()
    for age, name in enumerate(("04_self_attention (1).ipynb", "04_self_attention (2).ipynb")):
        (both / name).write_text("{}", encoding="utf-8")
        os.utime(both / name, (1_000_000 + age, 1_000_000 + age))
    path, notes = locate_submission(both / release_name)
    assert path.name == "04_self_attention (2).ipynb" and "also: 04_self_attention (1).ipynb" in notes[0]
    exact = tmp_path / "exact"
    exact.mkdir()
    for name in (release_name, "04_self_attention-Copy1.ipynb"):
        (exact / name).write_text("{}", encoding="utf-8")
    assert locate_submission(exact / release_name) == (
        exact / release_name,
        [f"graded {release_name}; also in the folder: 04_self_attention-Copy1.ipynb (not graded)"],
    )
    other = tmp_path / "other"
    other.mkdir()
    (other / "05_transformer_encoder.ipynb").write_text("{}", encoding="utf-8")
    assert locate_submission(other / release_name) == (
        None,
        ["the folder holds 05_transformer_encoder.ipynb, none of them 04_self_attention.ipynb"],
    )
    assert locate_submission(tmp_path / "missing" / release_name) == (None, [])


def test_a_notebook_under_a_name_of_the_students_own_is_graded_when_it_holds_the_releases_cells(tmp_path):
    from transformer_course_grader.grader import locate_submission

    release_name = "04_self_attention.ipynb"
    folder = tmp_path / "ada"
    folder.mkdir()
    (folder / "my attention homework.ipynb").write_text(
        '{"cells": [{"metadata": {"nbgrader": {"grade_id": "check_04_2"}}}]}'
    )
    (folder / "05_transformer_encoder.ipynb").write_text(
        '{"cells": [{"metadata": {"nbgrader": {"grade_id": "check_05_1"}}}]}'
    )
    path, notes = locate_submission(folder / release_name, frozenset({"check_04_1", "check_04_2"}))
    assert path == folder / "my attention homework.ipynb"
    assert notes == [
        "graded my attention homework.ipynb, a name of the student's own: it holds the cells of the release "
        + release_name
    ]
    # Without the release's cells in it, a notebook of another name is not this release's: not submitted, as before.
    path, notes = locate_submission(folder / release_name, frozenset({"check_04_9"}))
    assert path is None and "none of them 04_self_attention.ipynb" in notes[0]


def test_a_stray_byte_that_is_not_utf8_costs_nothing_else():
    assert grader.decode_submission("Jos\u00e9".encode("latin-1")) == ("Jos\ufffd", 1)
    assert grader.decode_submission("\u00e9\u00e9".encode("utf-8")) == ("\u00e9\u00e9", 0)
    assert grader.decode_submission(b"\xff\xfe{}") == ("\ufffd\ufffd{}", 2)


def _judged(exercise_id, wrong):
    """The grader's verdict on replies right on every case but the numbers in ``wrong`` (1-based), which raise."""
    from transformer_course.exercises import EXERCISES
    from transformer_course.exercises.values import encode
    from transformer_course_grader import grader, references

    exercise, cases, replies = EXERCISES[exercise_id], [], {}
    for number, (label, arguments, secret) in enumerate(grader._cases(EXERCISES[exercise_id], 7, "ada"), start=1):
        nonce, key = f"{number:032x}", f"{exercise_id}#{number}"
        cases.append((label, arguments, nonce, key, secret))
        replies[key] = (
            f"{nonce} raised ValueError: an edge case"
            if number in wrong
            else f"{nonce} ok __main__ {encode(references.expected(exercise_id, arguments))}"
        )
    return grader._judge(exercise, cases, replies, stopped=None)


def test_a_function_wrong_on_some_secret_cases_gets_their_share_with_every_failure_listed():
    result = _judged("04.1", wrong={7, 9})  # 5 public cases, then 5 secret ones; 3 points
    assert (result.points, result.status) == (1.8, "partial credit"), result
    assert result.message.startswith("2 of 10 cases wrong (3 of 5 secret cases right): secret case 7 ")
    assert "secret case 9 " in result.message and "an edge case" not in result.message  # no secret text shown
    assert _judged("04.1", wrong=set()).points == 3


def test_passing_only_the_public_cases_earns_nothing_and_a_wrong_public_case_costs_its_share():
    assert (_judged("04.1", wrong={6, 7, 8, 9, 10}).points, _judged("04.1", wrong={6, 7, 8, 9, 10}).status) == (
        0,
        "error",
    )
    assert _judged("04.1", wrong={1}).points == 2.5  # 3 points x 5 secret right / (5 secret + 1 public wrong)


def test_an_exercise_kept_all_or_nothing_or_with_two_secret_cases_scores_zero_on_one_wrong_case():
    assert _judged("07.1", wrong={5}).points == 0  # the catalogue keeps the causal mask all or nothing
    assert _judged("02.1", wrong={4}).points == 0  # two secret cases: a share of them says little
