"""The course website: built from the release with one call, every page and internal link in place,
no solution anywhere on it, and read in a real browser (headless Chromium): formulas typeset,
figures loaded, the run-it links right, no console error. Screenshots of the home page and one
notebook at phone and desktop widths go to build/site-screenshots/.

The site under test is built here, unless COURSE_SITE_DIR names one already built (the publishing
workflow tests the very site it publishes). The browser is Chromium from the PATH or COURSE_CHROMIUM;
without one the browser test is skipped, or fails where COURSE_REQUIRE_BROWSER is set."""

import functools
import html
import http.server
import json
import os
import re
import shutil
import tempfile
import threading
from pathlib import Path

import pytest

pytest.importorskip("sphinx")
pytest.importorskip("myst_nb")
pytest.importorskip("jupyter_server_mathjax")

from transformer_course.tooling.cli import main
from transformer_course.tooling.publishing import publication
from transformer_course.tooling.website import (
    GUIDES,
    SITE_PAGES,
    broken_internal_links,
    broken_repository_links,
    build_site,
)

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted(path.stem for path in (ROOT / "release").glob("[0-9][0-9]_*.ipynb"))
SCREENSHOTS = ROOT / "build" / "site-screenshots"
BROWSER = os.environ.get("COURSE_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """The site, built by the command a maintainer runs (`transformer-course site`)."""
    if os.environ.get("COURSE_SITE_DIR"):
        return Path(os.environ["COURSE_SITE_DIR"])
    output = tmp_path_factory.mktemp("website") / "site"
    assert main(["site", "--output", str(output), "--project-root", str(ROOT)]) == 0
    return output


def _visible_text(page: Path) -> str:
    """A page's text as a reader sees it: tags dropped (syntax highlighting splits code into spans)."""
    return html.unescape(re.sub(r"<[^>]+>", "", page.read_text(encoding="utf-8")))


def test_every_page_is_built_and_every_internal_link_resolves(site):
    missing = [name for name in (*SITE_PAGES, *NOTEBOOKS) if not (site / f"{name}.html").is_file()]
    assert not missing, f"pages missing from the site: {missing}"
    assert broken_internal_links(site) == []
    downloads = {path.name for path in (site / "_downloads").rglob("*.ipynb")}
    assert downloads == {f"{name}.ipynb" for name in NOTEBOOKS}


def test_the_link_check_reports_a_missing_page_and_a_missing_anchor(tmp_path):
    (tmp_path / "index.html").write_text(
        '<a href="page.html#here">ok</a><a href="gone.html">gone</a><a href="page.html#nowhere">no anchor</a>'
        '<img src="_images/figure.png"><a href="https://example.org/x">elsewhere</a>',
        encoding="utf-8",
    )
    (tmp_path / "page.html").write_text('<section id="here"></section>', encoding="utf-8")
    assert broken_internal_links(tmp_path) == [
        "index.html -> gone.html",
        "index.html -> page.html#nowhere",
        "index.html -> _images/figure.png",
    ]


def test_every_link_of_the_readme_and_the_guides_names_a_file_and_heading_of_the_repository(tmp_path):
    assert broken_repository_links(ROOT) == []
    (tmp_path / "docs").mkdir()
    (tmp_path / "benchmarks").mkdir()
    (tmp_path / "README.md").write_text(
        "# Course\n\n## Tested with\n\n[here](#tested-with) [gone](#nowhere) "
        "[guide](docs/grading.md#secret-cases) [elsewhere](https://example.org/x)\n"
    )
    (tmp_path / "docs" / "grading.md").write_text(
        "# Grading\n\n## Secret cases\n\n[back](../README.md) [missing](../lib/gone.py) [outside](../../x.md)\n"
    )
    assert broken_repository_links(tmp_path) == [
        "README.md -> #nowhere",
        "docs/start.md (missing)",
        "docs/students.md (missing)",
        "docs/grading.md -> ../lib/gone.py",
        "docs/grading.md -> ../../x.md",
        "docs/maintaining.md (missing)",
        "benchmarks/README.md (missing)",
    ]


def test_the_start_page_gives_each_notebooks_recorded_times_and_the_results_page_speaks_to_students(site):
    from transformer_course.tooling.publishing import _duration

    start = _visible_text(site / "start.html")
    record = json.loads((ROOT / "results" / "07_transformer_translation.json").read_text(encoding="utf-8"))
    smoke = json.loads((ROOT / "results" / "smoke" / "seconds.json").read_text(encoding="utf-8"))
    # the table's row of notebook 07, cell after cell: its title, then its two recorded times
    assert (
        f"English→Spanish\n{_duration(record['seconds'])}\n"
        f"{_duration(smoke['07_transformer_translation']['seconds'])}\n"
    ) in start
    assert "Colab in three steps" in start
    assert 'href="students.html"' in (site / "start.html").read_text(encoding="utf-8")  # docs/students.md
    assert "the whole GPT forward pass" in _visible_text(site / "students.html")
    results = _visible_text(site / "results.html")
    maintainers = _visible_text(site / "maintainers.html")
    assert "what was measured" in results
    assert record["commit"][:10] in maintainers and record["commit"][:10] not in results


def test_the_guides_are_pages_and_their_links_lead_to_pages_or_to_the_repository(site):
    setting = publication(ROOT)
    instructors = (site / "instructors.html").read_text(encoding="utf-8")
    assert "Secret cases" in _visible_text(site / "instructors.html")
    assert f"{setting.repository}/blob/{setting.ref}/.github/workflows/grade.yml" in instructors
    maintainers = (site / "maintainers.html").read_text(encoding="utf-8")
    assert 'href="benchmarks.html"' in maintainers
    assert f"{setting.repository}/blob/{setting.ref}/README.md#tested-with" in maintainers
    home = _visible_text(site / "index.html")
    assert all(title in home for _, title in GUIDES.values())


def test_the_site_carries_the_lesson_and_no_solution(site):
    import nbformat

    text = "\n".join(_visible_text(page) for page in site.rglob("*.html"))
    text += "\n".join(path.read_text(encoding="utf-8") for path in site.rglob("*.ipynb"))
    text += (site / "searchindex.js").read_text(encoding="utf-8")
    # The scan reads code as written: a line of lesson code from every notebook is found in it.
    for name in NOTEBOOKS:
        released = nbformat.read(ROOT / "release" / f"{name}.ipynb", as_version=4)
        lesson = next(
            line.strip()
            for cell in released.cells
            if cell.cell_type == "code"
            for line in cell.source.splitlines()
            if len(line.strip()) >= 24
        )
        assert lesson in text, f"{name}: lesson code not found on the site: {lesson!r}"
    from transformer_course_grader.markup import solution_lines  # the check of what reaches students is the grader's

    for source in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")):
        lines = solution_lines(nbformat.read(source, as_version=4))
        leaked = [line for line in lines if line in text or json.dumps(line)[1:-1] in text]
        assert not leaked, f"{source.name}: solution lines on the site: {leaked[:3]}"
    assert "✓ Exercise" not in text


def test_a_failed_build_leaves_the_previous_site_whole(tmp_path):
    project = tmp_path / "project"  # a course of one notebook
    (project / "release").mkdir(parents=True)
    shutil.copyfile(ROOT / "pyproject.toml", project / "pyproject.toml")
    shutil.copytree(ROOT / "results", project / "results")
    shutil.copyfile(ROOT / "release" / "04_self_attention.ipynb", project / "release" / "04_self_attention.ipynb")
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    (project / "README.md").write_text(readme, encoding="utf-8")
    for guide, _ in GUIDES.values():
        (project / guide).parent.mkdir(exist_ok=True)
        shutil.copyfile(ROOT / guide, project / guide)
    output = tmp_path / "site"
    build_site(output, project)
    before = sorted(path.relative_to(output) for path in output.rglob("*"))
    guide = (project / "docs" / "students.md").read_text(encoding="utf-8")
    (project / "docs" / "students.md").write_text(guide + "\n```{no-such-directive}\n```\n", encoding="utf-8")
    with pytest.raises(RuntimeError, match="no-such-directive"):
        build_site(output, project)
    assert sorted(path.relative_to(output) for path in output.rglob("*")) == before
    (project / "docs" / "students.md").write_text(guide, encoding="utf-8")
    start = (project / "docs" / "start.md").read_text(encoding="utf-8")
    (project / "docs" / "start.md").write_text(start.replace("<!-- notebook-plan -->", ""), encoding="utf-8")
    with pytest.raises(ValueError, match="notebook-plan"):
        build_site(output, project)


@pytest.fixture(scope="module")
def browser():
    if BROWSER is None:
        reason = "no Chromium on this machine: install Debian's `chromium` package (.ci/run does, as root)"
        if os.environ.get("COURSE_REQUIRE_BROWSER"):
            pytest.fail(reason)
        pytest.skip(reason)
    playwright = pytest.importorskip("playwright.sync_api")
    # Chromium puts a socket in TMPDIR, whose path must stay short (the test run's own TMPDIR is deep).
    short = tempfile.mkdtemp(prefix="chromium-", dir="/tmp" if os.path.isdir("/tmp") else None)
    with playwright.sync_playwright() as driver:
        launched = driver.chromium.launch(
            executable_path=BROWSER,
            env={**os.environ, "TMPDIR": short},
            args=[
                "--no-sandbox",
                "--disable-gpu",
                "--disable-quic",
                "--no-first-run",
                "--disable-sync",
                "--disable-background-networking",
                "--disable-component-update",
            ],
        )
        yield launched
        launched.close()
    shutil.rmtree(short, ignore_errors=True)


@pytest.fixture(scope="module")
def address(site):
    """The site served on localhost, as GitHub Pages serves it: static files under one address."""

    class Handler(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *arguments):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Handler, directory=site))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/"
    server.shutdown()


