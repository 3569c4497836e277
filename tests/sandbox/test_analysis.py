"""Analysis sessions, and the process boundary itself: unrestricted code (any import,
``open``, ``os``) attacks the machine from the sandbox child, in every tier. Where a tier
cannot contain something (``rlimits`` has no network or mount isolation) the test says so
and checks the tier reports itself, rather than pretending."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from speedrunner.core.sandbox import AnalysisSession, open_analysis_session
from speedrunner.core.sandbox.commands import NOBODY, package_root

from .conftest import GEMINI_KEY, LIMITS, OPENAI_KEY

MOUNTS_ENFORCED = {"bwrap", "unshare"}
NETWORK_ISOLATED = {"bwrap", "unshare"}


@pytest.fixture
def world_dir() -> Iterator[Path]:
    """A directory anyone may traverse, like a typical run directory (mode 0755)."""
    path = Path(tempfile.mkdtemp(prefix="sandbox-test-"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def session(tier: str) -> Iterator[AnalysisSession]:
    s = open_analysis_session(tier=tier, limits=LIMITS)
    yield s
    s.close()


def run(session: AnalysisSession, code: str, timeout_s: float = 5.0):
    return session.run(textwrap.dedent(code), timeout_s)


def still_works(session: AnalysisSession) -> None:
    result = run(session, "print(sum(range(10)))")
    assert (result.stdout, result.error, result.timed_out) == ("45\n", None, False)


def processes_of(scratch: Path) -> set[int]:
    """Live processes of the sandbox process with this scratch directory (its HOME, which
    forks inherit), not its root-owned wrappers (bwrap, unshare), which have that HOME too."""
    marker = b"HOME=" + str(scratch).encode() + b"\0"
    found = set()
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with contextlib.suppress(OSError):  # gone since listdir, or not ours to read
                if (
                    os.stat(f"/proc/{entry}").st_uid != 0
                    and marker in Path(f"/proc/{entry}/environ").read_bytes()
                ):
                    found.add(int(entry))
    return {pid for pid in found if _running(pid)}


def assert_all_gone(scratch: Path) -> None:
    deadline = time.monotonic() + 5
    while processes_of(scratch) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not processes_of(scratch)


def test_state_persists_between_runs_and_output_is_captured(session) -> None:
    assert run(session, "import json, statistics\nxs = [1, 2, 3]").error is None
    result = run(session, "print(statistics.mean(xs)); print(json.dumps({'n': len(xs)}))")
    assert result.stdout == '2\n{"n": 3}\n' and result.error is None and result.duration_s < 5


def test_errors_show_the_analysis_code_not_the_sandbox(session) -> None:
    result = run(session, "def f():\n    return {}['missing']\nf()")
    assert (
        'File "<analysis>", line 2, in f' in result.error and "KeyError: 'missing'" in result.error
    )
    assert "child.py" not in result.error
    still_works(session)


def test_a_timeout_kills_the_session_and_the_next_run_starts_fresh(session) -> None:
    run(session, "x = 1")
    pid = session.pid
    result = run(session, "while True:\n    pass", timeout_s=1.0)
    assert (
        result.timed_out and "timed out after 1 s" in result.error and 0.9 < result.duration_s < 3
    )
    assert "NameError" in run(session, "x").error  # fresh process, fresh state
    assert session.pid != pid
    still_works(session)


CAPPED_FORK_BOMB = """
import os, resource, time
print(resource.getrlimit(resource.RLIMIT_NPROC)[0])
pids = []
try:
    while True:
        pid = os.fork()
        if pid == 0:
            time.sleep(60)
            os._exit(0)
        pids.append(pid)
except OSError as e:
    print(len(pids), type(e).__name__)
