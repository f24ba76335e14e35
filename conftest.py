"""Test-wide settings: every test and every nbval-run notebook uses the smoke profile."""

import os

from transformer_course.datasets import pin_data_directory

# Set before any kernel starts: nbval's kernels inherit this environment.
os.environ["COURSE_PROFILE"] = "smoke"
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("MPLBACKEND", "Agg")
# A relative COURSE_DATA_DIR means "relative to where pytest was started", also for nbval's
# kernels, which run in the notebooks' folder.
pin_data_directory()
