"""One sandbox process owned at a time: started on demand, replaced when it died, killed on close.

The analysis session and the skill runner both hold one child this way; they differ only in
how a child is started (``_start_process``) and what a fresh one needs before use.
"""

from __future__ import annotations

import abc
import contextlib
from typing import Self

from speedrunner.core.sandbox.process import SandboxProcess


class SandboxOwner(abc.ABC):
    """Holds at most one ``SandboxProcess``; a context manager whose exit (or ``close``) kills
    it."""

    def __init__(self, what: str) -> None:
        """``what``: the owner's name in the error for use after ``close`` ("the skill runner")."""
        self._what = what
        self._process: SandboxProcess | None = None
        self._closed = False

    @property
    def pid(self) -> int | None:
        """Host pid of the current sandbox process (changes only when it had to be replaced)."""
        return None if self._process is None else self._process.pid

    @abc.abstractmethod
    def _start_process(self) -> SandboxProcess:
        """A fresh child for this owner."""

    def _live_process(self) -> tuple[SandboxProcess, bool]:
        """The current process, or a fresh one if there is none or it died (then ``True``)."""
        if self._closed:
            raise RuntimeError(f"{self._what} is closed")
        if self._process is not None and self._process.alive:
            return self._process, False
        self._discard_process()
        self._process = self._start_process()
        return self._process, True

    def _discard_process(self) -> None:
        if self._process is not None:
            self._process.kill()
            self._process = None

    def close(self) -> None:
        """Kill the sandbox process and remove its scratch directory (idempotent)."""
        self._closed = True
        self._discard_process()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        with contextlib.suppress(Exception):
            self.close()
