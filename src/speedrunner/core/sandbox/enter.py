"""The first program inside the ``unshare`` and ``rlimits`` tiers: it builds what bubblewrap
would (a private root, under ``unshare``), installs the seccomp filter, then execs the child.

Started as ``python -I -B -c <bootstrap> <package root> <spec json> <child argv...>``, as
root of the new namespaces (``unshare``: a private mount namespace of its own, inside
new pid and network namespaces). With ``spec["root"]`` it:

1. mounts a small tmpfs on that (empty) directory, the future ``/``;
2. bind-mounts every path of ``spec["binds"]`` read-only (``nosuid``, ``nodev``) at the
   same place, recreates ``spec["symlinks"]``, bind-mounts the few ``/dev`` nodes a
   program needs, a fresh ``/proc`` of the new pid namespace, and sized tmpfs mounts for
   ``/tmp``, ``/dev/shm`` and the scratch directory;
3. ``pivot_root``s into it and detaches the old root: no host path is reachable any more
   (the rest of the run directory, other runs, host unix sockets, the host's ``/tmp``).

Then, on every tier that uses it, the seccomp filter (``seccomp.py``) and ``execv``. It
imports only the standard library and two small modules of this package.
"""

from __future__ import annotations

import ctypes
import json
import os
import sys
from typing import Any

MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 16384, 1 << 18
MNT_DETACH = 2
_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41}
DEVICES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom")

_libc = ctypes.CDLL(None, use_errno=True)


def _check(result: int, what: str) -> None:
    if result != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"{what}: {os.strerror(errno)}")


def _enc(text: str | None) -> bytes | None:
    return None if text is None else text.encode()


def mount(
    source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None
) -> None:
    _check(
        _libc.mount(_enc(source), _enc(target), _enc(fstype), ctypes.c_ulong(flags), _enc(data)),
        f"mount {source or ''} on {target}",
    )


def _make(path: str, *, directory: bool) -> None:
    os.makedirs(path if directory else os.path.dirname(path), mode=0o755, exist_ok=True)
    if not directory and not os.path.lexists(path):
        with open(path, "w"):
            pass


_KEPT_FLAGS = (
    (os.ST_NOEXEC, MS_NOEXEC),
    (os.ST_NOATIME, 1024),
    (os.ST_NODIRATIME, 2048),
    (os.ST_RELATIME, 1 << 21),
)
"""Flags of the source mount a read-only remount must keep: inside a user namespace (a non-root
parent) the kernel refuses to drop them."""


def _bind_ro(source: str, target: str) -> None:
    _make(target, directory=os.path.isdir(source))
    mount(source, target, None, MS_BIND | MS_REC)
    had = os.statvfs(target).f_flag
    kept = sum(ms for st, ms in _KEPT_FLAGS if had & st)
    mount(None, target, None, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV | kept)


def build_root(spec: dict[str, Any]) -> None:
    """Steps 1-3 of the module docstring."""
    root = spec["root"]
    mount(None, "/", None, MS_REC | MS_PRIVATE)  # nothing we mount propagates to the host
    mount("tmpfs", root, "tmpfs", MS_NOSUID | MS_NODEV, "size=1m,mode=0755")

    def inside(path: str) -> str:
        return root + path

    for path, size, mode in sorted(
        spec["tmpfs"], key=lambda t: len(t[0])
    ):  # before what is mounted in them
        _make(inside(path), directory=True)
        mount("tmpfs", inside(path), "tmpfs", MS_NOSUID | MS_NODEV, f"size={int(size)},mode={mode}")
    for source in spec["binds"]:
        if os.path.exists(source):
            _bind_ro(source, inside(source))
    for target, link in spec["symlinks"]:
        _make(os.path.dirname(inside(link)), directory=True)
        os.symlink(target, inside(link))
    for device in DEVICES:
        _make(inside(device), directory=False)
        mount(device, inside(device), None, MS_BIND)
    _make(inside("/proc"), directory=True)
    mount("proc", inside("/proc"), "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    os.chdir(root)
    _check(_libc.syscall(_PIVOT_ROOT[os.uname().machine], b".", b"."), "pivot_root")
    _check(_libc.umount2(b".", MNT_DETACH), "detach the old root")
    os.chdir("/")
    mount(None, "/", None, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV)


def main(spec_json: str, argv: list[str]) -> None:
    spec = json.loads(spec_json)
    from speedrunner.core.sandbox import seccomp  # before the host's files are out of reach

    try:
        if spec.get("root"):
            build_root(spec)
        if spec.get("chdir"):
            os.chdir(spec["chdir"])
        if spec.get("seccomp"):
            seccomp.install()
    except OSError as e:
        print(f"sandbox setup failed: {e}", file=sys.stderr, flush=True)
        os._exit(71)
    os.execv(argv[0], argv)
