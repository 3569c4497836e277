"""One sandbox child process: started under a tier, talked to over pipes, killed whole.

What the child gets is decided here and nowhere else: ``python -I -B -S`` (no ``PYTHON*``
variables, no user site, no cwd on ``sys.path``, and no ``site`` module: the parent's
site-packages directories are put on ``sys.path`` as plain paths, so no ``.pth`` file runs
code in the child and a start costs one interpreter, not one plus every ``.pth`` hook
installed on the machine), an environment rebuilt from a short
allow-list (never API keys, never proxy settings), a scratch directory as cwd, HOME and
TMPDIR (removed when the process goes), its own session (``start_new_session``), stdout
and stderr into an anonymous log file (read back only to explain a death), and two
dedicated pipes for the protocol. The child imports ``speedrunner`` from the same source
tree as the parent: ``-I`` ignores ``PYTHONPATH``, so the bootstrap puts the parent's
package root first on ``sys.path`` itself; a preloaded plug-in module (a benchmark's skill API)
is imported from where the parent loads it (``commands.import_roots``).
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from speedrunner.core.sandbox import cgroups, seccomp
from speedrunner.core.sandbox.channel import Channel, ChannelClosed, ChannelTimeout, ProtocolError
from speedrunner.core.sandbox.commands import (
    NOBODY,
    drop_to_uid,
    import_roots,
    package_root,
    site_packages,
    wrap,
)
from speedrunner.core.sandbox.limits import ProcessLimits
from speedrunner.core.tempdirs import process_temp_dir

BOOTSTRAP = (
    "import sys; sys.path.insert(0, sys.argv[1]); "
    "from speedrunner.core.sandbox.child import main; main(sys.argv[2:])"
)
CHILD_BASE_MODULES = (
    "json",
    "linecache",
    "traceback",
    "speedrunner.core.skill",
    "speedrunner.errors",
    "speedrunner.core.sandbox.restrict",
    "speedrunner.core.sandbox.tracing",
)
_SIGNAL_HINTS = {
    signal.SIGXCPU: "it used up its CPU-time limit",
    signal.SIGKILL: "killed: the CPU-time hard limit, or the machine ran out of memory",
    signal.SIGSEGV: "it crashed (segmentation fault)",
    signal.SIGABRT: "it aborted",
}


SCRATCH_PREFIX = "speedrunner-sandbox-"
_ROOT_PREFIX = "speedrunner-root-"

_WRAPPER_TASKS = 4
"""Tasks of the wrappers (bwrap and its init, unshare, setpriv) counted by the cgroup's
``pids.max``."""


class SandboxStartError(RuntimeError):
    """The child did not come up (a broken tier, or our bug): the message has its stderr."""


class SandboxDied(Exception):
    """The child ended (or broke the protocol) in the middle of a request."""


class SandboxViolation(SandboxDied):
    """The child sent something an honest child never sends (see ``schema.py``): counted."""


def child_env(scratch: Path) -> dict[str, str]:
    """The child's whole environment: nothing inherited but the locale."""
    env = {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": str(scratch),
        "TMPDIR": str(scratch),
        "OPENBLAS_NUM_THREADS": "1",
        "OMP_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
    }
    for key in ("LANG", "LC_ALL"):
        if os.environ.get(key):
            env[key] = os.environ[key]
    env.setdefault("LANG", "C.UTF-8")
    return env


def tasks_of_uid(uid: int) -> int:
    """Processes and threads whose real uid is ``uid`` (what the kernel counts for RLIMIT_NPROC).

    Runs at every sandbox start over every process of the machine, in the parent: it reads each
    ``status`` only down to ``Threads`` (``Uid`` comes before it) and parses just those lines."""
    count = 0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/status", "rb") as f:
                real_uid = None
                for line in f:
                    if line.startswith(b"Uid:"):
                        real_uid = int(line.split()[1])
                        if real_uid != uid:
                            break
                    elif line.startswith(b"Threads:"):
                        if real_uid == uid:
                            count += int(line.split()[1])
                        break
        except (OSError, ValueError, IndexError):  # gone since listdir, or unreadable
            continue
    return count


