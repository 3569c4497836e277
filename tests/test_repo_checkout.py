"""A checkout stays clean: no tracked link out of the repo, and what the README's commands write
by default (``configs copy … my-configs/``, ``report … --out report``, a venv) is ignored."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.skipif(
    shutil.which("git") is None or not (REPO / ".git").exists(),
    reason="needs git and a git checkout",
)


def _git(*args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(REPO), *args], capture_output=True, text=True, check=True
    ).stdout


def test_no_tracked_symlink_points_outside_the_repo() -> None:
    outside = []
    for line in _git("ls-files", "-s").splitlines():
        mode, blob, _, link = line.split(maxsplit=3)
        if mode != "120000":
            continue
        target = _git("cat-file", "-p", blob)
        resolved = (REPO / link).parent.joinpath(target).resolve()
        if os.path.isabs(target) or not resolved.is_relative_to(REPO):
            outside.append(f"{link} -> {target}")
    assert not outside, f"tracked symlinks that break in every other clone: {outside}"


@pytest.mark.parametrize(
    "path",
    [
        ".venv/bin/python",
        ".venv-scale",
        "my-configs/speedrunner-gpt-t4.yaml",
        "report/report.html",
        "runs/babyai/x/config.resolved.json",
    ],
)
def test_what_the_readme_commands_write_by_default_is_ignored(path: str) -> None:
    r = subprocess.run(["git", "-C", str(REPO), "check-ignore", "-q", "--no-index", path])
    assert r.returncode == 0, (
        f"{path} would show up as untracked in `git status`; add it to .gitignore"
    )
