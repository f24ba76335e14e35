"""Release and grading: honest submissions and adversarial ones, each with its exact outcome.

The tests build a small course notebook with two exercises (07.1, the causal mask, 1 point; 07.2,
greedy decoding, 3 points), release it, write one submission per behaviour, grade them all in one
batch and check every student's score, status and flags.
"""

import json
import os
import shutil
import socket
import threading
from pathlib import Path

import nbformat
import pytest
from solutions import check_cell, solution_cell

from transformer_course_grader.grader import grade_folder
from transformer_course_grader.markup import release_folder, release_notebook
from transformer_course_grader.sandbox import Limits, sandbox_available

pytestmark = pytest.mark.tensorflow  # Keras on TensorFlow: no jax/torch backend session collects it

ROOT = Path(__file__).resolve().parents[2]
needs_sandbox = pytest.mark.skipif(not sandbox_available(), reason="bubblewrap cannot run here")
SANDBOX = sandbox_available()  # without bubblewrap the grading logic is still tested, unconfined
MARKER = "sandbox-daemon-4d1f"  # in the command line of a process a submission leaves behind

CAUSAL = """def causal_mask(length):
    ### BEGIN SOLUTION
    return np.tril(np.ones((length, length), dtype=bool))
    ### END SOLUTION"""

GREEDY = """def greedy_decode(next_token_probabilities, start_ids, end_id, max_length):
    ### BEGIN SOLUTION
    decoded = np.asarray(start_ids, dtype="int64")[:, None]
    finished = np.zeros(len(decoded), dtype=bool)
    for _ in range(max_length):
        next_ids = np.where(finished, 0, next_token_probabilities(decoded).argmax(axis=-1))
        decoded = np.concatenate([decoded, next_ids[:, None]], axis=1)
        finished |= next_ids == end_id
        if finished.all():
            break
    return decoded
    ### END SOLUTION"""

# 1200 MiB: a kernel that imports TensorFlow (tensor_answer) needs about 700; memory_hog asks for 1600.
# 90 s a cell: importing Keras in the graded kernel (tensor_answer) took 12 to 23 s on a slow 2-core machine
# while the other test workers kept both cores busy; a limit near that would test the machine's load, not the
# grader. No submission of the shared fixture waits for it: the endless loop is graded on its own, under a cell
# limit of 5 s: its notebook imports NumPy only, and its kernels start in about 0.6 s alone (a cell limit also
# bounds a kernel's start); the loop runs that long, on a core, in each of the two kernels.
LIMITS = Limits(cell_seconds=90, notebook_seconds=240, memory_mb=1200)
ENDLESS_LOOP_LIMITS = Limits(cell_seconds=5, notebook_seconds=120, memory_mb=1200)
SEED = 12345


def source_notebook():
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [
        nbformat.v4.new_markdown_cell("# A tiny lecture"),
        nbformat.v4.new_code_cell(
            "import numpy as np\nfrom transformer_course.exercises import check\nprint('the lesson')",
            execution_count=1,
            outputs=[nbformat.v4.new_output("stream", text="the lesson\n")],
        ),
        solution_cell("07.1", CAUSAL),
        check_cell(
            "07.1",
            1,
            'check("07.1", causal_mask)\n'
            "### BEGIN HIDDEN TESTS\nassert causal_mask(3).sum() == 6\n### END HIDDEN TESTS",
        ),
        solution_cell("07.2", GREEDY),
        check_cell("07.2", 3, 'check("07.2", greedy_decode)'),
        nbformat.v4.new_code_cell(
            "# NBVAL_CHECK_OUTPUT\nprint(2 + 2)", outputs=[nbformat.v4.new_output("stream", text="4\n")]
        ),
        nbformat.v4.new_code_cell(
            "print('later cells use the package')", outputs=[nbformat.v4.new_output("stream", text="x\n")]
        ),
    ]
    return notebook


def _with_outputs(notebook, size):
    """``notebook`` with ``size`` bytes of (image) outputs in its first code cell, as a run notebook saves them."""
    notebook = nbformat.from_dict(json.loads(json.dumps(notebook)))
    image = nbformat.v4.new_output("display_data", data={"image/png": "A" * size})
    notebook.cells[1].outputs = [image]
    return notebook


def _mangled(notebook):
    """nbgrader metadata that is not a dict, and a grade_id that is not a string."""
    notebook = nbformat.from_dict(json.loads(json.dumps(notebook)))
    notebook.cells[2].metadata["nbgrader"] = ["solution", True]
    notebook.cells[4].metadata["nbgrader"] = {"grade_id": 7, "solution": True}
    return notebook


def with_cell(notebook, index, source):
    notebook = nbformat.from_dict(json.loads(json.dumps(notebook)))
    notebook.cells[index].source = source
    return notebook


def inserted(notebook, index, source):
    notebook = nbformat.from_dict(json.loads(json.dumps(notebook)))
    notebook.cells.insert(index, nbformat.v4.new_code_cell(source))
    return notebook


# Ways past a list of refused words (each passed the policy before it was an allow-list): (prelude, the line in
# causal_mask that reaches past it), and the reason the allow-list gives.
ALLOW_LIST_BREAKS = {
    "os_sys_modules": ("import os\n", "os.sys.modules.get('transformer_course_grader.guard')"),
    "dataclasses_builtins": ("import dataclasses\n", "dataclasses.builtins.exec('1')"),
    "attrgetter_frames": ("import operator\n", "operator.attrgetter('tb_' + 'frame')"),
    "setattr_code": ("def helper():\n    pass\n", "object.__setattr__(helper, '__co' + 'de__', helper)"),
    "getattr_module": ("", "getattr(np, 'ctypes' + 'lib')"),
    "module_as_value": ("def helper(module):\n    return module.lib\n", "helper(np)"),
}
ALLOW_LIST_REASONS = {
    "os_sys_modules": "imports os, which graded code may not use",
    # Python 3.11 and 3.12's dataclasses import builtins (a module, refused as such); 3.13's does not (a name it
    # does not define, refused as not public). Refused either way.
    "dataclasses_builtins": "uses dataclasses.builtins: ",
    "attrgetter_frames": "uses operator.attrgetter, which loads files or code or reads attributes by a computed name",
    "setattr_code": "calls .__setattr__() with a name computed at run time",
    "getattr_module": "calls getattr() with a name computed at run time",
    "module_as_value": "uses the module np as a value",
}


