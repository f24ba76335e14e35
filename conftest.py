"""Test-wide settings: every test and every nbval-run notebook uses the smoke profile, and every
temporary file (TensorFlow's autograph leaves one per traced function) goes into one folder of the
test run's own, removed when the run ends."""

import os
import shutil
import tempfile

from transformer_course.datasets import pin_data_directory

# Set before any kernel starts: nbval's kernels inherit this environment.
os.environ["COURSE_PROFILE"] = "smoke"
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("MPLBACKEND", "Agg")
# A relative COURSE_DATA_DIR means "relative to where pytest was started", also for nbval's
# kernels, which run in the notebooks' folder.
pin_data_directory()

_TEMPORARY_FOLDER = tempfile.mkdtemp(prefix="transformer-course-tests-")
os.environ["TMPDIR"] = _TEMPORARY_FOLDER
tempfile.tempdir = _TEMPORARY_FOLDER


def pytest_unconfigure(config):
    shutil.rmtree(_TEMPORARY_FOLDER, ignore_errors=True)