# True once every formula on the page (Sphinx writes each as an element of classes "math notranslate") holds
# MathJax's output and MathJax has nothing left to do; at once on a page without formulas, which loads no MathJax.
TYPESET = (
    "[...document.querySelectorAll('.math.notranslate')].every(formula => formula.querySelector('.MathJax'))"
    " && (!window.MathJax || !MathJax.Hub || MathJax.Hub.queue.pending === 0)"
)


def _open(context, address, page_name, width, height, problems):
    """Open a page of the site in a new tab of the browser `context`; what the console reports as an error or a
    script throws goes into `problems`.

    The test machine has no network: requests to other hosts (the Colab badge's image) are answered
    with an empty badge, so that every error left is the site's own."""
    page = context.new_page()
    page.set_viewport_size({"width": width, "height": height})
    badge = '<svg xmlns="http://www.w3.org/2000/svg" width="117" height="20"/>'
    page.route(
        lambda url: not url.startswith(address),
        lambda route: route.fulfill(status=200, content_type="image/svg+xml", body=badge),
    )
    page.on(
        "console", lambda message: problems.append(f"{page_name}: {message.text}") if message.type == "error" else None
    )
    page.on("pageerror", lambda error: problems.append(f"{page_name}: {error}"))
    page.goto(address + page_name, wait_until="load")
    # MathJax typesets after the load event: the page is read once every formula holds its typeset output (waiting
    # for the network to stay idle half a second instead made the browser test 57.8 s against 53.5 s).
    page.wait_for_function(TYPESET, timeout=60_000)
    return page


