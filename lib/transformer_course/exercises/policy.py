"""What graded code may be made of, decided from its source before it runs: an allow-list.

The grader grades the statements a function needs (:mod:`.slicing`): known text. This module reads
that text — the student's own statements and the modules the notebook writes, never an installed
library — and lets it run only if every name it reads is one of:

* **the student's own**: a name the program binds (a function, a class, a parameter, a variable, a
  name it imports from an allowed module), resolved scope by scope as Python resolves it;
* **an allowed built-in** (:data:`ALLOWED_BUILTINS`): no ``exec``, ``eval``, ``compile``,
  ``__import__``, ``globals``, ``locals``, ``vars``, ``breakpoint``, ``input``, ``memoryview``;
  ``getattr``, ``setattr``, ``delattr`` and ``hasattr`` only called, with a constant public name;
  ``open`` only called, on a constant file name, and never to write a code file;
* **a module of** :data:`ALLOWED_MODULES` (NumPy, ``math``, ``re``, ``functools``, ``itertools``,
  ``collections``, ``dataclasses``, ``typing``, SciPy's ``special`` and ``stats``, ``keras.ops``…;
  or a module the notebook writes), and of it only its **public names** — its ``__all__``, or its
  names without a leading underscore where it has none — that are not modules outside the list, less
  :data:`DENIED_NAMES`, which load files or code or read attributes by a computed name
  (``numpy.ctypeslib``, ``operator.attrgetter``, ``typing.get_type_hints``…); ``numpy.load`` only
  with pickles off.

And an attribute of a value is never an interpreter internal: no special (``__dunder__``) name but
the protocol's own (:data:`ALLOWED_SPECIAL_ATTRIBUTES`: ``__init__``, ``__call__``, ``__class__``,
``__name__``…; ``__setattr__`` and its kin only called with a constant public name), none of the
attributes of frames, tracebacks, code objects, generators and coroutines (``f_back``, ``tb_frame``,
``co_code``, ``gi_frame``…, :data:`INTERNAL_ATTRIBUTES`), and no private (``_name``) attribute
except of ``self``/``cls``, a named tuple's (``_replace``, ``_asdict``, ``_make``, ``_fields``), or
one the program itself defines. A string constant is at most :data:`MAX_CONSTANT_CHARACTERS` long
(no answer needs more; a program carried as data does), and ``str.format`` takes only a literal
template whose fields read no private or special attribute.

This is the decision; the runtime audit hook of :mod:`.guard` stays in the graded kernel as a
tripwire behind it, and the sandbox keeps every limit. A refused exercise scores 0 with the reason
(the line and the construct), in words a student can act on; nothing of it runs.

Example:
    >>> problems_in("import marshal\\ncode = marshal.loads(DATA)")[0].reason
    'imports marshal, which graded code may not use (the grading rules list those it may)'
"""

from __future__ import annotations

import ast
import builtins
import functools
import importlib
import re
import types
from dataclasses import dataclass, field

__all__ = [
    "Problem",
    "problems_in",
    "program_problems",
    "refusal",
    "MAX_CONSTANT_CHARACTERS",
    "ALLOWED_BUILTINS",
    "ALLOWED_MODULES",
    "DENIED_NAMES",
    "ALLOWED_SPECIAL_ATTRIBUTES",
    "INTERNAL_ATTRIBUTES",
]

MAX_CONSTANT_CHARACTERS = 4096  # the longest string or bytes constant an answer may hold

_BUILTIN_NAMES = frozenset(dir(builtins))
_EXCEPTIONS = frozenset(
    name
    for name in _BUILTIN_NAMES
    if name[0].isupper() and name.endswith(("Error", "Exception", "Warning", "Group", "Iteration", "Exit"))
)
ALLOWED_BUILTINS = frozenset(
    {
        "abs", "all", "any", "ascii", "bin", "bool", "bytearray", "bytes", "callable", "chr", "classmethod",
        "complex", "dict", "dir", "divmod", "enumerate", "filter", "float", "format", "frozenset", "hash",
        "hex", "id", "int", "isinstance", "issubclass", "iter", "len", "list", "map", "max", "min", "next",
        "object", "oct", "ord", "pow", "print", "property", "range", "repr", "reversed", "round", "set",
        "slice", "sorted", "staticmethod", "str", "sum", "super", "tuple", "type", "zip", "aiter", "anext",
        "True", "False", "None", "NotImplemented", "Ellipsis", "BaseException", "Exception",
        "KeyboardInterrupt", "GeneratorExit",
        # called only, with a constant name (below)
        "getattr", "setattr", "delattr", "hasattr", "open",
    }
) | _EXCEPTIONS  # fmt: skip
NAMED_ACCESS = frozenset({"getattr", "setattr", "delattr", "hasattr"})  # the name is their second argument
ALLOWED_SPECIAL_NAMES = frozenset({"__name__", "__doc__", "__all__", "__slots__", "__version__"})

