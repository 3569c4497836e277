"""What a sandbox's process tree may take and reach, as an attacker writing analysis code would
try it (issue 22, items 3 and 4): memory and processes per sandbox (a cgroup, not per process),
private and sized /tmp and /dev/shm, host unix sockets, daemons that outlive the episode,
``kill(-1)`` against a concurrent sandbox, and nested user namespaces. Each test names the
attack it replays; each failed on the code before these protections."""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import textwrap
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from speedrunner.core.sandbox import ProcessLimits, cgroups, open_analysis_session, process
from speedrunner.core.sandbox.analysis import AnalysisSession

from .conftest import LIMITS

CGROUPS = isinstance(cgroups.discover(), cgroups.Hierarchies) and os.geteuid() == 0
needs_cgroups = pytest.mark.skipif(
    not CGROUPS, reason="per-sandbox cgroups need root and a writable cgroup tree"
)


def run(session: AnalysisSession, code: str, timeout_s: float = 20.0):
    return session.run(textwrap.dedent(code), timeout_s)


@pytest.fixture
def session(tier: str) -> Iterator[AnalysisSession]:
    s = open_analysis_session(tier=tier, limits=LIMITS)
    yield s
    s.close()


def processes_with_home(scratch: Path) -> set[int]:
    """Non-root processes whose HOME is this sandbox's scratch (every process it starts inherits
    it)."""
    marker = b"HOME=" + str(scratch).encode() + b"\0"
    found = set()
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with contextlib.suppress(OSError):
                if (
                    os.stat(f"/proc/{entry}").st_uid != 0
                    and marker in Path(f"/proc/{entry}/environ").read_bytes()
                ):
                    with open(f"/proc/{entry}/stat") as f:
                        if f.read().rsplit(")", 1)[1].split()[0] != "Z":
                            found.add(int(entry))
    return found


SIX_CHILDREN = """
import os, signal, time
kids = []
for i in range(6):
    pid = os.fork()
    if pid == 0:
        block = b"x" * ({mb} * 1024 * 1024)  # written, so every page is charged
        time.sleep(1)
        os._exit(0)
    kids.append(pid)
statuses = [os.waitpid(k, 0)[1] for k in kids]
print(sum(1 for s in statuses if os.WIFSIGNALED(s) and os.WTERMSIG(s) == signal.SIGKILL))
"""


@needs_cgroups
def test_the_memory_limit_covers_the_whole_process_tree(tier: str) -> None:
    """Attack: 6 children x 700 MB each stayed under the per-process RLIMIT_AS and together took
    4.3 GB. Scaled down (6 x 120 MB against a 256 MB tree limit): the kernel kills children
    instead, the tree never holds more than its limit, and the session goes on."""
    limits = ProcessLimits(memory_mb=512, tree_memory_mb=256, max_print_chars=2000)
    with open_analysis_session(tier=tier, limits=limits) as session:
        cgroup = session._process.cgroup
        assert cgroup is not None
        result = run(session, SIX_CHILDREN.format(mb=120))
        assert result.error is None, result.error
        assert int(result.stdout) >= 4  # at most two 120 MB children fit in 256 MB
        assert cgroup.memory_peak_bytes() <= 256 * 1024 * 1024
        assert run(session, "print(6 * 7)").stdout == "42\n"
        dirs = cgroup.dirs
    assert not any(d.exists() for d in dirs)  # removed with the sandbox


@needs_cgroups
def test_a_fork_bomb_is_capped_for_the_whole_tree(tier: str) -> None:
    """Attack: a fork bomb. The cgroup's pids.max caps the tree (threads included), whatever uid
    the processes run as; the capped tree is gone when the sandbox closes."""
    limits = ProcessLimits(memory_mb=512, processes=16, max_print_chars=2000)
    with open_analysis_session(tier=tier, limits=limits) as session:
        cgroup = session._process.cgroup
        result = run(
            session,
            """
            import os, time
            n = 0
            try:
                while True:
                    if os.fork() == 0:
                        time.sleep(60)
                        os._exit(0)
                    n += 1
            except OSError as e:
                print(n, type(e).__name__)
        """,
        )
        forked, error = result.stdout.split()
        # pids.max counts the wrappers and the child's own threads too; which of them are alive when
        # the bomb starts depends on the tier and the load, so the bound is the cgroup's, not 16.
        assert error == "BlockingIOError" and 0 < int(forked) < cgroup.pids_max
        assert len(cgroup.pids()) <= cgroup.pids_max
        scratch = session._process.scratch
    assert not processes_with_home(scratch)


