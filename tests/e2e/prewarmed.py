"""Entry points run from a pre-imported interpreter: the e2e tests' runs without the start-up.

A train run's process spends 1-1.7 CPU-seconds before its first episode: the interpreter, the
project's modules, the ``openai`` SDK (~0.75 s: its ``types`` package is ~700 pydantic models)
and, on Crafter, numba loading its compiled world-generation noise. The suite starts about two
hundred of them, so on 2 CPUs that start-up was a sixth of its time. Here one server process per
xdist worker imports all that once and then forks a child per run; each child is still a process
of its own (its own pid, session, stdio, environment, working directory and exit status), runs
the real entry point with ``runpy`` as ``python -m`` does, and exits through the interpreter's
own exit path (non-daemon threads joined, ``atexit`` handlers run, an uncaught exception
printed with exit status 1).

What a forked child does not reproduce, and so what the tests that use this do not test: the
interpreter's start-up and the imports themselves (``tests/e2e/test_main_job.py`` and the CLI
tests run ``python -m`` for real), and a fresh string-hash seed per process (every child shares
its server's, so a ``--resume`` comes from a second server: a resumed run is never compared with
a reference of its own seed). ``docs/contributing.md`` lists which tests run what.

``SPEEDRUNNER_TEST_PREWARMED=0`` runs every such command as a plain subprocess instead.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import select
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

PRELOAD = (
    "speedrunner.benchmarks.babyai.train",
    "speedrunner.benchmarks.crafter.train",
    "speedrunner.benchmarks.crafter.train_voyager",
    "speedrunner.benchmarks.scienceworld.train",
    "speedrunner.core.llm.provider_openai",
    "openai",
    "speedrunner.benchmarks.crafter.env",
    "speedrunner.benchmarks.scienceworld.env",
    "speedrunner.methods",
)
"""What every run would import (or that costs most of its start-up when it does)."""
MODULES = frozenset(PRELOAD[:4])
"""The entry points run here; any other command is a plain subprocess."""
ENABLED = os.environ.get("SPEEDRUNNER_TEST_PREWARMED", "1") != "0"
_MAX_REQUEST = 1 << 20


# -- the server (a process of its own; single-threaded, so forking it is safe) ---------------


def _warm() -> None:
    """The imports, then Crafter's noise once: numba loads its cached machine code at the first
    call. Nothing of the project runs here, so no project cache starts filled in a child."""
    import importlib

    for name in PRELOAD:
        importlib.import_module(name)
    for name in MODULES:  # what they import stays; runpy runs each itself, as `python -m` does
        package, _, leaf = name.rpartition(".")
        del sys.modules[name]
        delattr(sys.modules[package], leaf)
    import opensimplex

    opensimplex.OpenSimplex(seed=0).noise3(0.5, 0.5, 0.5)


def serve(path: str, parent: int) -> None:
    import ctypes

    ctypes.CDLL(None).prctl(
        1, signal.SIGKILL, 0, 0, 0
    )  # PR_SET_PDEATHSIG: it goes with the test process
    if os.getppid() != parent:
        os._exit(1)
    sys.path.remove(str(Path(__file__).parent))  # put there to import this module; no child sees it
    _warm()
    import gc

    gc.freeze()  # the children's collections skip what is already here (and leave its pages shared)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    listener.bind(path)
    listener.listen(16)
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    children: dict[int, socket.socket] = {}
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    while True:
        ready, _, _ = select.select([listener, wake_r], [], [])
        if listener in ready:
            conn, _ = listener.accept()
            message, fds, _, _ = socket.recv_fds(conn, _MAX_REQUEST, 3)
            request = json.loads(message)
            sys.stdout.flush()
            sys.stderr.flush()
            pid = os.fork()
            if pid == 0:
                _become(
                    request, fds, [listener, conn, *children.values()], [wake_r, wake_w]
                )  # never returns
            for fd in fds:
                os.close(fd)
            conn.sendall(json.dumps({"pid": pid}).encode())
            children[pid] = conn
        if wake_r in ready:
            with contextlib.suppress(BlockingIOError, InterruptedError):
                os.read(wake_r, 4096)
            while children:
                try:
                    pid, status = os.waitpid(-1, os.WNOHANG)
                except ChildProcessError:
                    break
                if pid == 0:
                    break
                conn = children.pop(pid, None)
                if conn is not None:
                    with contextlib.suppress(OSError):
                        conn.sendall(
                            json.dumps({"returncode": os.waitstatus_to_exitcode(status)}).encode()
                        )
                    conn.close()


def _become(request: dict, fds: list[int], sockets: list[socket.socket], pipes: list[int]) -> None:
    """In the forked child: become the requested process, run the entry point,
    exit as Python does."""
    import runpy

    signal.set_wakeup_fd(-1)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    for s in sockets:
        s.close()
    for fd in pipes:
        os.close(fd)
    if request["new_session"]:
        os.setsid()
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
    for fd in fds:
        if fd > 2:
            os.close(fd)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    sys.argv = [request["module"], *request["args"]]
    runpy.run_module(request["module"], run_name="__main__", alter_sys=True)
    sys.exit(0)  # from here the exception unwinds the server's frames: the interpreter's exit


# -- the client (in the test process) ----------------------------------------------------------


class Process:
    """The part of ``subprocess.Popen`` the tests use, for a child of the server."""

    def __init__(self, conn: socket.socket, pid: int, stdout, stderr) -> None:
        self._conn, self.pid, self.stdout, self.stderr = conn, pid, stdout, stderr
        self.returncode: int | None = None
        self.args: list[str] = []

    def poll(self) -> int | None:
        if self.returncode is None:
            ready, _, _ = select.select([self._conn], [], [], 0)
            if ready:
                self._read_status()
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            ready, _, _ = select.select([self._conn], [], [], timeout)
            if not ready:
                raise subprocess.TimeoutExpired(self.args, timeout)
            self._read_status()
        return self.returncode  # type: ignore[return-value]

    def communicate(self, timeout: float | None = None) -> tuple[str, str]:
        """Both outputs to their ends and the exit status, as ``Popen.communicate`` gives them."""
        out: list[str] = []
        err: list[str] = []
        pumps = [
            threading.Thread(target=lambda: out.append(self.stdout.read()), daemon=True),
            threading.Thread(target=lambda: err.append(self.stderr.read()), daemon=True),
        ]
        for t in pumps:
            t.start()
        deadline = None if timeout is None else time.monotonic() + timeout
        self.wait(timeout)
        for t in pumps:
            t.join(None if deadline is None else max(0.0, deadline - time.monotonic()))
            if t.is_alive():  # a descendant still holds the pipe open, as subprocess would wait for
                raise subprocess.TimeoutExpired(self.args, timeout)
        self.stdout.close()
        self.stderr.close()
        return "".join(out), "".join(err)

    def _read_status(self) -> None:
        data = self._conn.recv(4096)
        self._conn.close()
        if not data:
            raise RuntimeError(
                f"the pre-imported interpreter died before reporting how process {self.pid} ended"
            )
        self.returncode = json.loads(data)["returncode"]

    def send_signal(self, sig: int) -> None:
        if self.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, sig)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)


class Server:
    """One pre-imported interpreter per test process, started on first use, stopped at exit."""

    _lock = threading.Lock()
    _instances: dict[int, Server] = {}

    def __init__(self) -> None:
        # Its own environment holds no secret; each child gets the one its command asks for.
        env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")} | {
            "PYTHONUNBUFFERED": "1"
        }
        self._dir = tempfile.mkdtemp(prefix="speedrunner-prewarmed-")
        self.path = str(Path(self._dir) / "server.sock")
        code = (
            f"import sys; sys.path.insert(0, {str(Path(__file__).parent)!r}); "
            "import prewarmed; prewarmed.serve(sys.argv[1], int(sys.argv[2]))"
        )
        self._proc = subprocess.Popen(
            [sys.executable, "-c", code, self.path, str(os.getpid())],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
            start_new_session=True,
        )
        line = self._proc.stdout.readline() if self._proc.stdout else ""
        if line.strip() != "ready":
            raise RuntimeError(
                f"the pre-imported interpreter did not start (exit {self._proc.poll()})"
            )
        atexit.register(self.stop)

    @classmethod
    def get(cls, slot: int = 0) -> Server:
        """Server ``slot`` of this process: each has a string-hash seed of its own."""
        with cls._lock:
            server = cls._instances.get(slot)
            if server is None or server._proc.poll() is not None:
                server = cls._instances[slot] = cls()
            return server

    def stop(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            self._proc.kill()
        self._proc.wait()
        with contextlib.suppress(OSError):
            os.unlink(self.path)
            os.rmdir(self._dir)

    def spawn(
        self,
        module: str,
        args: list[str],
        *,
        cwd: Path | str,
        env: dict[str, str],
        new_session: bool = False,
    ) -> Process:
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        devnull = os.open(os.devnull, os.O_RDONLY)
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            conn.connect(self.path)
            request = {
                "module": module,
                "args": args,
                "cwd": str(cwd),
                "env": env,
                "new_session": new_session,
            }
            socket.send_fds(conn, [json.dumps(request).encode()], [devnull, out_w, err_w])
            pid = json.loads(conn.recv(4096))["pid"]
        finally:
            for fd in (out_w, err_w, devnull):
                os.close(fd)
        return Process(
            conn,
            pid,
            os.fdopen(out_r, "r", errors="replace"),
            os.fdopen(err_r, "r", errors="replace"),
        )


def entry_module(cmd: list[str]) -> str | None:
    """The entry point of ``[python, -m, module, ...]`` when it is one this server runs."""
    if (
        ENABLED
        and len(cmd) >= 3
        and cmd[0] == sys.executable
        and cmd[1] == "-m"
        and cmd[2] in MODULES
    ):
        return cmd[2]
    return None


def popen(
    cmd: list[str], *, cwd: Path | str, env: dict[str, str], new_session: bool = False
) -> Process | subprocess.Popen:
    """``subprocess.Popen(cmd, stdout=PIPE, stderr=PIPE, text=True, ...)``, from a server when
    ``cmd`` is an entry point it runs: a ``--resume`` from a second one, so that a resumed run
    and the run it is compared with (made on the first) never share a string-hash seed."""
    module = entry_module(cmd)
    if module is None:
        return subprocess.Popen(
            cmd,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=cwd,
            env=env,
            start_new_session=new_session,
        )
    slot = 1 if "--resume" in cmd else 0
    proc = Server.get(slot).spawn(module, cmd[3:], cwd=cwd, env=env, new_session=new_session)
    proc.args = cmd
    return proc


def run(
    cmd: list[str], *, cwd: Path | str, env: dict[str, str], timeout: float
) -> subprocess.CompletedProcess:
    """``subprocess.run(cmd, capture_output=True, text=True, ...)``, from a server when it can
    (``popen``)."""
    if entry_module(cmd) is None:
        return subprocess.run(
            cmd, capture_output=True, text=True, timeout=timeout, cwd=cwd, env=env
        )
    proc = popen(cmd, cwd=cwd, env=env)
    try:
        out, err = proc.communicate(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        raise
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)
