"""The grader's source policy beside RestrictedPython's and asteval's, on the same programs.

Two sets of programs: **honest** ones (every instructor's solution as the grader reads it — the
statements each graded function needs — and the honest styles the grader's tests hold) and **attacks**
(each a way past a list of refused words that a submission tried, with a harmless payload). Each is
given to three policies, and the verdict is "refused" or "runs":

* the grader's allow-list (:func:`transformer_course.exercises.policy.program_problems`), decided from the
  source before anything runs;
* RestrictedPython (``compile_restricted_exec``, then run with its ``safe_builtins``, its
  ``safer_getattr`` guard on every attribute, its write and iteration guards, and an ``__import__`` that
  admits the grader's allowed modules only): refused when it does not compile or a guard raises;
* asteval (``Interpreter`` with NumPy's symbol table and imports on): refused when it reports an error.

Each program runs in a fresh interpreter of its own (a payload can touch nothing here). RestrictedPython
and asteval run the definitions only, as the grader's own policy reads them: a guard inside a
function body is met only when that function is called, which this comparison does not do.

Needs ``pip install RestrictedPython asteval`` (neither is a course dependency). Prints one line a
program and, per policy, honest programs refused and attacks let run.

    .venv/bin/python benchmarks/source_policies.py [--no-solutions]
"""

import argparse
import json
import subprocess
import sys
from pathlib import Path

import nbformat

from transformer_course.exercises.policy import ALLOWED_MODULES, program_problems
from transformer_course_grader import grader

ROOT = Path(__file__).resolve().parents[1]

HONEST_STYLES = {
    "dataclass with a field factory": "from dataclasses import dataclass, field\n@dataclass\nclass Beam:\n"
    "    ids: list = field(default_factory=list)",
    "a private cache on self": "class Cache:\n    def __init__(self):\n        self._items = {}\n"
    "    def get(self, key):\n        return self._items[key]",
    "a global counter": "calls = 0\ndef f(x):\n    global calls\n    calls += 1\n    return x",
    "functools.lru_cache": "import functools\n@functools.lru_cache(maxsize=None)\ndef table(n):\n    return n",
    "star import of NumPy": "from numpy import *\ndef f(n):\n    return tril(ones((n, n)))",
    "super().__init__": "class Refused(Exception):\n    def __init__(self, message):\n"
    "        super().__init__(message)",
    "a literal format template": "ROW = '{:>5} {:.3f}'\ndef f(x):\n    return ROW.format(x, x)",
    "a lambda with a default": "best = lambda xs, k=3: sorted(xs, key=lambda v: -v)[:k]",
    "sys.float_info": "import sys\nEPSILON = sys.float_info.epsilon",
    "numpy.load of a constant file": "import numpy as np\ndef f():\n    return np.load('weights.npy')",
}
ATTACKS = {
    "os.sys.modules": "import os\nguard = os.sys.modules.get('json')",
    "dataclasses.builtins.exec": "import dataclasses\ndataclasses.builtins.exec('x = 1')",
    "operator.attrgetter by parts": "import operator\nget = operator.attrgetter('__cla' + 'ss__')\nget(1)",
    "object.__setattr__ by parts": "def f():\n    pass\nobject.__setattr__(f, '__na' + 'me__', 'g')",
    "getattr by parts": "import numpy as np\ngetattr(np, 'ctypes' + 'lib')",
    "a module passed as a value": "import numpy as np\ndef helper(m):\n    return m.ctypeslib\nhelper(np)",
    "a format field": "x = '{0.__class__.__mro__}'.format(1)",
    "exec": "exec('x = 1')",
    "traceback frames": "try:\n    1 / 0\nexcept ZeroDivisionError as error:\n    frame = error.__traceback__.tb_frame",
    "generator frame": "def g():\n    yield 1\nframe = g().gi_frame",
    "star import binds ctypeslib": "from numpy import *\nconvert = ctypeslib.as_ctypes",
    "numpy.load with pickles": "import numpy as np\ntry:\n    np.load('x.npy', allow_pickle=True)\n"
    "except OSError:\n    pass",
    "a private library name": "import dataclasses\nfn = dataclasses._create_fn",
    "typing.get_type_hints": "import typing\ndef f(x: 'int'):\n    pass\ntyping.get_type_hints(f)",
    "subprocess": "import subprocess",
    "vars()": "import json\nnames = vars(json)",
}

