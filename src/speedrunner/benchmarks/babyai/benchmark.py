"""``BabyAIBenchmark``: episode specs for BabyAI-Text and the server they are played on.

Training and evaluation episodes are pure functions of (run seed, split, index): the seed
comes from ``core.seeding.episode_seed`` and the task kind from the seed (``kinds.
kind_for_seed`` over the configured task set), so ``env.reset(spec.task, spec.seed)``
replays the same episode anywhere. When the configured server URL is local and nothing
answers, a private server subprocess is started on a free local port and stopped on
``close()``, at interpreter exit, or (watched by the server itself) when this process dies.
"""

from __future__ import annotations

import atexit
import contextlib
import http.client
import json
import os
import secrets
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from urllib.parse import quote, urlsplit

from speedrunner.benchmarks.babyai.config import BabyAIConfig
from speedrunner.benchmarks.babyai.env import START_HINT, BabyAITextEnv, ServerConnection
from speedrunner.benchmarks.babyai.kinds import kind_for_seed
from speedrunner.core.benchmark import EpisodeSpec, Split
from speedrunner.core.seeding import episode_seed
from speedrunner.errors import ServerUnavailableError

LOCAL_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})


def probe(url: str, timeout_s: float = 1.0) -> bool:
    """True if a BabyAI-Text server answers ``GET /health`` at ``url``; False if nothing listens.

    Raises ``ServerUnavailableError`` when something *else* answers there, since starting a
    server on that port would fail anyway.
    """
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port or 80, timeout=timeout_s)
    try:
        conn.request("GET", parts.path.rstrip("/") + "/health")
        response = conn.getresponse()
        body = response.read()
    except (OSError, http.client.HTTPException):
        return False
    finally:
        conn.close()
    try:
        answer = json.loads(body)
        # A busy server answers 503 too_many_connections: it is ours, and clients retry.
        ok = answer.get("service") == "babyai-text" or answer.get("code") == "too_many_connections"
    except (json.JSONDecodeError, AttributeError):
        ok = False
    if not ok:
        raise ServerUnavailableError(
            f"something other than a BabyAI-Text server answers at {url}; free the port or "
            "point benchmark.server_url elsewhere")
    return True


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port nothing listens on right now (the OS picks it)."""
    with socket.socket() as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


class ServerProcess:
    """A BabyAI-Text server subprocess on a local port, owned by this process."""

    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        self.url = f"http://{host}:{port}"
        self._proc: subprocess.Popen[bytes] | None = None
        # Lives as long as the server: its stderr, shown if startup fails.
        self._log = tempfile.TemporaryFile()  # noqa: SIM115

    def start(self, timeout_s: float) -> None:
        """Launch and wait until ``/health`` answers; raise with the server's stderr if it dies."""
        src = str(Path(__file__).resolve().parents[3])  # works from a checkout without install
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(
            p for p in (src, os.environ.get("PYTHONPATH")) if p)}
        cmd = [sys.executable, "-m", "speedrunner.benchmarks.babyai.server", "--host", self.host,
               "--port", str(self.port), "--parent-pid", str(os.getpid())]
        self._proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                      stderr=self._log, env=env, start_new_session=True)
        atexit.register(self.stop)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                self._log.seek(0)
                err = self._log.read().decode(errors="replace").strip()[-2000:]
                raise ServerUnavailableError(
                    f"the BabyAI-Text server started for {self.url} exited with code "
                    f"{self._proc.returncode}:\n{err}")
            if probe(self.url, timeout_s=1.0):
                return
            time.sleep(0.05)
        self.stop()
        raise ServerUnavailableError(
            f"the BabyAI-Text server started for {self.url} did not answer within {timeout_s:g} s; "
            "raise benchmark.server_start_timeout_s or start it yourself: " + START_HINT)

    def restart(self, timeout_s: float) -> None:
        """Start again on the same port (after the old process died)."""
        self.stop()
        self._log = tempfile.TemporaryFile()  # noqa: SIM115
        self.start(timeout_s)

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def stop(self) -> None:
        """Terminate (then kill) the server. Idempotent; registered with atexit."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        atexit.unregister(self.stop)
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self._log.close()


OWNER_FILE = "babyai_owner.json"
"""In the run directory: the server-side owner of this run's episodes and its token (0600)."""


