"""Per-endpoint concurrency limits shared by every process on one machine.

``model.max_concurrency`` caps the calls in flight to one endpoint. Inside one process a
semaphore does that; a sweep runs many runs as separate processes (local pool, SLURM
shards, Ray tasks on a node), and each would otherwise get the whole limit to itself.
When ``SPEEDRUNNER_LLM_SLOTS_DIR`` is set (``speedrunner sweep`` sets it for its runs),
a call also takes one of ``max_concurrency`` slot files for its endpoint under that
directory with ``flock``.

Why lock files rather than a limiter service (e.g. a Ray actor): the kernel releases a
``flock`` the moment its process dies, so a SIGKILLed run can never leak a slot; there is
nothing to start, to find or to keep alive; it works the same for processes, SLURM tasks
and Ray workers on a node; and a slot costs an ``open`` + ``flock`` (microseconds), not a
round trip. The limit is per machine: runs on N nodes may have N x max_concurrency calls
in flight (cap a shared server with its own limit, e.g. vLLM ``--max-num-seqs``). Runs
with different limits for one endpoint share slots ``0..limit-1``: the largest limit
bounds the total, and each run never exceeds its own.

The directory is trusted state (a pre-created symlink in a shared ``/tmp`` would redirect
the slot files, written as the running user): ``speedrunner sweep`` makes a fresh one with
an unpredictable name (``mkdtemp``, mode 0700), and every directory and file here is opened
relative to a descriptor with ``O_NOFOLLOW``. A directory not owned by the running user,
open to others, or a symlink is refused with a message saying what to do.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import os
import threading
from pathlib import Path
from types import TracebackType
from typing import Protocol

from speedrunner.core.interrupt import sleep_unless_stopped

__all__ = ["SLOTS_DIR_ENV", "EndpointLimit", "SharedSlots", "UnsafeSlotsDirError", "endpoint_limit"]

SLOTS_DIR_ENV = "SPEEDRUNNER_LLM_SLOTS_DIR"


class EndpointLimit(Protocol):
    def __enter__(self) -> object: ...

    def __exit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> bool | None: ...


def endpoint_limit(
    provider: str, endpoint: str, limit: int, *, lease_s: float = 900.0
) -> EndpointLimit:
    """The limiter for one endpoint: cluster-wide under a Ray-cluster sweep (``ray_limits``),
    machine-wide when ``SPEEDRUNNER_LLM_SLOTS_DIR`` is set, else per process. ``lease_s``
    bounds how long a cluster slot outlives a run killed while holding it."""
    if provider == "scripted":  # the scripted model has no endpoint to protect
        return threading.BoundedSemaphore(limit)
    from speedrunner.core.llm.ray_limits import LIMITER_ACTOR_ENV, RayLimit

    if os.environ.get(LIMITER_ACTOR_ENV):
        return RayLimit(f"{provider} {endpoint}", limit, lease_s=lease_s)
    directory = os.environ.get(SLOTS_DIR_ENV)
    if not directory:
        return threading.BoundedSemaphore(limit)
    return SharedSlots(Path(directory), f"{provider} {endpoint}", limit)


class UnsafeSlotsDirError(OSError):
    """The slot directory is a symlink, not the running user's, or open to other users."""


_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def _private_dir(name: str | Path, *, dir_fd: int | None = None, shown: Path) -> int:
    """A descriptor of directory ``name`` (made 0700 if missing), checked to be ours and private."""
    with contextlib.suppress(FileExistsError):
        os.mkdir(name, 0o700, dir_fd=dir_fd)
    try:
        fd = os.open(name, _DIR_FLAGS, dir_fd=dir_fd)
    except OSError as e:  # ELOOP: a symlink; ENOTDIR: a file
        raise UnsafeSlotsDirError(
            f"LLM slot directory {shown} is not a plain directory ({e.strerror}): remove it, "
            f"or point {SLOTS_DIR_ENV} elsewhere (unset, a sweep makes a private one)"
        ) from None
    st = os.fstat(fd)
    if st.st_uid != os.geteuid() or st.st_mode & 0o077:
        os.close(fd)
        raise UnsafeSlotsDirError(
            f"LLM slot directory {shown} is owned by uid {st.st_uid} with mode "
            f"{st.st_mode & 0o7777:04o}: it must be yours (uid {os.geteuid()}) with mode 0700, "
            "or another user could take or redirect its slots; chmod 0700 it, or point "
            f"{SLOTS_DIR_ENV} elsewhere (unset, a sweep makes a private one)"
        )
    return fd


class SharedSlots:
    """At most ``limit`` holders at once among all threads of all processes using ``directory``."""

    def __init__(self, directory: Path, key: str, limit: int, *, poll_s: float = 0.01) -> None:
        self.limit, self.poll_s = limit, poll_s
        self.dir = directory / hashlib.sha256(key.encode()).hexdigest()[:16]
        top = _private_dir(directory, shown=directory)
        try:
            self._dir_fd = _private_dir(self.dir.name, dir_fd=top, shown=self.dir)
        finally:
            os.close(top)
        with contextlib.suppress(FileExistsError):  # for a human looking at the directory
            fd = os.open(
                "endpoint.txt",
                os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                0o600,
                dir_fd=self._dir_fd,
            )
            with os.fdopen(fd, "w") as f:
                f.write(key + "\n")
        self._local = threading.BoundedSemaphore(
            limit
        )  # this process's threads queue here, not by polling
        self._held = threading.local()

    def __enter__(self) -> SharedSlots:
        self._local.acquire()
        try:
            fd = self._take()
        except BaseException:
            self._local.release()
            raise
        self._held.fds = [*getattr(self._held, "fds", []), fd]
        return self

    def __exit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        fd = self._held.fds.pop()
        try:
            fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)
            self._local.release()

    def _take(self) -> int:
        while (fd := self._try_once()) is None:
            sleep_unless_stopped(self.poll_s)  # a stopping run gives up its wait at once
        return fd

    def _try_once(self) -> int | None:
        """A locked slot file's descriptor, or None when every slot is held."""
        start = threading.get_ident() % self.limit  # spread first tries over the slots
        for i in range(self.limit):
            name = f"slot{(start + i) % self.limit}"
            try:
                fd = os.open(
                    name,
                    os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC,
                    0o600,
                    dir_fd=self._dir_fd,
                )
            except OSError as e:
                if e.errno != errno.ELOOP:
                    raise
                raise UnsafeSlotsDirError(
                    f"LLM slot file {self.dir / name} is a symlink (not followed): someone "
                    f"with access to {self.dir} planted it; remove it, or point "
                    f"{SLOTS_DIR_ENV} elsewhere (unset, a sweep makes a private one)"
                ) from None
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return fd
            except BlockingIOError:
                os.close(fd)
        return None
