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


def remove_stale(prefix: str) -> list[str]:
    """Remove ``prefix<pid>-*`` directories in the temp dir whose process is gone and which have
    not been modified for ``STALE_AFTER_S``; returns their names."""
    removed: list[str] = []
    now = time.time()
    with contextlib.suppress(OSError):
        for entry in os.scandir(tempfile.gettempdir()):
            if not owner_gone(entry.name, prefix):
                continue
            with contextlib.suppress(OSError):
                if (
                    not entry.is_dir(follow_symlinks=False)
                    or now - entry.stat(follow_symlinks=False).st_mtime < STALE_AFTER_S
                ):
                    continue
                shutil.rmtree(entry.path, ignore_errors=True)
                removed.append(entry.name)
    return removed


def owner_gone(name: str, prefix: str) -> bool:
    """Whether ``name`` is ``prefix<pid>-...`` and process ``pid`` no longer exists here."""
    if not name.startswith(prefix):
        return False
    pid = name[len(prefix) :].split("-", 1)[0]
    return pid.isdigit() and not os.path.exists(f"/proc/{pid}")
