"""The graded kernel's audit hook: graded code runs the source it was given and builds no other code.

Installed (:func:`install`) in the kernel that calls the graded functions, before any statement of
a submission runs, and never removed (Python offers no way to remove an audit hook, PEP 578).

**Code of the submission** is a frame running a statement the grader compiled from its cells (file
``<cell N>``) or a module the notebook wrote with ``%%writefile``. An event is the submission's
own when such a frame raised it, or when the frames between that frame and the event include a
library whose job is to run the code it is handed (``runpy``, ``code``, ``pdb``, ``doctest``,
``timeit``, ``zipimport``, ``pickle``, ``trace``, IPython, ipykernel); it came *through a library*
when only installed libraries lie between; and it belongs to an *import* when an installed module's
top level lies between (that module's own code, not the submission's).

**A tripwire, not the decision.** PEP 578 says it: audit hooks are not a sandbox. The code a graded
function runs is decided from its source before it runs (:mod:`.policy`); the sandbox keeps every
limit. The hook is a second line behind the policy, and an honest program never meets it: code the
standard library's class factories build (``@dataclass``, ``namedtuple``, ``typing.NamedTuple``)
passes it.

The hook refuses, with an error naming what was refused:

* code built at run time — ``compile``, ``exec``/``eval``, ``marshal.loads``/``load``,
  ``types.CodeType`` and ``code.replace`` (``code.__new__``) — asked by the submission or through a
  library; except the steps of an import that compile or unmarshal **exactly the bytes of an
  installed file** (or of a module the notebook wrote, at its path), which are compared with the
  file. At import time installed modules may build code as they always do (TensorFlow's op
  wrappers, ``namedtuple``);
* importing the course package (``ImportError``), however reached;
* ``ctypes``' audited calls, ``sys.settrace``/``setprofile``, ``sys._current_frames`` and ``gc``'s
  object walks, asked by the submission or through a library.

What an audit hook cannot see: ``ctypes``' foreign calls (``memmove``) are not audited, so a
submission that writes memory could, in principle, undo the hook; what it could then run is
still only what its own cells hold, since the package is not in that kernel.

Example:
    >>> install(trusted=(), written={}, home="/home/student")  # doctest: +SKIP
"""

from __future__ import annotations

import ast
import os
import sys

__all__ = ["install", "GradedCodeRefused", "STATEMENT_FILE"]

STATEMENT_FILE = "<cell {cell}>"  # the file name of a statement compiled from the notebook's cell N

_BUILDS_CODE = frozenset({"compile", "exec", "marshal.loads", "marshal.load", "code.__new__"})
_INTROSPECTION = frozenset(
    {"sys.settrace", "sys.setprofile", "gc.get_objects", "gc.get_referrers", "gc.get_referents", "sys._current_frames"}
)
# Libraries whose purpose is to run the code they are handed, matched by file (a module's __name__
# can be rebound by the code it would vouch for): these standard-library modules, and two packages.
_RUNNER_MODULES = (
    "runpy",
    "code",
    "codeop",
    "pdb",
    "bdb",
    "doctest",
    "timeit",
    "zipimport",
    "pickle",
    "cProfile",
    "profile",
    "trace",
)
_RUNNER_PACKAGES = ("IPython", "ipykernel")
# Packages graded code may not import: the course package and this grader (out of reach of graded functions).
_OUT_OF_REACH = frozenset({"transformer_course", "transformer_course_grader"})
# The standard library's class factories build their methods' code from the class's fields, validated by
# them (``dataclasses``, ``collections.namedtuple``, which ``typing.NamedTuple`` calls): compiled there,
# it is not the submission's. What a submission could smuggle through them (a field name that is code,
# set through ``__annotations__``) is refused in its source (:mod:`.policy`).
_CLASS_FACTORIES = ("dataclasses.py", os.path.join("collections", "__init__.py"))


class GradedCodeRefused(RuntimeError):
    """What graded code may not do: build code at run time, or reach the course package."""


_installed = False


def install(trusted: tuple, written: dict, home: str) -> None:
    """Install the hook once in this process (a second call does nothing).

    Args:
        trusted: absolute folders whose modules are the environment's (read-only in the sandbox).
        written: {file name: text} of the modules the notebook writes with ``%%writefile`` into
            ``home``: importing one compiles exactly its text.
        home: the folder the notebook's modules are written to.
    """
    global _installed
    if _installed:
        return
    _installed = True
    trusted = tuple(sorted({os.path.normpath(folder).rstrip(os.sep) + os.sep for folder in trusted if folder}))
    written_paths = frozenset(os.path.join(home, name) for name in written if type(name) is str)
    written_texts = frozenset(text for text in written.values() if type(text) is str)
    is_trusted, same_file = _installed_files(trusted)
    stock_import_read, frozen_import_read = _import_system_reads(is_trusted)
    is_written, is_submission = _submission_code(written_paths, written_texts)
    asked_by = _who_asked(trusted, is_trusted, is_submission)
    verified_import_step = _verified_import_step(same_file, is_trusted, is_written, written_paths)
    sys.addaudithook(
        _hook(asked_by, is_trusted, stock_import_read, frozen_import_read, verified_import_step, sys._getframe)
    )


