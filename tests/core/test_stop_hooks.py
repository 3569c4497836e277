"""A stop signal runs the registered stop hooks (e.g. silencing py4j) before the run unwinds,
once per hook, and a failing hook never keeps the run from stopping."""

from __future__ import annotations

import os
import signal
import time

import pytest

from speedrunner.core import interrupt
from speedrunner.core.interrupt import RunInterrupted, add_stop_hook, handle_stop_signals


def test_ctrl_c_runs_each_stop_hook_once_and_a_failing_hook_does_not_stop_the_stop(
    monkeypatch,
) -> None:
    monkeypatch.setattr(interrupt, "_STOP_HOOKS", [])
    calls: list[str] = []

    def quiet() -> None:
        calls.append("quiet")

    def broken() -> None:
        raise RuntimeError("hook failed")

    add_stop_hook(broken)
    add_stop_hook(quiet)
    add_stop_hook(quiet)  # registered twice: runs once
    with pytest.raises(RunInterrupted) as stopped, handle_stop_signals():
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(5)  # the handler raises out of it
    assert stopped.value.exit_code == 130
    assert calls == ["quiet"]
    interrupt.STOP.clear()
