"""Instructor tools: release student notebooks and grade submissions (``transformer-course release | grade``).

* :mod:`.markup` — nbgrader's cell metadata and markers in the source notebooks: solution regions,
  hidden-test regions, locked cells with checksums; :func:`.markup.release_notebook` makes the
  student version.
* :mod:`.protocol` — the wire format between the grader and a student's kernel (no pickles).
* :mod:`.sandbox` — a kernel for one submission: its own temporary folder, no network, hidden
  instructor folders, wall-clock and memory limits.
* :mod:`.grader` — grades a folder of submissions and writes ``grades.csv``, ``grades.json`` and
  ``report.md``.

The verdict is computed here, in the grader's process, which never imports or runs a
submission: the student's kernel only returns what their functions output on inputs the grader
chooses, and :mod:`transformer_course.exercises` compares those outputs with the reference.
"""
