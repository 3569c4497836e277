"""BabyAI-Text episode server: a small stdlib JSON API over HTTP/1.1 (keep-alive).

Start it with ``python BALROG/deploy_env.py deploy.port=8080`` or
``python -m speedrunner.benchmarks.babyai.server --port 8080``. It binds 127.0.0.1 unless
told otherwise, and serves only the user who started it: every request must carry
``Authorization: Bearer <token>``, the secret the server made at start (or
``SPEEDRUNNER_BABYAI_TOKEN``), which it writes to ``babyai-server-<port>.token`` (mode 0600) in
the user's runtime directory (``auth.py``); anything else gets 401 ``unauthorized`` before any
of it is read or done, and its connection is closed. Each episode lives server-side behind its
own lock, so many clients may play concurrently; idle episodes expire after ``episode_ttl_s``;
at most ``max_episodes`` exist at once.

JSON schema (request -> response; every body is a JSON object)::

    GET    /health                      -> {status: "ok", service: "babyai-text", tasks: [str],
                                            actions: [str], episodes: int}
    POST   /episodes {task: str, seed: int, owner?: str}
                                        -> {episode_id, task, instruction, observation,
                                            structured, actions, action_descriptions, max_steps}
    DELETE /episodes?owner=<owner>      -> {deleted: [<id>, ...]}   (every episode of that owner)
    POST   /episodes/<id>/step {action: str}
                                        -> {observation, structured, reward, done, success,
                                            progress, steps, truncated}
    POST   /episodes/<id>/reset {task: str, seed: int}   -> same as POST /episodes
    DELETE /episodes/<id>               -> {deleted: <id>}

``task`` is a kind (``goto``, ``pickup``, ``open``, ``putnext``, ``pick_up_seq_go_to``),
``mixed`` (kind drawn from the seed), or any of these prefixed with
``BabyAI-MixedTrainLocal-v0/``. ``seed`` is an integer in [0, 2**32). ``observation`` is
BALROG's text; ``structured`` the same facts as a dict (see ``text.py``).

``owner`` tags an episode with its client (a run), so a resumed run deletes what its killed
predecessor left instead of leaving it until the idle expiry. Each owner (and all clients
without one, together) may have at most ``max_episodes_per_owner`` episodes. Requests have a
total deadline (``request_timeout_s`` from their first byte), not just a per-read timeout; a
new connection that sends nothing is closed after ``first_byte_timeout_s``; a connection is
closed after ``max_requests_per_connection`` requests or ``max_connection_age_s``; when every
connection slot is taken, the connection idle longest, else the one whose request has been
arriving longest (nothing of it is executed: its client resends it), is closed to make room
(503 ``too_many_connections`` only when every connection is executing a request).

Errors are ``{"error": <what was wrong and what to do>, "code": <short id>, ...}``:
400 ``malformed_json`` (also numbers too long to convert and JSON nested too deep) /
``bad_request`` (also a bad ``Content-Length``) / ``unknown_task`` (+ ``valid_tasks``) /
``invalid_action`` (+ ``valid_actions``); 401 ``unauthorized`` (no or wrong token; + ``service``);
404 ``unknown_episode`` / ``unknown_route``;
405 ``method_not_allowed`` (+ ``allowed`` and an ``Allow``
header; HEAD, OPTIONS, TRACE and unknown methods too); 408 ``request_timeout`` (a request
not complete within ``request_timeout_s``); 409 ``episode_done``; 410 ``episode_expired``;
411 ``length_required``; 413 ``body_too_large``; 429 ``owner_quota``; 503
``too_many_episodes`` / ``too_many_connections`` (more than
``max_connections`` executing at once). Requests that are not HTTP/1.x get a JSON 400 too:
``not_http`` (TLS bytes: use ``http://``), ``http_0_9``, ``bad_request`` (a bad request line
or headers; 414 / 431 for oversized ones). A bad request never stops the server.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import signal
import socket
import sys
import threading
import time
import uuid
from collections import OrderedDict
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

if __name__ == "__main__":
    # A process of its own (every run starts one): it does without networkx. minigrid's package
    # init imports its WFC environments, which import networkx, a large share of this process's
    # start-up; BabyAI never builds one, and minigrid puts a stub in their place when
    # networkx cannot be imported. A module imported elsewhere leaves sys.modules alone.
    sys.modules.setdefault("networkx", None)  # type: ignore[assignment]

from speedrunner.benchmarks.babyai import auth, levels, text  # noqa: E402
from speedrunner.core.argparsing import ArgumentParser  # noqa: E402
from speedrunner.core.names import unknown  # noqa: E402
from speedrunner.errors import UnknownNameError  # noqa: E402

SERVICE = "babyai-text"


@dataclass
class ServerSettings:
    """How the server runs (``deploy.<field>=...`` on the deploy_env.py command line)."""

    host: str = "127.0.0.1"
    """Interface to bind; loopback by default so nothing outside the machine can play."""
    port: int = 8080
    """TCP port (0 picks a free one)."""
    episode_ttl_s: float = 1800.0
    """Seconds an episode may stay idle before it is discarded (clients that died leak nothing):
    longer than the worst model call between two steps with all its retries (6 attempts of
    120 s and their capped waits, about 23 minutes); lower it for models with shorter limits."""
    max_episodes: int = 4096
    """Most episodes alive at once; creating one more answers 503 after expiring idle ones. An
    episode holds a few KiB, so a full store stays well under a hundred MB."""
    max_episodes_per_owner: int = 256
    """Most episodes one owner (a run) may have alive (all clients that send no owner count as
    one); more answer 429, so one runaway run cannot fill the store for the others."""
    max_body_bytes: int = 65536
    """Largest request body accepted (413 above it)."""
    read_timeout_s: float = 300.0
    """An idle keep-alive connection (no request begun) is closed after this long; longer than an
    LLM call between two steps of a keep-alive client. When every connection slot is taken, the
    connection idle longest is closed at once to make room for a new one (a client reconnects)."""
    first_byte_timeout_s: float = 5.0
    """A new connection that sends nothing is closed after this long: a slot is held by a client
    that talks, not by one that only connects."""
    request_timeout_s: float = 10.0
    """A request (request line, headers and body) must arrive in full within this many seconds of
    its first byte, however slowly it trickles: else 408 and the connection is closed."""
    max_connections: int = 512
    """Most connections served at once. When all are taken, a new connection takes the place of
    one that is idle or whose request is still arriving (its client resends it); only when every
    one is executing a request, a 503 at once, without a thread."""
    max_requests_per_connection: int = 1000
    """A connection is closed (``Connection: close`` on its answer) after this many requests, so
    no client keeps a slot for ever; a keep-alive client simply reconnects."""
    max_connection_age_s: float = 600.0
    """A connection is closed after its first answer past this age (same reason)."""
    verbose: bool = False
    """Log every request to stderr."""


class ApiError(Exception):
    """A client mistake, answered with ``status`` and a JSON body; the server keeps going."""

    def __init__(self, status: int, code: str, message: str, **extra: Any) -> None:
        super().__init__(message)
        self.status, self.body = status, {"error": message, "code": code, **extra}


class Episode:
    """One level plus its lock; all state a client can change lives here."""

    def __init__(self, episode_id: str, owner: str | None = None) -> None:
        self.id = episode_id
        self.owner = owner
        self.lock = threading.Lock()
        self.last_used = time.monotonic()
        self.level: levels.MixedTrainLocalLevel | None = None
        self.done = False
        self.success = False

    def start(self, task: str, seed: int) -> dict[str, Any]:
        kind = _check_task(task, seed)
        if self.level is None or self.level.kind != kind:
            self.level = levels.MixedTrainLocalLevel(kind)
        self.level.reset(seed=seed)
        self.done = self.success = False
        observation, structured = text.observe(self.level)
        return {
            "episode_id": self.id,
            "task": kind,
            "instruction": text.instruction(self.level.mission),
            "observation": observation,
            "structured": structured,
            "actions": list(text.ACTIONS),
            "action_descriptions": text.ACTION_DESCRIPTIONS,
            "max_steps": self.level.max_steps,
        }

    def step(self, action: str) -> dict[str, Any]:
        if action not in text.ACTION_INDEX:
            raise ApiError(
                400,
                "invalid_action",
                unknown("action", str(action), text.ACTIONS),
                valid_actions=list(text.ACTIONS),
            )
        if self.level is None:
            raise ApiError(409, "episode_done", f"episode {self.id} has no level; reset it")
        if self.done:
            raise ApiError(
                409,
                "episode_done",
                f"episode {self.id} is finished "
                f"(success={self.success}); POST /episodes/{self.id}/reset to play again",
            )
        obs, reward, terminated, truncated, _ = self.level.step(text.ACTION_INDEX[action])
        self.success = bool(terminated and reward > 0)
        self.done = bool(terminated or truncated)
        observation, structured = text.observe(self.level, obs["image"])
        return {
            "observation": observation,
            "structured": structured,
            "reward": float(reward),
            "done": self.done,
            "success": self.success,
            "progress": 1.0 if self.success else 0.0,
            "steps": int(self.level.step_count),
            "truncated": bool(truncated and not terminated),
        }


class EpisodeStore:
    """Episodes by id, with idle expiry,
    a size bound and a quota per owner. One short global lock."""

    _REMEMBER_EXPIRED = 10000

    def __init__(self, ttl_s: float, max_episodes: int, max_per_owner: int | None = None) -> None:
        self.ttl_s, self.max_episodes = ttl_s, max_episodes
        self.max_per_owner = max_episodes if max_per_owner is None else max_per_owner
        self._lock = threading.Lock()
        self._episodes: dict[str, Episode] = {}
        self._expired: OrderedDict[str, None] = OrderedDict()
        self._last_sweep = 0.0

    def __len__(self) -> int:
        return len(self._episodes)

    def _sweep(self, now: float, force: bool = False) -> None:
        if not force and now - self._last_sweep < 1.0:
            return
        self._last_sweep = now
        for eid in [e.id for e in self._episodes.values() if now - e.last_used > self.ttl_s]:
            del self._episodes[eid]
            self._expired[eid] = None
        while len(self._expired) > self._REMEMBER_EXPIRED:
            self._expired.popitem(last=False)

    def create(self, owner: str | None = None) -> Episode:
        """A new episode, within the owner's quota and the store's size."""
        # Ids only name server-side state; they never influence an episode's content.
        episode = Episode(uuid.uuid4().hex, owner)
        with self._lock:
            self._sweep(time.monotonic(), force=True)
            if sum(e.owner == owner for e in self._episodes.values()) >= self.max_per_owner:
                who = f"owner {owner!r}" if owner is not None else "clients without an owner"
                raise ApiError(
                    429,
                    "owner_quota",
                    f"{who} already have {self.max_per_owner} episodes alive; "
                    "DELETE finished ones (or raise deploy.max_episodes_per_owner)",
                )
            if len(self._episodes) >= self.max_episodes:
                raise ApiError(
                    503,
                    "too_many_episodes",
                    f"{self.max_episodes} episodes are alive; DELETE finished ones or "
                    "start the server with a larger deploy.max_episodes",
                )
            self._episodes[episode.id] = episode
        return episode

    def get(self, episode_id: str) -> Episode:
        with self._lock:
            now = time.monotonic()
            self._sweep(now)
            episode = self._episodes.get(episode_id)
            if episode is not None and now - episode.last_used > self.ttl_s:
                self._sweep(now, force=True)
                episode = None
            if episode is None:
                if episode_id in self._expired:
                    raise ApiError(
                        410,
                        "episode_expired",
                        f"episode {episode_id} expired after "
                        f"{self.ttl_s:g} s idle; POST /episodes to start a new one",
                    )
                raise ApiError(
                    404,
                    "unknown_episode",
                    f"no episode {episode_id!r}; POST /episodes {{task, seed}} to create one",
                )
            episode.last_used = now
            return episode

    def delete(self, episode_id: str) -> None:
        self.get(episode_id)
        with self._lock:
            self._episodes.pop(episode_id, None)

    def delete_owned(self, owner: str) -> list[str]:
        """Delete every episode of ``owner``; their ids."""
        with self._lock:
            ids = [e.id for e in self._episodes.values() if e.owner == owner]
            for eid in ids:
                del self._episodes[eid]
        return ids


_ROUTES: list[tuple[re.Pattern[str], str, tuple[str, ...]]] = [
    (re.compile(r"^/health$"), "health", ("GET",)),
    (re.compile(r"^/episodes$"), "episodes", ("POST", "DELETE")),
    (re.compile(r"^/episodes/([^/]+)/step$"), "step", ("POST",)),
    (re.compile(r"^/episodes/([^/]+)/reset$"), "reset", ("POST",)),
    (re.compile(r"^/episodes/([^/]+)$"), "delete", ("DELETE",)),
]


def _task_and_seed(body: dict[str, Any]) -> tuple[str, int]:
    task, seed = body.get("task"), body.get("seed")
    if not isinstance(task, str):
        raise ApiError(
            400,
            "bad_request",
            'body needs "task" (a string), e.g. {"task": "pick_up_seq_go_to", "seed": 0}',
            valid_tasks=levels.valid_tasks(),
        )
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**32:
        raise ApiError(400, "bad_request", f'"seed" must be an integer in [0, 2**32), got {seed!r}')
    return task, seed


def _owner(body: dict[str, Any]) -> str | None:
    owner = body.get("owner")
    if owner is not None and (not isinstance(owner, str) or not 0 < len(owner) <= 200):
        raise ApiError(400, "bad_request", '"owner" must be a string of 1 to 200 characters')
    return owner


def _check_task(task: str, seed: int) -> str:
    try:
        return levels.resolve_task(task, seed)
    except UnknownNameError as e:
        raise ApiError(400, "unknown_task", str(e), valid_tasks=levels.valid_tasks()) from e


class DeadlineReader(io.RawIOBase):
    """The connection's reads, with a total deadline per request instead of a per-read timeout.

    A socket timeout restarts with every byte, so a client that trickles a header line now
    and then would hold its thread for ever. Here, waiting for a request to *begin* is
    bounded by ``idle_s`` (keep-alive), and once its first byte is in, the whole request
    must arrive within ``request_s``: every read gets only what is left of that.
    """

    def __init__(
        self, sock: socket.socket, idle_s: float, request_s: float, on_idle: Any = lambda: None
    ) -> None:
        self.sock, self.idle_s, self.request_s = sock, idle_s, request_s
        self.deadline: float | None = None
        self.on_idle = on_idle
        """Called when the connection waits for a request to begin (nothing of one is buffered)."""

    def readable(self) -> bool:
        return True

    def start_request(self) -> None:
        self.deadline = None

    def begin(self) -> None:
        if self.deadline is None:
            self.deadline = time.monotonic() + self.request_s

    def readinto(self, buffer: Any) -> int:
        if self.deadline is None:
            self.on_idle()  # waiting for a request to begin: evictable until its first bytes arrive
            self.sock.settimeout(self.idle_s)
        else:
            left = self.deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("the request did not arrive in time")
            self.sock.settimeout(left)
        n = self.sock.recv_into(buffer)
        if n:
            self.begin()
        return n


_ERROR_CODES = {
    400: "bad_request",
    414: "uri_too_long",
    431: "headers_too_large",
    501: "method_not_allowed",
    505: "http_version_not_supported",
}


class Evicted(Exception):
    """The connection was given to a newcomer before its request was read in full:
    drop it unanswered."""


class Handler(BaseHTTPRequestHandler):
    """Routes requests to the store; turns ``ApiError`` (and our own bugs) into JSON replies."""

    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body go out in separate writes
    server: BabyAIServer

    def setup(self) -> None:
        settings = self.server.settings
        self.timeout = settings.read_timeout_s  # StreamRequestHandler applies it (to writes, here)
        super().setup()
        self.rfile.close()
        self.reader = DeadlineReader(
            self.connection,
            settings.first_byte_timeout_s,
            settings.request_timeout_s,
            lambda: self.server.idle(self.connection),
        )
        self.rfile = io.BufferedReader(self.reader, 65536)
        self.served = 0
        self.opened = time.monotonic()

    def handle_one_request(self) -> None:
        """The stdlib's, with a JSON answer for everything that is not an HTTP/1.x request."""
        self.reader.start_request()
        if self.served:  # between requests of a keep-alive client: the longer idle allowance
            self.reader.idle_s = self.server.settings.read_timeout_s
        self.served += 1
        self.replied = False
        try:
            first = self.rfile.peek(1)[:1]
            self.reader.begin()  # from here on, the whole request is on the clock
            # Begun (read now or already buffered with the last request); until it is read in full
            # its slot may go to a newcomer. Evicted before this: dropped unanswered (it is resent).
            if not self.server.busy(self.connection):
                self.close_connection = True
                return
            if first in (b"\x16", b"\x80"):  # a TLS (or SSLv2) ClientHello
                self.request_version, self.command, self.requestline = "HTTP/1.1", None, "(TLS)"
                self.close_connection = True
                self._reply(
                    400,
                    {
                        "error": "this is a plain HTTP server: use http://, not https://",
                        "code": "not_http",
                    },
                )
                return
            self.raw_requestline = self.rfile.readline(65537)
            if len(self.raw_requestline) > 65536:
                self.requestline = self.command = ""
                self.request_version = "HTTP/1.1"
                self.send_error(414, "request line longer than 65536 bytes")
                return
            if not self.raw_requestline:
                self.close_connection = True
                return
            if (
                len(self.raw_requestline.split()) == 2
            ):  # "GET /path": HTTP/0.9, which has no headers
                self.requestline = self.raw_requestline.decode("latin-1").rstrip("\r\n")
                self.request_version, self.command = "HTTP/1.1", None
                self.close_connection = True
                self._reply(
                    400,
                    {
                        "error": "HTTP/0.9 requests are not served: send HTTP/1.1 (e.g. "
                        "'GET /health HTTP/1.1' and a Host header)",
                        "code": "http_0_9",
                    },
                )
                return
            if not self.parse_request():
                if not self.replied:
                    self.send_error(400, "empty request line")
                return
            if self.headers is not None and self.headers.defects:
                self.send_error(400, f"malformed header lines ({self.headers.defects[0]!r})")
                return
            if not auth.matches(self.headers.get("Authorization"), self.server.token):
                self._refuse()
                return
            getattr(self, "do_" + self.command)()
            self.wfile.flush()
        except TimeoutError:
            self.close_connection = True
            if not self.replied and self.reader.deadline is not None:
                with contextlib.suppress(OSError):
                    self.request_version = "HTTP/1.1"
                    self._reply(
                        408,
                        {
                            "error": f"request not complete within "
                            f"{self.server.settings.request_timeout_s:g} s of its first byte",
                            "code": "request_timeout",
                        },
                    )

    def _refuse(self) -> None:
        """401 before anything else is read or done, and the connection closed."""
        self.close_connection = True
        self._reply(
            401,
            {
                "error": "this BabyAI-Text server serves only the user who started it: send "
                "'Authorization: Bearer <token>' with the token from its token file "
                "(babyai-server-<port>.token in that user's runtime directory) or "
                f"{auth.TOKEN_ENV}",
                "code": "unauthorized",
                "service": SERVICE,
            },
            {"WWW-Authenticate": "Bearer"},
            body=self.command != "HEAD",
        )

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        """Errors the stdlib finds (request line, headers) as JSON, like every other answer."""
        self.close_connection = True
        if getattr(self, "request_version", "HTTP/0.9") == "HTTP/0.9":
            self.request_version = "HTTP/1.1"  # a status line and headers, whatever was sent
        text = message or self.responses.get(code, ("error",))[0]
        self._reply(
            code,
            {
                "error": f"{text}: send an HTTP/1.1 request with a JSON body (see GET /health)",
                "code": _ERROR_CODES.get(code, "bad_request"),
            },
            body=self.command != "HEAD",
        )

    def __getattr__(self, name: str) -> Any:
        # http.server looks up do_<METHOD>; every method, known or not, gets a JSON answer
        # (405 for the ones no route takes) instead of the stdlib's 501 HTML page.
        if name.startswith("do_"):
            return lambda: self._dispatch(name[3:])
        raise AttributeError(name)

    def log_message(self, format: str, *args: Any) -> None:
        if self.server.settings.verbose:
            super().log_message(format, *args)

    def _dispatch(self, method: str) -> None:
        headers: dict[str, str] = {}
        settings = self.server.settings
        if (
            self.served >= settings.max_requests_per_connection
            or time.monotonic() - self.opened >= settings.max_connection_age_s
        ):
            self.close_connection = (
                True  # no connection keeps its slot for ever; the client reconnects
            )
        try:
            status, payload = 200, self._route(method)
        except Evicted:
            self.close_connection = True  # its slot went to a new connection; the client resends
            return
        except ApiError as e:
            status, payload = e.status, e.body
            if status == 405:
                headers["Allow"] = ", ".join(e.body["allowed"])
        except Exception as e:  # our bug: answer 500 and keep serving
            status, payload = (
                500,
                {"error": f"internal error: {type(e).__name__}: {e}", "code": "internal"},
            )
        self._reply(status, payload, headers, body=method != "HEAD")

    def _route(self, method: str) -> dict[str, Any]:
        path = self.path.split("?", 1)[0].rstrip("/") or "/"
        for pattern, name, methods in _ROUTES:
            match = pattern.match(path)
            if not match:
                continue
            if method not in methods:
                self._discard_body()
                raise ApiError(
                    405,
                    "method_not_allowed",
                    f"{method} {path} is not supported; use {' or '.join(methods)}",
                    allowed=list(methods),
                )
            return getattr(self, f"_{name}")(*match.groups())
        self._discard_body()
        raise ApiError(
            404,
            "unknown_route",
            f"no route {method} {path}; see GET /health and the "
            "server module docstring for the API",
        )

    def _start_work(self) -> None:
        """The request is read in full: from here it is executed, so its connection is no longer
        given to a newcomer (Evicted if that happened while it arrived: nothing was done)."""
        if not self.server.working(self.connection):
            raise Evicted

    def _read_json(self) -> dict[str, Any]:
        length = self.headers.get("Content-Length")
        if length is None:
            self.close_connection = True
            raise ApiError(
                411, "length_required", "send a Content-Length header with the JSON body"
            )
        if not length.strip().isdigit():  # negative, signed or not a number: never read "until EOF"
            self.close_connection = True
            raise ApiError(
                400, "bad_request", f"bad Content-Length {length!r}: send the body's size in bytes"
            )
        size = int(length)
        limit = self.server.settings.max_body_bytes
        if size > limit:
            self.close_connection = True  # the unread body would corrupt the next request
            raise ApiError(413, "body_too_large", f"body of {size} bytes exceeds {limit} bytes")
        try:
            raw = self.rfile.read(size)
        except TimeoutError:  # the client stalled mid-body: answer and drop the connection
            self.close_connection = True
            raise ApiError(
                408,
                "request_timeout",
                f"body not received within "
                f"{self.server.settings.request_timeout_s:g} s of the request's first byte",
            ) from None
        self._start_work()
        if len(raw) < size:  # the client closed (or half-closed) before sending it all
            self.close_connection = True
            raise ApiError(400, "bad_request", f"body ended after {len(raw)} of {size} bytes")
        try:
            body = json.loads(raw or b"{}")
        except (ValueError, UnicodeDecodeError, RecursionError) as e:
            # ValueError covers JSONDecodeError and integers too long to convert
            raise ApiError(
                400,
                "malformed_json",
                f"request body is not valid JSON: {type(e).__name__}: {str(e)[:200]}",
            ) from None
        if not isinstance(body, dict):
            raise ApiError(400, "malformed_json", "request body must be a JSON object")
        return body

    def _discard_body(self) -> None:
        length = self.headers.get("Content-Length")
        if length and length.isdigit() and int(length) <= self.server.settings.max_body_bytes:
            try:
                self.rfile.read(int(length))
            except TimeoutError:
                self.close_connection = True
        elif length:
            self.close_connection = True
        self._start_work()

    def _health(self) -> dict[str, Any]:
        self._discard_body()
        return {
            "status": "ok",
            "service": SERVICE,
            "tasks": levels.valid_tasks(),
            "actions": list(text.ACTIONS),
            "episodes": len(self.server.store),
        }

    def _episodes(self) -> dict[str, Any]:
        if self.command == "DELETE":
            owner = parse_qs(urlsplit(self.path).query).get("owner", [""])[0]
            if not owner:
                raise ApiError(400, "bad_request", "DELETE /episodes needs ?owner=<owner>")
            self._discard_body()
            return {"deleted": self.server.store.delete_owned(owner)}
        return self._create()

    def _create(self) -> dict[str, Any]:
        body = self._read_json()
        task, seed = _task_and_seed(body)
        owner = _owner(body)
        _check_task(task, seed)  # before allocating, so a bad task leaves nothing behind
        episode = self.server.store.create(owner)
        with episode.lock:
            return episode.start(task, seed)

    def _step(self, episode_id: str) -> dict[str, Any]:
        body = self._read_json()
        action = body.get("action")
        if not isinstance(action, str):
            raise ApiError(
                400,
                "invalid_action",
                'body needs "action" (a string)',
                valid_actions=list(text.ACTIONS),
            )
        episode = self.server.store.get(episode_id)
        with episode.lock:
            return episode.step(action)

    def _reset(self, episode_id: str) -> dict[str, Any]:
        task, seed = _task_and_seed(self._read_json())
        episode = self.server.store.get(episode_id)
        with episode.lock:
            return episode.start(task, seed)

    def _delete(self, episode_id: str) -> dict[str, Any]:
        self._discard_body()
        self.server.store.delete(episode_id)
        return {"deleted": episode_id}

    def _reply(
        self,
        status: int,
        payload: dict[str, Any],
        headers: dict[str, str] | None = None,
        *,
        body: bool = True,
    ) -> None:
        data = json.dumps(payload, separators=(",", ":")).encode()
        self.replied = True
        self.connection.settimeout(self.server.settings.read_timeout_s)
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        if body:
            self.wfile.write(data)