class SandboxProcess:
    """A started child, ready for requests; ``kill()`` ends it and everything it started."""

    def __init__(
        self,
        tier: str,
        limits: ProcessLimits,
        *,
        mode: str,
        preload: Sequence[str] = (),
        read_only: Sequence[Path] = (),
        startup_timeout_s: float = 60.0,
        max_message_bytes: int | None = None,
        wait: bool = True,
    ) -> None:
        """Start the child; with ``wait=False`` return once it is launched and leave the wait for
        its hello to ``wait_ready()``, so it boots (tens of milliseconds of CPU, far longer when
        many start at once) while the caller does something else.

        Start it from a thread that outlives it: the wrappers die with the *thread* that started
        them (bwrap's ``--die-with-parent`` and setpriv's ``--pdeathsig`` are the kernel's
        parent-death signal, which follows the thread), so a sandbox launched from a short-lived
        helper thread is SIGKILLed when that thread ends."""
        self.tier = tier
        self.limits = limits
        self.scratch = process_temp_dir(SCRATCH_PREFIX)  # what killed runs left is removed
        # unshare builds its root on an empty directory, mounted only in the sandbox's namespace
        self._root = process_temp_dir(_ROOT_PREFIX) if tier == "unshare" else None
        self._log = tempfile.TemporaryFile(prefix="speedrunner-sandbox-log-")  # noqa: SIM115 - lives as long as the child
        self._popen: subprocess.Popen[bytes] | None = None
        self.channel: Channel | None = None
        self.child_pid: int | None = None
        """The child's pid as it sees itself (inside its pid namespace under bwrap/unshare)."""
        self.child_uid: int | None = None
        self._host_pid: int | None = None
        self._cpu: int | None = None
        self._ready_by: float | None = None
        """While the child boots: the deadline of its hello (``wait_ready``)."""
        self.cgroup: cgroups.Cgroup | None = None
        """The sandbox's memory+pids cgroup (``None`` where the machine offers none: rlimits
        only)."""
        drop = drop_to_uid(tier)
        self._own_uid = drop if drop is not None and drop != NOBODY else None
        try:
            self.cgroup = cgroups.create(
                limits.tree_memory_mb * 1024 * 1024, limits.processes + _WRAPPER_TASKS
            )
            if drop is not None:
                os.chown(self.scratch, drop, drop)
            self._launch(mode, [*CHILD_BASE_MODULES, *preload], read_only, drop, startup_timeout_s)
            if max_message_bytes is not None and self.channel is not None:
                self.channel.max_bytes = max_message_bytes
            if wait:
                self.wait_ready()
        except BaseException:
            self.kill()
            raise

    def _launch(
        self,
        mode: str,
        preload: list[str],
        read_only: Sequence[Path],
        drop: int | None,
        timeout_s: float,
    ) -> None:
        to_child_r, to_child_w = os.pipe()
        from_child_r, from_child_w = os.pipe()
        argv = [
            sys.executable,
            "-I",
            "-B",
            "-S",
            "-c",
            BOOTSTRAP,
            str(package_root()),
            str(to_child_r),
            str(from_child_w),
        ]
        filter_fd = seccomp.program_fd() if self.tier == "bwrap" and seccomp.supported() else None
        roots = import_roots(preload)  # a plug-in's package, wherever the parent imports it from
        try:
            command = cgroups.join_prefix(self.cgroup) + wrap(
                self.tier,
                argv,
                scratch=self.scratch,
                read_only=[*read_only, *(r.visible for r in roots)],
                scratch_bytes=self.limits.scratch_mb * 1024 * 1024,
                seccomp_fd=filter_fd,
                root=self._root,
            )
            self._popen = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=self._log,
                stderr=self._log,
                pass_fds=(to_child_r, from_child_w, *([] if filter_fd is None else [filter_fd])),
                cwd=self.scratch,
                env=child_env(self.scratch),
                start_new_session=True,
            )
        finally:
            os.close(to_child_r)
            os.close(from_child_w)
            if filter_fd is not None:
                os.close(filter_fd)
        self.channel = Channel(from_child_r, to_child_w, nonblocking=True)
        deadline = time.monotonic() + timeout_s
        limits = self.limits.to_json()
        # RLIMIT_NPROC counts every task of the uid machine-wide (other sandboxes of this run,
        # of other runs of a sweep): the limit is what this sandbox may add to what exists now.
        limits["processes"] += tasks_of_uid(os.getuid() if drop is None else drop)
        config = {
            "mode": mode,
            "tier": self.tier,
            "limits": limits,
            "preload": preload,
            "drop_to": drop,
            "site_packages": site_packages(),
            "import_paths": [str(r.entry) for r in roots],
        }
        try:
            self.channel.send(
                config, deadline
            )  # a few hundred bytes: the empty pipe takes them at once
        except (ChannelClosed, ChannelTimeout) as e:
            raise self._start_error(e) from None
        self._ready_by = deadline

    def wait_ready(self) -> None:
        """Wait for the booting child's hello (at once if it is ready); ``SandboxStartError`` if
        it does not come. The caller kills the process then."""
        if self._ready_by is None:
            return
        deadline, self._ready_by = self._ready_by, None
        assert self.channel is not None and self._popen is not None
        try:
            hello = self.channel.recv(deadline)
            self.child_pid, self.child_uid = int(hello["ready"]), int(hello["uid"])
        except (ChannelClosed, ChannelTimeout, ProtocolError, KeyError, TypeError, ValueError) as e:
            raise self._start_error(e) from None
        tree = None if self.cgroup is None else self.cgroup.pids()  # a few pids, not all of /proc
        self._host_pid = _host_pid(self._popen.pid, self.child_pid, tree)

    def _start_error(self, e: Exception) -> SandboxStartError:
        return SandboxStartError(
            f"the {self.tier} sandbox did not start ({type(e).__name__}): {self.describe_exit()}"
        )

    @contextlib.contextmanager
    def same_cpu(self) -> Iterator[None]:
        """Run the calling thread and the child on one CPU for the duration of a call.

        Parent and child strictly take turns (the child waits while the env steps, the
        parent while the skill thinks), so one CPU loses no parallelism, and it saves a
        cross-CPU wakeup per message: on a virtual machine that is an interrupt to a halted
        vCPU, measured at ~100 us per action on a 2-vCPU VM, as much as a BabyAI step. The
        calling thread's own affinity is restored afterwards. Best effort: without
        ``sched_getcpu`` or permission, nothing is pinned.
        """
        cpu = _current_cpu()
        saved: set[int] | None = None
        if cpu is not None and self._host_pid is not None:
            try:
                saved = os.sched_getaffinity(0)
                if self._cpu != cpu:
                    os.sched_setaffinity(self._host_pid, {cpu})
                    self._cpu = cpu
                os.sched_setaffinity(0, {cpu})
            except OSError:
                saved = None
        try:
            yield
        finally:
            if saved is not None:
                with contextlib.suppress(OSError):
                    os.sched_setaffinity(0, saved)

    @property
    def pid(self) -> int | None:
        """The host pid of the process the parent started (bwrap/unshare, or python itself)."""
        return None if self._popen is None else self._popen.pid

    @property
    def alive(self) -> bool:
        return self._popen is not None and self._popen.poll() is None and self.channel is not None

    def request(self, message: dict[str, Any], deadline: float) -> None:
        """Send one message; raises ``SandboxDied`` or ``ChannelTimeout``."""
        self.wait_ready()
        assert self.channel is not None
        try:
            self.channel.send(message, deadline)
        except ChannelClosed:
            raise SandboxDied(self.describe_exit()) from None

    @staticmethod
    def new_request_id() -> str:
        """A fresh request id: 128 random bits, so no reply written before its request (by a
        thread that outlived its call, say) can carry it; counting ids could be guessed."""
        return secrets.token_hex(16)

    def start_request(self, message: dict[str, Any], deadline: float) -> None:
        """Send a new request (``load``, ``call``, ``run``) to a child that should be idle.

        An honest child writes nothing between its reply and the next request, so anything
        already waiting on the pipe was written by code in the sandbox — e.g. a thread that
        outlived its call, answering ahead for the request it expects next. Refused here
        (``SandboxViolation``) before the request is sent, so such a reply is never read as
        the answer to it.
        """
        self.wait_ready()  # its hello is the one message that may be waiting
        assert self.channel is not None
        if self.channel.pending():
            raise SandboxViolation(
                "it broke the protocol (a message was waiting on the protocol pipe before the "
                "request was sent: code in the sandbox wrote to the protocol pipe itself)"
            )
        self.request(message, deadline)

    def receive(self, deadline: float) -> dict[str, Any]:
        """The next message; raises ``SandboxDied`` (exit or protocol violation) or
        ``ChannelTimeout``."""
        self.wait_ready()
        assert self.channel is not None
        try:
            return self.channel.recv(deadline)
        except ChannelClosed:
            raise SandboxDied(self.describe_exit()) from None
        except ProtocolError as e:
            raise SandboxViolation(f"it broke the protocol ({e})") from None

    def describe_exit(self) -> str:
        """Why the child is gone, for the author: exit status or signal, and its last stderr."""
        if self._popen is None:
            return "it was never started"
        try:
            code = self._popen.wait(timeout=2)
        except subprocess.TimeoutExpired:
            return "it stopped answering"
        if code < 0 or (self.tier != "rlimits" and code > 128):  # wrappers report a signal as 128+n
            number = -code if code < 0 else code - 128
            try:
                name = signal.Signals(number).name
            except ValueError:
                name = f"signal {number}"
            what = f"the sandbox process was killed by {name}"
            hint = _SIGNAL_HINTS.get(number)
            if hint:
                what += f" ({hint})"
        else:
            what = f"the sandbox process exited with status {code}"
        if self.cgroup is not None and self.cgroup.oom_kills():
            what += (
                f"; the kernel killed {self.cgroup.oom_kills()} of its processes for going over "
                f"the sandbox's memory limit ({self.limits.tree_memory_mb} MB for all its "
                "processes)"
            )
        tail = self.stderr_tail()
        return what + (f"; its last output:\n{tail}" if tail else "")

    def stderr_tail(self, chars: int = 1500) -> str:
        try:
            size = os.fstat(self._log.fileno()).st_size
            data = os.pread(self._log.fileno(), chars, max(0, size - chars))
        except (OSError, ValueError):
            return ""
        return data.decode("utf-8", "replace").strip()

    def kill(self) -> None:
        """SIGKILL the child and everything it started; close the pipes; remove scratch."""
        if self._popen is not None:
            if self._popen.returncode is None:
                kill_tree(
                    self._popen.pid, members=None if self.cgroup is None else self.cgroup.pids
                )
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self._popen.pid, signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._popen.wait(timeout=5)
        if (
            self.cgroup is not None
        ):  # what left the process tree (a double-forked daemon) is still here
            self.cgroup.remove()
        if self._own_uid is not None:  # the same, found by the uid only this sandbox runs as
            kill_uid(self._own_uid)
        if self.channel is not None:
            self.channel.close()
            self.channel = None
        with contextlib.suppress(OSError, ValueError):
            self._log.close()
        shutil.rmtree(self.scratch, ignore_errors=True)
        if self._root is not None:
            with contextlib.suppress(OSError):
                self._root.rmdir()  # the private root was mounted in the sandbox's namespace only


