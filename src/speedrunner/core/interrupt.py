"""Stopping a run on Ctrl-C or SIGTERM: no new paid call, and no waiting out a back-off.

``handle_stop_signals()`` installs handlers for SIGINT and SIGTERM (what ``kill``, SLURM,
Docker and Ray send). The first signal sets ``STOP`` and raises ``RunInterrupted`` in the
main thread, which unwinds the run. Episode threads see ``STOP`` before their next model
call, and the retry layer's back-off waits on it (``sleep_unless_stopped``), so nobody
sleeps through "retrying in 13 s". A second signal while the run unwinds does not raise
again: the clean-up, and the message that says how to resume, always complete. A request
already on the wire cannot be taken back; the entry point does not wait for it.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

__all__ = [
    "STOP",
    "RunInterrupted",
    "add_stop_hook",
    "check_stop",
    "handle_stop_signals",
    "sleep_unless_stopped",
    "stop_for_closed_stdout",
]

STOP = threading.Event()
"""Set once the run is stopping; every paid call checks it first."""

_STOP_HOOKS: list[Callable[[], None]] = []


def add_stop_hook(hook: Callable[[], None]) -> None:
    """Run ``hook`` (once, in the main thread) when a stop signal arrives, before the run unwinds.

    For a backend whose library reports its own connections dying as ERROR logs with
    tracebacks (py4j, when Ctrl-C also stops ScienceWorld's JVMs): the hook silences it, so
    the one message that says how to resume is not buried. Registering twice runs it once.
    """
    if hook not in _STOP_HOOKS:
        _STOP_HOOKS.append(hook)


def _run_stop_hooks() -> None:
    for hook in list(_STOP_HOOKS):
        with contextlib.suppress(Exception):  # quieting noise must never break stopping
            hook()


_EXIT_CODES = {signal.SIGINT: 130, signal.SIGTERM: 143}


class RunInterrupted(KeyboardInterrupt):
    """Raised when the run is stopping (Ctrl-C, SIGTERM, or another episode failed).

    A ``KeyboardInterrupt`` so that ``except Exception`` in library code never swallows it.
    """

    def __init__(self, message: str = "interrupted", *, signum: int = signal.SIGINT) -> None:
        super().__init__(message)
        self.signum = signum

    @property
    def signal_name(self) -> str:
        return signal.Signals(self.signum).name

    @property
    def exit_code(self) -> int:
        """128 + signal number, as shells report it: 130 for Ctrl-C, 143 for SIGTERM."""
        return _EXIT_CODES.get(self.signum, 128 + self.signum)


def stop_for_closed_stdout() -> RunInterrupted:
    """What to raise when a reader closed stdout (``| head``): the run stops as on Ctrl-C
    (resumable, nothing lost), and later output goes nowhere instead of failing again."""
    with contextlib.suppress(OSError, ValueError):
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    if not STOP.is_set():
        STOP.set()
        _run_stop_hooks()
    return RunInterrupted("stdout closed", signum=signal.SIGPIPE)


def check_stop(what: str = "call") -> None:
    """Raise ``RunInterrupted`` if the run is stopping (called before every paid call)."""
    if STOP.is_set():
        raise RunInterrupted(f"stopping: {what} not started")


def sleep_unless_stopped(seconds: float) -> None:
    """``time.sleep`` that ends at once, raising ``RunInterrupted``, when the run stops."""
    if STOP.wait(max(0.0, seconds)):
        raise RunInterrupted("stopping: back-off interrupted")


@contextmanager
def handle_stop_signals() -> Iterator[None]:
    """Route SIGINT and SIGTERM to ``STOP`` + ``RunInterrupted`` while the block runs.

    Outside the main thread (where Python cannot install handlers) this does nothing.
    """
    STOP.clear()
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, frame: object) -> None:
        if STOP.is_set():
            return  # already unwinding: let the clean-up and the message finish
        STOP.set()
        _run_stop_hooks()
        raise RunInterrupted(f"interrupted by {signal.Signals(signum).name}", signum=signum)

    previous = {s: signal.signal(s, handler) for s in _EXIT_CODES}
    try:
        yield
    finally:
        for s, h in previous.items():
            if signal.getsignal(s) is handler:  # the block may have chosen to ignore them
                signal.signal(s, h)
