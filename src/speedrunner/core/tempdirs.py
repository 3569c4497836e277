"""Temporary directories named after the process that made them, so the next run can remove
what a killed one left.

A run killed by SIGKILL, the OOM killer or a cluster's preemption removes nothing: each of its
sandboxes left an (often empty) ``speedrunner-sandbox-*`` directory in ``/tmp``, and on a busy
test machine they piled up by the hundred. ``process_temp_dir`` names a directory
``<prefix><pid>-<random>`` (``mkdtemp``: mode 0700, a name nobody can predict) and, the first
time a process uses a prefix, removes that prefix's directories whose process is gone and
which nothing has touched for an hour (a live process in another pid namespace sharing
``/tmp`` looks gone from here; an hour of quiet spares its directories).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import threading
import time
from pathlib import Path

STALE_AFTER_S = 3600.0
"""A dead process's directory is removed once it has been left alone this long."""

_swept: set[str] = set()
_lock = threading.Lock()


def process_temp_dir(prefix: str) -> Path:
    """A fresh private directory ``<tmp>/<prefix><pid>-<random>``; see the module docstring."""
    with _lock:
        first = prefix not in _swept
        _swept.add(prefix)
    if first:
        remove_stale(prefix)
    return Path(tempfile.mkdtemp(prefix=f"{prefix}{os.getpid()}-"))


def remove_stale(prefix: str, where: str | None = None, *, stale_after_s: float = STALE_AFTER_S) -> list[str]:
    """Remove ``prefix<pid>-*`` directories in ``where`` (the temp dir) whose process is gone and
    whose modification time is older than ``stale_after_s``; returns their names."""
    removed: list[str] = []
    now = time.time()
    with contextlib.suppress(OSError):
        for entry in os.scandir(where or tempfile.gettempdir()):
            if not entry.name.startswith(prefix):
                continue
            pid = entry.name[len(prefix):].split("-", 1)[0]
            if not pid.isdigit() or int(pid) == os.getpid() or os.path.exists(f"/proc/{pid}"):
                continue
            with contextlib.suppress(OSError):
                if not entry.is_dir(follow_symlinks=False) or now - entry.stat(follow_symlinks=False).st_mtime < stale_after_s:
                    continue
                shutil.rmtree(entry.path, ignore_errors=True)
                removed.append(entry.name)
    return removed
