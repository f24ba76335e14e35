"""The ``transformer-course`` command.

``transformer-course run [NOTEBOOK ...] [--profile smoke|full]`` executes notebooks headless, in
order, with nbclient, writing executed copies to a build folder (never over the sources), and
prints a table: notebook, status, seconds, headline metric. A full-profile run writes one record
per notebook to ``results/``.

``transformer-course results [--update-readme README.md]`` prints the table of recorded results,
or rewrites the README's copy of it.

``transformer-course catalogue [--update docs/students.md]`` prints the students' catalogue of
exercises (:func:`transformer_course.exercises.catalogue_table`), or rewrites the guide's copy of it.

``transformer-course site [--output build/site]`` builds the course website from the student
notebooks and the records (:mod:`transformer_course.tooling.website`) and fails on a broken internal link.

Releasing and grading are the grader's (:data:`GRADER_COMMANDS`), a distribution of its own that
instructors install beside this one: ``transformer-course-grader release | grade | ...``. Typed
here, those commands say so and exit with status 2.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from . import results
from .profiles import DEFAULT_PROFILE, PROFILE_NAMES
from .runner import find_notebooks, record_smoke_times, run_notebooks, summary_table

__all__ = ["main", "CELL_TIMEOUTS", "GRADER_COMMANDS", "CATALOGUE_MARKERS"]

# Seconds one cell may run before the runner stops the notebook, per profile: a guard against a hung
# cell, never a training budget (training is sized in epochs and updates). A full-profile training cell
# legitimately runs for a long time on a slow machine (notebook 07 trains for 31 minutes in one cell on
# the recording machine, about 2.3 hours where TensorFlow's steps are 4.4 times slower); a smoke-profile
# cell that takes 15 minutes has hung.
CELL_TIMEOUTS = {"smoke": 900, "full": 14400}


# The instructor's commands, which the grader's own distribution provides (``transformer-course-grader``).
GRADER_COMMANDS = ("release", "grade", "merge-grades", "score-written", "export", "gradescope-autograder")


def _command_of_the_grader(arguments) -> int:
    print(
        f"transformer-course: `{arguments.command}` is the grader's, a distribution of its own that instructors "
        f"install beside the course (in a checkout: `pip install -e grader`); then run "
        f"`transformer-course-grader {arguments.command} ...` (docs/grading.md)",
        file=sys.stderr,
    )
    return 2


def _command_run(arguments) -> int:
    paths = find_notebooks(arguments.notebooks, Path(arguments.notebooks_dir))
    if arguments.fresh:
        from .stages import clear_runs

        for path in paths:
            for folder in clear_runs(path.name[:2]):
                print(f"cleared the kept stages in {folder}")
    runs = run_notebooks(
        paths,
        arguments.profile,
        Path(arguments.build_dir),
        Path(arguments.results_dir),
        timeout=arguments.timeout or CELL_TIMEOUTS[arguments.profile],
        progress=not arguments.quiet,
    )
    print(summary_table(runs))
    if arguments.record_times:
        if arguments.profile != "smoke":
            print(
                "--record-times records smoke-profile times; full-profile runs record theirs in their results.",
                file=sys.stderr,
            )
        else:
            print(f"recorded smoke times in {record_smoke_times(runs, Path(arguments.results_dir))}")
    for run in runs:
        if not run.passed:
            print(f"\nFAILED {run.path}, {run.failure}\n  executed copy with the traceback: {run.executed_copy}")
        elif run.record:
            print(f"recorded {run.record}")
    if arguments.profile != "full":
        print(f"\n{arguments.profile} profile: a quick check that everything runs; its numbers mean nothing.")
    return 0 if all(run.passed for run in runs) else 1


def _command_runs(arguments) -> int:
    from .stages import clear_runs, runs_directory

    if arguments.action == "clear":
        removed = [folder for notebook in (arguments.notebooks or [None]) for folder in clear_runs(notebook)]
        print("\n".join(f"removed {folder}" for folder in removed) or f"no kept stages in {runs_directory()}")
    else:
        print(runs_directory())
    return 0


def _command_results(arguments) -> int:
    if arguments.update_readme:
        changed = results.update_readme_table(arguments.update_readme, arguments.results_dir)
        print(f"{arguments.update_readme}: {'updated' if changed else 'already up to date'}")
    else:
        print(results.results_table(results.load_records(arguments.results_dir)))
    return 0


# The lines between which a guide holds the generated catalogue of exercises.
CATALOGUE_MARKERS = ("<!-- exercise-catalogue:start -->", "<!-- exercise-catalogue:end -->")


def _command_catalogue(arguments) -> int:
    from .._files import replace_between_markers, write_text_atomically
    from ..exercises import catalogue_table

    if not arguments.update:
        print(catalogue_table())
        return 0
    path = Path(arguments.update)
    text = path.read_text(encoding="utf-8")
    try:
        new = replace_between_markers(text, CATALOGUE_MARKERS, catalogue_table(), where=str(path))
    except ValueError as error:
        print(f"catalogue: {error}", file=sys.stderr)
        return 2
    if new != text:
        write_text_atomically(path, new)
    print(f"{path}: {'updated' if new != text else 'already up to date'}")
    return 0


def _command_site(arguments) -> int:
    from .website import broken_internal_links, build_site

    try:
        site = build_site(arguments.output, arguments.project_root, quiet=not arguments.verbose)
    except (FileNotFoundError, ValueError, RuntimeError) as error:
        print(f"transformer-course site: {error}", file=sys.stderr)
        return 1
    broken = broken_internal_links(site)
    for link in broken:
        print(f"broken internal link: {link}", file=sys.stderr)
    pages = sum(1 for _ in site.glob("*.html"))
    print(f"{'site with broken links' if broken else 'site'}: {site}/index.html ({pages} pages)")
    return 1 if broken else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="transformer-course", description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)

    run = commands.add_parser("run", help="execute notebooks headless and print a summary table")
    run.add_argument("notebooks", nargs="*", metavar="NOTEBOOK", help="paths or ids (01); default: all, in order")
    run.add_argument("--profile", choices=PROFILE_NAMES, default=os.environ.get("COURSE_PROFILE") or DEFAULT_PROFILE)
    run.add_argument("--notebooks-dir", default="notebooks", help="where NN_*.ipynb live (default: notebooks)")
    run.add_argument("--build-dir", default="build/executed", help="executed copies go here (default: build/executed)")
    run.add_argument("--results-dir", default="results", help="full-profile records go here (default: results)")
    run.add_argument(
        "--timeout",
        type=int,
        default=None,
        help="seconds one cell may run (default: 900 in the smoke profile, 14400 in the full one)",
    )
    run.add_argument("--quiet", action="store_true", help="no progress bars")
    run.add_argument(
        "--record-times",
        action="store_true",
        help="smoke profile: record each notebook's seconds in RESULTS_DIR/smoke/seconds.json "
        "(the run times the notebooks show)",
    )
    run.add_argument(
        "--fresh",
        action="store_true",
        help="clear each notebook's kept stages first (a full run otherwise continues from its last finished stage)",
    )
    run.set_defaults(handler=_command_run)

    runs = commands.add_parser("runs", help="the kept stages of interrupted runs: where they are, or clear them")
    runs.add_argument("action", choices=("where", "clear"), help="where: print the folder; clear: delete stages")
    runs.add_argument("notebooks", nargs="*", metavar="NOTEBOOK", help="ids (09) to clear; default: every notebook")
    runs.set_defaults(handler=_command_runs)

    table = commands.add_parser("results", help="print the table of recorded full-profile results")
    table.add_argument("--results-dir", default="results")
    table.add_argument("--update-readme", metavar="README", help="rewrite the table in this README")
    table.set_defaults(handler=_command_results)

    catalogue = commands.add_parser("catalogue", help="print the students' catalogue of exercises")
    catalogue.add_argument("--update", metavar="GUIDE", help="rewrite the catalogue between this guide's markers")
    catalogue.set_defaults(handler=_command_catalogue)

    site = commands.add_parser("site", help="build the course website from release/ into build/site/")
    site.add_argument("--output", default="build/site", help="where the site goes (default: build/site)")
    site.add_argument("--project-root", default=".", help="the course checkout (default: the current folder)")
    site.add_argument("--verbose", action="store_true", help="show Sphinx's progress")
    site.set_defaults(handler=_command_site)
    for name in GRADER_COMMANDS:
        moved = commands.add_parser(name, add_help=False, help=f"the grader's: transformer-course-grader {name}")
        moved.set_defaults(handler=_command_of_the_grader)

    arguments, unknown = parser.parse_known_args(argv)  # a grader's command is named whatever follows it
    if unknown and arguments.handler is not _command_of_the_grader:
        parser.error(f"unrecognized arguments: {' '.join(unknown)}")
    from ..datasets import pin_data_directory

    pin_data_directory()  # kernels run in the notebooks' folder, not where the command was typed
    return arguments.handler(arguments)


if __name__ == "__main__":
    sys.exit(main())