class BabyAIServer(ThreadingHTTPServer):
    """The HTTP server plus its episode store, settings and token."""

    daemon_threads = True
    request_queue_size = 256  # the default 5 drops SYNs when many episodes connect at once

    def __init__(
        self, settings: ServerSettings, *, token: str | None = None, token_file: bool = True
    ) -> None:
        self.settings = settings
        self.token = token or auth.new_token()
        """Every request must carry it (``Authorization: Bearer``); never printed or logged."""
        if ":" in settings.host:
            self.address_family = socket.AF_INET6
        self.store = EpisodeStore(
            settings.episode_ttl_s, settings.max_episodes, settings.max_episodes_per_owner
        )
        self._connections = threading.BoundedSemaphore(settings.max_connections)
        self._state_lock = threading.Lock()
        self._idle: dict[socket.socket, float] = {}
        """Connections waiting for a request to begin, and since when."""
        self._arriving: dict[socket.socket, float] = {}
        """Connections whose request has begun but is not yet read in full, and since when."""
        self._evicted: set[socket.socket] = set()
        super().__init__((settings.host, settings.port), Handler)
        self.token_file: auth.TokenFile | None = None
        if token_file:
            try:
                self.token_file = auth.TokenFile(self.server_address[1], self.token)
            except BaseException:
                super().server_close()
                raise

    def server_close(self) -> None:
        super().server_close()
        if self.token_file is not None:
            self.token_file.remove()

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that went away before its answer was written (a killed run, a timed-out or
        evicted connection) is routine for a server: nothing to print. Anything else keeps
        socketserver's traceback on stderr."""
        if isinstance(sys.exc_info()[1], (BrokenPipeError, ConnectionResetError)):
            return
        super().handle_error(request, client_address)

    def idle(self, sock: socket.socket) -> None:
        """``sock`` waits for a request to begin: it may be evicted for a new connection."""
        with self._state_lock:
            self._arriving.pop(sock, None)
            self._idle[sock] = time.monotonic()

    def busy(self, sock: socket.socket) -> bool:
        """A request began on ``sock`` (still evictable until read in full);
        False if it was evicted."""
        with self._state_lock:
            self._idle.pop(sock, None)
            self._arriving[sock] = time.monotonic()
            return sock not in self._evicted

    def working(self, sock: socket.socket) -> bool:
        """``sock``'s request is read in full and about to be executed: no longer evictable.
        False if it was evicted first (then it must not be executed)."""
        with self._state_lock:
            self._arriving.pop(sock, None)
            return sock not in self._evicted

    def gone(self, sock: socket.socket) -> None:
        with self._state_lock:
            self._idle.pop(sock, None)
            self._arriving.pop(sock, None)
            self._evicted.discard(sock)

    def _evict(self) -> bool:
        """Close the connection idle longest, else the one whose request has been arriving longest
        (nothing of it was executed: its client resends it); False if every one is executing."""
        with self._state_lock:
            pool = self._idle or self._arriving
            if not pool:
                return False
            sock = min(pool, key=pool.__getitem__)
            del pool[sock]
            self._evicted.add(sock)
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)
        return True

    def process_request(self, request: Any, client_address: Any) -> None:
        """One thread per connection, at most ``max_connections``: when all are taken, one that is
        idle or still receiving its request is closed to make room; only if every one is executing
        a request, a 503 at once, without a thread."""
        if not self._connections.acquire(blocking=False) and not (
            self._evict() and self._connections.acquire(timeout=2.0)
        ):
            body = json.dumps(
                {
                    "error": f"the server is busy: {self.settings.max_connections} connections are "
                    "executing requests; retry later or raise deploy.max_connections",
                    "code": "too_many_connections",
                    "service": SERVICE,
                }
            ).encode()
            with contextlib.suppress(OSError):
                request.sendall(
                    b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n"
                    b"Connection: close\r\nContent-Length: "
                    + str(len(body)).encode()
                    + b"\r\n\r\n"
                    + body
                )
            self.shutdown_request(request)
            return
        super().process_request(request, client_address)

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self.gone(request)
            self._connections.release()

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def start_in_thread(
    settings: ServerSettings | None = None, *, token_file: bool = True
) -> BabyAIServer:
    """Serve in a daemon thread of this process (tests, benchmarks); stop with ``.shutdown()``
    and ``.server_close()`` (which removes its token file)."""
    server = BabyAIServer(settings or ServerSettings(port=0), token_file=token_file)
    threading.Thread(
        target=server.serve_forever,
        kwargs={"poll_interval": 0.05},
        name="babyai-server",
        daemon=True,
    ).start()
    return server


