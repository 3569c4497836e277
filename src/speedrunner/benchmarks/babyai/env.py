"""``BabyAITextEnv``: a TextEnv over the BabyAI-Text server's JSON API.

One env owns one server-side episode and one keep-alive HTTP connection (stdlib
``http.client``), so a step costs one loopback round trip. The server is the only place
the game state lives; the env caches the last observation so skills can re-read it free.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import secrets
import socket
import sys
import threading
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

from speedrunner.benchmarks.babyai import auth
from speedrunner.benchmarks.babyai.text import ACTIONS
from speedrunner.core.env import Observation, StepResult, TextEnv
from speedrunner.core.names import unknown
from speedrunner.errors import (
    EnvError,
    InvalidActionError,
    ServerUnavailableError,
    UnknownNameError,
)

START_HINT = "start one with `python BALROG/deploy_env.py deploy.port=<port>`"
BUSY_WAIT_S = 60.0
"""How long a request keeps retrying while the server is busy (503 ``too_many_connections``, or a
connection it closed unanswered to make room): another client holds every connection slot."""
BUSY_CODES = frozenset({"too_many_connections", "too_many_episodes"})
"""503 codes that mean the server is full (other clients), not broken."""


class ServerAuthError(EnvError):
    """The server refused our token (401): it is another user's,
    or was started with another token."""


def refused(base_url: str) -> ServerAuthError:
    return ServerAuthError(
        f"the BabyAI server at {base_url} refused this run (401 unauthorized): it serves only the "
        f"user who started it, with its token; {auth.where(base_url)}"
    )


class ServerConnection:
    """A keep-alive JSON connection to one server; not thread-safe (one per env).

    Every request carries the server's token: ``token``, else the one ``auth.find_token`` finds.
    """

    def __init__(self, base_url: str, timeout_s: float, token: str | None = None) -> None:
        parts = urlsplit(base_url)
        if parts.scheme != "http" or not parts.hostname:
            raise EnvError(f"BabyAI server_url must look like http://host:port, got {base_url!r}")
        self.base_url = base_url.rstrip("/")
        self.host, self.port = parts.hostname, parts.port or 80
        self.prefix = parts.path.rstrip("/")
        self.timeout_s = timeout_s
        self._auth = auth.header(token or auth.find_token(self.base_url))
        self._conn: http.client.HTTPConnection | None = None

    def _connect(self) -> http.client.HTTPConnection:
        conn = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout_s)
        conn.connect()
        # Small request/response pairs: without NODELAY, Nagle + delayed ACK stall every step.
        conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return conn

    def request(
        self,
        method: str,
        path: str,
        body: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
        *,
        busy_wait_s: float = BUSY_WAIT_S,
    ) -> tuple[int, dict[str, Any]]:
        """(status, JSON body). A connection closed before its answer is retried on a new one (the
        server closes a stale keep-alive connection, or an idle one to make room, without serving
        what arrives on it), and so is a 503 ``too_many_connections`` (answered before the request
        is read), for up to ``busy_wait_s``, with a note on stderr: the server is busy, not broken.
        A 401 (the server is not ours to use) raises ``ServerAuthError`` at once."""
        started, pause, noted = time.monotonic(), 0.1, False
        while True:
            status, payload = self._request_once(method, path, body, headers, started + busy_wait_s)
            if status == 401:
                raise refused(self.base_url)
            if status != 503 or payload.get("code") != "too_many_connections":
                return status, payload
            if time.monotonic() + pause > started + busy_wait_s:
                return status, payload
            if not noted:
                print(
                    f"BabyAI server at {self.base_url} is busy (every connection slot is taken by "
                    f"other clients); retrying for up to {busy_wait_s:g} s",
                    file=sys.stderr,
                )
                noted = True
            time.sleep(pause)
            pause = min(pause * 2, 2.0)

    def _request_once(
        self,
        method: str,
        path: str,
        body: dict[str, Any] | None,
        headers: dict[str, str] | None,
        deadline: float,
    ) -> tuple[int, dict[str, Any]]:
        data = json.dumps(body).encode() if body is not None else None
        headers = {
            **({"Content-Type": "application/json"} if data is not None else {}),
            **self._auth,
            **(headers or {}),
        }
        attempt = 0
        while True:
            attempt += 1
            reused = self._conn is not None
            try:
                conn = self._conn
                if conn is None:
                    conn = self._conn = self._connect()
                # ``conn``, not ``self._conn``: a close() from another thread (a run shutting
                # down) then fails this request as a dropped connection, not an AttributeError.
                conn.request(method, self.prefix + path, body=data, headers=headers)
                response = conn.getresponse()
                raw = response.read()
                if response.will_close:
                    self.close()
                break
            except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError) as e:
                self.close()
                if not reused and (attempt >= 8 or time.monotonic() > deadline):
                    raise ServerUnavailableError(
                        f"BabyAI server at {self.base_url} closed the connection without answering "
                        f"{method} {path}, {attempt} times ({e}): it is busy (other clients hold "
                        "its connections) or stopping; is it still running? (a server autostarted "
                        "by another run stops when that run ends; for concurrent runs "
                        f"{START_HINT})"
                    ) from e
                if not reused:
                    time.sleep(min(0.05 * 2**attempt, 1.0))
            except (OSError, http.client.HTTPException, AttributeError) as e:
                if isinstance(e, AttributeError) and self._conn is not None:
                    raise  # a real bug, not a connection closed under the request
                self.close()
                raise ServerUnavailableError(
                    f"BabyAI server at {self.base_url} did not answer {method} {path} ({e}); "
                    f"{START_HINT}"
                ) from e
        try:
            payload = json.loads(raw)
        except json.JSONDecodeError as e:
            raise ServerUnavailableError(
                f"{self.base_url} answered {method} {path} with non-JSON (status "
                f"{response.status}); is it a BabyAI-Text server? {START_HINT}"
            ) from e
        return response.status, payload

    def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()


def _raise_for(status: int, payload: dict[str, Any], what: str) -> None:
    """Turn a server error reply into the matching named error."""
    if status == 200:
        return
    message = f"{what}: {payload.get('error', payload)}"
    code = payload.get("code")
    if code == "unknown_task":
        raise UnknownNameError(message)
    if code == "invalid_action":
        raise InvalidActionError(message)
    if status == 503 and code in BUSY_CODES:
        message += f" (the server is busy: {code}, other clients hold what it has; retry later)"
        raise ServerBusyError(message)
    if status >= 500:
        message += " (server-side bug; the server keeps running)"
    raise EnvError(message)


class ServerBusyError(EnvError):
    """The server answered but is full (503 ``too_many_*``): other clients,
    not a fault of ours or its."""


class OwnerTag:
    """The owner a run's episodes are created under (shared by its envs), so a resume can delete
    what a killed process of the run left. When the server has no room left for it (429
    ``owner_quota``: its episodes fill the owner's quota), the run goes on under a fresh one."""

    def __init__(
        self, run_tag: str, name: str | None = None, on_change: Callable[[str], None] | None = None
    ) -> None:
        self.run_tag = run_tag
        self.name = name or self.fresh()
        self.on_change = on_change
        """Called with the new name after a change (the benchmark stores it for a resume)."""
        self._lock = threading.Lock()

    def fresh(self) -> str:
        return f"{self.run_tag}-{secrets.token_hex(6)}"

    def replace(self, refused: str, base_url: str, why: str) -> str:
        """A fresh name instead of ``refused`` (once, however many envs were refused it),
        said in one line."""
        with self._lock:
            if self.name == refused:
                self.name = self.fresh()
                print(
                    f"BabyAI server at {base_url} has no room for owner {refused!r} ({why}); this "
                    f"run's episodes go on under a fresh owner {self.name!r}",
                    file=sys.stderr,
                )
                if self.on_change is not None:
                    self.on_change(self.name)
            return self.name


class BabyAITextEnv(TextEnv):
    """One BabyAI-Text episode at a time, played on a server (see ``server.py``)."""

    accepts_free_text = False  # step() refuses anything not in actions (InvalidActionError)

    def __init__(
        self,
        server_url: str,
        *,
        request_timeout_s: float = 30.0,
        owner: OwnerTag | None = None,
        token: str | None = None,
    ) -> None:
        self._http = ServerConnection(server_url, request_timeout_s, token)
        self._owner = owner  # tags server-side episodes with the run, so a resume can clean up
        self._episode_id: str | None = None
        self._start: dict[str, Any] = {}
        self._observation: Observation | None = None
        self._success = False
        self._done = False

    def __repr__(self) -> str:
        return f"BabyAITextEnv({self._http.base_url!r}, episode={self._episode_id})"

    # Protocol members answer before reset too ("" / the fixed vocabulary): runtime_checkable
    # isinstance() reads them, and only AttributeError would be tolerated there.
    @property
    def instruction(self) -> str:
        return self._start.get("instruction", "")

    @property
    def actions(self) -> list[str]:
        return list(self._start.get("actions", ACTIONS))

    @property
    def action_descriptions(self) -> dict[str, str]:
        """Per-action help for prompts (``pick up`` acts on the cell in front)."""
        return dict(self._started()["action_descriptions"])

    @property
    def task(self) -> str:
        """The concrete task kind of the current episode (resolved for ``mixed``)."""
        return self._started()["task"]

    @property
    def max_steps(self) -> int:
        return int(self._started()["max_steps"])

    @property
    def step_limit(self) -> int:
        """The level's own step limit (``max_steps``)."""
        return self.max_steps

    @property
    def success(self) -> bool:
        return self._success

    @property
    def observation(self) -> Observation:
        """The latest observation (no server call)."""
        if self._observation is None:
            raise EnvError("call reset(task, seed) before reading the observation")
        return self._observation

    def _started(self) -> dict[str, Any]:
        if not self._start:
            raise EnvError("call reset(task, seed) before using the env")
        return self._start

    def reset(self, task: str, seed: int) -> Observation:
        body = {"task": task, "seed": int(seed)}
        status, payload = 0, {}
        if self._episode_id is not None:
            status, payload = self._http.request(
                "POST", f"/episodes/{self._episode_id}/reset", body
            )
            if payload.get("code") in ("unknown_episode", "episode_expired"):
                self._episode_id = None  # expired or server restarted: start afresh
        if self._episode_id is None:
            tag = self._owner
            owner = None if tag is None else tag.name
            status, payload = self._http.request("POST", "/episodes", {**body, "owner": owner})
            if tag is not None and owner is not None and payload.get("code") == "owner_quota":
                owner = tag.replace(owner, self._http.base_url, str(payload.get("error")))
                status, payload = self._http.request("POST", "/episodes", {**body, "owner": owner})
        _raise_for(status, payload, f"reset({task!r}, {seed})")
        self._episode_id = payload["episode_id"]
        self._start = payload
        self._success = self._done = False
        self._observation = Observation(payload["observation"], payload["structured"])
        return self._observation

    def step(self, action: str) -> StepResult:
        valid = self._started()["actions"]  # raises before reset
        if action not in valid:
            raise InvalidActionError(unknown("BabyAI action", action, valid))
        if self._done:
            raise EnvError("the episode is over; call reset(task, seed) to play again")
        status, payload = self._http.request(
            "POST", f"/episodes/{self._episode_id}/step", {"action": action}
        )
        _raise_for(status, payload, f"step({action!r})")
        self._observation = Observation(payload["observation"], payload["structured"])
        self._success, self._done = bool(payload["success"]), bool(payload["done"])
        info = {k: payload[k] for k in ("success", "progress", "steps", "truncated")}
        return StepResult(self._observation, float(payload["reward"]), self._done, info)

    def progress(self) -> float:
        return 1.0 if self._success else 0.0

    def close(self) -> None:
        """Delete the server-side episode (best effort) and drop the connection. Idempotent."""
        if self._episode_id is not None:
            # Server gone: episode gone too. Refused (restarted with another token): it expires
            # there.
            with contextlib.suppress(ServerUnavailableError, ServerAuthError):
                self._http.request("DELETE", f"/episodes/{self._episode_id}")
            self._episode_id = None
        self._http.close()
