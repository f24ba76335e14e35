"""Where the course is published: the one setting behind every Colab link and Colab install.

Students open notebooks in Colab from a badge, and the notebook's first cell installs this package
there. Both addresses come from one place, the project's ``pyproject.toml``:

* ``[project.urls] Repository`` — the GitHub repository (``https://github.com/OWNER/NAME``);
* ``[project] version`` — the release, published as the git tag ``v<version>``.

:func:`stamp` writes them into a text (a notebook, its paired script, the README):

* every Colab link opens the **student version**, ``release/NN_name.ipynb``, at that tag;
* every Colab install line installs ``transformer-course @ git+<repository>@v<version>``.

``transformer-course-grader release`` stamps the source notebooks and the README before it writes the
student versions, and ``release --check`` fails while any of them disagrees with the setting.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

__all__ = [
    "Publication",
    "publication",
    "publication_targets",
    "stamp",
    "run_time_line",
    "COLAB_LINK",
    "COLAB_INSTALL",
    "RUN_TIME",
]

# A Colab link to a notebook of this course, whatever repository, ref and folder it names now.
COLAB_LINK = re.compile(
    r"https://colab\.research\.google\.com/github/[^/\s)\"']+/[^/\s)\"']+/blob/[^/\s)\"']+/"
    r"(?:notebooks|release)/(?P<name>\d\d_[\w-]+\.ipynb)"
)
# The requirement the Colab setup cell installs (inside a Python string, possibly JSON-escaped).
COLAB_INSTALL = re.compile(r"transformer-course @ git\+[^\s\"'\\]+")
# The run-time line at the top of every notebook (up to the end of its line or JSON string).
RUN_TIME = re.compile(r"\*\*Run time:\*\*[^\n\"\\]*")
_GITHUB = re.compile(r"^https://github\.com/(?P<owner>[\w.-]+)/(?P<name>[\w.-]+?)(?:\.git)?/?$")


@dataclass(frozen=True)
class Publication:
    """A GitHub repository and the git ref (a tag) students' notebooks come from.

    Attributes:
        repository: str, ``https://github.com/OWNER/NAME``.
        ref: str, a tag or commit, e.g. ``"v0.1.0"``.
    """

    repository: str
    ref: str

    def __post_init__(self):
        if not _GITHUB.match(self.repository):
            raise ValueError(
                "`repository` must be a GitHub address like https://github.com/OWNER/NAME (Colab opens "
                f"notebooks from GitHub); received {self.repository!r}. Set [project.urls] Repository "
                "in pyproject.toml."
            )
        if not re.fullmatch(r"[\w.+-]+", self.ref):
            raise ValueError(f"`ref` must be a git tag or commit such as 'v0.1.0'; received {self.ref!r}.")

    def colab_link(self, notebook_name: str) -> str:
        """The Colab address of the student version ``release/<notebook_name>`` at :attr:`ref`."""
        owner_and_name = _GITHUB.match(self.repository)
        return (
            f"https://colab.research.google.com/github/{owner_and_name['owner']}/{owner_and_name['name']}"
            f"/blob/{self.ref}/release/{notebook_name}"
        )

    def kaggle_link(self, notebook_name: str) -> str:
        """The address that opens the student version ``release/<notebook_name>`` at :attr:`ref` in Kaggle."""
        return (
            f"https://kaggle.com/kernels/welcome?src={self.repository.rstrip('/')}"
            f"/blob/{self.ref}/release/{notebook_name}"
        )

    @property
    def site_address(self) -> str:
        """The course website's address on GitHub Pages: ``https://owner.github.io/NAME/``.

        A repository named ``OWNER.github.io`` is published at the root, ``https://owner.github.io/``.
        """
        owner_and_name = _GITHUB.match(self.repository)
        owner, name = owner_and_name["owner"].lower(), owner_and_name["name"]
        if name.lower() == f"{owner}.github.io":
            return f"https://{owner}.github.io/"
        return f"https://{owner}.github.io/{name}/"

    @property
    def requirement(self) -> str:
        """What a notebook's Colab setup cell gives ``pip install``."""
        return f"transformer-course @ git+{self.repository.rstrip('/')}@{self.ref}"


def publication(project_root: str | Path | None = None) -> Publication:
    """The publication setting, from ``<project_root>/pyproject.toml`` or else the installed package.

    Args:
        project_root: the folder holding ``pyproject.toml`` (a checkout of the course). With None,
            or where that folder has no ``pyproject.toml``, the installed package's metadata is
            read (the same setting, as it was when the package was built or installed).

    Returns:
        :class:`Publication` with ``ref = "v" + version``.

    Raises:
        ValueError: if the setting is missing or is not a GitHub address.
    """
    pyproject = Path(project_root) / "pyproject.toml" if project_root is not None else None
    if pyproject is not None and pyproject.is_file():
        import tomllib

        project = tomllib.loads(pyproject.read_text(encoding="utf-8")).get("project", {})
        repository, version = project.get("urls", {}).get("Repository"), project.get("version")
        where = str(pyproject)
    else:
        installed = metadata.metadata("transformer-course")
        urls = dict(entry.split(", ", 1) for entry in installed.get_all("Project-URL") or [] if ", " in entry)
        repository, version = urls.get("Repository"), installed["Version"]
        where = "the installed transformer-course package"
    if not repository or not version:
        raise ValueError(f"{where} has no [project.urls] Repository or no version; Colab links need both.")
    return Publication(repository=repository, ref=f"v{version}")