# Graded with the whole notebook run too (grade --run-notebooks): their tests read what that run reports.
WHOLE_RUN_STUDENTS = (
    "syntax_error",
    "reads_outside",
    "uses_network",
    "library_copy",
    "reads_the_repository",
    "reads_git",
    "writes_the_package",
    "reads_the_references",
    "reads_the_environment",
    "leaves_a_daemon",
)


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    root = tmp_path_factory.mktemp("course")
    source_dir, release_dir, submissions = root / "source", root / "release", root / "submissions"
    source_dir.mkdir()
    nbformat.write(source_notebook(), source_dir / "07_tiny.ipynb")
    release_folder(source_dir, release_dir)
    release = nbformat.read(release_dir / "07_tiny.ipynb", as_version=4)
    solved = nbformat.read(release_dir / "07_tiny.ipynb", as_version=4)
    solved.cells[2].source, solved.cells[4].source = CAUSAL, GREEDY  # what a student who solves both writes

    server = socket.create_server(("127.0.0.1", 0))
    threading.Thread(target=lambda: [server.accept()[0].close() for _ in range(50)], daemon=True).start()
    port = server.getsockname()[1]
    secret = source_dir / "07_tiny.ipynb"

    submissions_by_student = {
        "full": solved,
        "release": release,
        "one_wrong": with_cell(
            solved, 2, "def causal_mask(length):\n    return np.triu(np.ones((length, length), dtype=bool))"
        ),
        "syntax_error": with_cell(solved, 2, "def causal_mask(length)\n    return None"),
        "memory_hog": with_cell(
            solved,
            2,
            (
                "hog = np.ones(200_000_000)\n"
                "def causal_mask(length):\n"
                "    return np.tril(hog[:length * length].reshape(length, length) > 0)"
            ),
        ),
        "edited_check": with_cell(release, 3, 'print("✓ Exercise 07.1: all cases match (1/1 points)")'),
        "monkeypatch": inserted(
            release,
            2,
            (
                "import numpy, transformer_course.exercises as exercises\n"
                "numpy.allclose = numpy.array_equal = numpy.isclose = lambda *a, **k: True\n"
                "exercises.evaluate = lambda *a, **k: 'passed'\n"
                "exercises.compare_outputs = lambda *a, **k: None\n"
                "import transformer_course_grader.protocol as protocol\n"
                "protocol.parse_reply = lambda *a, **k: ('ok', None)"
            ),
        ),
        "fake_score": inserted(
            release,
            2,
            (
                "print('full,1,3,4,4')\nprint('TOTAL: 4 / 4')\n"
                "import sys\nsys.stdout.write('0123456789abcdef0123456789abcdef ok __main__ true\\n')"
            ),
        ),
        "reads_outside": with_cell(
            release,
            2,
            (
                "import json\n"
                f"source = json.load(open({str(secret)!r}))\n"
                "exec(''.join(source['cells'][2]['source'])"
                ".replace('### BEGIN SOLUTION', '').replace('### END SOLUTION', ''))"
            ),
        ),
        # The network tried from a lesson cell: the graded kernel's policy refuses `socket` before anything runs.
        "uses_network": inserted(
            solved, 2, f"import socket\nsocket.create_connection(('127.0.0.1', {port}), timeout=2).close()"
        ),
        "library_copy": with_cell(
            release, 2, "from transformer_course_grader.references import _causal_reference as causal_mask"
        ),
        # Honest answers written in ordinary but unexpected ways.
        # A Keras tensor for an answer, built by a tf.function helper of the same cell: each kernel that imports
        # TensorFlow costs about 9 s of a core on a slow 2-core machine, so the two forms share one submission.
        "tensor_answer": with_cell(
            solved,
            2,
            (
                "import keras\n"
                "import tensorflow as tf\n"
                "@tf.function\n"
                "def lower_triangle(length):\n"
                "    return tf.linalg.band_part(tf.ones((length, length)), -1, 0) > 0\n"
                "def causal_mask(length):\n"
                "    return keras.ops.convert_to_tensor(lower_triangle(length))"
            ),
        ),
        "prints_no_newline": with_cell(
            solved,
            2,
            (
                "def causal_mask(length):\n"
                "    print('building a mask of', length, end=' ')\n"
                "    return np.tril(np.ones((length, length), dtype=bool))"
            ),
        ),
        "answer_below_stub": inserted(release, 3, CAUSAL),
        "big_outputs": _with_outputs(solved, 60 * 2**20),  # ran every cell and saved 60 MiB of figures
        # Dishonest ones.
        "wrapper": with_cell(
            release,
            2,
            (
                "from transformer_course import masks\n"
                "def causal_mask(length):\n"
                "    return np.asarray(masks.causal_mask(length))"
            ),
        ),
        # The package's or the grader's own code, reached every way a determined student tried: each earns nothing for
        # 07.1. The grader's NumPy reference wherever the route is the point, not the module reached: importing the
        # course's masks starts TensorFlow in the kernel (about 9 s of a core a row), so only the routes that need the
        # package's own module reach it (the wrapper, a relabelled function, its source run from a file).
        "resolve_name": with_cell(
            solved,
            2,
            (
                "import pkgutil\n"
                "def causal_mask(length):\n"
                "    name = 'transformer_' + 'course_grader.references:_causal_reference'\n"
                "    return np.asarray(pkgutil.resolve_name(name)(length))"
            ),
        ),
        "builtins_import": with_cell(
            solved,
            2,
            (
                "causal_mask = getattr(vars()['__builtins__'], '__imp' + 'ort__')("
                "'transformer_course_grader.references', fromlist=['_causal_reference'])._causal_reference"
            ),
        ),
        "unpickled_reference": with_cell(
            solved,
            2,
            (
                "import pickle\n"
                "causal_mask = pickle.loads(\n"
                "    b'\\x80\\x04c' + b'transformer_course_grader.references\\n_causal_reference\\n.')"
            ),
        ),
        "source_run_from_tmp": with_cell(
            solved,
            2,
            (
                "import inspect, re, runpy, tempfile, transformer_course.masks as m\n"
                "path = tempfile.mkstemp(suffix='.py')[1]\n"
                "open(path, 'w').write(re.sub(r'from \\.[\\w.]* import .*', 'PADDING_ID = 0', inspect.getsource(m)))\n"
                "causal_mask = runpy.run_path(path)['causal_mask']"
            ),
        ),
        "decorator_elsewhere": inserted(
            with_cell(solved, 2, ("@answered_by_the_package\ndef causal_mask(length):\n    raise NotImplementedError")),
            2,
            (
                "def answered_by_the_package(function):\n"
                "    from transformer_course_grader import references\n"
                "    return lambda length: np.asarray(references._causal_reference(length))"
            ),
        ),
        "code_object_copy": with_cell(
            solved,
            2,
            (
                "import types, transformer_course_grader.references as m\n"
                "reference = m._causal_reference\n"
                "causal_mask = types.FunctionType(reference.__code__, reference.__globals__, 'causal_mask')"
            ),
        ),
        "relabelled_module": with_cell(
            solved, 2, ("from transformer_course.masks import causal_mask\ncausal_mask.__module__ = '__main__'")
        ),
        "ipython_syntax": with_cell(
            solved,
            2,
            ("from transformer_course_grader.references import _causal_reference as causal_mask\nhere = %pwd"),
        ),
        "grader_detector": with_cell(
            solved,
            2,
            (
                "import os\n"
                "def causal_mask(length):\n"
                "    if os.environ.get('COURSE_PROFILE') != 'smoke':  # the grader's kernels run the smoke profile\n"
                "        raise RuntimeError('only the grader gets an answer')\n"
                "    module = __import__(''.join(['transformer', '_course_grader.references']), fromlist=['_'])\n"
                "    return np.asarray(module._causal_reference(length))"
            ),
        ),
        # Honest ones that lean on the notebook: a helper and a constant from other cells, a cache.
        "helper_in_another_cell": inserted(
            with_cell(solved, 2, ("def causal_mask(length):\n    return lower_triangle(length) & ALLOWED")),
            2,
            ("ALLOWED = True\ndef lower_triangle(size):\n    return np.tril(np.ones((size, size), dtype=bool))"),
        ),
        "written_module": inserted(
            with_cell(
                solved, 2, ("import norm_helpers\ndef causal_mask(length):\n    return norm_helpers.lower(length)")
            ),
            2,
            (
                "%%writefile norm_helpers.py\n"
                "import numpy as np\n"
                "def lower(length):\n"
                "    return np.tril(np.ones((length, length), dtype=bool))\n"
            ),
        ),
        # The package's own code carried as data, or rebuilt from its text: the grader runs source only.
        "marshalled_code": with_cell(
            solved,
            2,
            (
                "import marshal, types\n"
                "def _template(length):\n"
                "    return np.tril(np.ones((length, length), dtype=bool))\n"
                "causal_mask = types.FunctionType(marshal.loads(marshal.dumps(_template.__code__)), globals())"
            ),
        ),
        "renamed_code": with_cell(
            solved,
            2,
            (
                "def _template(length):\n"
                "    return np.tril(np.ones((length, length), dtype=bool))\n"
                "causal_mask = type(_template)(_template.__code__.replace(co_name='causal_mask'), globals())"
            ),
        ),
        "text_run_at_call": with_cell(
            solved,
            2,
            (
                "SOURCE = 'def causal_mask(length):\\n    return np.tril(np.ones((length, length), dtype=bool))'\n"
                "def causal_mask(length):\n"
                "    scope = {'np': np}\n"
                "    exec(SOURCE, scope)\n"
                "    return scope['causal_mask'](length)"
            ),
        ),
        "runpy_of_a_written_file": with_cell(
            solved,
            2,
            (
                "import runpy\n"
                "def causal_mask(length):\n"
                "    open('copied.py', 'w').write('import numpy as np\\ndef f(n):\\n'\n"
                "                                 '    return np.tril(np.ones((n, n), dtype=bool))')\n"
                "    return runpy.run_path('copied.py')['f'](length)"
            ),
        ),
        "table_from_the_package": with_cell(
            solved,
            2,
            (
                "import transformer_course_grader.references as references\n"
                "TABLE = {n: np.asarray(references._causal_reference(n)) for n in range(1, 40)}\n"
                "def causal_mask(length):\n"
                "    return TABLE[length]"
            ),
        ),
        "cached_answer": with_cell(
            solved,
            2,
            (
                "import functools\n"
                "@functools.cache\n"
                "def causal_mask(length):\n"
                "    return np.tril(np.ones((length, length), dtype=bool))"
            ),
        ),
        "reads_the_references": inserted(
            solved,
            2,
            (
                "import transformer_course_grader, pathlib\n"
                "folder = pathlib.Path(transformer_course_grader.__file__).parent / 'references'\n"
                "print(len((folder / '__init__.py').read_text()))\n"
                "from transformer_course_grader.references import expected"
            ),
        ),
        "forged_reply": with_cell(
            solved,
            2,
            (
                "import sys\n"
                "def causal_mask(length):\n"
                "    frame = sys._getframe(1)\n"
                "    print(frame.f_locals.get('nonce'), 'ok __main__ true')\n"
                "    return np.tril(np.ones((length, length), dtype=bool))"
            ),
        ),
        "flood": with_cell(
            solved,
            2,
            (
                "def causal_mask(length):\n"
                "    print('x' * 8_000_000, end='')\n"
                "    return np.tril(np.ones((length, length), dtype=bool))"
            ),
        ),
        "deep_folder": inserted(
            solved,
            2,
            (
                "import os\nbase = os.getcwd()\n"
                "for _ in range(3000):\n    os.mkdir('d')\n    os.chdir('d')\n"
                "os.chdir(base)"
            ),
        ),
        "mangled_metadata": _mangled(solved),
        # Honest ones in ordinary Python the reading must follow: each scores what its own check shows.
        "star_import": with_cell(
            solved,
            2,
            ("from numpy import *\ndef causal_mask(length):\n    return tril(ones((length, length), dtype=bool))"),
        ),
        "time_magic": with_cell(solved, 2, "%%time\n" + CAUSAL),
        "capture_magic": with_cell(solved, 2, "%%capture output\n" + CAUSAL),
        "open_write_module": inserted(
            with_cell(
                solved, 2, ("import mask_helpers\ndef causal_mask(length):\n    return mask_helpers.lower(length)")
            ),
            2,
            (
                "open('mask_helpers.py', 'w').write('import numpy as np\\ndef lower(length):\\n'\n"
                "                                   '    return np.tril(np.ones((length, length), dtype=bool))\\n')"
            ),
        ),
        "global_counter": with_cell(
            solved,
            2,
            (
                "calls = 0\n\n"
                "def causal_mask(length):\n"
                "    global calls\n"
                "    calls += 1\n"
                "    return np.tril(np.ones((length, length), dtype=bool))"
            ),
        ),
        "dataclass_helper": with_cell(
            solved,
            2,
            (
                "from dataclasses import dataclass\n\n"
                "@dataclass\n"
                "class Square:\n"
                "    size: int\n\n"
                "def causal_mask(length):\n"
                "    square = Square(length)\n"
                "    return np.tril(np.ones((square.size, square.size), dtype=bool))"
            ),
        ),
        "namedtuple_helper": with_cell(
            solved,
            2,
            (
                "from collections import namedtuple\n"
                "Shape = namedtuple('Shape', 'rows columns')\n\n"
                "def causal_mask(length):\n"
                "    return np.tril(np.ones(Shape(length, length), dtype=bool))"
            ),
        ),
        # The graded program's source refused before it runs: each way past a runtime hook that was tried.
        "hook_globals": with_cell(
            solved,
            2,
            (
                "import sys\n"
                "def causal_mask(length):\n"
                "    sys.modules['transformer_course_grader.guard'].__dict__.clear()\n"
                "    return np.tril(np.ones((length, length), dtype=bool))"
            ),
        ),
        "traceback_frames": with_cell(
            solved,
            2,
            (
                "def causal_mask(length):\n"
                "    try:\n"
                "        open('/nonexistent')\n"
                "    except OSError as error:\n"
                "        error.__traceback__.tb_frame.f_back.f_globals.clear()\n"
                "    return np.tril(np.ones((length, length), dtype=bool))"
            ),
        ),
        "builtins_swap": with_cell(
            solved,
            2,
            (
                "import builtins\n"
                "def causal_mask(length):\n"
                "    builtins.open = lambda *arguments: None\n"
                "    return np.tril(np.ones((length, length), dtype=bool))"
            ),
        ),
        "meta_path_finder": with_cell(
            solved,
            2,
            (
                "import sys\n"
                "def causal_mask(length):\n"
                "    sys.meta_path.insert(0, object())\n"
                "    return np.tril(np.ones((length, length), dtype=bool))"
            ),
        ),
        "compressed_carrier": with_cell(
            solved,
            2,
            (
                f"PACKED = {bytes(range(256)) * 20!r}\n"
                "def causal_mask(length):\n"
                "    len(PACKED)\n"
                "    return np.tril(np.ones((length, length), dtype=bool))"
            ),
        ),
        # What a word list of refused constructs let through: each refused by the allow-list.
        **{
            student: with_cell(
                solved,
                2,
                f"{prelude}def causal_mask(length):\n    {reach}\n"
                "    return np.tril(np.ones((length, length), dtype=bool))",
            )
            for student, (prelude, reach) in ALLOW_LIST_BREAKS.items()
        },
        # Escapes from the sandbox.
        "reads_the_repository": inserted(
            solved, 2, (f"open({str(ROOT / 'notebooks' / '04_self_attention.ipynb')!r}).read()")
        ),
        "reads_git": inserted(solved, 2, f"import os\nos.listdir({str(ROOT / '.git')!r})"),
        "writes_the_package": inserted(
            solved, 2, ("import transformer_course\nopen(transformer_course.__file__, 'a').write('# changed')")
        ),
        "reads_the_environment": inserted(
            solved, 2, ("import os\nraise ValueError('seen: ' + os.environ.get('GRADER_SECRET', 'nothing'))")
        ),
        "leaves_a_daemon": inserted(
            solved,
            2,
            (
                "import subprocess, sys\n"
                f"subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)', {MARKER!r}], "
                "start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)"
            ),
        ),
    }
    for student, notebook in submissions_by_student.items():
        (submissions / student).mkdir(parents=True)
        nbformat.write(notebook, submissions / student / "07_tiny.ipynb")
    (submissions / "near_name").mkdir()  # downloaded twice from Jupyter: the browser added " (1)"
    nbformat.write(solved, submissions / "near_name" / "07_tiny (1).ipynb")
    (submissions / "linked").mkdir()
    (submissions / "linked" / "07_tiny.ipynb").symlink_to(secret)
    (submissions / "fifo").mkdir()
    os.mkfifo(submissions / "fifo" / "07_tiny.ipynb")
    odd_name = os.fsencode(str(submissions)) + b"/odd\xff\xfename"
    os.mkdir(odd_name)
    nbformat.write(solved, os.fsdecode(odd_name + b"/07_tiny.ipynb"))
    (submissions / "linked_folder").symlink_to(source_dir)
    (submissions / "corrupt").mkdir()
    (submissions / "corrupt" / "07_tiny.ipynb").write_text('{"cells": [', encoding="utf-8")
    (submissions / "missing").mkdir()

    # The students whose tests read what the whole notebook's run reports (--run-notebooks: a lesson cell's error,
    # what the sandbox refuses a cell that no graded function needs) are graded with it, in a class of their own;
    # the rest as grade grades by default, the graded calls alone.
    whole_run = root / "whole_run_submissions"
    whole_run.mkdir()
    for student in WHOLE_RUN_STUDENTS:
        (submissions / student).rename(whole_run / student)
    out = root / "report"
    os.environ["GRADER_SECRET"] = "s3cr3t-token"  # in the grader's environment, never in a kernel's
    try:
        results = [
            *grade_folder(submissions, out, release_dir, LIMITS, workers=2, progress=False, seed=SEED, sandbox=SANDBOX),
            *grade_folder(
                whole_run,
                root / "whole_run_report",
                release_dir,
                LIMITS,
                workers=2,
                progress=False,
                seed=SEED,
                sandbox=SANDBOX,
                run_notebooks=True,
            ),
        ]
    finally:
        del os.environ["GRADER_SECRET"]
    for student in WHOLE_RUN_STUDENTS:
        (whole_run / student).rename(submissions / student)
    server.close()
    by_student = {r.student: r for r in results}
    return {
        "root": root,
        "out": out,
        "results": by_student,
        "release_dir": release_dir,
        "submissions": submissions,
        "source_dir": source_dir,
    }