def _host_pid(wrapper_pid: int, child_pid: int, tree: set[int] | None = None) -> int | None:
    """The host pid of the child python, given the pid it reports inside its namespace
    (``tree``: the sandbox's processes if known, else the wrapper's descendants)."""
    for pid in [
        wrapper_pid,
        *sorted((_descendants(wrapper_pid) if tree is None else tree) - {wrapper_pid}),
    ]:
        try:
            with open(f"/proc/{pid}/status") as f:
                nspids = next(
                    (line.split()[1:] for line in f if line.startswith("NSpid:")), [str(pid)]
                )
        except OSError:
            continue
        if nspids[-1] == str(child_pid) and (pid == child_pid or len(nspids) > 1):
            return pid
    return None


@functools.cache
def _sched_getcpu() -> Any:
    try:
        return ctypes.CDLL(None, use_errno=True).sched_getcpu
    except (OSError, AttributeError):
        return None


def _current_cpu() -> int | None:
    getcpu = _sched_getcpu()
    cpu = getcpu() if getcpu is not None else -1
    return cpu if cpu >= 0 else None


def kill_tree(root: int, rounds: int = 20, members: Callable[[], set[int]] | None = None) -> None:
    """SIGKILL ``root`` and all its descendants, including those that left its process group.

    Each round stops (SIGSTOP) every descendant not yet stopped, so a fork bomb cannot
    outrun the scan; then everything stopped is killed. Namespaced tiers do not need it
    (the pid namespace dies with its init), the rlimits tier does. ``members`` lists the
    tree where it is known (the sandbox's cgroup, which holds every process the wrapper
    started, reparented ones too): a few pids read, rather than every process of the machine,
    which made killing thirty sandboxes at once cost ~30 ms of CPU each.
    """
    _stop_then_kill(lambda: {root} | (_descendants(root) if members is None else members()), rounds)


