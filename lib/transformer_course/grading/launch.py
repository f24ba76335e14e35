"""Start a student's kernel: hide the instructor's folders (inside a new mount namespace), then exec ipykernel.

Run by :mod:`transformer_course.grading.sandbox` as::

    [unshare -rmn --] python -m transformer_course.grading.launch --workdir DIR [--isolated]
        [--hide FOLDER ...] -- -f CONNECTION_FILE

``--isolated`` says the process is inside fresh user, mount and network namespaces (made by
``unshare``); only then are the ``--hide`` folders covered with empty read-only tmpfs mounts, which
no process outside the namespace sees.
"""

import argparse
import os
import subprocess
import sys


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workdir", required=True)
    parser.add_argument("--isolated", action="store_true")
    parser.add_argument("--hide", action="append", default=[])
    arguments, kernel_arguments = parser.parse_known_args(argv)
    kernel_arguments = [argument for argument in kernel_arguments if argument != "--"]
    if arguments.isolated:
        for folder in arguments.hide:
            if os.path.isdir(folder):
                subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=16k", "none", folder], check=True)
    os.chdir(arguments.workdir)
    os.execv(sys.executable, [sys.executable, "-m", "ipykernel_launcher", *kernel_arguments])


if __name__ == "__main__":
    main()
