"""The course website: the student notebooks with their recorded outputs, as a static site.

``transformer-course site`` (or :func:`build_site`) turns the release into a website that students
read like a book before they run anything: every figure, table and printed number of the recorded
full-profile runs in place, formulas typeset, and above each notebook a bar that opens it in Colab
or Kaggle or downloads it. It holds only what the student versions hold (``release/``), so no
solution appears on it.

The site is built by Sphinx with myst-nb (which reads notebooks with their stored outputs, without
running them) and sphinx-book-theme, the stack of Jupyter Book 1 and of many university courses:
installable from PyPI alone, with a build that needs neither Node.js nor the network. Formulas are
typeset in the reader's browser by MathJax, served from the site itself (the copy that the
``jupyter-server-mathjax`` package carries), so pages render offline and a test in a browser
without network sees them typeset.

Pages: the home page (the README's introduction and the notebook table, with a Colab link per
notebook), the results table (generated from ``results/*.json``, as in the README), the start page,
the students', instructors' and maintainers' guides (``docs/start.md``, ``docs/students.md``,
``docs/grading.md``, ``docs/maintaining.md``), the benchmarks (``benchmarks/README.md``), and one
page per notebook.
Links in those texts to files of the repository become links to GitHub at the release tag, links
between them links between the site's pages; :func:`broken_repository_links` checks that each
names a file (and heading) that exists.

The address of the published site comes from the publication setting the Colab badges use
(:attr:`transformer_course.tooling.publishing.Publication.site_address`).
"""

from __future__ import annotations

import html.parser
import posixpath
import re
import shutil
import subprocess
import sys
from pathlib import Path
from urllib.parse import unquote, urlsplit

from .publishing import Publication, publication

__all__ = ["build_site", "broken_internal_links", "broken_repository_links", "SITE_PAGES", "GUIDES"]

# The pages besides the notebooks, as Sphinx document names.
SITE_PAGES = ("index", "start", "results", "students", "instructors", "maintainers", "benchmarks")
# The guides kept as files of the repository: page name -> (file, title in the site's navigation).
GUIDES = {
    "start": ("docs/start.md", "Start here"),
    "students": ("docs/students.md", "For students: exercises and instant feedback"),
    "instructors": ("docs/grading.md", "For instructors: release and grade"),
    "maintainers": ("docs/maintaining.md", "For maintainers"),
    "benchmarks": ("benchmarks/README.md", "Benchmarks"),
}
# The texts the site is made of, whose links :func:`broken_repository_links` checks.
_LINKED_TEXTS = ("README.md", *(file for file, _ in GUIDES.values()))
_NOTEBOOK_ROW = re.compile(
    r"^\| (?P<number>\d\d) \| \[(?P<title>[^\]]+)\]\(release/(?P<file>\d\d_[\w-]+\.ipynb)\) \| (?P<covers>.*?) \|"
)
_MARKDOWN_LINK = re.compile(r"\]\((?P<target>[^)\s]+)\)")
_SPHINX_CONFIGURATION = """\
# Written by `transformer-course site`; edit lib/transformer_course/tooling/website.py instead.
project = "transformer-course"
author = "the transformer-course authors"
copyright = "the transformer-course authors, Apache License 2.0"
extensions = ["myst_nb"]
myst_enable_extensions = ["dollarmath", "amsmath"]
myst_heading_anchors = 3  # headings get GitHub's anchors, so the guides' links to a section work on the site too
nb_execution_mode = "off"  # the recorded outputs are the content; nothing runs here
nb_merge_streams = True
exclude_patterns = ["downloads", "conf.py"]
html_theme = "sphinx_book_theme"
html_title = "transformer-course"
html_baseurl = {site_address!r}
html_static_path = ["_static"]
html_copy_source = False
html_show_sourcelink = False
html_theme_options = {{
    "repository_url": {repository!r},
    "repository_branch": {ref!r},
    "use_repository_button": True,
    "use_download_button": False,
    "show_toc_level": 2,
    # The results page is one wide table and no sections: no contents column beside it.
    "secondary_sidebar_items": {{"**": ["page-toc"], "results": []}},
}}
# MathJax from the site itself (relative to _static), so formulas render without the network.
mathjax_path = "mathjax/MathJax.js?config=TeX-AMS-MML_HTMLorMML-full"
# That copy carries the STIX-Web fonts only (as Jupyter configures it). The page's body is marked
# "ignore" for MathJax; Sphinx's math spans (class "math") are typeset.
mathjax2_config = {{
    "tex2jax": {{"processClass": "math|output_area", "ignoreClass": "document|tex2jax_ignore|mathjax_ignore"}},
    "HTML-CSS": {{
        "availableFonts": [], "webFont": "STIX-Web", "imageFont": None,
        # MathJax probes fonts against a blank face at url('about:blank'), which browsers refuse
        # (a console error on every page); a local() source that is never installed does the same.
        "styles": {{"@font-face": {{"font-family": "MathJax_Blank", "src": "local('MathJax_Blank')"}}}},
    }},
    "SVG": {{"font": "STIX-Web"}},
}}
html_favicon = "_static/favicon.svg"
html_css_files = ["course.css"]
# A first visit stores no colour mode; name one so the theme has nothing to reset.
html_context = {{"default_mode": "auto"}}
# myst-nb has no renderer for the widget views some progress bars store; their text is kept.
suppress_warnings = ["mystnb.unknown_mime_type"]
"""