def test_the_site_in_a_browser(browser, address):
    """Home page and notebook 04 at desktop width; every page at phone width: nothing wider than the
    screen, no console error anywhere."""
    setting, problems = publication(ROOT), []
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    # One context for every page, as one reader's browser: the theme's scripts and MathJax's files are fetched once.
    context = browser.new_context()

    home = _open(context, address, "index.html", 1280, 900, problems)
    links = home.eval_on_selector_all("article a", "anchors => anchors.map(a => a.getAttribute('href'))")
    assert {f"{name}.html" for name in (*NOTEBOOKS, *SITE_PAGES[1:])} <= set(links)
    assert {setting.colab_link(f"{name}.ipynb") for name in NOTEBOOKS} <= set(links)
    home.screenshot(path=SCREENSHOTS / "home-desktop.png")

    lesson = _open(context, address, "04_self_attention.html", 1280, 900, problems)  # read once typeset (TYPESET)
    formulas = lesson.eval_on_selector_all(".math.notranslate", "nodes => nodes.length")
    typeset = lesson.eval_on_selector_all(".math.notranslate .MathJax", "nodes => nodes.length")
    assert formulas > 0 and typeset == formulas, f"{typeset} of {formulas} formulas typeset"
    assert lesson.eval_on_selector_all(".MathJax_Error, .merror", "nodes => nodes.length") == 0
    widths = lesson.eval_on_selector_all(".cell_output img", "images => images.map(image => image.naturalWidth)")
    assert widths and all(width > 0 for width in widths), f"figures that did not load: {widths}"
    bar = lesson.eval_on_selector_all(".run-it a", "anchors => anchors.map(a => a.href)")
    assert bar[:2] == [setting.colab_link("04_self_attention.ipynb"), setting.kaggle_link("04_self_attention.ipynb")]
    download = lesson.request.get(bar[2])
    assert download.ok and json.loads(download.body())["cells"], f"the download link {bar[2]} is no notebook"
    lesson.screenshot(path=SCREENSHOTS / "notebook-desktop.png")
    lesson.close()
    shots = {"index.html": "home-phone.png", "04_self_attention.html": "notebook-phone.png"}
    for page_name in [f"{name}.html" for name in (*SITE_PAGES, *NOTEBOOKS)]:
        page = _open(context, address, page_name, 390, 844, problems)  # laid out for a phone from the start
        assert page.evaluate("document.documentElement.scrollWidth") <= 390, f"{page_name} scrolls sideways"
        if page_name in shots:
            page.screenshot(path=SCREENSHOTS / shots[page_name])
        if page_name.removesuffix(".html") in NOTEBOOKS:  # the same page at desktop width, laid out again
            page.set_viewport_size({"width": 1280, "height": 900})
            # Code and outputs wrap at the page's width, or scroll: no line is cut.
            clipped = page.eval_on_selector_all(
                "article pre",
                "blocks => blocks.filter(block => "
                "block.scrollWidth > block.clientWidth + 1 && "
                "!['auto', 'scroll'].includes(getComputedStyle(block).overflowX))"
                ".map(block => block.textContent.slice(0, 80))",
            )
            assert not clipped, f"{page_name}: code or output cut at the page's width: {clipped}"
        page.close()
    assert not problems, f"console errors: {problems}"