def kill_uid(uid: int, rounds: int = 20) -> None:
    """SIGSTOP, then SIGKILL, every process whose real uid is ``uid`` (a uid one sandbox owns)."""
    _stop_then_kill(lambda: _processes_of_uid(uid), rounds)


def _stop_then_kill(find: Callable[[], set[int]], rounds: int) -> None:
    """SIGSTOP what ``find`` lists until it lists nothing new, then SIGKILL all of it.

    Stopping first means a process cannot fork faster than the scan finds its children.
    """
    stopped: set[int] = set()
    for _ in range(rounds):
        new = find() - stopped
        if not new:
            break
        for pid in new:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGSTOP)
        stopped |= new
    for pid in stopped:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)


def _processes_of_uid(uid: int) -> set[int]:
    found = set()
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/status", encoding="ascii", errors="replace") as f:
                    line = next(x for x in f if x.startswith("Uid:"))
                if int(line.split()[1]) == uid:
                    found.add(int(entry))
            except (OSError, StopIteration, ValueError, IndexError):
                continue
    return found


def _descendants(root: int) -> set[int]:
    children: dict[int, list[int]] = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return set()
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        ppid = int(stat.rsplit(b")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(entry))
    found: set[int] = set()
    todo = [root]
    while todo:
        for child in children.get(todo.pop(), ()):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found