def outcome(graded, student):
    result = graded["results"][student]
    return {x.exercise: (x.points, x.status) for x in result.exercises}, result


def test_release_replaces_solutions_with_stubs_and_drops_hidden_tests(graded):
    released = nbformat.read(graded["release_dir"] / "07_tiny.ipynb", as_version=4)
    assert 'raise NotImplementedError("Exercise 07.1")' in released.cells[2].source
    assert "np.tril" not in released.cells[2].source
    assert "HIDDEN" not in released.cells[3].source and "assert" not in released.cells[3].source
    assert released.cells[1].outputs[0]["text"] == "the lesson\n" and released.cells[1].execution_count == 1
    # From the first exercise on, nothing keeps an output: solutions, checks, and any later cell.
    assert not any(cell.outputs for cell in released.cells[2:] if cell.cell_type == "code")
    assert released.cells[3].metadata["nbgrader"]["checksum"]


def test_release_is_reproducible(graded, tmp_path):
    release_folder(graded["source_dir"], tmp_path)
    assert (tmp_path / "07_tiny.ipynb").read_text() == (graded["release_dir"] / "07_tiny.ipynb").read_text()


def test_full_solution_gets_full_marks(graded):
    scores, result = outcome(graded, "full")
    assert scores == {"07.1": (1, "passed"), "07.2": (3, "passed")}
    assert not result.flags


