"""The course's machinery, apart from what it teaches: run profiles, notebook start-up, result
records, the headless runner, the ``transformer-course`` command, publishing and the website.

Subject modules never import from here (see the package docstring); notebooks reach the helpers
they call through the package itself (``from transformer_course import start_notebook``).
"""

from .._files import atomic_output, write_text_atomically

# Atomic writes, for the course's own commands and for tools built on the course (the grader).
__all__ = ["atomic_output", "write_text_atomically"]
