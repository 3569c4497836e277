"""``BabyAIBenchmark``: episode specs for BabyAI-Text and the server they are played on.

Training and evaluation episodes are pure functions of (run seed, split, index): the seed
comes from ``core.seeding.episode_seed`` and the task kind from the seed (``kinds.
kind_for_seed`` over the configured task set), so ``env.reset(spec.task, spec.seed)``
replays the same episode anywhere. When the configured server URL is local and nothing
answers, a private server subprocess is started on a free local port and stopped on
``close()``, at interpreter exit, or (watched by the server itself) when this process dies.
Every server serves only its user's token holders (``auth.py``): one we start gets its token in
its environment; one already at the URL is used with the token ``auth.find_token`` finds, and
if it refuses us (another user's), a local URL with autostart gets a private server instead.
"""

from __future__ import annotations

import atexit
import contextlib
import http.client
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Literal
from urllib.parse import quote, urlsplit

from speedrunner.benchmarks.babyai import auth
from speedrunner.benchmarks.babyai.config import BabyAIConfig
from speedrunner.benchmarks.babyai.env import (
    START_HINT,
    BabyAITextEnv,
    OwnerTag,
    ServerConnection,
    refused,
)
from speedrunner.benchmarks.babyai.kinds import kind_for_seed
from speedrunner.core.benchmark import Benchmark, EpisodeSpec, Split
from speedrunner.core.seeding import episode_seed
from speedrunner.errors import ServerUnavailableError

LOCAL_HOSTS = auth.LOCAL_HOSTS

Answer = Literal["ours", "nothing", "refused"]
"""At a URL: our server (it takes our token), nothing listening,
or a BabyAI server that refuses us."""


def answer_at(url: str, token: str | None, timeout_s: float = 1.0) -> Answer:
    """What answers ``GET /health`` at ``url`` with ``token``.

    Raises ``ServerUnavailableError`` when something other than a BabyAI-Text server answers
    there, since starting a server on that port would fail anyway.
    """
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port or 80, timeout=timeout_s)
    try:
        conn.request("GET", parts.path.rstrip("/") + "/health", headers=auth.header(token))
        response = conn.getresponse()
        body = response.read()
    except (OSError, http.client.HTTPException):
        return "nothing"
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
            "point benchmark.server_url elsewhere"
        )
    return "refused" if response.status == 401 else "ours"


def probe(url: str, timeout_s: float = 1.0, token: str | None = None) -> bool:
    """True if a BabyAI-Text server this user may use answers at ``url`` (with ``token``, else the
    one ``auth.find_token`` finds); False if nothing listens or the server refuses us."""
    return answer_at(url, token or auth.find_token(url), timeout_s) == "ours"


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
        self.token = auth.new_token()
        """Handed to the server in its environment (never on its command line,
        which every user sees)."""
        self._proc: subprocess.Popen[bytes] | None = None
        # Lives as long as the server: its stderr, shown if startup fails.
        self._log = tempfile.TemporaryFile()  # noqa: SIM115

    def start(self, timeout_s: float) -> None:
        """Launch and wait until ``/health`` answers; raise with the server's stderr if it dies."""
        src = str(Path(__file__).resolve().parents[3])  # works from a checkout without install
        env = {
            **os.environ,
            auth.TOKEN_ENV: self.token,
            "PYTHONPATH": os.pathsep.join(p for p in (src, os.environ.get("PYTHONPATH")) if p),
        }
        cmd = [
            sys.executable,
            "-m",
            "speedrunner.benchmarks.babyai.server",
            "--host",
            self.host,
            "--port",
            str(self.port),
            "--parent-pid",
            str(os.getpid()),
        ]
        self._proc = subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=self._log,
            env=env,
            start_new_session=True,
        )
        atexit.register(self.stop)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                self._log.seek(0)
                err = self._log.read().decode(errors="replace").strip()[-2000:]
                raise ServerUnavailableError(
                    f"the BabyAI-Text server started for {self.url} exited with code "
                    f"{self._proc.returncode}:\n{err}"
                )
            if probe(self.url, timeout_s=1.0, token=self.token):
                return
            time.sleep(0.05)
        self.stop()
        raise ServerUnavailableError(
            f"the BabyAI-Text server started for {self.url} did not answer within {timeout_s:g} s; "
            "raise benchmark.server_start_timeout_s or start it yourself: " + START_HINT
        )

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
"""In the run directory: the server-side owners of this run's episodes, the current one last
(0600)."""