def test_untouched_release_scores_zero_not_attempted(graded):
    scores, _ = outcome(graded, "release")
    assert scores == {"07.1": (0, "not attempted"), "07.2": (0, "not attempted")}


def test_an_untouched_stub_is_not_called_and_a_stub_rebound_later_is(graded, monkeypatch):
    """An exercise whose program is exactly the release's (the stub) is "not attempted" without its graded
    calls, so an untouched notebook needs no kernel at all; a stub whose name a later cell binds to an answer is
    the student's program, and it is called."""
    from transformer_course_grader import grader

    kernels, start_kernel = [], grader.run_submission
    monkeypatch.setattr(grader, "run_submission", lambda *a, **k: kernels.append(a[1]) or start_kernel(*a, **k))
    release_path = graded["release_dir"] / "07_tiny.ipynb"
    untouched = grader.grade_notebook("release", release_path, release_path, LIMITS, seed=SEED, sandbox=SANDBOX)
    assert [x.status for x in untouched.exercises] == ["not attempted", "not attempted"], untouched.exercises
    assert kernels == [], "an untouched notebook started a kernel"
    rebound = inserted(
        nbformat.read(release_path, as_version=4),
        3,
        "def lower(length):\n    return np.tril(np.ones((length, length), dtype=bool))\ncausal_mask = lower",
    )
    path = graded["root"] / "rebound" / "07_tiny.ipynb"
    path.parent.mkdir()
    nbformat.write(rebound, path)
    result = grader.grade_notebook("rebound", path, release_path, LIMITS, seed=SEED, sandbox=SANDBOX)
    assert [(x.exercise, x.points, x.status) for x in result.exercises] == [
        ("07.1", 1, "passed"),
        ("07.2", 0, "not attempted"),
    ]
    assert len(kernels) == 1 and kernels[-1] and all(key.startswith("07.1#") for key in kernels[-1]), kernels[-1]


def test_one_wrong_exercise_gives_the_exact_partial_score(graded):
    scores, result = outcome(graded, "one_wrong")
    assert scores == {"07.1": (0, "failed"), "07.2": (3, "passed")}
    assert "expected" in result.exercises[0].message


def test_syntax_error_costs_only_that_exercise(graded):
    scores, result = outcome(graded, "syntax_error")
    assert scores == {"07.1": (0, "not attempted"), "07.2": (3, "passed")}
    assert any("SyntaxError" in problem for problem in result.problems)


def test_endless_loop_is_stopped_and_the_rest_graded(graded, tmp_path):
    solved = nbformat.read(graded["submissions"] / "full" / "07_tiny.ipynb", as_version=4)
    endless = with_cell(solved, 2, "def causal_mask(length):\n    while True:\n        pass")
    (tmp_path / "class" / "endless_loop").mkdir(parents=True)
    nbformat.write(endless, tmp_path / "class" / "endless_loop" / "07_tiny.ipynb")
    [result] = grade_folder(
        tmp_path / "class",
        tmp_path / "out",
        graded["release_dir"],
        ENDLESS_LOOP_LIMITS,
        progress=False,
        seed=SEED,
        sandbox=SANDBOX,
    )
    scores = {x.exercise: (x.points, x.status) for x in result.exercises}
    assert scores == {"07.1": (0, "error"), "07.2": (3, "passed")}
    assert "past the 5 s limit" in result.exercises[0].message, result.exercises[0].message


def test_the_score_never_waits_on_the_lessons(graded, tmp_path):
    """A lesson cell that runs past every limit costs no point: the graded kernel alone decides the score, within
    the notebook's limit; the whole notebook runs only when asked, after it, and its stop is a flag."""
    solved = nbformat.read(graded["submissions"] / "full" / "07_tiny.ipynb", as_version=4)
    (tmp_path / "class" / "long_lessons").mkdir(parents=True)
    nbformat.write(
        inserted(solved, 2, "import time\ntime.sleep(3600)"), tmp_path / "class" / "long_lessons" / "07_tiny.ipynb"
    )
    for run_notebooks in (False, True):
        [result] = grade_folder(
            tmp_path / "class",
            tmp_path / f"out_{run_notebooks}",
            graded["release_dir"],
            ENDLESS_LOOP_LIMITS,
            progress=False,
            seed=SEED,
            sandbox=SANDBOX,
            run_notebooks=run_notebooks,
        )
        scores = {x.exercise: (x.points, x.status) for x in result.exercises}
        assert scores == {"07.1": (1, "passed"), "07.2": (3, "passed")}, (run_notebooks, result.exercises)
        # Only the whole notebook's run meets the lesson cell, and reports it: its points are untouched.
        interrupted = ["cell 3 ran past the 5 s cell limit and was interrupted"]
        assert result.problems == (interrupted if run_notebooks else []), result.problems