# The site's icon: the letters q·k on the course's blue.
_FAVICON = (
    '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 32 32"><rect width="32" height="32" rx="6" '
    'fill="#1f4e8c"/><text x="16" y="22" font-family="sans-serif" font-size="15" text-anchor="middle" '
    'fill="#fff">q·k</text></svg>\n'
)

# On a phone, a long inline name (a call with its arguments) breaks instead of widening the page.
_STYLE = """\
/* Code and outputs wrap at the page's width rather than being cut; a table drawn in characters (a
   model summary, whose HTML keeps its lines whole) scrolls sideways instead. */
.bd-article pre { white-space: pre-wrap; overflow-wrap: anywhere; }
.bd-article .output pre { overflow-x: auto; }
/* The results table has seven columns: the page it is on gets the whole width, the table small type. */
.bd-main .bd-content .bd-article-container:has(.results-table) { max-width: 100%; }
.results-table table { font-size: 0.85em; }
@media (max-width: 600px) {
    code.literal span.pre { white-space: pre-wrap; overflow-wrap: anywhere; }
}
"""


def _readme_section(readme: str, heading: str) -> str:
    """The body of the README's ``## heading`` section, up to the next ``## `` heading."""
    match = re.search(rf"^## {re.escape(heading)}\n(?P<body>.*?)(?=^## |\Z)", readme, flags=re.M | re.S)
    if match is None:
        raise ValueError(f"the README has no section '## {heading}', which the site's pages are made of.")
    return match["body"].strip() + "\n"


# The README's sections that are pages of the site: heading anchor -> page.
_README_PAGES = {"results": "results"}


def _repository_path(target: str, text_file: str) -> str:
    """A relative link's target in ``text_file`` as a path from the repository's root (anchor kept)."""
    path, hash_mark, anchor = target.partition("#")
    if not path:
        return text_file + hash_mark + anchor
    return posixpath.normpath(posixpath.join(posixpath.dirname(text_file), path)) + hash_mark + anchor


def _site_links(text: str, setting: Publication, notebook_files: set[str], text_file: str = "README.md") -> str:
    """Rewrite the relative links of ``text_file``: release notebooks and the guides become site pages,
    other files of the repository (and the README's own headings) GitHub pages at the release tag."""
    pages = {file: page for page, (file, _) in GUIDES.items()}
    site_pages = {f"{page}.md" for page in SITE_PAGES}

    def rewrite(match):
        target = match["target"]
        if re.match(r"[a-z]+:", target) or target.split("#")[0] in site_pages:
            return match[0]  # another host, or a page of the site already (the generated pages' own links)
        resolved = _repository_path(target, text_file)
        path, _, anchor = resolved.partition("#")
        if path == "README.md" and anchor in _README_PAGES:
            return f"]({_README_PAGES[anchor]}.md)"
        if path in pages:
            return f"]({pages[path]}.md{'#' + anchor if anchor else ''})"
        if path.removeprefix("release/") in notebook_files:
            return f"]({path.removeprefix('release/')})"
        return f"]({setting.repository}/blob/{setting.ref}/{resolved})"

    return _MARKDOWN_LINK.sub(rewrite, text)