# Each allowed module -> None (its public names: __all__, else the names without a leading underscore), or the
# only names graded code may take from it.
ALLOWED_MODULES: dict[str, frozenset | None] = {
    **dict.fromkeys(
        (
            "numpy", "numpy.random", "numpy.linalg", "numpy.fft", "numpy.ma", "numpy.polynomial", "numpy.exceptions",
            "numpy.dtypes", "numpy.typing", "numpy.strings", "numpy.char", "numpy.lib.stride_tricks",
            "math", "cmath", "random", "statistics", "fractions", "decimal", "numbers", "re", "string", "textwrap",
            "unicodedata", "functools", "itertools", "operator", "collections", "collections.abc", "heapq", "bisect",
            "array", "copy", "dataclasses", "enum", "typing", "abc", "contextlib", "warnings", "time", "json",
            "scipy", "scipy.special", "scipy.stats", "keras", "keras.ops", "keras.random", "keras.activations",
            "keras.layers", "keras.initializers", "jax", "jax.numpy", "jax.nn", "jax.lax", "tensorflow",
            "tensorflow.linalg", "tensorflow.math", "tensorflow.nn", "tensorflow.random",
        )
    ),
    "sys": frozenset({"float_info", "int_info", "maxsize", "byteorder", "version_info", "hash_info"}),
}  # fmt: skip
# What loads files or code, or reads or writes attributes by a computed name, out of an allowed module.
DENIED_NAMES: dict[str, frozenset] = {
    "numpy": frozenset({"lib", "f2py", "ctypeslib", "testing", "core", "distutils"}),
    "numpy.lib.stride_tricks": frozenset({"as_strided"}),  # strides past the array read any memory
    "operator": frozenset({"attrgetter", "methodcaller"}),
    "typing": frozenset({"get_type_hints", "ForwardRef"}),
    "dataclasses": frozenset({"make_dataclass"}),
    "string": frozenset({"Formatter"}),
    "keras": frozenset({"saving", "utils", "config", "models", "export"}),
    "keras.layers": frozenset({"TFSMLayer", "Lambda"}),
    "jax": frozenset({"export", "experimental", "extend"}),
    "tensorflow": frozenset({"load_library", "load_op_library", "load_pluggable_device_library"}),
}
ALLOWED_SPECIAL_ATTRIBUTES = frozenset(
    {
        "__init__", "__call__", "__class__", "__name__", "__qualname__", "__doc__", "__module__", "__new__",
        "__post_init__", "__len__", "__getitem__", "__setitem__", "__delitem__", "__contains__", "__iter__",
        "__next__", "__enter__", "__exit__", "__repr__", "__str__", "__format__", "__hash__", "__bool__",
        "__eq__", "__ne__", "__lt__", "__le__", "__gt__", "__ge__", "__array__", "__index__", "__int__",
        "__float__", "__neg__", "__pos__", "__abs__", "__invert__",
    }
    | {
        f"__{prefix}{operation}__"
        for operation in ("add", "sub", "mul", "matmul", "truediv", "floordiv", "mod", "pow", "and", "or", "xor",
                          "lshift", "rshift")
        for prefix in ("", "r", "i")
    }
)  # fmt: skip
# Read or written only as a call whose name argument is a constant public name: {attribute: {arity: name index}}.
NAMED_SPECIAL_ATTRIBUTES = {
    "__setattr__": {3: 1, 2: 0},
    "__getattribute__": {2: 1, 1: 0},
    "__getattr__": {2: 1, 1: 0},
    "__delattr__": {2: 1, 1: 0},
}
INTERNAL_ATTRIBUTES = frozenset(
    name
    for kind in (
        types.FrameType,
        types.TracebackType,
        types.CodeType,
        types.GeneratorType,
        types.CoroutineType,
        types.AsyncGeneratorType,
    )
    for name in dir(kind)
    if name.startswith(("f_", "tb_", "co_", "gi_", "cr_", "ag_"))
) | {"ctypes"}
# Names of the interpreter's internals: refused as names, and as string constants (a dict key that stands for one).
_INTERNAL_NAMES = frozenset(
    {
        "__builtins__", "__loader__", "__spec__", "__annotations__", "__code__", "__globals__", "__closure__",
        "__subclasses__", "__mro__", "__bases__", "__base__", "__dict__", "__getattribute__", "__reduce__",
        "__reduce_ex__", "__self__", "__func__", "__wrapped__", "__kwdefaults__", "__defaults__", "__traceback__",
        "__import__", "__build_class__", "f_globals", "f_locals", "f_builtins", "f_back", "f_code", "tb_frame",
        "gi_frame", "cr_frame", "co_code", "co_consts", "co_names",
    }
)  # fmt: skip
REFUSED_CALLS = {
    **dict.fromkeys(("exec", "eval", "compile", "__import__", "breakpoint"), "which runs code built from data"),
    **dict.fromkeys(("globals", "vars", "locals"), "which reaches a namespace and its builtins by name"),
}
NAMED_TUPLE_ATTRIBUTES = frozenset({"_replace", "_asdict", "_make", "_fields", "_field_defaults"})
CODE_SUFFIXES = (".py", ".pyc", ".pyw", ".so", ".zip", ".pth", ".egg")
_FIELD_READS_PRIVATE = re.compile(r"\{[^{}:!]*(?:\.|\[)\s*_")  # "{0.__class__}", "{x[_y]}"
_MODULES_SAID = "the grading rules list those it may"