def _installed_files(trusted: tuple):
    """(is_trusted(filename), same_file(path, data, offset)): a file of the environment, and data that is exactly
    an installed file's bytes."""
    normpath = os.path.normpath

    def is_trusted(filename) -> bool:
        if type(filename) is not str:
            return False
        if filename.startswith("<frozen "):
            return True
        return filename.startswith(trusted) and normpath(filename) == filename

    def same_file(path, data, offset=0) -> bool:
        """``data`` (bytes, a view of them, or str) is exactly the installed file at ``path`` from ``offset`` on."""
        if type(data) is memoryview:  # importlib hands marshal a view of the .pyc past its header
            data = data.tobytes()
        if not is_trusted(path) or type(data) not in (bytes, str):
            return False
        try:
            with open(path, "rb") as file:
                content = file.read()[offset:]
        except OSError:
            return False
        return content == (data.encode("utf-8") if type(data) is str else data)

    return is_trusted, same_file


def _import_system_reads(is_trusted):
    """(stock_import_read(frame), frozen_import_read(frame)): the import system itself reading an installed
    module's .pyc, or a frozen standard-library module."""
    from importlib import machinery

    stock_readers = {kind: kind.get_data for kind in (machinery.SourceFileLoader, machinery.SourcelessFileLoader)}

    def stock_import_read(frame) -> bool:
        """``_compile_bytecode`` called by the import system's own ``get_code`` on a stock file loader (its
        ``get_data`` not replaced), for an installed module's .pyc: the bytes come from that file itself."""
        caller = frame.f_back
        if (
            caller is None
            or caller.f_code.co_name != "get_code"
            or not caller.f_code.co_filename.startswith("<frozen importlib")
        ):
            return False
        loader = caller.f_locals.get("self")
        kind = type(loader)
        return (
            kind in stock_readers
            and kind.get_data is stock_readers[kind]
            and "get_data" not in getattr(loader, "__dict__", {})
            and is_trusted(frame.f_locals.get("bytecode_path"))
        )

    import _imp

    get_frozen_object = _imp.get_frozen_object
    frozen_importlib = sys.modules.get("_frozen_importlib")

    def frozen_import_read(frame) -> bool:
        """The import system loading a frozen standard-library module (``runpy``, ``importlib.util``): from
        Python 3.13 ``_imp.get_frozen_object(name)`` unmarshals the interpreter's own frozen bytes. Only that
        call, made by importlib's own ``_call_with_frames_removed`` (its code and its module's globals) with
        a name and no data of the caller's, passes."""
        if frame.f_code.co_name != "_call_with_frames_removed" or frozen_importlib is None:
            return False
        if (
            frame.f_code is not frozen_importlib._call_with_frames_removed.__code__
            or frame.f_globals is not frozen_importlib.__dict__
        ):
            return False
        local = frame.f_locals
        return local.get("f") is get_frozen_object and len(local.get("args", ())) == 1 and not local.get("kwds")

    return stock_import_read, frozen_import_read


def _submission_code(written_paths: frozenset, written: frozenset):
    """(is_written(data), is_submission(filename)): a module text the notebook wrote, and a file name of the
    submission's own code."""
    written_stripped = frozenset(text.rstrip("\n") for text in written)

    def is_written(data) -> bool:
        if type(data) is bytes:
            try:
                data = data.decode("utf-8")
            except UnicodeDecodeError:
                return False
        return type(data) is str and (data in written or data.rstrip("\n") in written_stripped)

    def is_submission(filename) -> bool:
        """Code of the submission: a statement compiled from its cells, or a module it wrote."""
        return type(filename) is str and (
            filename in written_paths
            or (filename.startswith("<cell ") and filename.endswith(">") and filename[6:-1].isdigit())
        )

    return is_written, is_submission


