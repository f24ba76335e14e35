"""The grader's own shape: its modules use one another and the course package through public names
only, and no two of its modules import each other in a circle (read from every import statement)."""

from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "lib" / "transformer_course_grader"
MODULES = sorted(PACKAGE.rglob("*.py"))


def _private(name: str) -> bool:
    return any(part.startswith("_") and not part.startswith("__") for part in name.split("."))


def test_the_reader_sees_the_graders_imports(import_graph):
    imported = dict(import_graph.imports(PACKAGE / "sandbox.py", PACKAGE))
    assert (
        "transformer_course_grader.snapshot" in imported
        and "kernel_mounts" in imported["transformer_course_grader.snapshot"]
    )


def test_no_grader_module_imports_a_private_name_of_another_or_of_the_course_package(import_graph):
    private = [
        f"{path.name}: {module} {name}"
        for path in MODULES
        for module, names in import_graph.imports(path, PACKAGE)
        if module.split(".")[0] in ("transformer_course", "transformer_course_grader")
        for name in [module, *(f"{module}.{name}" for name in names)]
        if _private(name)
    ]
    assert private == []


def test_no_two_grader_modules_import_each_other_in_a_circle(import_graph):
    graph = import_graph.module_graph(PACKAGE)
    assert "transformer_course_grader.snapshot" in graph["transformer_course_grader.sandbox"]
    assert import_graph.circles(graph) == []


def test_the_distribution_carries_the_courses_license_and_pins_its_version():
    """The grader's folder is built on its own, so it holds a copy of the license; and it is released with
    the course package of the same version (its references are that release's exercises)."""
    import tomllib

    root = PACKAGE.parents[2]
    assert (root / "grader" / "LICENSE").read_bytes() == (root / "LICENSE").read_bytes()
    course = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    grader = tomllib.loads((root / "grader" / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert grader["version"] == course["version"]
    assert f"{course['name']}=={course['version']}" in grader["dependencies"]
    assert grader["license"] == course["license"]
