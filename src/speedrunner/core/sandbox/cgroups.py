"""A memory and pids cgroup per sandbox, so a limit covers the sandbox's whole process tree.

``RLIMIT_AS`` and ``RLIMIT_NPROC`` are per process (and per uid): six children of 700 MB
each stay under a 1 GiB ``RLIMIT_AS`` and together take 4 GB. A cgroup counts every
process the sandbox starts, double-forked daemons included, and they cannot leave it
(moving a task needs write access to the cgroup tree, which uid 65534 does not have).

Where the kernel offers it, each sandbox gets:

- cgroup v2 (the unified hierarchy has the ``memory`` controller): one directory with
  ``memory.max``, ``memory.swap.max`` = 0 and ``pids.max``;
- cgroup v1 (separate ``memory`` and ``pids`` hierarchies, as on many older hosts): one
  directory in each, ``memory.limit_in_bytes`` (+ ``memory.memsw.limit_in_bytes``) and
  ``pids.max``.

The directories are created by the parent under the parent's own cgroup (so a limit the
parent lives under still holds for its sandboxes), joined by the child's wrapper as its
first act (``join_prefix``: before the interpreter starts, so nothing it runs is outside),
emptied with SIGKILL and removed when the sandbox ends.

Where cgroups cannot be used (not root, a read-only ``/sys/fs/cgroup``, a container
without delegation, or a v2 host where the run's own cgroup holds processes, so the
controllers cannot be enabled below it), ``create`` returns ``None`` and logs one warning
that names the gap and its fix: then only the per-process rlimits hold (the tree's memory is
unbounded in total; a fork bomb is still capped by ``RLIMIT_NPROC`` for a root parent).
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from speedrunner.core.tempdirs import owner_gone

log = logging.getLogger(__name__)

PREFIX = "speedrunner-sandbox-"
V2_NOT_DELEGATED = (
    "the memory and pids controllers cannot be enabled for sandboxes under {parent} ({error}): "
    "cgroup v2 enables them for a cgroup's children only while it holds no process itself, and "
    "this run's cgroup holds the run (and whatever shares it, e.g. a login shell). Fix: start the "
    "run in a cgroup of its own with the controllers delegated, e.g. "
    "`systemd-run --user --scope -p Delegate=yes python -m ...` "
    "(as root: `systemd-run --scope -p Delegate=yes ...`), or in a container whose cgroup is "
    "delegated"
)
"""The warning's reason on a cgroup v2 host where the run's own cgroup has processes (the usual case
for a program started from a shell): the sandbox then falls back to per-process rlimits."""
_warned = threading.Event()


@dataclass(frozen=True)
class Hierarchies:
    """Where sandbox cgroups go: one v2 parent directory, or v1 ``memory`` and ``pids`` parents."""

    version: int
    parents: tuple[Path, ...]
    """v2: ``(parent,)``; v1: ``(memory parent, pids parent)``."""


def _mounts(mounts_file: str = "/proc/self/mounts") -> list[tuple[Path, str, set[str]]]:
    found = []
    with open(mounts_file, encoding="utf-8") as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 4 and parts[2] in ("cgroup", "cgroup2"):
                found.append(
                    (Path(parts[1].replace("\\040", " ")), parts[2], set(parts[3].split(",")))
                )
    return found


def _own_paths(cgroup_file: str = "/proc/self/cgroup") -> dict[str, str]:
    """Controller (``""`` for v2) -> this process's cgroup path in that hierarchy."""
    own: dict[str, str] = {}
    with open(cgroup_file, encoding="utf-8") as f:
        for line in f:
            _, controllers, path = line.rstrip("\n").split(":", 2)
            for c in controllers.split(",") if controllers else [""]:
                own[c] = path
    return own


def discover() -> Hierarchies | str:
    """Where this process may put sandbox cgroups, or why nowhere (a sentence)."""
    try:
        mounts, own = _mounts(), _own_paths()
    except OSError as e:
        return f"cannot read the cgroup mounts ({e})"
    for mount, kind, _ in mounts:
        if kind == "cgroup2":
            try:
                controllers = set((mount / "cgroup.controllers").read_text().split())
            except OSError:
                continue
            if {"memory", "pids"} <= controllers:
                return Hierarchies(2, (mount / own.get("", "/").lstrip("/"),))
    v1 = {}
    for mount, kind, options in mounts:
        for controller in ("memory", "pids"):
            if kind == "cgroup" and controller in options and controller not in v1:
                v1[controller] = mount / own.get(controller, "/").lstrip("/")
    if len(v1) == 2:
        return Hierarchies(1, (v1["memory"], v1["pids"]))
    missing = [c for c in ("memory", "pids") if c not in v1]
    return (
        "no cgroup v2 hierarchy with the memory and pids controllers, "
        f"and no cgroup v1 {' or '.join(missing)} hierarchy"
    )


