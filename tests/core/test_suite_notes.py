"""The suite tells a new user what a missing system package left untested (README Set-up)."""

from __future__ import annotations

import shutil

import pytest

from tests import conftest


class _Terminal:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def write_line(self, line: str, **_: object) -> None:
        self.lines.append(line)


def test_a_missing_browser_and_bwrap_are_named_at_the_end_of_the_run(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    present = {"java"}
    monkeypatch.setattr(shutil, "which", lambda cmd: f"/usr/bin/{cmd}" if cmd in present else None)
    terminal = _Terminal()
    conftest.pytest_terminal_summary(terminal, 0, None)
    (line,) = terminal.lines
    assert line.startswith("NOT TESTED here for lack of system packages:")
    assert (
        "browser test" in line and "bubblewrap sandbox tier" in line and "ScienceWorld" not in line
    )
    assert "apt-get install bubblewrap chromium chromium-driver" in line
    assert all("missing" in h for h in conftest.pytest_report_header(None))


def test_nothing_is_said_when_every_package_is_present(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(shutil, "which", lambda cmd: f"/usr/bin/{cmd}")
    terminal = _Terminal()
    conftest.pytest_terminal_summary(terminal, 0, None)
    assert terminal.lines == []


def test_every_package_the_suite_names_is_in_the_readme_set_up_and_ci() -> None:
    from pathlib import Path

    repo = Path(__file__).resolve().parents[2]
    set_up = (repo / "README.md").read_text("utf-8").split("## Set-up", 1)[1].split("\n## ", 1)[0]
    installer = (repo / "scripts" / "install-system-packages.sh").read_text("utf-8")
    assert "bash scripts/install-system-packages.sh" in set_up
    assert "bash scripts/install-system-packages.sh" in (repo / ".ci" / "run").read_text("utf-8")
    for _, package, _ in conftest.SYSTEM_PACKAGES:
        assert f"`{package}`" in set_up and f"missing+=({package})" in installer, package


def test_ci_installs_into_a_virtual_environment_it_makes() -> None:
    """Nothing preinstalled on the machine can stand in for a dependency the install forgot."""
    from pathlib import Path

    ci = (Path(__file__).resolve().parents[2] / ".ci" / "run").read_text("utf-8").splitlines()
    commands = [line.strip() for line in ci if line.strip() and not line.lstrip().startswith("#")]
    made = next(i for i, c in enumerate(commands) if c.startswith("python3 -m venv"))
    activated = next(
        i for i, c in enumerate(commands) if c.startswith("source") and "activate" in c
    )
    installed = commands.index('pip install -e ".[dev]"')
    assert made < activated < installed < commands.index("python -m pytest -q")