RUNNER = r"""
import json, sys
policy, source, allowed = sys.argv[1], sys.stdin.read(), set(json.loads(sys.argv[2]))
if policy == "RestrictedPython":
    from RestrictedPython import compile_restricted_exec, safe_builtins
    from RestrictedPython.Eval import default_guarded_getitem, default_guarded_getiter
    from RestrictedPython.Guards import full_write_guard, guarded_iter_unpack_sequence, safer_getattr
    compiled = compile_restricted_exec(source)
    if compiled.errors:
        print(json.dumps(["refused", compiled.errors[0]])); sys.exit()
    def guarded_import(name, *args, **kwargs):
        if name not in allowed:
            raise ImportError(f"{name} is not allowed")
        return __import__(name, *args, **kwargs)
    builtins = dict(safe_builtins, __import__=guarded_import, __build_class__=__build_class__)
    namespace = {"__builtins__": builtins, "__name__": "graded", "__metaclass__": type, "_getattr_": safer_getattr,
                 "_getitem_": default_guarded_getitem, "_getiter_": default_guarded_getiter,
                 "_write_": full_write_guard,
                 "_iter_unpack_sequence_": guarded_iter_unpack_sequence, "_inplacevar_": lambda op, x, y: x + y}
    try:
        exec(compiled.code, namespace)
    except Exception as error:
        print(json.dumps(["refused", f"{type(error).__name__}: {error}"[:200]])); sys.exit()
    print(json.dumps(["runs", ""]))
else:
    import asteval
    interpreter = asteval.Interpreter(use_numpy=True, config={"import": True, "importfrom": True})
    interpreter(source, show_errors=False)
    if interpreter.error:
        kind, text = interpreter.error[0].get_error()
        print(json.dumps(["refused", f"{kind}: {text.strip().splitlines()[-1]}"[-200:]]))
    else:
        print(json.dumps(["runs", ""]))
"""


def run_elsewhere(policy: str, source: str) -> tuple:
    """(verdict, why) of ``policy`` on ``source``, in a fresh interpreter."""
    allowed = json.dumps(sorted(ALLOWED_MODULES))
    done = subprocess.run([sys.executable, "-c", RUNNER, policy, allowed], input=source, capture_output=True,
                          text=True, timeout=120)  # fmt: skip
    lines = [line for line in done.stdout.splitlines() if line.startswith("[")]
    return tuple(json.loads(lines[-1])) if lines else ("refused", f"crashed: {done.stderr.strip()[-120:]}")


def ours(texts: list) -> tuple:
    problems = [problem for problems in program_problems(texts) for problem in problems]
    return ("refused", problems[0].reason) if problems else ("runs", "")


def solutions() -> dict:
    """exercise id -> the texts of the statements its function needs, from the instructor's notebooks."""
    programs = {}
    for path in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")):
        notebook = nbformat.read(path, as_version=4)
        for exercise, program in grader._programs(notebook, grader.release_facts(notebook).exercises).items():
            programs[f"solution {exercise}"] = [unit.writes_body or unit.text for unit in program.units]
    return programs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--no-solutions", action="store_true", help="the honest styles only, not the 45 solutions")
    arguments = parser.parse_args()
    honest = {name: [text] for name, text in HONEST_STYLES.items()}
    if not arguments.no_solutions:
        honest |= solutions()
    policies = ("ours", "RestrictedPython", "asteval")
    wrong = {policy: [] for policy in policies}
    print(f"{'program':<40}" + "".join(f"{policy:>18}" for policy in policies))
    for kind, programs in (("honest", honest), ("attack", {name: [text] for name, text in ATTACKS.items()})):
        for name, texts in programs.items():
            verdicts = {"ours": ours(texts)}
            for policy in policies[1:]:
                verdicts[policy] = run_elsewhere(policy, "\n\n".join(texts))
            print(f"{kind[0]} {name:<38}" + "".join(f"{verdicts[p][0]:>18}" for p in policies))
            for policy, (verdict, why) in verdicts.items():
                if (verdict == "refused") == (kind == "honest"):
                    wrong[policy].append(f"{kind} '{name}': {verdict}{' (' + why + ')' if why else ''}")
    print(f"\n{len(honest)} honest programs, {len(ATTACKS)} attacks")
    for policy, mistakes in wrong.items():
        refused = sum(m.startswith("honest") for m in mistakes)
        runs = sum(m.startswith("attack") for m in mistakes)
        print(f"{policy}: {refused} honest refused, {runs} attacks run")
        for mistake in mistakes:
            print(f"    {mistake}")


if __name__ == "__main__":
    main()
