"""What a killed run leaves in ``/tmp`` is removed by a later one (``core/tempdirs.py``)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import pytest

from speedrunner.core import tempdirs

PREFIX = "speedrunner-sandbox-"


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def _age(path: Path, seconds: float) -> None:
    then = time.time() - seconds
    os.utime(path, (then, then))


def test_a_killed_runs_sandbox_scratch_is_removed_by_the_next_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A process SIGKILLed with a sandbox open leaves its scratch directory; the next process
    that opens a sandbox removes it once it is an hour old, and keeps the live and the recent."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    code = textwrap.dedent("""
        import sys, time
        from speedrunner.core.sandbox.process import SandboxProcess
        from speedrunner.core.sandbox.limits import ProcessLimits
        from speedrunner.core.sandbox.tiers import resolve_tier
        p = SandboxProcess(resolve_tier("auto"), ProcessLimits(), mode="skills")
        print(p.scratch, flush=True)
        time.sleep(60)
    """)
    killed = subprocess.Popen(
        [sys.executable, "-c", code],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "TMPDIR": str(tmp_path)},
    )
    left = Path(killed.stdout.readline().strip())
    killed.send_signal(signal.SIGKILL)
    killed.wait()
    assert left.is_dir() and left.name.startswith(f"{PREFIX}{killed.pid}-")
    (left / "notes.txt").write_text("what a skill wrote")
    _age(left, 2 * tempdirs.STALE_AFTER_S)
    recent = tmp_path / f"{PREFIX}{_dead_pid()}-recent"
    recent.mkdir()
    live = tmp_path / f"{PREFIX}{os.getppid()}-live"
    live.mkdir()
    _age(live, 2 * tempdirs.STALE_AFTER_S)
    foreign = tmp_path / f"{PREFIX}notapid"
    foreign.mkdir()
    _age(foreign, 2 * tempdirs.STALE_AFTER_S)

    monkeypatch.setattr(tempdirs, "_swept", set())
    made = tempdirs.process_temp_dir(PREFIX)
    assert not left.exists()
    assert recent.is_dir() and live.is_dir() and foreign.is_dir() and made.is_dir()
    assert made.name.startswith(f"{PREFIX}{os.getpid()}-")


def test_the_sweep_runs_once_per_process_and_prefix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Not at every sandbox start: ``/tmp`` may hold thousands of entries."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setattr(tempdirs, "_swept", set())
    sweeps: list[str] = []
    real = tempdirs.remove_stale
    monkeypatch.setattr(
        tempdirs, "remove_stale", lambda prefix: sweeps.append(prefix) or real(prefix)
    )
    for _ in range(3):
        tempdirs.process_temp_dir("speedrunner-a-")
    tempdirs.process_temp_dir("speedrunner-b-")
    assert sweeps == ["speedrunner-a-", "speedrunner-b-"]
    assert len(list(tmp_path.glob("speedrunner-a-*"))) == 3
