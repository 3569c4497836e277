"""Resource limits of one sandbox process, applied by the child to itself before any
untrusted code exists in it.

The limits bound what one runaway skill or analysis snippet can take from the machine;
the wall-clock timeout of each call (enforced by the parent, which kills the process
group) bounds how long. ``cpu_s`` is per *process*, and one process serves every call of
an episode, so it is a ceiling on the whole episode's skill CPU, not per call: when a
process runs out, the parent reports it and starts a fresh one for the next call.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True)
class ProcessLimits:
    """What one sandbox process may use (``RLIMIT_*``), and how much of its output is kept."""

    memory_mb: int = 1024
    """Address space of each process (``RLIMIT_AS``): a bigger allocation raises ``MemoryError``."""
    tree_memory_mb: int = 2048
    """Memory of the sandbox's whole process tree (a cgroup, where the machine offers one; see
    ``cgroups.py``): going over it gets a process of the tree killed by the kernel."""
    cpu_s: int = 600
    """CPU seconds for the process's lifetime (``RLIMIT_CPU``; SIGXCPU, then SIGKILL 1 s later)."""
    file_size_mb: int = 16
    """Largest file the process may write (``RLIMIT_FSIZE``; larger writes fail with EFBIG)."""
    open_files: int = 64
    """Open file descriptors (``RLIMIT_NOFILE``)."""
    processes: int = 32
    """Processes and threads a sandbox may add to its user's (``RLIMIT_NPROC``, which the kernel
    counts machine-wide: the child's limit is this plus the uid's tasks when it starts); stops
    fork bombs. Only enforced for a non-root user, which is why a root parent runs the child as
    uid 65534. Where cgroups work, the whole tree is also capped at this many tasks (plus the
    wrappers') by ``pids.max``."""
    scratch_mb: int = 64
    """Size of the scratch directory (a private tmpfs under bwrap and unshare, so nothing reaches
    the disk); ``/tmp`` and ``/dev/shm`` are private tmpfs mounts of 16 MiB each there."""
    max_print_chars: int = 10_000
    """Printed characters kept per call (skills) or per ``run`` (analysis); the rest is counted."""

    def __post_init__(self) -> None:
        for name, value in asdict(self).items():
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"ProcessLimits.{name} must be a positive integer, got {value!r}")

    def to_json(self) -> dict[str, Any]:
        return asdict(self)