def test_memory_hog_is_stopped_with_the_reason(graded):
    scores, result = outcome(graded, "memory_hog")
    assert scores == {"07.1": (0, "error"), "07.2": (0, "error")}
    assert "memory" in result.exercises[0].message and any("memory" in flag for flag in result.flags)


def test_edited_check_cell_is_restored_and_flagged(graded):
    scores, result = outcome(graded, "edited_check")
    assert scores == {"07.1": (0, "not attempted"), "07.2": (0, "not attempted")}
    assert result.flags == ["locked cell 'check_07_1' was edited; restored from the release"]


@pytest.mark.parametrize("student", ["monkeypatch", "fake_score"])
def test_faking_a_pass_inside_the_kernel_earns_nothing(graded, student):
    scores, _ = outcome(graded, student)
    assert scores == {"07.1": (0, "not attempted"), "07.2": (0, "not attempted")}


@needs_sandbox
def test_reading_the_instructors_files_fails(graded):
    scores, result = outcome(graded, "reads_outside")
    assert scores == {"07.1": (0, "not attempted"), "07.2": (0, "not attempted")}
    assert any("FileNotFoundError" in problem for problem in result.problems)


@needs_sandbox
def test_the_kernel_has_no_network(graded):
    scores, result = outcome(graded, "uses_network")
    assert scores == {"07.1": (1, "passed"), "07.2": (3, "passed")}, (result.isolated, result.problems, result.flags)
    assert any("Connection" in problem or "unreachable" in problem for problem in result.problems), result.problems


def test_the_librarys_own_function_is_not_the_students_work(graded):
    scores, result = outcome(graded, "library_copy")
    assert scores["07.1"] == (0, "failed")
    assert (
        "`causal_mask` needs cell 3, which imports the course package or its grader "
        "(transformer_course_grader.references._causal_reference)"
    ) in result.exercises[0].message
    # In the student's own kernel the references are not even there:
    assert any(
        f"raised {error}" in p
        for p in result.problems
        for error in ("PermissionError", "ImportError", "ModuleNotFoundError")
    ), result.problems


def test_corrupt_and_missing_notebooks_score_zero_and_the_batch_goes_on(graded):
    scores, result = outcome(graded, "corrupt")
    assert scores == {"07.1": (0, "error"), "07.2": (0, "error")}
    assert "not a valid notebook" in result.exercises[0].message
    assert outcome(graded, "missing")[0] == {"07.1": (0, "not submitted"), "07.2": (0, "not submitted")}
    assert len(graded["results"]) == 62 + len(
        ALLOW_LIST_BREAKS
    )  # every folder, the linked one too (a row with the reason)


def test_reports(graded):
    accounting = {result.accounting for result in graded["results"].values() if result.accounting}
    assert accounting <= {"cgroup v1", "cgroup v2", "watchdog"} and (accounting or not SANDBOX)
    if accounting:
        assert "Memory limits kept by: " in (graded["out"] / "report.md").read_text()
    rows = (graded["out"] / "grades.csv").read_text().splitlines()
    assert rows[0] == "student,07.1,07.2,total,max"
    assert "full,1,3,4,4" in rows and "one_wrong,0,3,3,4" in rows and "release,0,0,0,4" in rows
    report = (graded["out"] / "report.md").read_text()
    assert "## full: 4 / 4" in report and "restored from the release" in report
    details = json.loads((graded["out"] / "grades.json").read_text())
    assert details["exercises"] == ["07.1", "07.2"]
    assert set(details["students"]) == set(graded["results"]) - set(WHOLE_RUN_STUDENTS)  # graded in another class
    assert details["seed"] == SEED


def test_grading_is_deterministic(graded, tmp_path):
    submissions = tmp_path / "again"
    for student in ("full", "one_wrong", "release"):
        shutil.copytree(graded["submissions"] / student, submissions / student)
    again = {
        r.student: [(x.exercise, x.points, x.status, x.message) for x in r.exercises]
        for r in grade_folder(
            submissions, tmp_path / "out", graded["release_dir"], LIMITS, progress=False, seed=SEED, sandbox=SANDBOX
        )
    }
    for student, exercises in again.items():
        first = graded["results"][student]
        assert exercises == [(x.exercise, x.points, x.status, x.message) for x in first.exercises]


def test_release_rejects_broken_markup():
    from transformer_course_grader.markup import MarkupError

    notebook = nbformat.v4.new_notebook()
    notebook.cells = [solution_cell("07.1", "def causal_mask(length):\n    ### BEGIN SOLUTION\n    return 1")]
    with pytest.raises(MarkupError, match="never closed"):
        release_notebook(notebook)


def test_cli_grade_and_release_report_bad_folders(tmp_path, capsys):
    from transformer_course_grader.cli import main

    assert (
        main(["grade", str(tmp_path / "nowhere"), "--out", str(tmp_path / "out"), "--release-dir", str(tmp_path)]) == 2
    )
    assert "nowhere" in capsys.readouterr().err
    (tmp_path / "subs").mkdir()
    assert main(["grade", str(tmp_path / "subs"), "--out", str(tmp_path / "out"), "--release-dir", str(tmp_path)]) == 2
    assert "no released notebooks" in capsys.readouterr().err
    assert main(["release", "--notebooks-dir", str(tmp_path / "empty"), "--out", str(tmp_path / "r")]) == 2
    assert "no notebooks" in capsys.readouterr().err


def test_cli_grade_writes_the_reports(graded, capsys):
    from transformer_course_grader.cli import main

    submissions = graded["root"] / "cli_submissions"
    shutil.copytree(graded["submissions"] / "full", submissions / "full")
    out = graded["root"] / "cli_report"
    assert (
        main(
            [
                "grade",
                str(submissions),
                "--out",
                str(out),
                "--release-dir",
                str(graded["release_dir"]),
                "--quiet",
                *([] if SANDBOX else ["--unsafe-no-sandbox"]),
            ]
        )
        == 0
    )
    assert "full,1,3,4,4" in (out / "grades.csv").read_text().splitlines()
    assert "graded 1 notebook(s) of 1 student(s)" in capsys.readouterr().out


def test_reports_escape_what_students_control():
    """Folder names and student-produced messages cannot inject Markdown, HTML or spreadsheet formulas."""
    from transformer_course_grader.grader import ExerciseResult, NotebookResult
    from transformer_course_grader.reports import report_texts

    names = ['=HYPERLINK("http://evil.example","x")', "<img src=x onerror=alert(1)>", "ok\n## 100 / 100 [a](b)"]
    results = [
        NotebookResult(
            student=name,
            notebook="04_self_attention.ipynb",
            exercises=[ExerciseResult("04.1", 0, 3, "error", "raised <script>x</script> | *boom*")],
            problems=["cell 3 raised ValueError: ![pixel](http://evil.example/p.png)"],
        )
        for name in names
    ]
    csv_text, _, markdown = report_texts(results, ["04.1"])
    students = [row.split(",")[0] for row in csv_text.splitlines()[1:]]
    assert not any(cell.lstrip('"').startswith(("=", "+", "-", "@")) for cell in students), students
    assert "<img" not in markdown and "<script>" not in markdown and "![pixel](" not in markdown
    assert "[a](b)" not in markdown
    headings = [
        line for line in markdown.splitlines() if line.startswith("## ") and line != "## Near-identical solutions"
    ]
    assert len(headings) == 3, headings  # a newline in a folder name starts no heading of its own
    rows = [line for line in markdown.splitlines() if line.startswith("| 04.1")]
    assert all(line.count(" | ") == 2 for line in rows), rows  # no extra table cells


