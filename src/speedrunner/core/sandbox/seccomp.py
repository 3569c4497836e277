"""A seccomp filter that stops sandboxed code from creating user namespaces.

Inside a new user namespace an unprivileged process is root again: it may mount file
systems, create network devices and reach kernel code that is otherwise root-only — the
usual first step of a kernel exploit. bwrap's ``--disable-userns`` does this only with a
user namespace of its own, which a root parent does not use (see ``commands.py``), so
every tier installs this filter instead (bwrap through ``--seccomp``, the other tiers in
the wrapper that starts the child, ``enter.py``).

Refused with EPERM: ``unshare`` and ``clone`` with ``CLONE_NEWUSER``. ``clone3`` answers
ENOSYS (its flags are behind a pointer a filter cannot read; libc then falls back to
``clone``), and so does every system call of a foreign ABI (i386 ``int 0x80``, x32), which
would otherwise bypass the numbers checked here.
"""

from __future__ import annotations

import ctypes
import os
import platform
import struct

CLONE_NEWUSER = 0x10000000
_ARCHES = {  # machine -> (AUDIT_ARCH_*, unshare, clone, clone3)
    "x86_64": (0xC000003E, 272, 56, 435),
    "aarch64": (0xC00000B7, 97, 220, 435),
}
_LD_ABS, _JEQ, _JGE, _JSET, _RET = 0x20, 0x15, 0x35, 0x45, 0x06
_ALLOW = 0x7FFF0000
_ERRNO = 0x00050000
_EPERM, _ENOSYS = 1, 38
_X32_BIT = 0x40000000


def supported() -> bool:
    """Whether a filter exists for this machine's architecture."""
    return platform.machine() in _ARCHES


def program() -> bytes:
    """The filter as the kernel (and ``bwrap --seccomp``) reads it: an array of ``sock_filter``."""
    arch, unshare, clone, clone3 = _ARCHES[platform.machine()]
    x32 = platform.machine() == "x86_64"
    ins: list[tuple[int, int, int, int]] = []

    def emit(code: int, jt: int, jf: int, k: int) -> None:
        ins.append((code, jt, jf, k))

    # Offsets: seccomp_data.nr = 0, .arch = 4, .args[0] low word = 16 (little-endian).
    emit(_LD_ABS, 0, 0, 4)
    emit(_JEQ, 1, 0, arch)
    emit(_RET, 0, 0, _ERRNO | _ENOSYS)  # a foreign ABI
    emit(_LD_ABS, 0, 0, 0)
    if x32:
        emit(_JGE, 0, 1, _X32_BIT)
        emit(_RET, 0, 0, _ERRNO | _ENOSYS)
    emit(_JEQ, 0, 1, clone3)
    emit(_RET, 0, 0, _ERRNO | _ENOSYS)
    emit(_JEQ, 1, 0, unshare)
    emit(_JEQ, 0, 3, clone)
    emit(_LD_ABS, 0, 0, 16)
    emit(_JSET, 0, 1, CLONE_NEWUSER)
    emit(_RET, 0, 0, _ERRNO | _EPERM)
    emit(_RET, 0, 0, _ALLOW)
    return b"".join(struct.pack("=HBBI", *i) for i in ins)


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def install() -> None:
    """Apply the filter to this process and everything it will start (also sets no_new_privs)."""
    code = program()
    buffer = ctypes.create_string_buffer(code, len(code))
    prog = _SockFprog(len(code) // 8, ctypes.cast(buffer, ctypes.c_void_p))
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(38, 1, 0, 0, 0) != 0:  # PR_SET_NO_NEW_PRIVS: setuid binaries gain nothing
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS) failed")
    if libc.prctl(22, 2, ctypes.byref(prog), 0, 0) != 0:  # PR_SET_SECCOMP, SECCOMP_MODE_FILTER
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_SECCOMP) failed")


def program_fd() -> int:
    """A readable descriptor holding ``program()`` (for ``bwrap --seccomp FD``); the caller
    closes it."""
    fd = os.memfd_create("speedrunner-seccomp", 0)
    os.write(fd, program())
    os.lseek(fd, 0, os.SEEK_SET)
    return fd