def publication_targets(notebooks_dir: str | Path) -> tuple[Path | None, list[Path]]:
    """The checkout that holds ``notebooks_dir`` and the files of it that carry Colab links.

    Args:
        notebooks_dir: str or Path, a folder of source notebooks (``notebooks/`` of a checkout).

    Returns:
        (root, files): ``root`` the checkout (the folder above ``notebooks_dir``, holding a
        ``pyproject.toml``), or None outside one, with ``files`` then empty; ``files`` the
        numbered notebooks (``NN_*.ipynb``), their paired scripts (``NN_*.py``) and the README,
        sorted, the files :func:`stamp` is applied to.

    Example:
        >>> root, files = publication_targets("notebooks")  # doctest: +SKIP
        >>> [path.name for path in files][-1]  # doctest: +SKIP
        'README.md'
    """
    notebooks_dir = Path(notebooks_dir)
    root = notebooks_dir.resolve().parent
    if not (root / "pyproject.toml").is_file():
        return None, []
    files = sorted(notebooks_dir.glob("[0-9][0-9]_*.ipynb")) + sorted(notebooks_dir.glob("[0-9][0-9]_*.py"))
    return root, files + [path for path in [root / "README.md"] if path.is_file()]


def _duration(seconds: float) -> str:
    if seconds < 90:
        return f"about {max(1, round(seconds / 5) * 5):.0f} s"
    return f"about {round(seconds / 60):.0f} min"


def run_time_line(notebook: str, results_dir: str | Path) -> str:
    """The run-time line a notebook shows at the top, from the recorded runs.

    Args:
        notebook: str, the notebook's file stem (``"07_transformer_translation"``).
        results_dir: the folder of full-profile records (``results/``); smoke-profile times are
            read from ``results/smoke/seconds.json`` (``transformer-course run --profile smoke
            --record-times`` writes it).

    Returns:
        str, one line of Markdown starting ``**Run time:**``: each profile's recorded seconds and
        the machine they were measured on, how to switch profile, what a GPU changes, and which
        cells are worth running in the smoke profile.
    """
    import json

    results_dir = Path(results_dir)
    parts = []
    full = results_dir / f"{notebook}.json"
    if full.is_file():
        record = json.loads(full.read_text(encoding="utf-8"))
        hardware = record.get("hardware", {})
        machine = hardware.get("accelerator") or f"{hardware.get('cpu_count', '?')}-core CPU"
        parts.append(f"full profile {_duration(record['seconds'])} on a {machine}")
    else:
        parts.append("full profile not yet recorded")
    smoke_file = results_dir / "smoke" / "seconds.json"
    smoke = json.loads(smoke_file.read_text(encoding="utf-8")).get(notebook) if smoke_file.is_file() else None
    if smoke:
        parts.append(f"smoke profile {_duration(smoke['seconds'])}")
    return (
        f"**Run time:** {', '.join(parts)} (recorded runs). The profile comes from the environment "
        "variable `COURSE_PROFILE` (`full` or `smoke`): set it before starting Jupyter, or in Colab run "
        "`%env COURSE_PROFILE=smoke` before the first code cell. On Colab, a GPU runtime (Runtime, Change "
        "runtime type) trains on the GPU; the recorded times are CPU times. The outputs shown come from the "
        "recorded full-profile run; running a cell replaces its output with yours. In the smoke profile, run "
        "the exercises and their checks, and the cells whose output does not depend on the profile (shapes, "
        "worked examples, equalities with Keras): the accuracies, "
        "losses, curves, timings and samples it prints come from tiny data and a few steps and mean nothing; "
        "read the recorded ones."
    )


def stamp(text: str, setting: Publication, run_time: str | None = None) -> str:
    """``text`` with every Colab link and Colab install line set from ``setting``.

    Args:
        text: str, a notebook (``.ipynb`` JSON or its ``py:percent`` script) or the README.
        setting: the :class:`Publication` to write.
        run_time: optional line from :func:`run_time_line`, written over the notebook's
            ``**Run time:**`` line.

    Returns:
        str, the stamped text (equal to ``text`` when it already agrees).
    """
    text = COLAB_LINK.sub(lambda match: setting.colab_link(match["name"]), text)
    if run_time is not None:
        text = RUN_TIME.sub(lambda match: run_time, text)
    return COLAB_INSTALL.sub(setting.requirement, text)