@pytest.mark.parametrize("where", ["plain-dir", "read-only"])
def test_without_cgroups_it_says_so_once_and_falls_back_to_rlimits(
    where: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Where no cgroup can be made (not a cgroup file system, or not writable) the sandbox still
    starts, with per-process rlimits only, and one warning names the gap."""
    parents = (
        (tmp_path / "memory", tmp_path / "pids")
        if where == "plain-dir"
        else (Path("/proc/self/memory"), Path("/proc/self/pids"))
    )
    for p in parents:
        with contextlib.suppress(OSError):
            p.mkdir()
    monkeypatch.setattr(cgroups, "discover", lambda: cgroups.Hierarchies(1, parents))
    monkeypatch.setattr(cgroups, "_warned", __import__("threading").Event())
    with caplog.at_level(logging.WARNING, logger="speedrunner.core.sandbox.cgroups"):
        for _ in range(2):
            with open_analysis_session(tier="rlimits", limits=LIMITS) as session:
                assert session._process.cgroup is None
                assert (
                    "MemoryError" in run(session, "x = bytearray(2 * 1024 ** 3)").error
                )  # RLIMIT_AS holds
                assert run(session, "print(1)").stdout == "1\n"
    warnings = [r.getMessage() for r in caplog.records if "cgroup" in r.getMessage()]
    assert len(warnings) == 1
    assert "per process" in warnings[0] and "whole process tree" in warnings[0]
    assert list(tmp_path.glob("*/speedrunner-sandbox-*")) == []  # nothing half-made is left


def test_on_a_v2_host_whose_run_cgroup_holds_processes_the_warning_names_the_fix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """cgroup v2 enables controllers for a cgroup's children only while it holds no process: a run
    started from a shell cannot give its sandboxes memory limits. Simulated (this host is v1): the
    parent refuses ``+memory +pids`` and a new child cgroup has no ``memory.max``. The sandbox falls
    back to rlimits, and the one warning says why and how to fix it."""
    parent = tmp_path / "user.slice"
    (parent / "cgroup.subtree_control").mkdir(parents=True)  # writing it fails, as EBUSY would
    real_mkdir = Path.mkdir

    def mkdir_as_cgroupfs(self: Path, *args: object, **kwargs: object) -> None:
        real_mkdir(self, *args, **kwargs)  # type: ignore[arg-type]
        if self.parent == parent:
            (self / "cgroup.procs").touch()  # a cgroup, but without the controllers' files

    monkeypatch.setattr(Path, "mkdir", mkdir_as_cgroupfs)
    monkeypatch.setattr(cgroups, "_warned", __import__("threading").Event())
    with caplog.at_level(logging.WARNING, logger="speedrunner.core.sandbox.cgroups"):
        assert cgroups.create(1 << 30, 64, where=cgroups.Hierarchies(2, (parent,))) is None
    [warning] = [r.getMessage() for r in caplog.records if "cgroup" in r.getMessage()]
    assert (
        "holds no process itself" in warning
        and "systemd-run --user --scope -p Delegate=yes" in warning
    )
    assert "per process" in warning


def test_a_double_forked_daemon_dies_with_the_sandbox(session) -> None:
    """Attack (rlimits): a double-forked, setsid() daemon outlived the episode. Now the sandbox's
    cgroup (or, without one, its own uid under rlimits, or its pid namespace) takes it down."""
    if session.tier == "rlimits" and session._process.cgroup is None and os.geteuid() != 0:
        pytest.skip(
            "a non-root parent without cgroups: rlimits sandboxes share its uid "
            "(not promised, docs/sandbox.md)"
        )
    scratch = start_a_double_forked_daemon(session)
    session.close()
    assert not processes_with_home(scratch)


def start_a_double_forked_daemon(session: AnalysisSession) -> Path:
    """A setsid() daemon, reparented out of the sandbox's process tree; returns the scratch its
    processes are found by."""
    result = run(
        session,
        """
        import os, time
        if os.fork() == 0:
            os.setsid()
            if os.fork() == 0:
                time.sleep(120)
            os._exit(0)
        time.sleep(0.2)
        print("forked")
    """,
    )
    assert result.stdout == "forked\n", result.error
    scratch = session._process.scratch
    assert processes_with_home(scratch)  # the daemon is there, outside the sandbox's process tree
    return scratch


@needs_cgroups
def test_a_sandbox_with_a_cgroup_is_found_and_killed_through_it_not_by_walking_all_processes(
    tier: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Starting and killing a sandbox walked every process of the machine (``/proc``) to find its
    tree: thirty sandboxes of an evaluation closing at once took ~30 ms of CPU each. With a cgroup,
    its member list is the tree, a reparented daemon included, and it all dies at close."""

    def walked(root: int) -> set[int]:
        raise AssertionError("walked all of /proc")

    monkeypatch.setattr(process, "_descendants", walked)
    with open_analysis_session(tier=tier, limits=LIMITS) as session:
        scratch = start_a_double_forked_daemon(session)
    assert not processes_with_home(scratch)


def test_kill_minus_one_cannot_reach_a_concurrent_sandbox(tier: str) -> None:
    """Attack (rlimits): ``kill(-1, SIGKILL)`` from one sandbox killed a concurrent one (both ran
    as uid 65534). Under rlimits each sandbox now has a uid of its own; bwrap and unshare have
    pid namespaces."""
    if os.geteuid() != 0 and tier == "rlimits":
        pytest.skip(
            "a non-root parent's rlimits sandboxes share its uid: not separated "
            "(docs/sandbox.md says so)"
        )
    with (
        open_analysis_session(tier=tier, limits=LIMITS) as victim,
        open_analysis_session(tier=tier, limits=LIMITS) as attacker,
    ):
        victim_pid = victim.pid
        assert run(victim, "x = 41").error is None
        result = run(
            attacker,
            "import os, signal\ntry:\n    os.kill(-1, signal.SIGKILL)\n"
            "except ProcessLookupError:\n    pass  # nothing else it may signal\nprint('sent')",
        )
        assert result.stdout == "sent\n", result.error
        after = run(victim, "print(x + 1)")
        assert (after.stdout, after.error, victim.pid) == (
            "42\n",
            None,
            victim_pid,
        )  # same process, state kept


def test_no_nested_user_namespace(session) -> None:
    """Attack (bwrap as root): ``unshare(CLONE_NEWUSER)`` succeeded inside the sandbox (a new user
    namespace makes the code root again, the usual first step of a kernel exploit). A seccomp
    filter refuses it on every tier, for ``unshare`` and ``clone``; subprocesses still work."""
    result = run(
        session,
        """
        import ctypes, os, subprocess
        libc = ctypes.CDLL(None, use_errno=True)
        print(libc.unshare(0x10000000), os.strerror(ctypes.get_errno()))
        child = subprocess.run(["/bin/sh", "-c", "echo child"], capture_output=True, text=True)
        print(child.stdout.strip())
    """,
    )
    assert result.error is None, result.error
    assert result.stdout.splitlines() == ["-1 Operation not permitted", "child"]


def test_tmp_and_dev_shm_are_private_and_sized(tier: str) -> None:
    """Attack (unshare, rlimits): 320 MiB written to /tmp and /dev/shm each, left behind on the
    host. Under bwrap and unshare both are private tmpfs mounts of 16 MiB: writing stops there,
    and nothing lands on the host."""
    if tier == "rlimits":
        pytest.skip(
            "the rlimits tier has no mount namespace: /tmp is the host's (docs/sandbox.md says so)"
        )
    name = f"fill-{uuid.uuid4().hex}"
    with open_analysis_session(tier=tier, limits=LIMITS) as session:
        result = run(
            session,
            f"""
            import os
            for where in ("/tmp", "/dev/shm"):
                written = 0
                try:
                    for i in range(80):  # 80 x 4 MiB = 320 MiB
                        with open(f"{{where}}/{name}-{{i}}", "wb") as f:
                            f.write(b"x" * (4 * 1024 * 1024))
                        written += 4
                except OSError as e:
                    print(where, written, e.errno)
        """,
        )
        assert result.error is None, result.error
        for line in result.stdout.splitlines():
            where, written, errno = line.split()
            assert int(written) <= 16 and int(errno) == 28  # ENOSPC
        assert len(result.stdout.splitlines()) == 2
    assert not list(Path("/tmp").glob(f"{name}-*")) and not list(Path("/dev/shm").glob(f"{name}-*"))


def test_the_scratch_directory_is_a_tmpfs_of_scratch_mb(tier: str) -> None:
    """The scratch directory (cwd, HOME, TMPDIR) is the one writable place; under bwrap and unshare
    it is a tmpfs of ``ProcessLimits.scratch_mb`` (8 MiB here): writing stops there with ENOSPC,
    in files each far under the per-file limit, and nothing lands in the host's scratch
    directory."""
    if tier == "rlimits":
        pytest.skip(
            "the rlimits tier has no mount namespace: scratch is on disk, bounded per file "
            "(docs/sandbox.md)"
        )
    limits = ProcessLimits(
        memory_mb=LIMITS.memory_mb, max_print_chars=LIMITS.max_print_chars, scratch_mb=8
    )
    with open_analysis_session(tier=tier, limits=limits) as session:
        result = run(
            session,
            """
            import os
            written = 0
            try:
                for i in range(16):  # 16 x 1 MiB, twice the scratch size
                    with open(f"fill-{i}", "wb") as f:
                        f.write(b"x" * (1024 * 1024))
                    written += 1
            except OSError as e:
                print(os.getcwd() == os.environ["HOME"], written, e.errno)
        """,
        )
        host_scratch = session._process.scratch
        assert result.error is None, result.error
        same, written, errno = result.stdout.split()
        assert same == "True" and int(written) <= 8 and int(errno) == 28  # ENOSPC
        assert not list(host_scratch.glob("fill-*"))


def test_host_unix_sockets_are_unreachable(tier: str, tmp_path: Path) -> None:
    """Attack (unshare): a unix socket on the host file system was reached from inside the
    network namespace. Path sockets are outside the private root now; abstract ones belong to
    the network namespace."""
    tmp_path.chmod(0o755)
    path = tmp_path / "host.sock"
    abstract = f"\0speedrunner-test-{uuid.uuid4().hex}"
    servers = []
    for address in (str(path), abstract):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.bind(address)
        s.listen(4)
        servers.append(s)
    path.chmod(0o777)
    try:
        with open_analysis_session(tier=tier, limits=LIMITS) as session:
            result = run(
                session,
                f"""
                import socket
                for address in ({str(path)!r}, {abstract!r}):
                    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                    try:
                        s.connect(address)
                        print("connected")
                    except OSError as e:
                        print(type(e).__name__)
            """,
            )
    finally:
        for s in servers:
            s.close()
    assert result.error is None, result.error
    if tier == "rlimits":  # NOT contained: no namespaces at all, and the tier's name says so
        assert (
            result.stdout.split()[1] == "connected"
        )  # (the path one only where its uid may enter)
    else:
        assert "connected" not in result.stdout.split()


@needs_cgroups
def test_cgroups_a_killed_run_left_are_removed_by_the_next_sandbox() -> None:
    """A SIGKILLed run cannot remove its sandboxes' cgroups: the next sandbox start removes the
    ones named after a pid that no longer exists (never those of a live run)."""
    import subprocess

    dead = subprocess.Popen(["true"])
    dead.wait()
    where = cgroups.discover()
    assert isinstance(where, cgroups.Hierarchies)
    stale = [parent / f"{cgroups.PREFIX}{dead.pid}-000000000000" for parent in where.parents]
    live = [parent / f"{cgroups.PREFIX}{os.getpid()}-000000000000" for parent in where.parents]
    for d in stale + live:
        d.mkdir()
    try:
        with open_analysis_session(tier="rlimits", limits=LIMITS):
            pass
        assert not any(d.exists() for d in stale) and all(d.exists() for d in live)
    finally:
        for d in stale + live:
            with contextlib.suppress(OSError):
                d.rmdir()