@dataclass(frozen=True)
class Problem:
    """One refused construct.

    Attributes:
        line: int, its line in the statement's text (1-based).
        reason: str, what was refused and why, in one phrase.
    """

    line: int
    reason: str


def _special(name: str) -> bool:
    return name.startswith("__") and name.endswith("__") and len(name) > 4


@functools.cache
def _module(path: str):
    """The installed module ``path`` (imported here, in the grader, once), or None where it cannot be."""
    try:
        return importlib.import_module(path)
    except Exception:  # noqa: BLE001 - a module that fails to import has no names to offer
        return None


@functools.cache
def public_names(path: str) -> frozenset:
    """The names graded code may take from the allowed module ``path`` (empty where it cannot be imported)."""
    listed = ALLOWED_MODULES[path]
    if listed is not None:
        return listed
    module = _module(path)
    if module is None:
        return frozenset()
    names = getattr(module, "__all__", None)
    if not isinstance(names, (list, tuple)):
        names = [name for name in dir(module) if not name.startswith("_")]
    return frozenset(name for name in names if isinstance(name, str) and not name.startswith("_"))


def _submodule(path: str, name: str) -> str | None:
    """``path.name`` where that attribute of the installed module is a module (its dotted name), else None."""
    if f"{path}.{name}" in ALLOWED_MODULES:
        return f"{path}.{name}"  # TensorFlow's tf.linalg is named tensorflow._api.v2.linalg
    module = _module(path) if path in ALLOWED_MODULES else None
    value = getattr(module, name, None) if module is not None else None
    return value.__name__ if isinstance(value, types.ModuleType) else None


@dataclass
class _Scope:
    kind: str  # "module", "function", "class"
    local: set = field(default_factory=set)
    global_names: set = field(default_factory=set)


def _target_names(target: ast.AST) -> set:
    return {node.id for node in ast.walk(target) if isinstance(node, ast.Name)}


def _scope_of(node: ast.AST) -> _Scope:
    """The names a function, lambda, comprehension or class binds in its own scope."""
    kind = "class" if isinstance(node, ast.ClassDef) else "function"
    scope = _Scope(kind)
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
        arguments = node.args
        for argument in [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs]:
            scope.local.add(argument.arg)
        for argument in (arguments.vararg, arguments.kwarg):
            if argument is not None:
                scope.local.add(argument.arg)
        body = [node.body] if isinstance(node, ast.Lambda) else node.body
    elif isinstance(node, ast.ClassDef):
        body = node.body
    else:  # a comprehension: its targets
        for generator in node.generators:
            scope.local |= _target_names(generator.target)
        return scope
    return _body_bindings(body, scope)


