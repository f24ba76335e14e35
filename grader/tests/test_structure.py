"""The grader's own shape: its modules use one another and the course package through public names
only, and no two of its modules import each other in a circle (read from every import statement)."""

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "lib" / "transformer_course_grader"
MODULES = sorted(PACKAGE.rglob("*.py"))


def _imports(path: Path) -> list[tuple[str, list[str]]]:
    """(module, imported names) of every import statement of ``path``, relative ones resolved in the grader."""
    package = ["transformer_course_grader", *path.parent.relative_to(PACKAGE).parts]
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [(alias.name, []) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package[:len(package) - node.level + 1] if node.level else []
            found.append((".".join([*base, *([node.module] if node.module else [])]),
                          [alias.name for alias in node.names]))
    return found


def _private(name: str) -> bool:
    return any(part.startswith("_") and not part.startswith("__") for part in name.split("."))


def test_the_reader_sees_the_graders_imports():
    imported = dict(_imports(PACKAGE / "sandbox.py"))
    assert "transformer_course_grader.snapshot" in imported and "kernel_mounts" in imported[
        "transformer_course_grader.snapshot"]


def test_no_grader_module_imports_a_private_name_of_another_or_of_the_course_package():
    private = [f"{path.name}: {module} {name}" for path in MODULES for module, names in _imports(path)
               if module.split(".")[0] in ("transformer_course", "transformer_course_grader")
               for name in [module, *(f"{module}.{name}" for name in names)] if _private(name)]
    assert private == []


def test_no_two_grader_modules_import_each_other_in_a_circle():
    names = {".".join(["transformer_course_grader", *path.relative_to(PACKAGE).with_suffix("").parts])
             .removesuffix(".__init__"): path for path in MODULES}
    graph = {}
    for name, path in names.items():
        reached = set()
        for module, imported in _imports(path):
            reached |= {candidate for candidate in (module, *(f"{module}.{alias}" for alias in imported))
                        if candidate in names and not name.startswith(candidate + ".") and candidate != name}
        graph[name] = reached
    circles = []
    for start in graph:
        seen, stack = set(), list(graph[start])
        while stack:
            module = stack.pop()
            if module == start:
                circles.append(start)
                break
            if module not in seen:
                seen.add(module)
                stack.extend(graph.get(module, ()))
    assert circles == []