@pytest.mark.parametrize(
    "student",
    [
        "tensor_answer",
        "prints_no_newline",
        "answer_below_stub",
        "helper_in_another_cell",
        "cached_answer",
        "written_module",
        "star_import",
        "time_magic",
        "capture_magic",
        "open_write_module",
        "global_counter",
        "dataclass_helper",
        "namedtuple_helper",
        "near_name",
    ],
)
def test_honest_answers_in_unexpected_forms_get_their_marks(graded, student):
    scores, result = outcome(graded, student)
    assert scores["07.1"] == (1, "passed"), result.exercises[0].message
    if student != "answer_below_stub":  # the release with 07.1 answered below its stub: 07.2 untouched
        assert scores["07.2"] == (3, "passed"), result.exercises[1].message


def test_a_notebook_under_a_near_name_is_graded_and_the_instructor_told(graded):
    assert "graded 07_tiny (1).ipynb, under the release's name 07_tiny.ipynb" in outcome(graded, "near_name")[1].flags


POLICY = "graded code is run as the notebook shows it, and may not build code or reach the interpreter's internals"


@pytest.mark.parametrize(
    "student, seen",
    [
        ("hook_globals", "the interpreter's internals"),
        ("traceback_frames", "the interpreter's internals"),
        ("builtins_swap", "imports builtins"),
        ("meta_path_finder", "uses sys.meta_path"),
        ("compressed_carrier", "holds a constant of 5,120 characters"),
        *ALLOW_LIST_REASONS.items(),
    ],
)
def test_a_program_that_reaches_the_interpreters_internals_is_refused_from_its_source(graded, student, seen):
    scores, result = outcome(graded, student)
    assert scores == {"07.1": (0, "failed"), "07.2": (3, "passed")}, result.exercises
    assert seen in result.exercises[0].message and POLICY in result.exercises[0].message, result.exercises[0].message


def test_a_wrapper_around_the_package_is_flagged_for_the_instructor(graded):
    scores, result = outcome(graded, "wrapper")
    assert any("cell 3 reaches into the course package (transformer_course)" in flag for flag in result.flags), (
        result.flags
    )
    assert scores == {"07.1": (0, "failed"), "07.2": (0, "not attempted")}
    assert "imports the course package or its grader (transformer_course.masks)" in result.exercises[0].message
    assert not outcome(graded, "full")[1].flags


IMPORTS_THE_PACKAGE = "needs cell 3, which imports the course package or its grader "


@pytest.mark.parametrize(
    "student, seen",
    [
        # A statement the function needs imports the package: refused before anything runs.
        ("decorator_elsewhere", IMPORTS_THE_PACKAGE + "(transformer_course_grader.references)"),
        ("code_object_copy", IMPORTS_THE_PACKAGE + "(transformer_course_grader.references)"),
        ("relabelled_module", IMPORTS_THE_PACKAGE + "(transformer_course.masks.causal_mask)"),
        ("ipython_syntax", IMPORTS_THE_PACKAGE + "(transformer_course_grader.references._causal_reference)"),
        ("source_run_from_tmp", IMPORTS_THE_PACKAGE + "(transformer_course.masks)"),
        ("table_from_the_package", IMPORTS_THE_PACKAGE + "(transformer_course_grader.references)"),
        # A module loaded by a computed name, code built from data: refused from the source, before it runs
        # (the graded kernel's audit hook, behind it, would refuse them too).
        ("resolve_name", "imports pkgutil"),
        ("builtins_import", "with a name computed at run time"),
        ("unpickled_reference", "imports pickle"),
        ("marshalled_code", "imports marshal"),
        ("renamed_code", "calls globals()"),
        ("text_run_at_call", "calls exec()"),
        ("runpy_of_a_written_file", "imports runpy"),
        ("grader_detector", "calls __import__()"),
    ],
)
def test_the_packages_own_code_earns_nothing_however_it_is_reached(graded, student, seen):
    scores, result = outcome(graded, student)
    assert scores["07.1"][0] == 0 and scores["07.2"] == (3, "passed"), result.exercises
    assert seen in result.exercises[0].message, result.exercises[0].message


def test_a_reply_forged_from_the_stack_is_refused_and_flagged(graded):
    """Reading the grader's nonce needs the caller's frame: the source is refused, and the instructor told."""
    scores, result = outcome(graded, "forged_reply")
    assert scores["07.1"] == (0, "failed") and "sys._getframe, a private name" in result.exercises[0].message
    assert any("stack frames" in flag for flag in result.flags)


def test_flooding_stdout_costs_nothing_and_the_reply_is_still_found(graded):
    assert outcome(graded, "flood")[0]["07.1"] == (1, "passed")


def test_a_working_folder_nested_thousands_deep_is_no_problem(graded):
    assert outcome(graded, "deep_folder")[0] == {"07.1": (1, "passed"), "07.2": (3, "passed")}


def test_a_notebook_saved_with_large_outputs_is_graded_on_its_code(graded):
    assert (graded["submissions"] / "big_outputs" / "07_tiny.ipynb").stat().st_size > 50 * 2**20
    assert outcome(graded, "big_outputs")[0] == {"07.1": (1, "passed"), "07.2": (3, "passed")}


def test_mangled_metadata_gives_that_student_a_row(graded):
    scores, _ = outcome(graded, "mangled_metadata")
    assert set(scores) == {"07.1", "07.2"}


@pytest.mark.parametrize("student, reason", [("linked", "symbolic link"), ("fifo", "not a regular file")])
def test_only_regular_files_are_read(graded, student, reason):
    scores, result = outcome(graded, student)
    assert scores == {"07.1": (0, "error"), "07.2": (0, "error")}
    assert reason in result.exercises[0].message


def test_odd_folder_names_get_rows_and_linked_folders_a_row_with_the_reason(graded):
    assert outcome(graded, "odd\\xff\\xfename")[0] == {"07.1": (1, "passed"), "07.2": (3, "passed")}
    scores, result = outcome(graded, "linked_folder")  # it links to the solutions: nothing behind it is read
    assert scores == {"07.1": (0, "error"), "07.2": (0, "error")}
    assert "symbolic link" in result.exercises[0].message and result.flags
    from transformer_course_grader.safe_text import markdown_text

    assert f"## {markdown_text('odd' + chr(92) + 'xff' + chr(92) + 'xfename')}: 4 / 4" in (
        graded["out"] / "report.md"
    ).read_text(encoding="utf-8")


def test_every_run_and_every_student_draws_secret_cases_of_their_own():
    from transformer_course.exercises import EXERCISES
    from transformer_course_grader import references
    from transformer_course_grader.grader import _cases, draw_seed

    seeds = {draw_seed() for _ in range(5)}
    assert len(seeds) == 5 and max(seeds) >= 2**64  # 128 bits: no search over seeds
    exercise = EXERCISES["04.1"]
    public = references.cases("04.1", __import__("numpy").random.default_rng(0))
    first, second, other = _cases(exercise, 1, "ada"), _cases(exercise, 2, "ada"), _cases(exercise, 1, "bo")
    assert str(first[: len(public)]) == str(second[: len(public)]) == str(other[: len(public)])  # students' checks
    assert not any(secret for *_, secret in first[: len(public)]) and all(secret for *_, secret in first[len(public) :])
    assert str(first[len(public) :]) != str(second[len(public) :])  # the secret ones differ by seed...
    assert str(first[len(public) :]) != str(other[len(public) :])  # ...and by student
    assert str(first) == str(_cases(exercise, 1, "ada"))  # and the same seed gives the same cases


