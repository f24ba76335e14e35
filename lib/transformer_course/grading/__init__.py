"""Instructor tools: release student notebooks and grade submissions (``transformer-course release | grade | merge-grades``).

* :mod:`.markup` — nbgrader's cell metadata and markers in the source notebooks: solution regions,
  hidden-test regions, locked cells with checksums; :func:`.markup.release_notebook` makes the
  student version.
* :mod:`.protocol` — the wire format between the grader and a student's kernel (no pickles), and
  the one conversion of results (tensors to arrays) that ``check`` shares.
* :mod:`.references` — the references and the generators of the grading cases; only the grader
  reads them (the sandbox covers the file).
* :mod:`.sandbox` — a kernel for one submission in a bubblewrap allow-list sandbox, with limits on
  time, memory and output.
* :mod:`.inspection` — reads the cells a student wrote, never running them, for the instructor's flags.
* :mod:`.grader` — grades a folder of submissions (or a shard of it), merges shards, and writes
  ``grades.csv``, ``grades.json`` and ``report.md``.

The verdict is computed here, in the grader's process, which never imports or runs a
submission: the student's kernel only returns what their functions output on inputs the grader
draws with a secret seed, and the grader compares those outputs with its references.
"""
