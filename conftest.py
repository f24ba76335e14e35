"""Test-wide settings: every test and every nbval-run notebook uses the smoke profile."""

import os

# Set before any kernel starts: nbval's kernels inherit this environment.
os.environ["COURSE_PROFILE"] = "smoke"
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("MPLBACKEND", "Agg")
