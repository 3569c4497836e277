"""Which replica a call goes to, and which replicas are out for now.

A model may list several OpenAI-compatible base URLs (vLLM data-parallel replicas on several
GPUs or hosts). Each call starts on the replica a stable hash of its ``call_id`` picks (a
repeat lands where the first went, which keeps that replica's prefix cache warm for an
episode's growing prompt) and moves to the next on retry. A replica that fails the way a dead
or overloaded server fails (no connection, a timeout, 502/503/504) is taken out for a while
— 5 s, doubling on every further failure up to 5 min — so later calls skip it instead of
each paying a failed attempt and a back-off; it comes back after that time (the next call
that would start there tries it again) or on its first answer. When every replica is out,
calls go to the one that comes back first rather than failing without trying.

Which replica served a call is recorded in ``llm_calls.jsonl`` (``endpoint``); the response
cache and replay never depend on it.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Callable, Sequence

from speedrunner.core.llm.provider import CallFailure

__all__ = ["Replicas"]

FIRST_OUT_S = 5.0
MAX_OUT_S = 300.0
DOWN_STATUSES = frozenset({502, 503, 504})


def looks_down(failure: CallFailure) -> bool:
    """A failure that says the server is gone or overloaded, not that the request was bad."""
    return failure.kind in ("connection", "timeout") or failure.status in DOWN_STATUSES


class Replicas:
    """The endpoints of one model with a shared (per process) view of which are out."""

    def __init__(
        self, endpoints: Sequence[str], *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        if not endpoints:
            raise ValueError("a model needs at least one endpoint")
        self.endpoints = list(endpoints)
        self._clock = clock
        self._lock = threading.Lock()
        self._out_until: dict[str, float] = {}
        self._out_for: dict[str, float] = {}

    def pick(self, call_id: str, attempt: int) -> str:
        """The replica for attempt ``attempt`` (1-based) of ``call_id``."""
        n = len(self.endpoints)
        start = int.from_bytes(hashlib.sha256(call_id.encode()).digest()[:8], "big")
        order = [self.endpoints[(start + attempt - 1 + i) % n] for i in range(n)]
        if n == 1:
            return order[0]
        now = self._clock()
        with self._lock:
            usable = [e for e in order if self._out_until.get(e, 0.0) <= now]
            if usable:
                return usable[0]
            return min(order, key=lambda e: self._out_until[e])

    def failed(self, endpoint: str, failure: CallFailure) -> None:
        if not looks_down(failure) or len(self.endpoints) == 1:
            return
        with self._lock:
            out_for = min(MAX_OUT_S, self._out_for.get(endpoint, FIRST_OUT_S / 2) * 2)
            self._out_for[endpoint] = out_for
            self._out_until[endpoint] = self._clock() + out_for

    def answered(self, endpoint: str) -> None:
        with self._lock:
            self._out_until.pop(endpoint, None)
            self._out_for.pop(endpoint, None)

    def out(self) -> list[str]:
        """The replicas taken out right now (for messages and tests)."""
        now = self._clock()
        with self._lock:
            return [e for e in self.endpoints if self._out_until.get(e, 0.0) > now]
