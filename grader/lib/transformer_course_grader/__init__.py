"""The course's grader, a distribution of its own: release student notebooks and grade submissions.

Instructors install it beside the course package (``pip install -e . -e grader`` in a checkout);
students never do, and the course package imports nothing from it. The command line:
``transformer-course-grader release``, ``grade``, ``merge-grades``, ``score-written``, ``export``
and ``gradescope-autograder`` (:mod:`.cli`).

* :mod:`.markup` — nbgrader's cell metadata and markers in the source notebooks: solution regions,
  hidden-test regions, locked cells with checksums; :func:`.markup.release_notebook` makes the
  student version.
* :mod:`transformer_course.exercises.slicing` and :mod:`transformer_course.exercises.policy` (in the
  course package, so that a student's ``check`` reads the code as the grader does) — read a
  submission's cells, never running them: the statements each graded function needs (its
  definition, the helpers, constants and imports it uses), and whether they may run (an allow-list).
* :mod:`.protocol` — the wire format between the grader and the kernels: values never as
  pickles; graded functions as the source of those statements; and the one conversion of
  results (tensors to arrays) that ``check`` shares.
* :mod:`.guard` — the graded kernel's audit hook: graded code builds no code at run time and never
  imports the course package.
* :mod:`.references` — the references and the generators of the grading cases; only the grader
  reads them (the sandbox covers the file).
* :mod:`.sandbox` — a kernel for one submission in a bubblewrap allow-list sandbox, with limits on
  time, memory and output; its other jobs in :mod:`.confinement` (the command line, seccomp, the
  kernel's user, :class:`~.confinement.Limits`), :mod:`.snapshot` (the package copies kernels
  import), :mod:`.watchdog` (limits polled while it runs) and :mod:`.cgroups` (memory control groups).
* :mod:`.inspection` — reads the cells a student wrote, never running them, for the instructor's flags.
* :mod:`.grader` — grades a folder of submissions (or a shard of it) and merges shards;
* :mod:`.reports` — what a run writes, ``grades.csv``, ``grades.json`` and ``report.md``, with
  every name and message a student controls made safe for each.

The verdict is computed here, in the grader's process, which never imports or runs a
submission: a kernel only returns what the student's functions output on inputs the grader
draws with a secret seed, and the grader compares those outputs with its references.
"""


def evaluate_hidden(exercise_id: str, candidate, seed: int):
    """The verdict on ``candidate`` for cases drawn from the grader's references with ``seed``.

    The hidden tests of the instructor's notebooks use it (``assert evaluate_hidden("07.1",
    causal_mask, seed=7).passed``); release copies do not contain them.

    Args:
        exercise_id: str, e.g. ``"04.1"``.
        candidate: the function to check.
        seed: int, seeds the case generator.

    Returns:
        :class:`transformer_course.exercises.Verdict`.

    Raises:
        KeyError: for an unknown exercise id.
    """
    import numpy as np

    from transformer_course.exercises import evaluate

    from . import references

    drawn = [
        (label, arguments, references.expected(exercise_id, arguments))
        for label, arguments in references.cases(exercise_id, np.random.default_rng(seed))
    ]
    return evaluate(exercise_id, candidate, cases=drawn)