def _read_owner(run_dir: Path | None) -> tuple[str, str] | None:
    if run_dir is None:
        return None
    try:
        fd = os.open(run_dir / OWNER_FILE, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        with os.fdopen(fd, encoding="utf-8") as f:
            data = json.load(f)
        return str(data["owner"]), str(data["token"])
    except (OSError, ValueError, KeyError, TypeError):
        return None  # none yet, or unreadable: a fresh owner (leftovers then wait for the idle expiry)


def _save_owner(run_dir: Path | None, owner: str, token: str) -> None:
    if run_dir is None:
        return
    tmp = run_dir / f".{OWNER_FILE}.{secrets.token_hex(4)}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        json.dump({"owner": owner, "token": token}, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, run_dir / OWNER_FILE)


class BabyAIBenchmark:
    """BabyAI-Text (BALROG's MixedTrainLocal kinds) for the runner."""

    name = "babyai"

    def __init__(self, config: BabyAIConfig, *, rollouts: int, eval_episodes: int) -> None:
        self.config = config
        self.rollouts = rollouts
        self.n_eval = eval_episodes
        self.kinds = config.task_kinds
        self._server: ServerProcess | None = None
        self._url = config.server_url.rstrip("/")
        self._checked = False
        self._lock = threading.Lock()
        self._owner: str | None = None
        self._owner_token: str | None = None
        self.restarts = 0

    def __repr__(self) -> str:
        return f"BabyAIBenchmark(task_set={self.config.task_set!r}, url={self.config.server_url!r})"

    def _spec(self, split: Split, run_seed: int, index: int) -> EpisodeSpec:
        seed = episode_seed(run_seed, split, index)
        return EpisodeSpec(split=split, index=index, task=kind_for_seed(seed, self.kinds), seed=seed)

    def train_episode(self, run_seed: int, index: int) -> EpisodeSpec:
        return self._spec("train", run_seed, index)

    def eval_episodes(self, run_seed: int) -> list[EpisodeSpec]:
        return [self._spec("eval", run_seed, i) for i in range(self.n_eval)]

    def ensure_server(self) -> None:
        """Make sure a server answers at the configured URL, starting one if allowed."""
        with self._lock:
            if self._checked and (self._server is None or self._server.running):
                return
            url = self.config.server_url.rstrip("/")
            if not probe(url):
                parts = urlsplit(url)
                if parts.hostname not in LOCAL_HOSTS:
                    raise ServerUnavailableError(
                        f"no BabyAI-Text server answers at {url}; on that machine run "
                        f"`python BALROG/deploy_env.py deploy.host=0.0.0.0 deploy.port="
                        f"{parts.port or 80}`, or use a local URL such as http://127.0.0.1:8080")
                if not self.config.autostart_server:
                    raise ServerUnavailableError(
                        f"no BabyAI-Text server answers at {url}; {START_HINT}, or set "
                        "benchmark.autostart_server: true")
                # A private server on a free port: concurrent runs never share (and so never
                # stop) each other's autostarted server. A server you start yourself at the
                # configured URL is used instead whenever it answers.
                self._server = ServerProcess(parts.hostname or "127.0.0.1", free_port())
                self._server.start(self.config.server_start_timeout_s)
                self._url = self._server.url
            self._checked = True

    def make_env(self) -> BabyAITextEnv:
        self.ensure_server()
        return BabyAITextEnv(self._url, request_timeout_s=self.config.request_timeout_s, owner=self._owner,
                             owner_token=self._owner_token)

    def start_run(self, run_tag: str, run_dir: Path | None = None) -> None:
        """Tag this run's episodes, and delete what a killed earlier process of it left.

        A SIGKILLed run cannot delete its episodes; on a shared server they would wait for
        the idle expiry. The server gives each owner to the first client that claims it, and
        deleting its episodes takes the owner's token: it is kept in ``run_dir`` (mode 0600,
        outside what analysis code sees), so the resume has it and removes them at once.
        """
        saved = _read_owner(run_dir)
        owner, token = saved or (run_tag, secrets.token_urlsafe(24))
        self.ensure_server()
        with contextlib.suppress(ServerUnavailableError, OSError):
            conn = ServerConnection(self._url, self.config.request_timeout_s)
            try:
                if saved:
                    status, payload = conn.request("DELETE", f"/episodes?owner={quote(owner, safe='')}",
                                                   headers={"X-Owner-Token": token})
                    if status == 200 and payload.get("deleted"):
                        print(f"BabyAI server {self._url}: deleted {len(payload['deleted'])} episode(s) an "
                              "earlier process of this run left behind", file=sys.stderr)
                status, payload = conn.request("POST", "/owners", {"owner": owner, "owner_token": token})
                if status == 403:  # someone else holds this tag on that server: use a fresh one
                    owner, token = f"{run_tag}-{secrets.token_hex(4)}", secrets.token_urlsafe(24)
                    status, payload = conn.request("POST", "/owners", {"owner": owner, "owner_token": token})
                if status != 200:  # busy (503 too_many_owners) or refused: play without an owner
                    print(f"BabyAI server {self._url} did not register owner {owner!r} (HTTP {status}: "
                          f"{payload.get('error', payload)}); this run's episodes go on without an owner (they "
                          "expire after the server's idle timeout instead of being deleted by a resume)",
                          file=sys.stderr)
                    self._owner = self._owner_token = None
                    return
            finally:
                conn.close()
        self._owner, self._owner_token = owner, token
        _save_owner(run_dir, owner, token)

    def recover(self, error: Exception) -> bool:
        """After an env error: restart our own server if it died (True: replay the episode).

        A server the user started is theirs: it is never restarted (the run stops, and the
        error says so). Our own is restarted on the same port up to ``max_server_restarts``
        times; after that, False lets the error stop the run.
        """
        if not isinstance(error, ServerUnavailableError):
            return False
        with self._lock:
            server = self._server
            if server is None:
                raise ServerUnavailableError(
                    f"the BabyAI-Text server at {self._url}, which this run did not start, stopped "
                    f"answering ({error}); it is yours, so the run does not restart it: start it "
                    "again, then continue with --resume") from error
            if server.running:
                return True  # another episode already restarted it
            if self.restarts >= self.config.max_server_restarts:
                return False
            self.restarts += 1
            print(f"warning: the BabyAI server this run started ({server.url}) died; restarting it "
                  f"({self.restarts}/{self.config.max_server_restarts}) and replaying the affected "
                  "episodes from their seeds (their LLM answers come from the cache)", file=sys.stderr)
            server.restart(self.config.server_start_timeout_s)
            return True

    def close(self) -> None:
        with self._lock:
            if self._server is not None:
                self._server.stop()
                self._server = None
            self._url = self.config.server_url.rstrip("/")
            self._checked = False