def _body_bindings(body: list, scope: _Scope) -> _Scope:
    """``scope`` with the names ``body`` binds outside its nested scopes (less those it declares global or
    nonlocal)."""
    declared = set()
    for inner in _own_nodes(body):
        if isinstance(inner, (ast.Global, ast.Nonlocal)):
            declared |= set(inner.names)
            if isinstance(inner, ast.Global):
                scope.global_names |= set(inner.names)
        elif isinstance(inner, ast.Name) and isinstance(inner.ctx, (ast.Store, ast.Del)):
            scope.local.add(inner.id)
        elif isinstance(inner, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            scope.local.add(inner.name)
        elif isinstance(inner, (ast.Import, ast.ImportFrom)):
            scope.local |= {alias.asname or alias.name.split(".")[0] for alias in inner.names if alias.name != "*"}
        elif isinstance(inner, ast.ExceptHandler) and inner.name:
            scope.local.add(inner.name)
        elif isinstance(inner, (ast.MatchAs, ast.MatchStar)) and inner.name:
            scope.local.add(inner.name)
    scope.local -= declared
    return scope


_NEW_SCOPES = (
    ast.FunctionDef,
    ast.AsyncFunctionDef,
    ast.Lambda,
    ast.ClassDef,
    ast.ListComp,
    ast.SetComp,
    ast.DictComp,
    ast.GeneratorExp,
)


def _own_nodes(body) -> list:
    """The nodes of ``body`` (a node or a list of them) outside nested scopes; a nested scope's own node is kept
    (its name, decorators, default values and base classes belong to this scope), its inside is not."""
    nodes, stack = [], list(body) if isinstance(body, list) else [body]
    while stack:
        node = stack.pop()
        nodes.append(node)
        if isinstance(node, _NEW_SCOPES):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                stack += node.decorator_list
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                stack += [*node.args.defaults, *(d for d in node.args.kw_defaults if d is not None)]
            if isinstance(node, ast.ClassDef):
                stack += [*node.bases, *node.keywords]
            if isinstance(node, (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)):
                stack.append(node.generators[0].iter)  # the first iterable is evaluated in the enclosing scope
                # a walrus in a comprehension binds in the enclosing scope
                stack += [n for n in ast.walk(node) if isinstance(n, ast.NamedExpr)]
            continue
        stack.extend(ast.iter_child_nodes(node))
    return nodes


@dataclass
class _Program:
    """What the whole program binds: module-level names, which of them are modules, its own attributes."""

    names: set = field(default_factory=set)  # module-level names some statement binds
    modules: dict = field(default_factory=dict)  # name -> the module it stands for ("numpy.linalg")
    members: dict = field(default_factory=dict)  # name -> (module, name) it was imported as
    attributes: set = field(default_factory=set)  # attribute names the program defines (obj._x = ..., class bodies)
    written: set = field(default_factory=set)  # modules the notebook writes
    stores: dict = field(default_factory=dict)  # name -> how many times the program binds it, anywhere
    literals: dict = field(default_factory=dict)  # name -> the str constants top-level `name = "..."` give it

    def literal(self, name: str) -> bool:
        """Whether ``name`` is only ever bound, at the top level, to one string constant."""
        values = self.literals.get(name, [])
        return bool(values) and len(set(values)) == 1 and self.stores.get(name, 0) == len(values)

    def read(self, tree: ast.Module) -> None:
        self.names |= _body_bindings(tree.body, _Scope("module")).local
        for node in ast.walk(tree):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                self.stores[node.id] = self.stores.get(node.id, 0) + 1
            if isinstance(node, ast.Global):
                self.names |= set(node.names)
            elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                self.attributes.add(node.attr)
            elif isinstance(node, ast.ClassDef):
                for inner in _own_nodes(node.body):
                    if isinstance(inner, ast.Name) and isinstance(inner.ctx, ast.Store):
                        self.attributes.add(inner.id)
                    elif isinstance(inner, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                        self.attributes.add(inner.name)
        for node in tree.body:
            self._read_statement(node)

    def _read_statement(self, node: ast.stmt) -> None:
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    self.modules[alias.asname] = alias.name
                else:
                    top = alias.name.split(".")[0]
                    self.modules[top] = top
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for alias in node.names:
                if alias.name == "*":
                    if node.module in ALLOWED_MODULES:  # denied names too: bound by Python, refused where used
                        for name in public_names(node.module):
                            self._member(name, node.module, name)
                    continue
                self._member(alias.asname or alias.name, node.module, alias.name)
        elif (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
            and _constant_name(node.value) is not None
        ):
            self.literals.setdefault(node.targets[0].id, []).append(node.value.value)
        for inner in ast.iter_child_nodes(node):  # statements under if/try/with at the top level
            if isinstance(inner, ast.stmt) and not isinstance(inner, _NEW_SCOPES):
                self._read_statement(inner)

    def _member(self, name: str, module: str, member: str) -> None:
        self.names.add(name)
        submodule = _submodule(module, member) if module in ALLOWED_MODULES else None
        if submodule is not None:
            self.modules[name] = submodule
        else:
            self.members[name] = (module, member)


def _constant_name(node: ast.AST | None) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


class _Reader:
    """Walks one text with the program's bindings, scope by scope, and collects its problems."""

    def __init__(self, program: _Program):
        self.program = program
        self.problems: list[Problem] = []
        self.scopes: list[_Scope] = []
        self.called: set = set()  # ids of nodes that are the function of a call (getattr(...), open(...))
        self.owners: set = set()  # ids of nodes whose attribute is read (np in np.sum)
        self.reported: set = set()  # ids of names already refused as the function of a call

    def refuse(self, node: ast.AST, reason: str) -> None:
        self.problems.append(Problem(getattr(node, "lineno", 1), reason))

    # -- names ---------------------------------------------------------------------------------------------------

    def own(self, name: str) -> bool:
        """Whether ``name``, read in the current scope, is one the program binds (not a built-in)."""
        innermost = True
        for scope in reversed(self.scopes):
            if scope.kind == "class" and not innermost:
                continue  # a class body's names are not seen from its methods
            if name in scope.global_names:
                break
            if scope.kind != "module" and name in scope.local:
                return True
            innermost = False
        return name in self.program.names

    def module_of(self, node: ast.AST) -> str | None:
        """The allowed or written module an expression stands for (``np`` -> numpy, ``np.linalg``), else None."""
        if isinstance(node, ast.Name):
            if node.id in self.program.modules and not self._shadowed(node.id):
                return self.program.modules[node.id]
            return None
        if isinstance(node, ast.Attribute):
            owner = self.module_of(node.value)
            if owner is None or owner.split(".")[0] in self.program.written:
                return None
            return _submodule(owner, node.attr)
        return None

    def _shadowed(self, name: str) -> bool:
        return any(name in scope.local for scope in self.scopes if scope.kind != "module")

    def check_module(self, path: str, node: ast.AST, statement: str) -> bool:
        """Refuse an import of a module graded code may not use; True where it may."""
        top = path.split(".")[0]
        if top in self.program.written:
            return True
        if path not in ALLOWED_MODULES:
            self.refuse(node, f"imports {path}, which graded code may not use ({_MODULES_SAID})")
            return False
        if _module(path) is None:
            self.refuse(node, f"imports {path}, which is not installed where grading runs")
            return False
        return True

    def check_member(self, module: str, name: str, node: ast.AST, verb: str = "uses") -> None:
        """Refuse ``module.name`` unless it is a public name graded code may take from that module."""
        if module.split(".")[0] in self.program.written:
            return
        if f"{module}.{name}" in ALLOWED_MODULES or (
            id(node) in self.owners and any(path.startswith(f"{module}.{name}.") for path in ALLOWED_MODULES)
        ):
            return  # an allowed module, or on the way to one (np.lib to np.lib.stride_tricks): the next name decides
        if module not in ALLOWED_MODULES:
            self.refuse(node, f"{verb} {module}.{name}: the module {module}, which graded code may not use")
            return
        said = f"{verb} {module}.{name}"
        if name.startswith("_"):
            self.refuse(node, f"{'reads' if verb == 'uses' else verb} {module}.{name}, a private name of a library")
        elif name in DENIED_NAMES.get(module, frozenset()):
            self.refuse(node, f"{said}, which loads files or code or reads attributes by a computed name")
        elif f"{module}.{name}" in ALLOWED_MODULES:
            return
        elif name not in public_names(module):
            submodule = _submodule(module, name)
            where = f"the module {submodule}, which graded code may not use" if submodule else "not a public name of it"
            self.refuse(node, f"{said}: {where}")
        else:
            submodule = _submodule(module, name)
            if submodule is not None and submodule not in ALLOWED_MODULES:
                self.refuse(node, f"{said}, the module {submodule}, which graded code may not use")

    def check_value_attribute(self, owner: ast.AST, name: str, node: ast.AST) -> None:
        """Refuse an attribute of a value that reaches the interpreter's internals or a library's private parts."""
        if _special(name):
            if name in NAMED_SPECIAL_ATTRIBUTES:
                if id(node) not in self.called:
                    self.refuse(node, f"reads .{name}, which reaches attributes by a computed name")
                return  # the call checks its name argument
            if name not in ALLOWED_SPECIAL_ATTRIBUTES:
                self.refuse(node, f"reads .{name}, the interpreter's internals")
        elif name in INTERNAL_ATTRIBUTES:
            self.refuse(node, f"reads .{name}, the interpreter's internals (frames, code, tracebacks)")
        elif name.startswith("_"):
            receiver = owner.id if isinstance(owner, ast.Name) else None
            if receiver in ("self", "cls") or name in NAMED_TUPLE_ATTRIBUTES or name in self.program.attributes:
                return
            shown = f"{receiver}.{name}" if receiver else f".{name}"
            self.refuse(node, f"reads {shown}, a private name your code does not define")

    def check_attribute(self, owner: ast.AST, name: str, node: ast.AST) -> None:
        module = self.module_of(owner)
        if module is not None:
            self.check_member(module, name, node)
        else:
            self.check_value_attribute(owner, name, node)

    def check_module_value(self, node: ast.AST, shown: str) -> None:
        """A library module used as a value (``f(np)``, ``m = np.linalg``) could reach any of its names unseen."""
        module = self.module_of(node)
        if module is not None and module.split(".")[0] not in self.program.written and id(node) not in self.owners:
            self.refuse(node, f"uses the module {shown} as a value (graded code may only use its names: {shown}.name)")

    def check_name(self, node: ast.Name) -> None:
        name = node.id
        if id(node) in self.reported:
            return
        if isinstance(node.ctx, ast.Load):
            if self.own(name):
                if name in self.program.members and not self._shadowed(name):
                    self.check_member(*self.program.members[name], node)
                self.check_module_value(node, name)
                return
            if _special(name):
                if name not in ALLOWED_SPECIAL_NAMES:
                    self.refuse(node, f"uses {name}, the interpreter's internals")
            elif name in _BUILTIN_NAMES and name not in ALLOWED_BUILTINS:
                why = REFUSED_CALLS.get(name, "which graded code may not use (the grading rules list those it may)")
                self.refuse(node, f"uses {name}, a built-in {why}")
            elif name in NAMED_ACCESS | {"open"} and id(node) not in self.called:
                self.refuse(node, f"uses {name} without calling it, so that the name it takes cannot be read")
        elif _special(name) and name not in ALLOWED_SPECIAL_NAMES:
            in_class = self.scopes and self.scopes[-1].kind == "class"
            if not in_class or name in _INTERNAL_NAMES or name == "__class__":
                self.refuse(node, f"uses {name}, the interpreter's internals")

    # -- calls ---------------------------------------------------------------------------------------------------

    def check_call(self, node: ast.Call) -> None:
        function = node.func
        self.called.add(id(function))
        if isinstance(function, ast.Name) and not self.own(function.id):
            if function.id in REFUSED_CALLS:
                self.refuse(node, f"calls {function.id}(), {REFUSED_CALLS[function.id]}")
                self.reported.add(id(function))
            elif function.id in NAMED_ACCESS:
                name = _constant_name(node.args[1]) if len(node.args) > 1 else None
                if name is None:
                    self.refuse(node, f"calls {function.id}() with a name computed at run time")
                elif name.startswith("_"):
                    self.refuse(node, f"calls {function.id}() on {name}, the interpreter's internals or a private name")
                elif node.args:
                    self.check_attribute(node.args[0], name, node)
            elif function.id == "open":
                self.check_open(node)
        elif isinstance(function, ast.Attribute):
            if function.attr in NAMED_SPECIAL_ATTRIBUTES and self.module_of(function.value) is None:
                index = NAMED_SPECIAL_ATTRIBUTES[function.attr].get(len(node.args))
                name = _constant_name(node.args[index]) if index is not None else None
                if name is None or node.keywords or any(isinstance(a, ast.Starred) for a in node.args):
                    self.refuse(node, f"calls .{function.attr}() with a name computed at run time")
                elif name.startswith("_"):
                    self.refuse(node, f"calls .{function.attr}() on {name}, the interpreter's internals or a "
                                "private name")  # fmt: skip
            elif function.attr in ("format", "format_map"):
                self.check_template(function.value, node)
            elif function.attr in ("write_text", "write_bytes"):
                self.refuse(node, f"writes a file with .{function.attr}() (a module the notebook writes is graded "
                            "from its constant text only)")  # fmt: skip
        # numpy.load, however it is named (np.load, or load after `from numpy import load`), never with pickles
        if isinstance(function, ast.Attribute):
            member = self.resolve_member(function)
        else:
            member = self.program.members.get(function.id) if isinstance(function, ast.Name) else None
        pickles = next((k.value for k in node.keywords if k.arg == "allow_pickle"), None)
        if member == ("numpy", "load") and pickles is not None:
            if not (isinstance(pickles, ast.Constant) and pickles.value is False):
                self.refuse(node, "calls numpy.load with pickles allowed, which loads code")

    def resolve_member(self, function: ast.Attribute) -> tuple | None:
        module = self.module_of(function.value)
        return (module, function.attr) if module is not None else None

    def check_template(self, template: ast.AST, node: ast.Call) -> None:
        if isinstance(template, ast.Name) and self.program.literal(template.id):
            return  # a module-level constant, itself checked where it is written
        if isinstance(template, ast.Constant) and isinstance(template.value, str):
            return
        if isinstance(template, ast.Name) and template.id == "str" and node.args:
            self.check_template(node.args[0], node)
            return
        if isinstance(template, ast.Constant):
            return
        self.refuse(node, "formats a template that is not a literal string (write the template in the call, or use "
                    "an f-string)")  # fmt: skip

    def check_open(self, node: ast.Call) -> None:
        name = _constant_name(node.args[0]) if node.args else None
        mode = node.args[1] if len(node.args) > 1 else next((k.value for k in node.keywords if k.arg == "mode"), None)
        if name is None:
            writes = mode is not None and (_constant_name(mode) is None or set(mode.value) & set("wax+"))
            self.refuse(node, f"opens a file {'for writing ' if writes else ''}whose name is computed at run time")
            return
        if mode is None:
            return
        if _constant_name(mode) is None:
            self.refuse(node, "opens a file for writing whose mode is computed at run time")
        elif set(mode.value) & set("wax+") and name.endswith(CODE_SUFFIXES):
            self.refuse(node, "opens a file for writing whose name is code's (.py, .so, .zip…)")

    # -- the walk ------------------------------------------------------------------------------------------------

    def visit(self, node: ast.AST) -> None:
        if isinstance(node, ast.Call):
            self.check_call(node)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if any(part.startswith("_") for part in alias.name.split(".")[1:]):
                    self.refuse(node, f"imports {alias.name}, a module's private part")
                else:
                    self.check_module(alias.name, node, "import")
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                self.refuse(node, "imports relatively (from . import …), which graded code may not")
            elif self.check_module(node.module, node, "from"):
                for alias in node.names:
                    if alias.name == "*":
                        continue
                    if alias.name.startswith("_"):
                        self.refuse(node, f"imports {alias.name} from {node.module}, a module's private name")
                    else:
                        self.check_member(node.module, alias.name, node, "imports")
        elif isinstance(node, ast.Attribute):
            self.owners.add(id(node.value))
            self.check_attribute(node.value, node.attr, node)
            self.check_module_value(node, ast.unparse(node))
        elif isinstance(node, ast.Name):
            self.check_name(node)
        elif isinstance(node, ast.Constant) and isinstance(node.value, (str, bytes)):
            if len(node.value) > MAX_CONSTANT_CHARACTERS:
                self.refuse(node, f"holds a constant of {len(node.value):,} characters (at most "
                            f"{MAX_CONSTANT_CHARACTERS:,}): code carried as data")  # fmt: skip
            elif node.value in _INTERNAL_NAMES:
                self.refuse(node, f"names {node.value}, the interpreter's internals")
            elif isinstance(node.value, str) and _FIELD_READS_PRIVATE.search(node.value):
                self.refuse(node, "holds a format template whose field reads a private or special attribute")
        if isinstance(node, _NEW_SCOPES):
            self.visit_scope(node)
            return
        for child in ast.iter_child_nodes(node):
            self.visit(child)

    def visit_scope(self, node: ast.AST) -> None:
        """A nested scope: what belongs to the enclosing scope first, then its inside with its own names."""
        inside: list = []
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for outer in [*node.decorator_list, *node.args.defaults, *(d for d in node.args.kw_defaults if d)]:
                self.visit(outer)
            annotations = [a.annotation for a in [*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs]]
            for outer in [*annotations, node.returns]:
                if outer is not None:
                    self.visit(outer)
            inside = node.body
        elif isinstance(node, ast.Lambda):
            for outer in [*node.args.defaults, *(d for d in node.args.kw_defaults if d)]:
                self.visit(outer)
            inside = [node.body]
        elif isinstance(node, ast.ClassDef):
            for outer in [*node.decorator_list, *node.bases, *node.keywords]:
                self.visit(outer)
            inside = node.body
        else:  # a comprehension: the first iterable in the enclosing scope
            self.visit(node.generators[0].iter)
            elements = [node.key, node.value] if isinstance(node, ast.DictComp) else [node.elt]
            inside = [*elements, node.generators[0].target, *node.generators[0].ifs]
            for generator in node.generators[1:]:
                inside += [generator.target, generator.iter, *generator.ifs]
        self.scopes.append(_scope_of(node))
        try:
            for inner in inside:
                self.visit(inner)
        finally:
            self.scopes.pop()


def _parse(text: str) -> ast.Module | Problem:
    try:
        return ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError) as error:
        return Problem(getattr(error, "lineno", None) or 1, f"does not parse ({type(error).__name__})")


def program_problems(texts: list[str], written: frozenset | set = frozenset()) -> list[list[Problem]]:
    """The refused constructs of each text of one program (its statements and the modules it writes), read
    together: a name one statement binds is the program's own in every other.

    Args:
        texts: list of str, Python source (top-level statements as :mod:`.slicing` gives them, magics already
            turned into ``get_ipython()`` calls, or a module the notebook writes).
        written: the names of the modules the notebook writes (``%%writefile name.py`` -> ``"name"``).

    Returns:
        one list of :class:`Problem` per text, in order (``[]`` where it may run); a text that does not parse
        gives one problem saying so.
    """
    program = _Program(written=set(written))
    trees = []
    for text in texts:
        tree = _parse(text)
        trees.append(tree)
        if isinstance(tree, ast.Module):
            try:
                program.read(tree)
            except RecursionError:
                trees[-1] = Problem(1, "is nested too deeply to read")
    results = []
    for tree in trees:
        if isinstance(tree, Problem):
            results.append([tree])
            continue
        reader = _Reader(program)
        reader.scopes.append(_Scope("module"))
        try:
            reader.visit(tree)
        except RecursionError:
            reader.problems = [Problem(1, "is nested too deeply to read")]
        results.append(sorted(reader.problems, key=lambda problem: problem.line))
    return results


def problems_in(text: str) -> list[Problem]:
    """The refused constructs of one self-contained text, in order (``[]`` when it may run).

    Args:
        text: str, Python source: the whole of what it needs (its imports and definitions included).

    Returns:
        list of :class:`Problem` (:func:`program_problems` of that one text).
    """
    return program_problems([text])[0]


def refusal(program, function_name: str, place=lambda cell: f"cell {cell + 1}") -> str | None:
    """Why the grader refuses to run a graded function's program, in words a student can act on; None if it runs.

    Args:
        program: the :class:`.slicing.Program` of the function (its statements and the modules they write).
        function_name: str, the graded function's name.
        place: cell index -> how the message names that cell (the grader: ``cell 3``; a student's check,
            which reads the cells as they were run: ``In [7]``).

    Returns:
        str or None: up to three reasons, each with its cell and line, then what graded code may use.
    """
    texts = [unit.writes_body if unit.writes_module else unit.text for unit in program.units]
    written = {unit.writes_module for unit in program.units if unit.writes_module}
    found = {}  # each reason once, where it first occurs, three at most
    for unit, problems in zip(program.units, program_problems(texts, written)):
        for problem in problems:
            if problem.reason not in found and len(found) < 3:
                if unit.writes_module:
                    found[problem.reason] = (
                        f"the module {unit.writes_module}.py that {place(unit.cell)} writes, line {problem.line}"
                    )
                else:
                    found[problem.reason] = f"{place(unit.cell)}, line {unit.line + problem.line - 1}"
    if not found:
        return None
    said = "; and ".join(f"{where}, which {reason}" for reason, where in found.items())
    return (
        f"`{function_name}` needs {said}: graded code is run as the notebook shows it, and may not build code or "
        "reach the interpreter's internals; it may use its own names and the built-ins and modules the course's "
        "grading rules list"
    )
