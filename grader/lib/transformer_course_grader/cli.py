"""The ``transformer-course-grader`` command: the instructor's side of the course.

``release`` writes the student notebooks (solutions stubbed, hidden tests removed, Colab links and
run times stamped); ``grade`` grades a folder of submissions in the sandbox; ``merge-grades``,
``score-written`` and ``export`` work on its reports; ``gradescope-autograder`` writes the zip of a
Gradescope programming assignment. ``docs/grading.md`` is the instructors' guide.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

__all__ = ["main", "read_seed_file"]


def _command_release(arguments) -> int:
    from transformer_course.tooling import write_text_atomically
    from transformer_course.tooling.publishing import publication, publication_targets, run_time_line, stamp

    from .markup import MarkupError, release_folder

    notebooks_dir = Path(arguments.notebooks_dir)
    try:
        root, targets = publication_targets(notebooks_dir)
        setting = publication(root)
        results_dir = (root or notebooks_dir.resolve().parent) / "results"

        def stamped(path: Path, text: str) -> str:
            is_notebook = path.suffix in (".ipynb", ".py") and path.name[:2].isdigit()
            return stamp(text, setting, run_time_line(path.stem, results_dir) if is_notebook else None)

        texts = {path: path.read_text(encoding="utf-8") for path in targets}
        wanted = {path: stamped(path, text) for path, text in texts.items()}  # each file stamped once
        if root is not None:  # the full-profile records travel with the package (pip and Colab installs)
            from transformer_course.tooling.results import PACKAGED_RECORDS

            for record in sorted(results_dir.glob("[0-9][0-9]_*.json")):
                copy = PACKAGED_RECORDS / record.name
                texts[copy] = copy.read_text(encoding="utf-8") if copy.is_file() else ""
                wanted[copy] = record.read_text(encoding="utf-8")
        unstamped = {path: text for path, text in wanted.items() if text != texts[path]}
        if not arguments.check:
            for path, text in unstamped.items():
                path.parent.mkdir(parents=True, exist_ok=True)
                write_text_atomically(path, text)
                print(
                    f"stamped {path} with {setting.repository} at {setting.ref} and its run time"
                    if path.suffix != ".json"
                    else f"copied the record {path.name} into the package"
                )
            for path in release_folder(notebooks_dir, arguments.out):
                text = path.read_text(encoding="utf-8")
                new_text = stamped(path, text)
                if new_text != text:  # sources outside a checkout keep their own links
                    write_text_atomically(path, new_text)
                print(f"wrote {path}")
            return 0
        with tempfile.TemporaryDirectory() as fresh:

            def current(path):
                written = Path(arguments.out) / path.name
                expected = stamped(path, path.read_text(encoding="utf-8")).encode("utf-8")
                return written.exists() and written.read_bytes() == expected

            stale = [path.name for path in release_folder(notebooks_dir, fresh) if not current(path)]
    except (FileNotFoundError, MarkupError, ImportError, ValueError) as error:
        print(f"release: {error}", file=sys.stderr)
        return 2
    if unstamped:
        print(
            f"release: Colab links, install lines, run times or packaged records disagree with "
            f"{setting.repository} at {setting.ref} in {', '.join(str(path) for path in unstamped)}; "
            f"run `transformer-course-grader release`",
            file=sys.stderr,
        )
    if stale:
        print(
            f"release: out of date in {arguments.out}: {', '.join(stale)}; run `transformer-course-grader release`",
            file=sys.stderr,
        )
    if unstamped or stale:
        return 1
    print(f"release: {arguments.out} is up to date")
    return 0


def read_seed_file(path) -> int:
    """The secret seed written in ``path``: one non-negative integer, surrounding whitespace allowed.

    Raises:
        OSError: the file cannot be read.
        ValueError: the file is empty or holds anything but one integer >= 0 (a shard must never
            grade with a seed of its own while the others share one).
    """
    text = Path(path).read_text(encoding="utf-8").strip()
    if not text.isdigit():
        raise ValueError(
            f"the seed file {path} must hold one integer >= 0; it holds "
            f"{'nothing' if not text else f'{len(text)} other characters'}"
        )
    return int(text)


def _command_grade(arguments) -> int:
    from .grader import draw_seed, grade_folder, parse_shard
    from .sandbox import Limits, SandboxUnavailable

    try:
        shard = None if arguments.shard is None else parse_shard(arguments.shard)
    except ValueError as error:
        print(f"grade: {error}", file=sys.stderr)
        return 2

    try:
        limits = Limits(
            arguments.cell_timeout,
            arguments.notebook_timeout,
            arguments.memory_mb,
            arguments.tmp_mb,
            arguments.processes,
            arguments.file_mb,
        )
    except ValueError as error:
        print(f"grade: {error}", file=sys.stderr)
        return 2
    if arguments.unsafe_no_sandbox:
        print(
            "grade: warning: --unsafe-no-sandbox: students' code runs unconfined, with network and this "
            "machine's files in reach; the report says so",
            file=sys.stderr,
        )
    seed = draw_seed() if arguments.seed is None else arguments.seed
    if arguments.seed_file is not None:
        try:
            seed = read_seed_file(arguments.seed_file)
        except (OSError, ValueError) as error:
            print(f"grade: {error}", file=sys.stderr)
            return 2
    from .deadlines import DeadlineError
    from .exports import OverrideError
    from .written import WrittenScoreError

    try:
        overrides, written_scores = _overrides(arguments), _written_scores(arguments)
        results = grade_folder(
            arguments.submissions,
            arguments.out,
            arguments.release_dir,
            limits,
            workers=arguments.workers,
            seed=seed,
            progress=not arguments.quiet,
            shard=shard,
            sandbox=not arguments.unsafe_no_sandbox,
            overrides=overrides,
            written_scores=written_scores,
            notebooks=arguments.notebooks,
            deadline=_deadline(arguments),
            run_notebooks=arguments.run_notebooks,
        )
    except (
        FileNotFoundError,
        ImportError,
        SandboxUnavailable,
        OverrideError,
        WrittenScoreError,
        DeadlineError,
        OSError,
    ) as error:
        print(f"grade: {error}", file=sys.stderr)
        return 2
    students = {result.student for result in results}
    print(f"graded {len(results)} notebook(s) of {len(students)} student(s); report in {arguments.out}")
    print(f"secret seed {seed} (kept in grades.json; `--seed {seed}` grades with the same cases again)")
    return 0


def _deadline(arguments):
    """The :class:`Deadline` of ``--due`` and its companions (None without ``--due``); raises DeadlineError."""
    from .deadlines import (
        Deadline,
        DeadlineError,
        parse_late_credit,
        parse_time,
        read_extensions,
        read_submission_times,
    )

    companions = [name for name in ("late_credit", "submission_times", "extensions") if getattr(arguments, name)]
    if arguments.due is None:
        if companions:
            raise DeadlineError(f"--{companions[0].replace('_', '-')} needs --due")
        return None
    if not arguments.submission_times:
        raise DeadlineError(
            "--due needs --submission-times (student,submitted): the grader never guesses when a notebook was handed in"
        )
    return Deadline(
        parse_time(arguments.due, "--due"),
        parse_late_credit(arguments.late_credit) if arguments.late_credit else (),
        read_submission_times(arguments.submission_times),
        read_extensions(arguments.extensions) if arguments.extensions else {},
    )


def _overrides(arguments):
    """The rows of ``--overrides`` (None without it); raises OverrideError or OSError with the reason."""
    from .exports import read_overrides

    return None if arguments.overrides is None else read_overrides(arguments.overrides)


def _written_scores(arguments):
    """The rows of ``--written-scores`` (None without it); raises WrittenScoreError or OSError with the reason."""
    from .written import read_written_scores

    path = getattr(arguments, "written_scores", None)
    return None if path is None else read_written_scores(path)


def _command_score_written(arguments) -> int:
    from .grader import MergeError, score_written
    from .written import WrittenScoreError

    try:
        results = score_written(arguments.report, arguments.out or arguments.report, _written_scores(arguments))
    except (MergeError, WrittenScoreError, OSError) as error:
        print(f"score-written: {error}", file=sys.stderr)
        return 1
    scored = sum(x.status == "graded by hand" for result in results for x in result.exercises)
    print(f"{scored} written answer(s) scored by hand; report in {arguments.out or arguments.report}")
    return 0


def _command_merge_grades(arguments) -> int:
    from .exports import OverrideError
    from .grader import MergeError, merge_grades
    from .written import WrittenScoreError

    try:
        results = merge_grades(
            arguments.shards,
            arguments.out,
            overrides=_overrides(arguments),
            written_scores=_written_scores(arguments),
            notebooks=arguments.notebooks,
        )
    except (MergeError, OverrideError, WrittenScoreError, OSError) as error:
        print(f"merge-grades: {error}", file=sys.stderr)
        return 1
    students = {result.student for result in results}
    print(
        f"merged {len(arguments.shards)} shard(s): {len(results)} notebook(s) of {len(students)} student(s); "
        f"report in {arguments.out}"
    )
    return 0


def _notebooks(text: str) -> list[str]:
    """``--notebooks 04,05`` for argparse: a clear usage error for anything else."""
    from .grader import parse_notebooks

    try:
        return parse_notebooks(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def _command_export(arguments) -> int:
    import json

    from transformer_course.tooling import write_text_atomically

    from .exports import OverrideError, canvas_gradebook, gradescope_results

    try:
        if arguments.format == "canvas":
            if not (arguments.roster and arguments.assignment and (arguments.assignment_id or arguments.per_exercise)):
                print(
                    "export: canvas needs --roster, --assignment and --assignment-id (or --per-exercise)",
                    file=sys.stderr,
                )
                return 2
            text, unmatched = canvas_gradebook(
                arguments.report,
                arguments.roster,
                arguments.assignment,
                arguments.assignment_id,
                notebooks=arguments.notebooks,
                per_exercise=arguments.per_exercise,
            )
            for name in unmatched:
                print(f"export: not matched between the grades and the roster: {name}", file=sys.stderr)
        else:
            if arguments.student is None:
                print("export: gradescope needs --student (the name as the report shows it)", file=sys.stderr)
                return 2
            text = (
                json.dumps(
                    gradescope_results(arguments.report, arguments.student, notebooks=arguments.notebooks), indent=2
                )
                + "\n"
            )
    except (OSError, ValueError, KeyError, OverrideError) as error:
        print(f"export: {type(error).__name__}: {error}", file=sys.stderr)
        return 2
    write_text_atomically(Path(arguments.out), text)
    print(f"wrote {arguments.out}")
    return 0


def _command_gradescope_autograder(arguments) -> int:
    from .autograder import write_gradescope_autograder
    from .grader import draw_seed

    seed = draw_seed() if arguments.seed is None else arguments.seed
    try:
        path = write_gradescope_autograder(
            arguments.out,
            arguments.notebooks,
            ".",
            arguments.release_dir,
            seed,
            arguments.cell_timeout,
            arguments.notebook_timeout,
            arguments.sandbox,
        )
    except (ValueError, FileNotFoundError, OSError) as error:
        print(f"gradescope-autograder: {error}", file=sys.stderr)
        return 2
    print(
        f"wrote {path}: upload it as the autograder of a Gradescope programming assignment (Ubuntu 24.04 "
        f"base image); secret seed {seed}; keep the zip private, it holds the grader's references"
    )
    return 0


def main(argv: list[str] | None = None) -> int:
    """Run one ``transformer-course-grader`` command; returns its exit status (0 done, 1 failed or stale, 2 refused)."""
    parser = argparse.ArgumentParser(
        prog="transformer-course-grader",
        description="The course's grader: release student notebooks, grade submissions.",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    release = commands.add_parser("release", help="write student notebooks: solutions stubbed, hidden tests removed")
    release.add_argument("--notebooks-dir", default="notebooks", help="source notebooks (default: notebooks)")
    release.add_argument("--out", default="release", help="where the student notebooks go (default: release)")
    release.add_argument(
        "--check",
        action="store_true",
        help="write nothing; exit 1 if the folder in --out is not what release would write",
    )
    release.set_defaults(handler=_command_release)

    grade = commands.add_parser("grade", help="grade a folder of submissions (SUBMISSIONS/<student>/NN_*.ipynb)")
    grade.add_argument("submissions", metavar="SUBMISSIONS_DIR")
    grade.add_argument(
        "--out", required=True, metavar="REPORT_DIR", help="grades.csv, grades.json and report.md go here"
    )
    grade.add_argument("--release-dir", default="release", help="the released notebooks (default: release)")
    grade.add_argument(
        "--unsafe-no-sandbox",
        action="store_true",
        help="run students' code without the bubblewrap sandbox (only for code you trust)",
    )
    grade.add_argument("--workers", type=int, default=1, help="notebooks graded at once (default: 1)")
    grade.add_argument("--cell-timeout", type=float, default=60, help="seconds per cell or graded call (default: 60)")
    grade.add_argument(
        "--notebook-timeout",
        type=float,
        default=600,
        help="seconds per notebook for reading its code and calling its graded functions, and, with "
        "--run-notebooks, for the whole notebook's run (default: 600)",
    )
    grade.add_argument(
        "--run-notebooks",
        action="store_true",
        help="also run each submission's whole notebook, after its graded functions, to report which cells "
        "raise or time out (flags only: no score depends on it; a class takes several times longer)",
    )
    grade.add_argument(
        "--memory-mb",
        type=int,
        default=4096,
        help="memory per sandbox in MiB: its processes and its files in /tmp, /dev/shm and its home (default: 4096)",
    )
    grade.add_argument(
        "--tmp-mb",
        type=int,
        default=1024,
        help="size of each of the sandbox's /tmp, /dev/shm and home, in MiB (default: 1024)",
    )
    grade.add_argument("--processes", type=int, default=512, help="processes and threads per sandbox (default: 512)")
    grade.add_argument(
        "--file-mb", type=int, default=256, help="the largest file a kernel may write, in MiB (default: 256)"
    )
    seeds = grade.add_mutually_exclusive_group()
    seeds.add_argument(
        "--seed",
        type=int,
        help="the grading cases' secret seed (default: a fresh one each run; the one used is kept in grades.json)",
    )
    seeds.add_argument(
        "--seed-file",
        metavar="PATH",
        help="read the secret seed from this file (one integer; "
        "an empty or malformed file is refused): how shards get it",
    )
    grade.add_argument(
        "--shard",
        metavar="K/N",
        help="grade only shard K of N of the students (a fixed share by name); combine the N reports with merge-grades",
    )
    grade.add_argument("--quiet", action="store_true", help="no progress bar")
    overrides_help = "an overrides.csv (student,exercise,points,reason): points set by hand, kept on every regrade"
    grade.add_argument("--overrides", metavar="CSV", help=overrides_help)
    written_help = (
        "a written-scores CSV (student,question,points,comment; answers/written-scores.csv is the "
        "template): the instructor's scores of the answers in words, the whole of them (an earlier "
        "file's scores it leaves out are dropped)"
    )
    grade.add_argument("--written-scores", metavar="CSV", help=written_help)
    grade.add_argument(
        "--due",
        metavar="TIME",
        help="the due time, ISO 8601 with its offset (2026-12-01T23:59+01:00): "
        "the reports show each late student's credited total beside the raw one",
    )
    grade.add_argument(
        "--late-credit",
        metavar="STEPS",
        default="",
        help="with --due: the share kept by hours or days late, e.g. 24h:0.9,3d:0.5 (past the last "
        "step, and with no steps once late at all, nothing is kept)",
    )
    grade.add_argument(
        "--submission-times",
        metavar="CSV",
        help="with --due: student,submitted (ISO 8601 with offsets), as the platform exports them",
    )
    grade.add_argument("--extensions", metavar="CSV", help="with --due: student,extra_hours, each student's extra time")
    notebooks_help = "one assignment: only these notebooks, by number (e.g. 04,05); default: every notebook"
    grade.add_argument("--notebooks", type=_notebooks, metavar="NN,NN", help=notebooks_help)
    merge = commands.add_parser("merge-grades", help="combine the reports of `grade --shard K/N` runs into one")
    merge.add_argument("shards", nargs="+", metavar="SHARD_REPORT_DIR")
    merge.add_argument("--out", required=True, metavar="REPORT_DIR", help="where the combined reports go")
    merge.add_argument("--overrides", metavar="CSV", help=overrides_help)
    merge.add_argument("--written-scores", metavar="CSV", help=written_help)
    merge.add_argument("--notebooks", type=_notebooks, metavar="NN,NN", help=notebooks_help)
    scoring = commands.add_parser(
        "score-written", help="add the instructor's scores of written answers to a report, without regrading"
    )
    scoring.add_argument("report", metavar="REPORT_DIR", help="a folder written by grade or merge-grades")
    scoring.add_argument("--written-scores", required=True, metavar="CSV", help=written_help)
    scoring.add_argument("--out", metavar="REPORT_DIR", help="where the reports go (default: REPORT_DIR itself)")
    scoring.set_defaults(handler=_command_score_written)
    export = commands.add_parser("export", help="grades for Canvas (a gradebook CSV) or Gradescope (results.json)")
    export.add_argument("format", choices=("canvas", "gradescope"))
    export.add_argument("report", metavar="REPORT_DIR", help="a folder written by grade or merge-grades")
    export.add_argument("--out", required=True, metavar="FILE")
    export.add_argument("--roster", metavar="CSV", help="canvas: folder,Student,ID,SIS User ID,SIS Login ID,Section")
    export.add_argument("--assignment", help="canvas: the assignment's name")
    export.add_argument("--assignment-id", help="canvas: the assignment's Canvas id")
    export.add_argument("--student", help="gradescope: the student, as the report names them")
    export.add_argument("--notebooks", type=_notebooks, metavar="NN,NN", help=notebooks_help)
    export.add_argument(
        "--per-exercise",
        action="store_true",
        help="canvas: one column per exercise (new assignments named '<assignment>: 04.1')",
    )
    export.set_defaults(handler=_command_export)
    autograder = commands.add_parser(
        "gradescope-autograder",
        help="the zip of a Gradescope programming assignment that grades one notebook's "
        "submissions with this grader (docs/grading.md)",
    )
    autograder.add_argument("--notebooks", type=_notebooks, required=True, metavar="NN,NN", help=notebooks_help)
    autograder.add_argument("--out", required=True, metavar="ZIP")
    autograder.add_argument("--release-dir", default="release", help="the released notebooks (default: release)")
    autograder.add_argument(
        "--seed", type=int, default=None, help="the hidden cases' secret seed (default: drawn, and printed)"
    )
    autograder.add_argument("--cell-timeout", type=float, default=60, help="seconds per cell (default: 60)")
    autograder.add_argument("--notebook-timeout", type=float, default=600, help="seconds per notebook (default: 600)")
    autograder.add_argument(
        "--sandbox",
        choices=("auto", "always", "never"),
        default="auto",
        help="bubblewrap inside Gradescope's container: auto and always grade only in it (without it: 0 and the "
        "reason); never runs unconfined, only for notebooks you trust (default: auto)",
    )
    autograder.set_defaults(handler=_command_gradescope_autograder)
    grade.set_defaults(handler=_command_grade)
    merge.set_defaults(handler=_command_merge_grades)

    arguments = parser.parse_args(argv)
    from transformer_course.datasets import pin_data_directory

    pin_data_directory()  # kernels run in the notebooks' folder, not where the command was typed
    return arguments.handler(arguments)


if __name__ == "__main__":
    sys.exit(main())