def _watch_parent(server: BabyAIServer, parent_pid: int) -> None:
    """Shut down when the process that started us is gone, so no server is ever orphaned."""
    while True:
        time.sleep(0.5)
        if os.getppid() != parent_pid:
            server.shutdown()
            return


def serve(settings: ServerSettings, *, parent_pid: int | None = None) -> None:
    """Serve until interrupted (or until ``parent_pid`` exits)."""
    try:
        server = BabyAIServer(settings)
    except auth.TokenFileError as e:
        print(f"error: {e}", file=sys.stderr)
        raise SystemExit(2) from None
    if parent_pid is not None:
        threading.Thread(target=_watch_parent, args=(server, parent_pid), daemon=True).start()
    # SIGTERM (a run stopping its server, kill) ends like Ctrl-C: the token file is removed.
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    print(
        f"BabyAI-Text server listening on {server.url}; it serves only you: its token is in "
        f"{server.token_file.path if server.token_file else '(no file)'} (mode 0600), where the "
        f"runs you start find it (elsewhere, set {auth.TOKEN_ENV} to it)",
        file=sys.stderr,
        flush=True,
    )
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


def main(argv: list[str] | None = None) -> None:
    """``python -m speedrunner.benchmarks.babyai.server --port 8080``."""
    defaults = ServerSettings()
    parser = ArgumentParser(description="BabyAI-Text episode server (JSON over HTTP).")
    parser.add_argument(
        "--host", default=defaults.host, help="interface to bind (default loopback)"
    )
    parser.add_argument("--port", type=int, default=defaults.port, help="TCP port")
    parser.add_argument(
        "--episode-ttl-s",
        type=float,
        default=defaults.episode_ttl_s,
        help="idle seconds before an episode expires",
    )
    parser.add_argument(
        "--max-episodes",
        type=int,
        default=defaults.max_episodes,
        help="most episodes alive at once",
    )
    parser.add_argument(
        "--max-episodes-per-owner",
        type=int,
        default=defaults.max_episodes_per_owner,
        help="most episodes one owner may have alive",
    )
    parser.add_argument(
        "--request-timeout-s",
        type=float,
        default=defaults.request_timeout_s,
        help="seconds a whole request may take from its first byte",
    )
    parser.add_argument(
        "--parent-pid",
        type=int,
        default=None,
        help="exit when this process (the one that started us) exits",
    )
    parser.add_argument("--verbose", action="store_true", help="log every request to stderr")
    args = parser.parse_args(argv)
    settings = ServerSettings(
        host=args.host,
        port=args.port,
        episode_ttl_s=args.episode_ttl_s,
        max_episodes=args.max_episodes,
        max_episodes_per_owner=args.max_episodes_per_owner,
        request_timeout_s=args.request_timeout_s,
        verbose=args.verbose,
    )
    serve(settings, parent_pid=args.parent_pid)


if __name__ == "__main__":
    main()