def test_feedback_on_a_secret_case_names_the_case_and_the_kind_of_error_only():
    """A student's exception could carry the secret arguments out; so could a returned value shown back. The
    whole verdict is kept for the instructor."""
    from transformer_course.exercises import EXERCISES
    from transformer_course_grader.grader import _case_verdict

    exercise = EXERCISES["07.1"]
    raised = _case_verdict(exercise, 3, "random length", {"length": 17}, "raised", "ValueError: length=17", True)
    assert raised.message == "secret case 3 (random length) raised an exception" and "17" not in raised.message
    assert raised.detail == "case 3 (random length) raised ValueError: length=17"
    wrong = _case_verdict(
        exercise, 4, "random length", {"length": 17}, "ok", ("__main__", __import__("numpy").eye(17)), True
    )
    assert "differs from the reference" in wrong.message and "17" not in wrong.message
    assert "shape" in wrong.detail or "value" in wrong.detail
    assert (
        _case_verdict(
            exercise,
            4,
            "random length",
            {"length": 2},
            "ok",
            ("__main__", __import__("numpy").tril(__import__("numpy").ones((2, 2), bool))),
            True,
        )
        is None
    )


def test_replies_that_would_exhaust_the_grader_are_refused_quickly():
    import base64
    import io

    import numpy as np

    from transformer_course_grader import protocol

    with pytest.raises(ValueError, match="not a valid encoded value"):
        protocol.decode("[" * 100_000 + "]" * 100_000)
    buffer = io.BytesIO()
    np.lib.format.write_array_header_1_0(buffer, {"descr": "<f8", "fortran_order": False, "shape": (10**12,)})
    huge = json.dumps({"__array__": base64.b64encode(buffer.getvalue()).decode()})
    with pytest.raises(ValueError, match="not a valid encoded value"):
        protocol.decode(huge)
    assert protocol.parse_reply("abc 1\nabc ok m 1", "abc") == ("forged", None)


def test_check_and_the_grader_read_results_through_one_conversion():
    import keras
    import numpy as np

    from transformer_course.exercises import evaluate
    from transformer_course_grader import protocol

    tensor = keras.ops.convert_to_tensor(np.eye(2))
    assert isinstance(protocol.plain_value((tensor, [tensor])), tuple)
    assert evaluate("07.1", lambda length: keras.ops.convert_to_tensor(np.tril(np.ones((length, length), bool)))).passed


def test_three_shards_merged_give_the_grades_of_one_run(graded, tmp_path, capsys):
    from transformer_course_grader.cli import main

    submissions = tmp_path / "class"
    # Six students, two of whom run: the shards split students, whatever their notebooks hold.
    for student in ("full", "one_wrong", "corrupt", "missing"):
        shutil.copytree(graded["submissions"] / student, submissions / student)
    shutil.copytree(graded["submissions"] / "corrupt", submissions / "corrupt_again")
    (submissions / "missing_again").mkdir()
    common = [
        "--release-dir",
        str(graded["release_dir"]),
        "--seed",
        "777",
        "--quiet",
        "--workers",
        "2",
        *([] if SANDBOX else ["--unsafe-no-sandbox"]),
    ]
    assert main(["grade", str(submissions), "--out", str(tmp_path / "whole"), *common]) == 0
    for k in (1, 2, 3):
        assert (
            main(["grade", str(submissions), "--out", str(tmp_path / f"shard{k}"), "--shard", f"{k}/3", *common]) == 0
        )
    shards = [str(tmp_path / f"shard{k}") for k in (1, 2, 3)]
    assert main(["merge-grades", *shards, "--out", str(tmp_path / "merged")]) == 0
    whole, merged = (tmp_path / "whole" / "grades.csv").read_text(), (tmp_path / "merged" / "grades.csv").read_text()
    assert merged == whole and len(whole.splitlines()) == 7
    sizes = [len(json.loads((tmp_path / f"shard{k}" / "grades.json").read_text())["students"]) for k in (1, 2, 3)]
    assert sum(sizes) == 6
    capsys.readouterr()
    # A shard missing, or one given twice, is refused with the reason.
    assert main(["merge-grades", *shards[:2], "--out", str(tmp_path / "bad")]) == 1
    assert "expected shards 1..3" in capsys.readouterr().err
    assert main(["merge-grades", shards[0], shards[0], shards[2], "--out", str(tmp_path / "bad")]) == 1
    assert "expected shards 1..3" in capsys.readouterr().err
    assert main(["grade", str(submissions), "--out", str(tmp_path / "x"), "--shard", "4/3", *common]) == 2
    assert "`--shard` must be K/N" in capsys.readouterr().err


def test_merging_refuses_shards_that_miss_or_double_a_student(tmp_path):
    from transformer_course_grader.grader import MergeError, merge_grades

    def shard(index, students):
        folder = tmp_path / f"s{index}"
        folder.mkdir()
        report = {
            "seed": 1,
            "shard": {"index": index, "count": 2},
            "all_students": ["a", "b", "c"],
            "exercises": ["07.1"],
            "students": {name: [] for name in students},
        }
        (folder / "grades.json").write_text(json.dumps(report))
        return folder

    with pytest.raises(MergeError, match=r"graded twice: \['b'\]; not graded: \['c'\]"):
        merge_grades([shard(1, ["a", "b"]), shard(2, ["b"])], tmp_path / "out")


@needs_sandbox
@pytest.mark.parametrize(
    "student, problem",
    [
        ("reads_the_repository", "FileNotFoundError"),
        ("reads_git", "FileNotFoundError"),
        ("writes_the_package", "OSError|PermissionError"),
    ],
)  # read-only; and not its user's, where it has its own
def test_the_sandbox_shows_only_what_is_allowed(graded, student, problem):
    scores, result = outcome(graded, student)
    assert scores == {"07.1": (1, "passed"), "07.2": (3, "passed")}  # the honest part still counts
    assert any(f"raised {kind}" in note for note in result.problems for kind in problem.split("|")), result.problems


@needs_sandbox
def test_the_graders_references_are_out_of_reach(graded):
    scores, result = outcome(graded, "reads_the_references")
    assert scores == {"07.1": (1, "passed"), "07.2": (3, "passed")}
    # The kernel's copy of the grader holds one line there, which raises: importing it fails.
    assert any(
        f"raised {error}" in p
        for p in result.problems
        for error in ("PermissionError", "ImportError", "ModuleNotFoundError")
    ), result.problems


@needs_sandbox
def test_the_graders_environment_never_reaches_a_kernel(graded):
    _, result = outcome(graded, "reads_the_environment")
    assert any("seen: nothing" in note for note in result.problems), result.problems
    assert "s3cr3t" not in json.dumps([r.problems for r in graded["results"].values()])


@needs_sandbox
def test_nothing_a_submission_starts_outlives_its_sandbox(graded):
    assert outcome(graded, "leaves_a_daemon")[0] == {"07.1": (1, "passed"), "07.2": (3, "passed")}
    import time

    time.sleep(1)

    def command_line(entry) -> str:
        try:  # a process of another test may end between the listing and the reading
            return (entry / "cmdline").read_bytes().decode("utf-8", "replace")
        except (FileNotFoundError, ProcessLookupError, PermissionError):
            return ""

    alive = [entry for entry in Path("/proc").iterdir() if entry.name.isdigit() and MARKER in command_line(entry)]
    assert not alive