def _who_asked(trusted: tuple, is_trusted, is_submission):
    """asked_by(frame): who raised an event, read from the stack below it (see the returned function)."""
    standard_library = {os.path.dirname(os.__file__), os.path.realpath(os.path.dirname(os.__file__))}
    runner_files = frozenset(
        os.path.join(folder, f"{name}.py") for folder in standard_library for name in _RUNNER_MODULES
    )
    runner_folders = tuple(os.path.join(folder, package) + os.sep for folder in trusted for package in _RUNNER_PACKAGES)
    # What the stack holds below a frame, remembered per frame: an import runs thousands of events
    # (``typing``'s forward references are compiled one by one) over the same frames, and reading a frame's
    # code is itself an audited event. A frame's callers never change while it runs, so its answer holds
    # while it can appear in a stack; a generator's or coroutine's frame changes callers on every resumption
    # and is never remembered. The table holds its frames until it is emptied.
    resumable = 0x20 | 0x80 | 0x200  # CO_GENERATOR | CO_COROUTINE | CO_ASYNC_GENERATOR
    remembered: dict = {}
    found_here = ("submission frame",)

    def below(frame):
        """None (no code of the submission at or below ``frame``), ``found_here`` (``frame`` is the
        submission's), or (a runner lies between, an installed module's top level lies between) for the
        frames from ``frame`` down to the first frame of the submission."""
        path = []
        while frame is not None:
            if frame in remembered:  # a frame is its own key (identity), held: never a reused id
                state = remembered[frame]
                break
            code = frame.f_code
            if is_submission(code.co_filename):
                state = found_here
                break
            path.append((frame, code))
            frame = frame.f_back
        else:
            state = None
        if len(remembered) > 4096:
            remembered.clear()
        for frame, code in reversed(path):
            if state is not None:
                runner = code.co_name != "<module>" and (
                    code.co_filename in runner_files or code.co_filename.startswith(runner_folders)
                )
                module = code.co_name == "<module>" and is_trusted(code.co_filename)
                state = (runner, module) if state is found_here else (state[0] or runner, state[1] or module)
            if not code.co_flags & resumable:
                remembered[frame] = state
        return state

    def asked_by(frame) -> str | None:
        """Who raised this event: None (no code of the submission below it), "submission" (its own frame,
        or through a code-running library), "import" (an installed module's import-time code, which
        the submission's import started), or "library" (an installed library it called)."""
        state = below(frame)
        if state is None:
            return None
        if state is found_here:
            return "submission"
        through_runner, importing = state
        if through_runner:
            return "submission"
        return "import" if importing else "library"

    return asked_by


def _verified_import_step(same_file, is_trusted, is_written, written_paths: frozenset):
    """verified_import_step(event, arguments, frame): an import compiling or loading the text of an installed
    module's file, or of a module the notebook wrote, or running the code so obtained."""

    def verified_import_step(event, arguments, frame) -> bool:
        if event in ("marshal.loads", "marshal.load"):
            if frame.f_code.co_name != "_compile_bytecode":
                return False
            return event == "marshal.loads" and same_file(frame.f_locals.get("bytecode_path"), arguments[0], 16)
        if event == "compile":
            source, filename = arguments[0], arguments[1]
            return type(filename) is str and (
                same_file(filename, source) or (filename in written_paths and is_written(source))
            )
        if event == "exec":
            filename = getattr(arguments[0], "co_filename", None)
            return is_trusted(filename) or filename in written_paths
        return False

    return verified_import_step


def _hook(asked_by, is_trusted, stock_import_read, frozen_import_read, verified_import_step, getframe):
    """The audit hook itself: refuses what the module says, deciding the common events first and cheaply."""
    standard_library = {os.path.dirname(os.__file__), os.path.realpath(os.path.dirname(os.__file__))}
    class_factories = frozenset(os.path.join(folder, name) for folder in standard_library for name in _CLASS_FACTORIES)
    ast_parse = ast.parse.__code__  # the standard library's: it compiles with PyCF_ONLY_AST, a tree and no code

    def hook(event, arguments):
        if (
            event not in _BUILDS_CODE
            and event not in _INTROSPECTION
            and event != "import"
            and not event.startswith("ctypes.")
        ):
            return
        frame = getframe(1)
        if event == "import":
            module = arguments[0]
            if type(module) is str and module.split(".")[0] in _OUT_OF_REACH and asked_by(frame):
                raise ImportError(
                    f"graded code may not import the course package or its grader ({module}): it is "
                    "out of reach here; write the function yourself"
                )
            return
        if event in _INTROSPECTION or event.startswith("ctypes."):
            if asked_by(frame) in ("submission", "library"):
                raise GradedCodeRefused(f"graded code may not call {event}")
            return
        if event in ("compile", "exec") and frame.f_code.co_filename in class_factories:
            return  # the standard library's class factories (a @dataclass's __init__, a namedtuple's __new__)
        if event == "compile" and frame.f_code is ast_parse:
            return  # ast.parse builds a syntax tree, never code (NumPy's np.load reads its header so); compiling the
            # tree into code is a compile of its own, decided here
        # The import system loading an installed module: decided without walking the stack or reading the file.
        if event == "marshal.loads" and frame.f_code.co_name == "_compile_bytecode" and stock_import_read(frame):
            return
        if event == "marshal.loads" and frozen_import_read(frame):
            return
        if event == "exec" and is_trusted(getattr(arguments[0], "co_filename", None)):
            return  # an installed module's code: it was compiled or unmarshalled under the rules here
        who = asked_by(frame)
        if who is None or who == "import":
            return
        if verified_import_step(event, arguments, frame):  # an installed module's own file, however reached
            return
        what = event
        if event == "compile" and type(arguments[1]) is str:
            what = f"compile, of {arguments[1][:100]}"
        elif event == "exec" and type(getattr(arguments[0], "co_filename", None)) is str:
            what = f"exec, of {arguments[0].co_filename[:100]}"
        if "autograph" in what:
            what += "; a tf.function compiles a new version of your function: call it without @tf.function"
        raise GradedCodeRefused(
            f"graded code may not build code at run time ({what}): the grader runs the code "
            "written in the notebook's cells, as written"
        )

    return hook