def _heading_anchors(markdown: str) -> set[str]:
    """The anchors GitHub gives a Markdown text's headings (lower case, punctuation dropped, spaces as -)."""
    anchors = set()
    for heading in re.findall(r"^#{1,6} +(.+?) *#*$", re.sub(r"```.*?```", "", markdown, flags=re.S), flags=re.M):
        anchors.add(re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-"))
    return anchors


def broken_repository_links(project_root: str | Path = ".") -> list[str]:
    """Every relative link of the README and the guides that names no file, or no heading, of the repository.

    Args:
        project_root: a checkout of the course.

    Returns:
        ``"docs/grading.md -> ../missing.md"`` for each Markdown link whose file does not exist, or
        whose ``#anchor`` no heading of the named Markdown file gives; an empty list when every
        link resolves. Links to other hosts are not followed; a missing text is itself reported.

    Example:
        >>> broken_repository_links(".")  # doctest: +SKIP
        []
    """
    root = Path(project_root)
    broken = []
    for text_file in _LINKED_TEXTS:
        if not (root / text_file).is_file():
            broken.append(f"{text_file} (missing)")
            continue
        text = re.sub(r"```.*?```", "", (root / text_file).read_text(encoding="utf-8"), flags=re.S)
        for target in _MARKDOWN_LINK.findall(text):
            if re.match(r"[a-z]+:", target):
                continue
            path, _, anchor = _repository_path(target, text_file).partition("#")
            if path.startswith("../") or not (root / path).exists():
                broken.append(f"{text_file} -> {target}")
            elif (
                anchor
                and path.endswith(".md")
                and anchor not in _heading_anchors((root / path).read_text(encoding="utf-8"))
            ):
                broken.append(f"{text_file} -> {target}")
    return broken


def _run_it_cell(notebook_file: str, setting: Publication) -> dict:
    """The markdown cell above each notebook page: open in Colab or Kaggle, or download."""
    import nbformat

    text = (
        "```{admonition} Run it\n:class: tip run-it\n"
        f"[Open in Colab]({setting.colab_link(notebook_file)}) · "
        f"[Open in Kaggle]({setting.kaggle_link(notebook_file)}) · "
        f"{{download}}`Download the notebook <downloads/{notebook_file}>`\n```"
    )
    return nbformat.v4.new_markdown_cell(text, metadata={"tags": ["run-it"]})


def _home_page(readme: str, setting: Publication, rows: list[re.Match]) -> str:
    introduction = readme.split("\n## ", 1)[0].split("\n", 1)[1].strip()
    guides = {
        "start": GUIDES["start"][1],
        "results": "Results of the recorded runs",
        **{page: title for page, (_, title) in GUIDES.items() if page != "start"},
    }
    table = ["| # | notebook | what it covers | run it |", "|---|---|---|---|"]
    for row in rows:
        table.append(
            f"| {row['number']} | [{row['title']}]({row['file']}) | {row['covers']} | "
            f"[Colab]({setting.colab_link(row['file'])}) |"
        )
    toctree = "\n".join(row["file"][: -len(".ipynb")] for row in rows)
    return (
        f"# transformer-course\n\n{introduction}\n\nNew here? [Start here](start.md): the order, each "
        "notebook's time, what to read and what to run, and Colab in three steps.\n\n## The notebooks\n\n"
        + "\n".join(table)
        + "\n\n"
        "Each notebook page shows the student version with the outputs of its recorded full-profile "
        "run. The exercises are left for you: open the notebook in Colab or Kaggle, or download it.\n\n"
        "## Guides\n\n" + "".join(f"- [{title}]({page}.md)\n" for page, title in guides.items()) + "\n"
        f"The source, with the package the notebooks import: <{setting.repository}>.\n\n"
        f"```{{toctree}}\n:hidden:\n:caption: Notebooks\n\n{toctree}\n```\n\n"
        "```{toctree}\n:hidden:\n:caption: Guides\n\n" + "\n".join(guides) + "\n```\n"
    )


def build_site(
    output_dir: str | Path = "build/site",
    project_root: str | Path = ".",
    *,
    source_dir: str | Path | None = None,
    quiet: bool = True,
) -> Path:
    """Build the course website from the release notebooks, the records and the README.

    Args:
        output_dir: the folder the static site is written to (replaced whole); ``index.html`` is
            its home page.
        project_root: a checkout of the course: ``README.md``, the guides (:data:`GUIDES`),
            ``pyproject.toml``, ``release/`` and ``results/``.
        source_dir: where the site's Sphinx sources are assembled (replaced whole); default:
            ``<output_dir>-source``.
        quiet: pass ``-q`` to Sphinx (warnings and errors are printed either way).

    Returns:
        The output folder, as a :class:`~pathlib.Path`.

    Raises:
        FileNotFoundError: if ``project_root`` lacks the README, a guide of :data:`GUIDES`,
            ``release/`` notebooks or the MathJax copy (install the ``[site]`` extra).
        ValueError: if the README lacks a section the pages are made of, or its notebook table
            names no release notebook.
        RuntimeError: if Sphinx reports a warning or an error (a broken cross-reference, a page
            missing from the table of contents, a notebook it cannot read); the message holds its
            report, and nothing is left half-written in ``output_dir``.

    Example:
        >>> build_site("build/site")  # doctest: +SKIP
        PosixPath('build/site')
    """
    import nbformat

    root = Path(project_root)
    output, source = Path(output_dir), Path(source_dir or f"{Path(output_dir)}-source")
    readme_path, release = root / "README.md", root / "release"
    if not readme_path.is_file() or not any(release.glob("[0-9][0-9]_*.ipynb")):
        raise FileNotFoundError(f"`project_root` must hold README.md and release/NN_*.ipynb; received {root}.")
    setting, readme = publication(root), readme_path.read_text(encoding="utf-8")
    rows = [
        match
        for line in _readme_section(readme, "The notebooks").splitlines()
        if (match := _NOTEBOOK_ROW.match(line)) and (release / match["file"]).is_file()
    ]
    if not rows:
        raise ValueError("the README's notebook table names no notebook of release/.")
    files = {row["file"] for row in rows}
    try:
        import jupyter_server_mathjax
    except ImportError as error:
        raise FileNotFoundError(
            "the site serves MathJax from the `jupyter-server-mathjax` package; install "
            "the [site] extra: pip install 'transformer-course[site]'."
        ) from error

    if source.exists():
        shutil.rmtree(source)
    (source / "downloads").mkdir(parents=True)
    shutil.copytree(Path(jupyter_server_mathjax.__file__).parent / "static", source / "_static" / "mathjax")
    (source / "_static" / "favicon.svg").write_text(_FAVICON, encoding="utf-8")
    (source / "_static" / "course.css").write_text(_STYLE, encoding="utf-8")
    for file in sorted(files):
        shutil.copyfile(release / file, source / "downloads" / file)
        notebook = nbformat.read(release / file, as_version=4)
        first = notebook.cells[0] if notebook.cells else None
        if first is not None and first.cell_type == "markdown" and first.source.startswith("# "):
            title, _, rest = first.source.partition("\n")  # the bar goes right under the title
            first.source = title
            notebook.cells[1:1] = [_run_it_cell(file, setting), nbformat.v4.new_markdown_cell(rest.strip())]
        else:
            notebook.cells.insert(0, _run_it_cell(file, setting))
        nbformat.write(notebook, source / file)
    from .results import load_records, results_table

    records = load_records(root / "results")  # read once: the results page and the maintainers' table
    pages = {
        "index": (_home_page(readme, setting, rows), "README.md"),
        "results": (_results_page(records), "README.md"),
    }
    for page, (file, _) in GUIDES.items():
        if not (root / file).is_file():
            raise FileNotFoundError(f"`project_root` must hold {file}, the site's {page} page; received {root}.")
        pages[page] = ((root / file).read_text(encoding="utf-8"), file)
    if _PLAN not in pages["start"][0]:
        raise ValueError(f"{GUIDES['start'][0]} must hold the line {_PLAN}, where the notebooks' table goes.")
    pages["start"] = (
        pages["start"][0].replace(_PLAN, _notebook_plan(rows, release, root / "results")),
        GUIDES["start"][0],
    )
    maintainers, file = pages["maintainers"]
    pages["maintainers"] = (
        maintainers.replace(_RECORDED_RUNS, f"```{{container}} results-table\n{results_table(records)}\n```"),
        file,
    )
    for name, (text, text_file) in pages.items():
        (source / f"{name}.md").write_text(_site_links(text, setting, files, text_file), encoding="utf-8")
    (source / "conf.py").write_text(
        _SPHINX_CONFIGURATION.format(site_address=setting.site_address, repository=setting.repository, ref=setting.ref),
        encoding="utf-8",
    )

    staging = output.with_name(output.name + ".partial")
    if staging.exists():
        shutil.rmtree(staging)
    command = [
        sys.executable,
        "-m",
        "sphinx",
        "-b",
        "html",
        "-W",
        "--keep-going",
        "-E",
        "-d",
        str(source / ".doctrees"),
        *(["-q"] if quiet else []),
        str(source),
        str(staging),
    ]
    finished = subprocess.run(command, capture_output=True, text=True)
    if finished.returncode != 0:
        shutil.rmtree(staging, ignore_errors=True)
        raise RuntimeError(
            f"Sphinx could not build the site (exit {finished.returncode}):\n"
            f"{finished.stderr.strip() or finished.stdout.strip()}"
        )
    if output.exists():
        shutil.rmtree(output)
    staging.rename(output)
    return output


_PLAN = "<!-- notebook-plan -->"


def _notebook_plan(rows: list[re.Match], release: Path, results_dir: Path) -> str:
    """The start page's table: each notebook's recorded times in both profiles and what it grades."""
    import json

    from .publishing import _duration

    smoke_file = results_dir / "smoke" / "seconds.json"
    smoke = json.loads(smoke_file.read_text(encoding="utf-8")) if smoke_file.is_file() else {}
    lines = [
        "| # | notebook | full profile | smoke profile | exercises (points) | question in words |",
        "|---|---|---|---|---|---|",
    ]
    for row in rows:
        stem = row["file"][: -len(".ipynb")]
        record = results_dir / f"{stem}.json"
        full = _duration(json.loads(record.read_text(encoding="utf-8"))["seconds"]) if record.is_file() else "—"
        quick = _duration(smoke[stem]["seconds"]) if stem in smoke else "—"
        graded = [
            cell["metadata"]["nbgrader"]
            for cell in json.loads((release / row["file"]).read_text(encoding="utf-8"))["cells"]
            if cell.get("metadata", {}).get("nbgrader", {}).get("grade")
        ]
        checks = [cell for cell in graded if str(cell.get("grade_id", "")).startswith("check_")]
        written = sum(cell.get("points", 0) for cell in graded if str(cell.get("grade_id", "")).startswith("written_"))
        exercises = f"{len(checks)} ({sum(cell.get('points', 0) for cell in checks)})" if checks else "—"
        lines.append(
            f"| {row['number']} | [{row['title']}](../release/{row['file']}) | {full} | {quick} | "
            f"{exercises} | {f'{written} points' if written else '—'} |"
        )
    return "\n".join(lines)


_RECORDED_RUNS = "<!-- recorded-runs -->"


def _results_page(records: list[dict]) -> str:
    """The results page, written for students: what each recorded run measured and what it found."""
    from .results import results_table

    table = results_table(records, for_students=True)
    return (
        "# Results of the recorded runs\n\n"
        "Each number below comes from one run of its notebook in the full profile, on a 2-core CPU, and is "
        "printed in that notebook beside the code that computed it; the notebook says how to read it. Where a "
        "result reads *x* vs *y*, *y* is what the notebook compares it with (a baseline, or the other arm of "
        "a comparison). The numbers of a smoke-profile run mean nothing.\n\n"
        f"```{{container}} results-table\n{table}\n```\n\n"
        "The commit, hardware and conditions of each run are on the "
        "[maintainers' page](maintainers.md#conditions-of-the-recorded-runs).\n"
    )


class _Links(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.links: list[str] = []
        self.anchors: set[str] = set()

    def handle_starttag(self, tag, attributes):
        attributes = dict(attributes)
        if attributes.get("id"):
            self.anchors.add(attributes["id"])
        for name in ("href", "src"):
            if attributes.get(name) and not (tag == "link" and attributes.get("rel") in ("canonical",)):
                self.links.append(attributes[name])


def broken_internal_links(site_dir: str | Path) -> list[str]:
    """Every link between the site's own pages and files that leads nowhere.

    Args:
        site_dir: a built site (the folder :func:`build_site` returns).

    Returns:
        ``"page.html -> target"`` for each ``href`` or ``src`` that names a file of the site that
        does not exist, or an ``#anchor`` that the page it names does not hold; an empty list when
        every internal link resolves. Links to other hosts (``https://``, ``mailto:``) are not
        followed.

    Raises:
        FileNotFoundError: if ``site_dir`` has no ``index.html``.
    """
    site = Path(site_dir).resolve()
    if not (site / "index.html").is_file():
        raise FileNotFoundError(f"`site_dir` must be a built site with an index.html; received {site_dir}.")
    parsed: dict[Path, _Links] = {}

    def parse(page: Path) -> _Links:
        if page not in parsed:
            parsed[page] = _Links()
            parsed[page].feed(page.read_text(encoding="utf-8", errors="replace"))
        return parsed[page]

    broken = []
    pages = [page for page in sorted(site.rglob("*.html")) if page.relative_to(site).parts[0] != "_static"]
    for page in pages:
        for link in parse(page).links:
            parts = urlsplit(link)
            if parts.scheme or parts.netloc or link.startswith(("javascript:", "data:")):
                continue
            target = (page.parent / unquote(parts.path)).resolve() if parts.path else page
            if target.is_dir():
                target = target / "index.html"
            if not target.is_relative_to(site) or not target.exists():
                broken.append(f"{page.relative_to(site)} -> {link}")
            elif parts.fragment and target.suffix == ".html" and unquote(parts.fragment) not in parse(target).anchors:
                broken.append(f"{page.relative_to(site)} -> {link}")
    return broken
