"""Per-endpoint concurrency limits across every node of a Ray cluster.

Slot files (``slots.py``) hold a limit per machine. A sweep on a Ray cluster runs on many
machines, so ``speedrunner sweep --backend ray --address ...`` starts one named actor that
holds every endpoint's slots for the whole cluster, and its runs take a slot from it for each
call. A slot is a lease: a run SIGKILLed while it holds one cannot give it back, so a lease
ends by itself after ``lease_s`` (longer than any call's timeout), and a dead run's slot
is free again then — never held for ever.

The run processes connect to the cluster lazily, on their first call, as Ray clients.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
import uuid
from types import TracebackType
from typing import Any

from speedrunner.core.interrupt import sleep_unless_stopped

__all__ = ["LIMITER_ACTOR_ENV", "LIMITER_ADDRESS_ENV", "RayLimit", "limiter_env", "start_limiter"]

LIMITER_ACTOR_ENV = "SPEEDRUNNER_LLM_LIMITER_ACTOR"
LIMITER_ADDRESS_ENV = "SPEEDRUNNER_LLM_LIMITER_ADDRESS"
NAMESPACE = "speedrunner"
POLL_S = 0.02


class _Limiter:
    """The actor: per endpoint key, the leases held now (lease id -> expiry)."""

    def __init__(self) -> None:
        self.held: dict[str, dict[str, float]] = {}
        self.peak: dict[str, int] = {}

    def acquire(self, key: str, limit: int, lease_s: float) -> str | None:
        now = time.monotonic()
        leases = {k: v for k, v in self.held.get(key, {}).items() if v > now}
        if len(leases) >= limit:
            self.held[key] = leases
            return None
        lease = uuid.uuid4().hex
        leases[lease] = now + lease_s
        self.held[key] = leases
        self.peak[key] = max(self.peak.get(key, 0), len(leases))
        return lease

    def release(self, key: str, lease: str) -> None:
        self.held.get(key, {}).pop(lease, None)

    def peaks(self) -> dict[str, int]:
        return dict(self.peak)


HEAD_NODE = "node:__internal_head__"
"""Ray's resource that only the head node has: the limiter lives there, so losing a worker
node (what a sweep must survive) never takes the cluster's limit with it."""


def start_limiter(ray: Any, name: str) -> Any:
    """Start (or find) the sweep's limiter actor on the connected cluster's head node."""
    actor = ray.remote(num_cpus=0, max_concurrency=1)(_Limiter)
    return actor.options(
        name=name,
        namespace=NAMESPACE,
        lifetime="detached",
        get_if_exists=True,
        resources={HEAD_NODE: 0.001},
    ).remote()


def limiter_env(address: str, name: str) -> dict[str, str]:
    return {LIMITER_ADDRESS_ENV: address, LIMITER_ACTOR_ENV: name}


_connect_lock = threading.Lock()
_actor: Any = None


def _limiter() -> Any:
    global _actor
    with _connect_lock:
        if _actor is None:
            import ray

            if not ray.is_initialized():
                ray.init(
                    address=os.environ[LIMITER_ADDRESS_ENV],
                    namespace=NAMESPACE,
                    log_to_driver=False,
                    include_dashboard=False,
                )
            _actor = ray.get_actor(os.environ[LIMITER_ACTOR_ENV], namespace=NAMESPACE)
        return _actor


class RayLimit:
    """At most ``limit`` holders at once among every process of the cluster using the actor."""

    def __init__(self, key: str, limit: int, *, lease_s: float) -> None:
        self.key, self.limit, self.lease_s = key, limit, lease_s
        self._local = threading.local()
        self._fallback: threading.BoundedSemaphore | None = None
        self._fallback_lock = threading.Lock()

    def __enter__(self) -> RayLimit:
        import ray

        if self._fallback is not None:
            self._fallback.acquire()
            return self
        try:
            actor = _limiter()
            while True:
                lease = ray.get(actor.acquire.remote(self.key, self.limit, self.lease_s))
                if lease is not None:
                    self._local.lease = lease
                    return self
                sleep_unless_stopped(POLL_S)
        except (ray.exceptions.RayError, ConnectionError, ValueError) as e:
            # The cluster's limiter is gone (its head died, or the sweep ended it): the run goes
            # on under this process's own limit rather than failing its calls.
            with self._fallback_lock:
                if self._fallback is None:
                    print(
                        "warning: the cluster-wide LLM limit is unreachable "
                        f"({type(e).__name__}); this run now holds {self.key} to {self.limit} "
                        "call(s) in flight by itself",
                        file=sys.stderr,
                    )
                    self._fallback = threading.BoundedSemaphore(self.limit)
            self._fallback.acquire()
            return self

    def __exit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        import ray

        lease = getattr(self._local, "lease", None)
        if lease is None:
            if self._fallback is not None:
                self._fallback.release()
            return
        self._local.lease = None
        with contextlib.suppress(ray.exceptions.RayError):  # a lost limiter ends the lease anyway
            ray.get(_limiter().release.remote(self.key, lease))
