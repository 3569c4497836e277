"""The style the project keeps: ``ruff check`` (line length 100 included) and ``ruff format``
leave nothing to fix in the source, the tests and the benchmarks."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TREES = ["src", "tests", "benchmarks"]


def _ruff(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ruff", *args, "--no-cache", *TREES],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_ruff_finds_nothing_long_lines_included() -> None:
    result = _ruff("check")
    assert result.returncode == 0, result.stdout[-3000:]


def test_the_code_is_as_ruff_formats_it() -> None:
    result = _ruff("format", "--check")
    assert result.returncode == 0, result.stdout[-3000:]