"""
"""Prints the process limit it runs under, then forks sleepers until the limit says no."""


def test_a_fork_bomb_is_capped_by_the_process_limit(session) -> None:
    for _ in range(3):
        result = run(session, CAPPED_FORK_BOMB, timeout_s=10)
        limit, forked, error = result.stdout.split()
        if int(forked) > 0:
            break
        # RLIMIT_NPROC counts every process of the sandbox uid: other sandboxes on the machine
        # (another test worker's runs) can fill the room for a moment. Try again.
        time.sleep(2)
    # The limit is LIMITS.processes on top of the uid's tasks at the start (other sandboxes on the
    # machine, e.g. the previous test's, still exiting), so a bomb gets at most that many.
    assert LIMITS.processes <= int(limit) < LIMITS.processes + 500
    assert error == "BlockingIOError" and 0 < int(forked) < int(limit)
    still_works(session)
    scratch = session._process.scratch
    assert len(processes_of(scratch)) > int(forked) // 2  # the sleepers are there, and found
    session.close()
    assert_all_gone(scratch)  # close() killed them too


# One tier at a time: another tier's sleepers, started after this one's limit was set, would count.
@pytest.mark.xdist_group("uid-65534-sleepers")
def test_other_processes_of_the_sandbox_user_do_not_use_up_its_process_limit(tier: str) -> None:
    """RLIMIT_NPROC counts the uid's tasks machine-wide: other runs' sandboxes (a sweep) must not
    leave analysis code unable to start a thread, and a fork bomb is still capped."""
    if os.geteuid() != 0:
        pytest.skip(
            "starting processes as uid 65534 needs root "
            "(a non-root user's sandboxes count as that user)"
        )
    others = [subprocess.Popen(["sleep", "60"], user=NOBODY) for _ in range(LIMITS.processes + 5)]
    try:
        session = open_analysis_session(tier=tier, limits=LIMITS)
        try:
            thread = run(
                session,
                "import threading\nt = threading.Thread(target=print, args=('a thread',))\n"
                "t.start(); t.join()",
            )
            result = run(session, CAPPED_FORK_BOMB, timeout_s=10)
            limit, forked, error = result.stdout.split()
            # the others do not count against it (under rlimits the sandbox has a uid of its own)
            assert int(limit) >= LIMITS.processes + (0 if tier == "rlimits" else len(others))
            assert thread.stdout == "a thread\n" and thread.error is None
            assert error == "BlockingIOError" and 0 < int(forked) < int(limit)
        finally:
            session.close()
    finally:
        for p in others:
            p.kill()
            p.wait()


def test_a_real_fork_bomb_times_out_and_leaves_nothing_behind(session) -> None:
    scratch = session._process.scratch
    result = run(
        session,
        """
        import os
        while True:
            try:
                os.fork()
            except OSError:
                pass
    """,
        timeout_s=1.5,
    )
    assert result.timed_out
    assert_all_gone(scratch)
    still_works(session)


def test_a_memory_bomb_is_a_memory_error(session) -> None:
    result = run(
        session,
        "blocks = []\nwhile True:\n    blocks.append(bytearray(64 * 1024 * 1024))",
        timeout_s=10,
    )
    assert "MemoryError" in result.error and not result.timed_out
    assert run(session, "del blocks").error is None
    still_works(session)


def test_huge_output_is_capped_and_fd_writes_cannot_flood_the_parent(session) -> None:
    result = run(session, "import os\nprint('y' * 10_000_000)\nos.write(1, b'z' * 10_000_000)")
    assert (
        result.error is None and result.stdout.startswith("y" * 2000) and len(result.stdout) < 2100
    )
    still_works(session)


def test_exits_are_reported_and_the_session_goes_on(session) -> None:
    assert "SystemExit: 3" in run(session, "import sys\nsys.exit(3)").error
    still_works(session)
    pid = session.pid
    result = run(session, "import os\nos._exit(7)")
    assert (
        "the sandbox process exited with status 7" in result.error
        and "variables are lost" in result.error
    )
    still_works(session)
    assert session.pid != pid


def test_no_api_keys_or_proxies_reach_the_child(session) -> None:
    result = run(
        session,
        f"""
        import os
        print(sorted(os.environ))
        for pid in ({os.getpid()}, os.getppid(), 1):
            try:
                print(open(f"/proc/{{pid}}/environ", "rb").read())
            except OSError as e:
                print(type(e).__name__)
    """,
    )
    assert result.error is None
    assert (
        OPENAI_KEY not in result.stdout
        and GEMINI_KEY not in result.stdout
        and "proxy.invalid" not in result.stdout
    )
    assert "OPENAI_API_KEY" not in result.stdout and "PROXY" not in result.stdout.upper()


def test_signals_cannot_reach_the_parent(session) -> None:
    received: list[int] = []
    previous = signal.signal(signal.SIGTERM, lambda sig, frame: received.append(sig))
    try:
        result = run(
            session,
            f"""
            import os, signal
            for target in ({os.getpid()}, os.getppid()):
                try:
                    os.kill(target, signal.SIGTERM)
                    print("sent", target)
                except OSError as e:
                    print(type(e).__name__)
            try:
                os.killpg({os.getpgid(0)}, signal.SIGTERM)
                print("sent group")
            except OSError as e:
                print(type(e).__name__)
        """,
        )
        time.sleep(0.2)
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert received == []
    assert "sent group" not in (result.stdout or "")
    still_works(session)


def test_writes_outside_scratch_do_not_land(tier, world_dir) -> None:
    writable = world_dir / "world-writable"
    writable.mkdir()
    writable.chmod(0o1777)  # like /tmp: only mount isolation keeps a child out of such a place
    targets = [world_dir / f"plain-{uuid.uuid4().hex}", writable / f"open-{uuid.uuid4().hex}"]
    with open_analysis_session(tier=tier, limits=LIMITS) as session:
        result = run(
            session,
            f"""
            import os
            open("in-scratch.txt", "w").write("fine")
            print(os.path.exists("in-scratch.txt"))
            for path in {[str(t) for t in targets]!r}:
                try:
                    open(path, "w").write("escaped")
                    print("wrote", path)
                except OSError as e:
                    print(type(e).__name__)
        """,
        )
        assert result.error is None and result.stdout.startswith("True\n")
        still_works(session)
    assert not targets[
        0
    ].exists()  # a root-owned 0755 directory: no tier lets uid 65534 write there
    if tier in MOUNTS_ENFORCED:
        assert not targets[1].exists()
    else:  # NOT contained: without mount isolation a world-writable directory is writable
        assert targets[1].exists() and session.tier == tier


def test_only_the_mounted_part_of_a_run_directory_is_readable(tier, world_dir) -> None:
    run_dir = world_dir / "run"
    (run_dir / "experience").mkdir(parents=True)
    (run_dir / "experience" / "traj.json").write_text('{"steps": 3}')
    (run_dir / "secret.txt").write_text("do not read")
    run_dir.chmod(0o755)
    (run_dir / "experience").chmod(0o755)
    with open_analysis_session(
        tier=tier, mounts=[run_dir / "experience"], limits=LIMITS
    ) as session:
        result = run(
            session,
            f"""
            import json, os
            print(json.load(open({str(run_dir / "experience" / "traj.json")!r}))["steps"])
            try:
                print(open({str(run_dir / "secret.txt")!r}).read())
            except OSError as e:
                print(type(e).__name__)
            try:
                open({str(run_dir / "experience" / "new.json")!r}, "w")
            except OSError as e:
                print(type(e).__name__)
        """,
        )
        assert result.error is None
        lines = result.stdout.splitlines()
        assert lines[0] == "3"
        assert lines[2] in ("OSError", "PermissionError")  # read-only mount / not the owner
        if tier in MOUNTS_ENFORCED:
            assert lines[1] == "FileNotFoundError"
        else:  # NOT contained: no mount isolation, a world-readable file is readable
            assert lines[1] == "do not read" and session.tier == tier
        still_works(session)


def test_the_network_is_unreachable(session) -> None:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        port = server.getsockname()[1]
        result = run(
            session,
            f"""
            import socket
            try:
                socket.create_connection(("127.0.0.1", {port}), timeout=1).close()
                print("connected")
            except OSError as e:
                print(type(e).__name__)
        """,
        )
    assert result.error is None
    if session.tier in NETWORK_ISOLATED:
        assert result.stdout.strip() in ("ConnectionRefusedError", "OSError")
    else:  # NOT contained: the rlimits tier has no network namespace, and says so in its name
        assert result.stdout.strip() == "connected" and session.tier == "rlimits"
    still_works(session)


def test_mounts_must_exist(tier) -> None:
    with pytest.raises(FileNotFoundError):
        open_analysis_session(tier=tier, mounts=["/nonexistent/experience"])


def test_a_busy_child_dies_with_a_killed_run(tier) -> None:
    script = textwrap.dedent(f"""
        import os, time
        from speedrunner.core.sandbox import open_analysis_session
        session = open_analysis_session(tier={tier!r})
        print(session._process._host_pid, session._process.scratch, flush=True)
        session._process.request({{"op": "run", "code": "while True: pass"}}, time.monotonic() + 5)
        time.sleep(0.3)
        os._exit(0)  # the run dies without closing anything
    """)
    env = {**os.environ, "PYTHONPATH": str(package_root())}
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, env=env
    )
    pid, scratch = done.stdout.split()
    deadline = time.monotonic() + 5
    while _running(int(pid)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _running(int(pid))
    shutil.rmtree(scratch)  # a killed run cannot remove its sandbox's (empty) scratch directory


def _running(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return (
                f.read().rsplit(b")", 1)[1].split()[0] != b"Z"
            )  # a zombie is dead, awaiting its reaper
    except OSError:
        return False
