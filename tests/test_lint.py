"""The linter and the formatter: ruff, configured in pyproject.toml, over the package, tests, benchmarks and notebooks
(the formatter leaves the notebooks as they are)."""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_ruff_reports_nothing():
    pytest.importorskip("ruff", reason="ruff is not installed (requirements.txt pins it)")
    result = subprocess.run(
        [sys.executable, "-m", "ruff", "check", "--no-cache", "--output-format", "concise", "."],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_ruff_format_would_change_nothing():
    pytest.importorskip("ruff", reason="ruff is not installed (requirements.txt pins it)")
    result = subprocess.run(
        [sys.executable, "-m", "ruff", "format", "--check", "--no-cache", "."], cwd=ROOT, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout + result.stderr