def test_the_cli_refuses_a_limit_that_is_not_positive(tmp_path, capsys):
    from transformer_course_grader.cli import main

    (tmp_path / "class").mkdir()
    assert main(["grade", str(tmp_path / "class"), "--out", str(tmp_path / "out"), "--processes", "0", "--quiet"]) == 2
    assert "grade: `processes` must be a positive number; received 0." in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_without_the_sandbox_grading_refuses_unless_asked(graded, tmp_path, monkeypatch, capsys):
    from transformer_course_grader import grader
    from transformer_course_grader.cli import main

    monkeypatch.setattr(grader, "sandbox_available", lambda: False)
    submissions = tmp_path / "class"
    shutil.copytree(graded["submissions"] / "full", submissions / "full")
    arguments = [
        "grade",
        str(submissions),
        "--out",
        str(tmp_path / "out"),
        "--release-dir",
        str(graded["release_dir"]),
        "--quiet",
    ]
    assert main(arguments) == 2
    assert "needs bubblewrap" in capsys.readouterr().err and not (tmp_path / "out").exists()
    assert main([*arguments, "--unsafe-no-sandbox"]) == 0
    assert "--unsafe-no-sandbox" in (tmp_path / "out" / "report.md").read_text()


@pytest.mark.parametrize(
    "source, places",
    [
        ("import re\ndef vectorize(text, vocabulary):\n    return re.compile(r'\\w+').findall(text)", []),
        ("def f(x):\n    return x.modules", []),
        ("from transformer_course import masks", ["the course package (transformer_course)"]),
        ("import sys\nsys._getframe(1).f_globals", ["stack frames (_getframe, f_globals)"]),
        (
            "import sys\nsys.modules['transformer_course']",
            ["the course package (transformer_course)", "builtins and the import machinery (sys.modules)"],
        ),
        ("exec('x = 1')\n__import__('os')", ["builtins and the import machinery (__import__, exec)"]),
        ("get_ipython().user_ns", ["the IPython shell (get_ipython)"]),
        ("%timeit f(3)\ndef f(x):\n    return x", []),
        ("def broken(:", []),
    ],
)
def test_the_grader_reads_what_students_wrote(source, places):
    from transformer_course_grader.inspection import reaches

    assert reaches(source) == places


def test_a_cell_too_large_to_read_is_flagged_not_parsed():
    from transformer_course_grader.grader import _flag_reaches
    from transformer_course_grader.inspection import MAX_INSPECTED_CHARACTERS, reaches

    source = "from transformer_course import masks\n" + "x = [1, 2, 3]\n" * (MAX_INSPECTED_CHARACTERS // 14)
    with pytest.raises(ValueError, match=f"`source` is too large to read: {len(source):,} characters"):
        reaches(source)
    flags = []
    _flag_reaches(
        nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(source)]), nbformat.v4.new_notebook(), flags
    )
    assert flags == [
        f"cell 1 holds code too large to read ({len(source):,} characters; at most "
        f"{MAX_INSPECTED_CHARACTERS:,} are parsed): look at it before trusting its score"
    ]
    assert reaches(source[:MAX_INSPECTED_CHARACTERS]) == ["the course package (transformer_course)"]


def test_names_and_texts_show_every_invisible_character_and_never_collide():
    from transformer_course_grader.safe_text import display_name, markdown_text, spreadsheet_cell

    literal, byte = "Jos\\xe9", "Jos" + b"\xe9".decode("utf-8", "surrogateescape")
    assert display_name(literal) != display_name(byte)  # one to one: a literal backslash is doubled
    assert display_name(byte) == "Jos\\xe9" and display_name(literal) == "Jos\\\\xe9"
    tricky = "a\x1b[31mred\x07 \u202eevil\u200b\u2029x😀"
    shown = display_name(tricky)
    assert not any(character in shown for character in "\x1b\x07\u202e\u200b\u2029")
    assert "\\u001b" in shown and "\\u202e" in shown and "\\u200b" in shown and "😀" in shown
    assert "\x1b" not in markdown_text(tricky) and "\u202e" not in markdown_text(tricky)
    cell = spreadsheet_cell("=cmd\u202e\x07")
    assert cell.startswith("'=") and "\u202e" not in cell and "\x07" not in cell
    assert spreadsheet_cell(3) == 3


def test_names_that_look_alike_are_flagged_and_shown_with_escapes():
    """Folders `alice` and `аlice` (a Cyrillic а) once showed as two identical rows."""
    from transformer_course_grader.grader import ExerciseResult, NotebookResult
    from transformer_course_grader.reports import report_texts

    names = ["alice", "\u0430lice", "bob", "carol"]
    results = [
        NotebookResult(
            student=name,
            notebook="07_tiny.ipynb",
            exercises=[ExerciseResult("07.1", 1, 1, "passed", "all cases match")],
        )
        for name in names
    ]
    _, _, markdown = report_texts(results, ["07.1"])
    assert "**Names that look alike**" in markdown
    assert "- alice, \\\\u0430lice" in markdown, markdown  # markdown_text doubles the escape's backslash
    assert "## \u0430lice \\(\\\\u0430lice\\): 1 / 1" in markdown, markdown
    assert "bob" not in markdown.split("**Names that look alike**")[1].split("##")[0]
    _, _, plain = report_texts(results[2:], ["07.1"])
    assert "look alike" not in plain


def test_student_controlled_texts_in_a_verdict_are_capped():
    from transformer_course.exercises import EXERCISES
    from transformer_course_grader.grader import MAX_MESSAGE_CHARACTERS, _judge

    cases = [("length 3", {"length": 3}, "0" * 32, "07.1#0", False)]
    import numpy as np

    from transformer_course.exercises.values import encode

    answer = encode(np.tril(np.ones((3, 3), dtype=bool)))
    for reply in (
        "raised " + "E" * 5_000_000 + ": boom",
        "unencodable " + "T" * 1_000_000,
        "ok transformer_course." + "m" * 1_000_000 + " " + answer,
    ):  # a __module__ of a million characters
        verdict = _judge(EXERCISES["07.1"], cases, {"07.1#0": "0" * 32 + " " + reply}, stopped=None)
        assert len(verdict.message) < MAX_MESSAGE_CHARACTERS + 100 and "more characters cut" in verdict.message


def test_graded_calls_import_only_the_protocol(tmp_path):
    import subprocess
    import sys

    from transformer_course_grader.sandbox import graded_snapshot

    probe = (
        "from transformer_course_grader.protocol import _serve\n"
        "from transformer_course.exercises.values import decode, encode\n"
        "from transformer_course.decoding import greedy_decode\n"
    )
    run = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(graded_snapshot().parent)},
    )
    assert "ImportError: transformer_course.decoding is out of reach of graded code" in run.stderr, run.stderr
    assert "line 3" in run.stderr  # the protocol and the value format imported; the subject did not


def test_the_graded_calls_are_held_to_the_notebooks_limit(graded, tmp_path):
    """Each graded call stays inside the cell limit (0.5 s of 10), but together they pass the notebook's 9 s: the
    calls left when it runs out score "error" with the reason, whatever the lesson cells take (they do not run)."""
    solved = nbformat.read(graded["submissions"] / "full" / "07_tiny.ipynb", as_version=4)
    slow = with_cell(
        solved,
        2,
        "import time\n"
        + CAUSAL.replace("def causal_mask(length):\n", "def causal_mask(length):\n    time.sleep(2.5)\n"),
    )
    (tmp_path / "class" / "slow").mkdir(parents=True)
    nbformat.write(slow, tmp_path / "class" / "slow" / "07_tiny.ipynb")
    limits = Limits(cell_seconds=10, notebook_seconds=9, memory_mb=1200)
    [result] = grade_folder(
        tmp_path / "class", tmp_path / "out", graded["release_dir"], limits, progress=False, seed=SEED, sandbox=SANDBOX
    )
    assert result.exercises[0].status == "error" and "9 s limit" in result.exercises[0].message, result.exercises
