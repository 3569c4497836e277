"""One sandbox lifecycle for the analysis session and the skill runner, and one stop-then-kill
for both ways of finding a sandbox's processes; checked with stand-in processes, no child
started."""

from __future__ import annotations

import signal

import pytest

from speedrunner.core.sandbox import process
from speedrunner.core.sandbox.analysis import AnalysisSession
from speedrunner.core.sandbox.lifecycle import SandboxOwner
from speedrunner.core.sandbox.skills import SandboxSkillRunner


class _Child:
    def __init__(self, pid: int) -> None:
        self.pid, self.alive, self.killed = pid, True, False

    def kill(self) -> None:
        self.killed, self.alive = True, False


class _Owner(SandboxOwner):
    def __init__(self) -> None:
        super().__init__("the test owner")
        self.started: list[_Child] = []

    def _start_process(self) -> _Child:  # type: ignore[override]
        child = _Child(100 + len(self.started))
        self.started.append(child)
        return child


def test_both_sandbox_users_share_one_lifecycle() -> None:
    assert issubclass(AnalysisSession, SandboxOwner)
    assert issubclass(SandboxSkillRunner, SandboxOwner)


def test_a_dead_process_is_replaced_and_close_kills_the_live_one() -> None:
    owner = _Owner()
    first, fresh = owner._live_process()
    assert fresh and owner.pid == 100
    assert owner._live_process() == (first, False)  # a live one is kept
    first.alive = False
    second, fresh = owner._live_process()
    assert fresh and second is not first and first.killed  # the dead one was killed (reaped) first
    with owner:
        pass
    assert second.killed and owner.pid is None
    with pytest.raises(RuntimeError, match="the test owner is closed"):
        owner._live_process()
    owner.close()  # idempotent


def test_stop_then_kill_stops_until_nothing_new_then_kills_all(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    sent: list[tuple[int, int]] = []
    monkeypatch.setattr(process.os, "kill", lambda pid, sig: sent.append((pid, sig)))
    scans = iter([{1, 2}, {1, 2, 3}, {1, 2, 3}])  # 3 is forked while the scan runs
    process._stop_then_kill(lambda: next(scans), rounds=5)
    stops = [pid for pid, sig in sent if sig == signal.SIGSTOP]
    kills = [pid for pid, sig in sent if sig == signal.SIGKILL]
    assert sorted(stops) == [1, 2, 3] and sorted(kills) == [1, 2, 3]
    assert sent.index((3, signal.SIGSTOP)) < min(sent.index((p, signal.SIGKILL)) for p in kills)


def test_kill_tree_and_kill_uid_both_stop_then_kill(monkeypatch: pytest.MonkeyPatch) -> None:
    sent: list[tuple[int, int]] = []
    monkeypatch.setattr(process.os, "kill", lambda pid, sig: sent.append((pid, sig)))
    monkeypatch.setattr(process, "_processes_of_uid", lambda uid: {7, 8})
    process.kill_uid(4242)
    process.kill_tree(5, members=lambda: {6})
    assert sorted(sent) == sorted(
        [(p, s) for p in (7, 8, 5, 6) for s in (signal.SIGSTOP, signal.SIGKILL)]
    )