@dataclass
class Cgroup:
    """One sandbox's cgroup directories (one for v2, memory + pids for v1)."""

    version: int
    dirs: tuple[Path, ...]
    memory_bytes: int
    pids_max: int
    removed: bool = field(default=False)

    @property
    def procs_files(self) -> list[str]:
        """The files a process writes its pid into to join (all of them, in order)."""
        return [str(d / "cgroup.procs") for d in self.dirs]

    def pids(self) -> set[int]:
        found: set[int] = set()
        for d in self.dirs:
            with contextlib.suppress(OSError, ValueError):
                found |= {int(p) for p in (d / "cgroup.procs").read_text().split()}
        return found

    def memory_peak_bytes(self) -> int | None:
        """The most memory the tree used at once (``None`` if the kernel does not say)."""
        name = "memory.peak" if self.version == 2 else "memory.max_usage_in_bytes"
        try:
            return int((self.dirs[0] / name).read_text())
        except (OSError, ValueError):
            return None

    def oom_kills(self) -> int:
        """How many of the tree's processes the kernel killed for going over the memory limit."""
        name = "memory.events" if self.version == 2 else "memory.oom_control"
        try:
            for line in (self.dirs[0] / name).read_text().splitlines():
                key, _, value = line.partition(" ")
                if key == "oom_kill":
                    return int(value)
        except (OSError, ValueError):
            pass
        return 0

    def kill(self, rounds: int = 200) -> None:
        """SIGKILL every process in the cgroup until none is left (``pids.max`` bounds the race)."""
        if self.version == 2:
            with contextlib.suppress(OSError):
                (self.dirs[0] / "cgroup.kill").write_text("1")
        for _ in range(rounds):
            pids = self.pids()
            if not pids:
                return
            for pid in pids:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.005)

    def remove(self) -> None:
        """Kill what is left and remove the directories (idempotent; best effort)."""
        if self.removed:
            return
        self.kill()
        for d in self.dirs:
            for _ in range(100):  # a killed task leaves the cgroup a moment after SIGKILL
                try:
                    d.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.01)
        self.removed = True


def create(
    memory_bytes: int, pids_max: int, *, where: Hierarchies | str | None = None
) -> Cgroup | None:
    """A fresh cgroup with these limits, or ``None`` (warned once) where none can be made."""
    where = discover() if where is None else where
    if isinstance(where, str):
        return _unavailable(where)
    name = f"{PREFIX}{os.getpid()}-{uuid.uuid4().hex[:12]}"
    made: list[Path] = []
    enabling: OSError | None = None
    try:
        if where.version == 2:  # the controllers must be enabled for our children (best effort)
            try:
                (where.parents[0] / "cgroup.subtree_control").write_text("+memory +pids")
            except (
                OSError
            ) as e:  # EBUSY: our own cgroup holds processes (v2's "no internal processes")
                enabling = e
        for parent in where.parents:
            _remove_stale(parent)
            d = parent / name
            d.mkdir(mode=0o755)
            made.append(d)
            if not (d / "cgroup.procs").exists():
                raise OSError(
                    f"{parent} is not a cgroup file system (no cgroup.procs in a new directory)"
                )
        if where.version == 2:
            if not (made[0] / "memory.max").exists():
                raise OSError(
                    V2_NOT_DELEGATED.format(
                        parent=where.parents[0], error=enabling or "not enabled"
                    )
                )
            (made[0] / "memory.max").write_text(str(memory_bytes))
            with contextlib.suppress(OSError):
                (made[0] / "memory.swap.max").write_text("0")
            (made[0] / "pids.max").write_text(str(pids_max))
        else:
            (made[0] / "memory.limit_in_bytes").write_text(str(memory_bytes))
            with contextlib.suppress(OSError):  # only with swap accounting
                (made[0] / "memory.memsw.limit_in_bytes").write_text(str(memory_bytes))
            (made[1] / "pids.max").write_text(str(pids_max))
    except OSError as e:
        for d in reversed(made):
            with contextlib.suppress(OSError):
                d.rmdir()
        return _unavailable(
            f"cannot create a cgroup under {', '.join(map(str, where.parents))}: {e}"
        )
    return Cgroup(where.version, tuple(made), memory_bytes, pids_max)


def _remove_stale(parent: Path) -> None:
    """Remove the cgroups a killed run left (named after its pid, which no longer exists)."""
    try:
        entries = [d for d in parent.iterdir() if owner_gone(d.name, PREFIX)]
    except OSError:
        return
    for d in entries:
        Cgroup(1, (d,), 0, 0).remove()


def _unavailable(reason: str) -> None:
    if not _warned.is_set():
        _warned.set()
        log.warning(
            "sandbox: %s; the memory limit of each sandbox is per process (RLIMIT_AS), not for its "
            "whole process tree, and its processes are capped by RLIMIT_NPROC only (run as root "
            "on a machine with writable cgroups for per-sandbox limits)",
            reason,
        )
    return None


def join_prefix(cgroup: Cgroup | None) -> list[str]:
    """A wrapper that moves itself into ``cgroup`` and then execs the command that follows."""
    if cgroup is None:
        return []
    files = cgroup.procs_files
    script = (
        'n=$1; shift; while [ "$n" -gt 0 ]; do echo $$ > "$1" || exit 97; shift; n=$((n-1)); done; '
        'exec "$@"'
    )
    return ["/bin/sh", "-c", script, "sh", str(len(files)), *files]