def _read_owners(run_dir: Path | None) -> list[str]:
    if run_dir is None:
        return []
    try:
        fd = os.open(run_dir / OWNER_FILE, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        with os.fdopen(fd, encoding="utf-8") as f:
            data = json.load(f)
        owners = data.get("owners") or [data["owner"]]  # "owner" alone: written by an older version
        return [str(o) for o in owners]
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        # None yet, or unreadable: a fresh owner (leftovers then wait for the idle expiry).
        return []


def _save_owners(run_dir: Path | None, owners: list[str]) -> None:
    if run_dir is None:
        return
    fd, tmp = tempfile.mkstemp(prefix=f".{OWNER_FILE}.", suffix=".tmp", dir=run_dir)  # mode 0600
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump({"owner": owners[-1], "owners": owners}, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, run_dir / OWNER_FILE)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


class BabyAIBenchmark(Benchmark):
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
        self._token: str | None = None
        self._owner: OwnerTag | None = None
        self.restarts = 0

    def __repr__(self) -> str:
        return f"BabyAIBenchmark(task_set={self.config.task_set!r}, url={self.config.server_url!r})"

    def _spec(self, split: Split, run_seed: int, index: int) -> EpisodeSpec:
        seed = episode_seed(run_seed, split, index)
        return EpisodeSpec(
            split=split, index=index, task=kind_for_seed(seed, self.kinds), seed=seed
        )

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
            self._token = auth.find_token(url)
            found = answer_at(url, self._token)
            parts = urlsplit(url)
            if found == "refused" and (
                parts.hostname not in LOCAL_HOSTS or not self.config.autostart_server
            ):
                raise refused(url)
            if found == "refused":
                print(
                    f"note: the BabyAI server at {url} serves another user (or wants a token this "
                    "run does not have); this run starts its own on a free port",
                    file=sys.stderr,
                )
            if found != "ours":
                if parts.hostname not in LOCAL_HOSTS:
                    raise ServerUnavailableError(
                        f"no BabyAI-Text server answers at {url}; on that machine run "
                        f"`python BALROG/deploy_env.py deploy.host=0.0.0.0 deploy.port="
                        f"{parts.port or 80}`, or use a local URL such as http://127.0.0.1:8080"
                    )
                if not self.config.autostart_server:
                    raise ServerUnavailableError(
                        f"no BabyAI-Text server answers at {url}; {START_HINT}, or set "
                        "benchmark.autostart_server: true"
                    )
                # A private server on a free port: concurrent runs never share (and so never
                # stop) each other's autostarted server. A server you start yourself at the
                # configured URL is used instead whenever it answers.
                self._server = ServerProcess(parts.hostname or "127.0.0.1", free_port())
                self._server.start(self.config.server_start_timeout_s)
                self._url, self._token = self._server.url, self._server.token
            self._checked = True

    def make_env(self) -> BabyAITextEnv:
        self.ensure_server()
        return BabyAITextEnv(
            self._url,
            request_timeout_s=self.config.request_timeout_s,
            owner=self._owner,
            token=self._token,
        )

    def start_run(self, run_tag: str, run_dir: Path | None = None) -> None:
        """Tag this run's episodes, and delete what a killed earlier process of it left.

        A SIGKILLed run cannot delete its episodes; on a shared server they would wait for the
        idle expiry. The owners it created them under are kept in ``run_dir`` (mode 0600), so the
        resume removes them at once. An owner is the run's tag plus a random part: no other run
        of the user creates under it by accident.
        """
        owners = _read_owners(run_dir)
        self.ensure_server()
        if owners:
            with contextlib.suppress(ServerUnavailableError, OSError):
                conn = ServerConnection(self._url, self.config.request_timeout_s, self._token)
                try:
                    deleted = 0
                    for owner in owners:
                        status, payload = conn.request(
                            "DELETE", f"/episodes?owner={quote(owner, safe='')}"
                        )
                        deleted += len(payload.get("deleted") or []) if status == 200 else 0
                    if deleted:
                        print(
                            f"BabyAI server {self._url}: deleted {deleted} episode(s) an earlier "
                            "process of this run left behind",
                            file=sys.stderr,
                        )
                finally:
                    conn.close()

        def remember(name: str) -> None:
            owners.append(name)
            _save_owners(run_dir, owners)

        self._owner = OwnerTag(run_tag, owners[-1] if owners else None, remember)
        if not owners:
            remember(self._owner.name)

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
                    "again, then continue with --resume"
                ) from error
            if server.running:
                return True  # another episode already restarted it
            if self.restarts >= self.config.max_server_restarts:
                return False
            self.restarts += 1
            print(
                f"warning: the BabyAI server this run started ({server.url}) died; restarting it "
                f"({self.restarts}/{self.config.max_server_restarts}) and replaying the affected "
                "episodes from their seeds (their LLM answers come from the cache)",
                file=sys.stderr,
            )
            server.restart(self.config.server_start_timeout_s)
            return True

    def close(self) -> None:
        with self._lock:
            if self._server is not None:
                self._server.stop()
                self._server = None
            self._url = self.config.server_url.rstrip("/")
            self._checked = False
