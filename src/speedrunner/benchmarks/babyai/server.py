"""BabyAI-Text episode server: a small stdlib JSON API over HTTP/1.1 (keep-alive).

Start it with ``python BALROG/deploy_env.py deploy.port=8080`` or
``python -m speedrunner.benchmarks.babyai.server --port 8080``. It binds 127.0.0.1 unless
told otherwise. Each episode lives server-side behind its own lock, so many clients may
play concurrently; idle episodes expire after ``episode_ttl_s``; at most ``max_episodes``
exist at once.

JSON schema (request -> response; every body is a JSON object)::

    GET    /health                      -> {status: "ok", service: "babyai-text", tasks: [str],
                                            actions: [str], episodes: int}
    POST   /episodes {task: str, seed: int, owner?: str}
                                        -> {episode_id, task, instruction, observation,
                                            structured, actions, action_descriptions, max_steps}
    POST   /owners {owner: str, owner_token?: str}  -> {owner, owner_token}   (claim an owner)
    DELETE /episodes?owner=<owner>  (header X-Owner-Token: <token>)
                                        -> {deleted: [<id>, ...]}   (every episode of that owner)
    POST   /episodes/<id>/step {action: str}
                                        -> {observation, structured, reward, done, success,
                                            progress, steps, truncated}
    POST   /episodes/<id>/reset {task: str, seed: int}   -> same as POST /episodes
    DELETE /episodes/<id>               -> {deleted: <id>}

``task`` is a kind (``goto``, ``pickup``, ``open``, ``putnext``, ``pick_up_seq_go_to``),
``mixed`` (kind drawn from the seed), or any of these prefixed with
``BabyAI-MixedTrainLocal-v0/``. ``seed`` is an integer in [0, 2**32). ``observation`` is
BALROG's text; ``structured`` the same facts as a dict (see ``text.py``).

``owner`` tags an episode with its client (a run): a resumed run deletes what its killed
predecessor left, instead of leaving it until the idle expiry. The first client to use an
owner (``POST /owners``, or a create with that owner) gets its ``owner_token`` (its own
``owner_token`` if it sent one, else a fresh secret); every later create for that owner and
every ``DELETE ?owner=`` must present it. Each owner (and all clients without one, together)
may have at most ``max_episodes_per_owner`` episodes, and each owner that has episodes has
``reserved_episodes_per_owner`` of them kept free for it: no other owner's create may take
them, and a new owner's first episode is accepted only while its own reservation still fits.
An owner without episodes holds no reservation, costs one episode slot, and is forgotten after
``owner_ttl_s`` idle, or at once (oldest first) when a new owner needs its place, so inventing
owner names never keeps new owners out. Requests have a total deadline
(``request_timeout_s`` from their first byte), not just a per-read timeout; a new connection
that sends nothing is closed after ``first_byte_timeout_s``, and when every connection slot is
taken the connection idle longest is closed to make room (503 ``too_many_connections`` only
when none is idle).

Errors are ``{"error": <what was wrong and what to do>, "code": <short id>, ...}``:
400 ``malformed_json`` (also numbers too long to convert and JSON nested too deep) /
``bad_request`` (also a bad ``Content-Length``) / ``unknown_task`` (+ ``valid_tasks``) /
``invalid_action`` (+ ``valid_actions``); 404 ``unknown_episode`` / ``unknown_route``;
403 ``owner_token_mismatch``; 405 ``method_not_allowed`` (+ ``allowed`` and an ``Allow``
header; HEAD, OPTIONS, TRACE and unknown methods too); 408 ``request_timeout`` (a request
not complete within ``request_timeout_s``); 409 ``episode_done``; 410 ``episode_expired``;
411 ``length_required``; 413 ``body_too_large``; 429 ``owner_quota``; 503
``too_many_episodes`` / ``too_many_owners`` / ``too_many_connections`` (more than
``max_connections`` open at once). Requests that are not HTTP/1.x get a JSON 400 too:
``not_http`` (TLS bytes: use ``http://``), ``http_0_9``, ``bad_request`` (a bad request line
or headers; 414 / 431 for oversized ones). A bad request never stops the server.
"""

from __future__ import annotations

import contextlib
import hmac
import io
import json
import os
import re
import secrets
import socket
import sys
import threading
import time
import uuid
from collections import Counter, OrderedDict
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

if __name__ == "__main__":
    # A process of its own (every run starts one): it does without networkx. minigrid's package
    # init imports its WFC environments, which import networkx, a fifth of this process's start-up
    # (0.1 of 0.45 CPU-s); BabyAI never builds one, and minigrid puts a stub in their place when
    # networkx cannot be imported. A module imported elsewhere leaves sys.modules alone.
    sys.modules.setdefault("networkx", None)  # type: ignore[assignment]

from speedrunner.benchmarks.babyai import levels, text  # noqa: E402
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
    episode holds ~14 KiB (measured), so a full store is ~60 MB; room for 255 owners' reservations."""
    max_episodes_per_owner: int = 256
    """Most episodes one owner may have alive (all clients that send no owner count as one);
    more answer 429, so one client cannot fill the store for the others."""
    max_owners: int = 4096
    """Most owners known at once. An owner without episodes costs one episode slot and is
    forgotten after ``owner_ttl_s`` idle, or at once when a new owner needs its place: claiming
    names never keeps a new owner out."""
    owner_ttl_s: float = 60.0
    """Seconds an owner with no episode is remembered (its client re-registers it, with its token,
    on its next create)."""
    reserved_episodes_per_owner: int = 16
    """Episodes kept free for each owner that has episodes (and for the clients without one,
    together) until it has that many: other owners' creates cannot take them, and a new owner's
    first episode is accepted only while its reservation fits (else 503 ``too_many_owners``). So a
    client that invents owner names can fill what is unreserved but never starve an owner that
    plays. Capped at ``max_episodes_per_owner`` and at an eighth of ``max_episodes`` (small
    stores); 0 turns it off."""
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
    """Most connections served at once; more are answered 503 at once, without a thread."""
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
            raise ApiError(400, "invalid_action", unknown("action", str(action), text.ACTIONS),
                           valid_actions=list(text.ACTIONS))
        if self.level is None:
            raise ApiError(409, "episode_done", f"episode {self.id} has no level; reset it")
        if self.done:
            raise ApiError(409, "episode_done", f"episode {self.id} is finished "
                           f"(success={self.success}); POST /episodes/{self.id}/reset to play again")
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


@dataclass
class Owner:
    """Who may create and delete an owner's episodes: whoever holds its token."""

    token: str
    last_used: float


class EpisodeStore:
    """Episodes by id, with idle expiry, a size bound and per-owner quotas. One short global lock."""

    _REMEMBER_EXPIRED = 10000

    def __init__(self, ttl_s: float, max_episodes: int, max_per_owner: int | None = None,
                 max_owners: int = 4096, reserved_per_owner: int = 0, owner_ttl_s: float | None = None) -> None:
        self.ttl_s, self.max_episodes = ttl_s, max_episodes
        self.owner_ttl_s = ttl_s if owner_ttl_s is None else owner_ttl_s
        self.max_per_owner = max_episodes if max_per_owner is None else max_per_owner
        self.max_owners = max_owners
        self.reserve = max(0, min(reserved_per_owner, self.max_per_owner, max_episodes // 8))
        """Episodes held free for each known owner (and the no-owner group) until it has that many."""
        self._owners: dict[str, Owner] = {}
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
        used = {e.owner for e in self._episodes.values()}
        for name in [n for n, o in self._owners.items() if n not in used and now - o.last_used > self.owner_ttl_s]:
            del self._owners[name]

    def _reserved(self, counts: Counter[str | None]) -> int:
        """Free slots still held for the owners that have episodes and the no-owner group (lock
        held). The store keeps ``max_episodes - alive >= this``: every create is checked against it."""
        if not self.reserve:
            return 0
        return sum(max(0, self.reserve - counts[o]) for o in [*(o for o in self._owners if counts[o]), None])

    def _empty_owners(self, counts: Counter[str | None]) -> list[str]:
        """Known owners without an episode, idle longest first (lock held)."""
        return sorted((n for n in self._owners if not counts[n]), key=lambda n: self._owners[n].last_used)

    def _free(self, counts: Counter[str | None]) -> int:
        """Episode slots free: an owner without episodes costs one (lock held)."""
        return self.max_episodes - len(self._episodes) - len(self._empty_owners(counts))

    def _claim(self, owner: str, token: str | None, now: float) -> str:
        """The owner's token: registers an unknown owner, checks a known one's (lock held)."""
        known = self._owners.get(owner)
        if known is None:
            counts = Counter(e.owner for e in self._episodes.values())
            empty = self._empty_owners(counts)
            # A new owner costs a slot; owners that never played make room for it, oldest first.
            while empty and (len(self._owners) >= self.max_owners or self._free(counts) - self._reserved(counts) < 1):
                del self._owners[empty.pop(0)]
            if len(self._owners) >= self.max_owners:
                raise ApiError(503, "too_many_owners", f"{self.max_owners} owners have episodes alive; retry "
                               "later or start the server with a larger deploy.max_owners")
            if self._free(counts) - self._reserved(counts) < 1:
                raise ApiError(503, "too_many_owners", "the store's free episodes are taken or reserved for the "
                               f"owners playing ({self.reserve} each); retry when one ends, or start the server "
                               "with a larger deploy.max_episodes")
            known = self._owners[owner] = Owner(token or secrets.token_urlsafe(24), now)
        elif token is None or not hmac.compare_digest(token.encode(), known.token.encode()):
            raise ApiError(403, "owner_token_mismatch", f"owner {owner!r} belongs to another client: send "
                           "the owner_token its first request got, or use another owner")
        known.last_used = now
        return known.token

    def claim(self, owner: str, token: str | None = None) -> str:
        """``POST /owners``: the owner's token (an unknown owner becomes the caller's)."""
        with self._lock:
            now = time.monotonic()
            self._sweep(now, force=True)
            return self._claim(owner, token, now)

    def create(self, owner: str | None = None, token: str | None = None) -> tuple[Episode, str | None]:
        """A new episode (and the owner's token, for an owner): quota and token checked first."""
        # Ids only name server-side state; they never influence an episode's content.
        episode = Episode(uuid.uuid4().hex, owner)
        with self._lock:
            now = time.monotonic()
            self._sweep(now, force=True)
            token = None if owner is None else self._claim(owner, token, now)
            counts = Counter(e.owner for e in self._episodes.values())
            if counts[owner] >= self.max_per_owner:
                who = f"owner {owner!r}" if owner is not None else "clients without an owner"
                raise ApiError(429, "owner_quota", f"{who} already have {self.max_per_owner} episodes alive; "
                               "DELETE finished ones (or raise deploy.max_episodes_per_owner)")
            if self._free(counts) + (not counts[owner] and owner is not None) < 1:
                raise ApiError(503, "too_many_episodes",
                               f"{self.max_episodes} episodes are alive; DELETE finished ones or "
                               "start the server with a larger deploy.max_episodes")
            counts[owner] += 1
            if self._free(counts) - 1 < self._reserved(counts):
                raise ApiError(503, "too_many_episodes",
                               f"the free episodes are reserved for other owners ({self.reserve} each until they "
                               "have that many); DELETE finished ones or start the server with a larger "
                               "deploy.max_episodes")
            self._episodes[episode.id] = episode
        return episode, token

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
                    raise ApiError(410, "episode_expired", f"episode {episode_id} expired after "
                                   f"{self.ttl_s:g} s idle; POST /episodes to start a new one")
                raise ApiError(404, "unknown_episode", f"no episode {episode_id!r}; "
                               "POST /episodes {task, seed} to create one")
            episode.last_used = now
            return episode

    def delete(self, episode_id: str) -> None:
        self.get(episode_id)
        with self._lock:
            self._episodes.pop(episode_id, None)

    def delete_owned(self, owner: str, token: str | None) -> list[str]:
        """Delete every episode of ``owner`` (its token required); their ids."""
        with self._lock:
            known = self._owners.get(owner)
            if known is None:
                return []  # an owner nobody holds has no episodes
            self._claim(owner, token, time.monotonic())
            ids = [e.id for e in self._episodes.values() if e.owner == owner]
            for eid in ids:
                del self._episodes[eid]
        return ids


_ROUTES: list[tuple[re.Pattern[str], str, tuple[str, ...]]] = [
    (re.compile(r"^/health$"), "health", ("GET",)),
    (re.compile(r"^/episodes$"), "episodes", ("POST", "DELETE")),
    (re.compile(r"^/owners$"), "owners", ("POST",)),
    (re.compile(r"^/episodes/([^/]+)/step$"), "step", ("POST",)),
    (re.compile(r"^/episodes/([^/]+)/reset$"), "reset", ("POST",)),
    (re.compile(r"^/episodes/([^/]+)$"), "delete", ("DELETE",)),
]


def _task_and_seed(body: dict[str, Any]) -> tuple[str, int]:
    task, seed = body.get("task"), body.get("seed")
    if not isinstance(task, str):
        raise ApiError(400, "bad_request", 'body needs "task" (a string), e.g. '
                       '{"task": "pick_up_seq_go_to", "seed": 0}', valid_tasks=levels.valid_tasks())
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**32:
        raise ApiError(400, "bad_request", f'"seed" must be an integer in [0, 2**32), got {seed!r}')
    return task, seed


def _owner_and_token(body: dict[str, Any]) -> tuple[str | None, str | None]:
    owner, token = body.get("owner"), body.get("owner_token")
    if owner is not None and (not isinstance(owner, str) or not 0 < len(owner) <= 200):
        raise ApiError(400, "bad_request", '"owner" must be a string of 1 to 200 characters')
    if token is not None and (not isinstance(token, str) or not 16 <= len(token) <= 200):
        raise ApiError(400, "bad_request", '"owner_token" must be a string of 16 to 200 characters')
    return owner, token


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

    def __init__(self, sock: socket.socket, idle_s: float, request_s: float,
                 on_idle: Any = lambda: None, on_begin: Any = lambda: True) -> None:
        self.sock, self.idle_s, self.request_s = sock, idle_s, request_s
        self.deadline: float | None = None
        self.on_idle, self.on_begin = on_idle, on_begin
        """Called when a request's first bytes arrive; False: the connection was evicted meanwhile
        (the bytes are dropped unanswered, so the client resends them on a new connection)."""

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
        if n and self.deadline is None and not self.on_begin():
            return 0
        if n:
            self.begin()
        return n


_ERROR_CODES = {400: "bad_request", 414: "uri_too_long", 431: "headers_too_large", 501: "method_not_allowed",
                505: "http_version_not_supported"}


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
        self.reader = DeadlineReader(self.connection, settings.first_byte_timeout_s, settings.request_timeout_s,
                                     lambda: self.server.idle(self.connection),
                                     lambda: self.server.busy(self.connection))
        self.rfile = io.BufferedReader(self.reader, 65536)
        self.served = 0

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
            if first in (b"\x16", b"\x80"):  # a TLS (or SSLv2) ClientHello
                self.request_version, self.command, self.requestline = "HTTP/1.1", None, "(TLS)"
                self.close_connection = True
                self._reply(400, {"error": "this is a plain HTTP server: use http://, not https://",
                                  "code": "not_http"})
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
            if len(self.raw_requestline.split()) == 2:  # "GET /path": HTTP/0.9, which has no headers
                self.requestline = self.raw_requestline.decode("latin-1").rstrip("\r\n")
                self.request_version, self.command = "HTTP/1.1", None
                self.close_connection = True
                self._reply(400, {"error": "HTTP/0.9 requests are not served: send HTTP/1.1 (e.g. "
                                  "'GET /health HTTP/1.1' and a Host header)", "code": "http_0_9"})
                return
            if not self.parse_request():
                if not self.replied:
                    self.send_error(400, "empty request line")
                return
            if self.headers is not None and self.headers.defects:
                self.send_error(400, f"malformed header lines ({self.headers.defects[0]!r})")
                return
            getattr(self, "do_" + self.command)()
            self.wfile.flush()
        except TimeoutError:
            self.close_connection = True
            if not self.replied and self.reader.deadline is not None:
                with contextlib.suppress(OSError):
                    self.request_version = "HTTP/1.1"
                    self._reply(408, {"error": f"request not complete within "
                                      f"{self.server.settings.request_timeout_s:g} s of its first byte",
                                      "code": "request_timeout"})

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        """Errors the stdlib finds (request line, headers) as JSON, like every other answer."""
        self.close_connection = True
        if getattr(self, "request_version", "HTTP/0.9") == "HTTP/0.9":
            self.request_version = "HTTP/1.1"  # a status line and headers, whatever was sent
        text = message or self.responses.get(code, ("error",))[0]
        self._reply(code, {"error": f"{text}: send an HTTP/1.1 request with a JSON body (see GET /health)",
                           "code": _ERROR_CODES.get(code, "bad_request")}, body=self.command != "HEAD")

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
        try:
            status, payload = 200, self._route(method)
        except ApiError as e:
            status, payload = e.status, e.body
            if status == 405:
                headers["Allow"] = ", ".join(e.body["allowed"])
        except Exception as e:  # our bug: answer 500 and keep serving
            status, payload = 500, {"error": f"internal error: {type(e).__name__}: {e}",
                                    "code": "internal"}
        self._reply(status, payload, headers, body=method != "HEAD")

    def _route(self, method: str) -> dict[str, Any]:
        path = self.path.split("?", 1)[0].rstrip("/") or "/"
        for pattern, name, methods in _ROUTES:
            match = pattern.match(path)
            if not match:
                continue
            if method not in methods:
                self._discard_body()
                raise ApiError(405, "method_not_allowed", f"{method} {path} is not supported; "
                               f"use {' or '.join(methods)}", allowed=list(methods))
            return getattr(self, f"_{name}")(*match.groups())
        self._discard_body()
        raise ApiError(404, "unknown_route", f"no route {method} {path}; see GET /health and the "
                       "server module docstring for the API")

    def _read_json(self) -> dict[str, Any]:
        length = self.headers.get("Content-Length")
        if length is None:
            self.close_connection = True
            raise ApiError(411, "length_required", "send a Content-Length header with the JSON body")
        if not length.strip().isdigit():  # negative, signed or not a number: never read "until EOF"
            self.close_connection = True
            raise ApiError(400, "bad_request", f"bad Content-Length {length!r}: send the body's size "
                           "in bytes")
        size = int(length)
        limit = self.server.settings.max_body_bytes
        if size > limit:
            self.close_connection = True  # the unread body would corrupt the next request
            raise ApiError(413, "body_too_large", f"body of {size} bytes exceeds {limit} bytes")
        try:
            raw = self.rfile.read(size)
        except TimeoutError:  # the client stalled mid-body: answer and drop the connection
            self.close_connection = True
            raise ApiError(408, "request_timeout", f"body not received within "
                           f"{self.server.settings.request_timeout_s:g} s of the request's first byte") from None
        if len(raw) < size:  # the client closed (or half-closed) before sending it all
            self.close_connection = True
            raise ApiError(400, "bad_request", f"body ended after {len(raw)} of {size} bytes")
        try:
            body = json.loads(raw or b"{}")
        except (ValueError, UnicodeDecodeError, RecursionError) as e:
            # ValueError covers JSONDecodeError and integers too long to convert
            raise ApiError(400, "malformed_json", f"request body is not valid JSON: "
                           f"{type(e).__name__}: {str(e)[:200]}") from None
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

    def _health(self) -> dict[str, Any]:
        return {"status": "ok", "service": SERVICE, "tasks": levels.valid_tasks(),
                "actions": list(text.ACTIONS), "episodes": len(self.server.store)}

    def _episodes(self) -> dict[str, Any]:
        if self.command == "DELETE":
            owner = parse_qs(urlsplit(self.path).query).get("owner", [""])[0]
            if not owner:
                raise ApiError(400, "bad_request", "DELETE /episodes needs ?owner=<owner>")
            self._discard_body()
            return {"deleted": self.server.store.delete_owned(owner, self.headers.get("X-Owner-Token"))}
        return self._create()

    def _owners(self) -> dict[str, Any]:
        owner, token = _owner_and_token(self._read_json())
        if owner is None:
            raise ApiError(400, "bad_request", 'body needs "owner" (a string)')
        return {"owner": owner, "owner_token": self.server.store.claim(owner, token)}

    def _create(self) -> dict[str, Any]:
        body = self._read_json()
        task, seed = _task_and_seed(body)
        owner, token = _owner_and_token(body)
        _check_task(task, seed)  # before allocating, so a bad task leaves nothing behind
        episode, token = self.server.store.create(owner, token)
        with episode.lock:
            started = episode.start(task, seed)
        return started if token is None else {**started, "owner_token": token}

    def _step(self, episode_id: str) -> dict[str, Any]:
        body = self._read_json()
        action = body.get("action")
        if not isinstance(action, str):
            raise ApiError(400, "invalid_action", 'body needs "action" (a string)',
                           valid_actions=list(text.ACTIONS))
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

    def _reply(self, status: int, payload: dict[str, Any], headers: dict[str, str] | None = None,
               *, body: bool = True) -> None:
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
    """The HTTP server plus its episode store and settings."""

    daemon_threads = True
    request_queue_size = 256  # the default 5 drops SYNs when many episodes connect at once

    def __init__(self, settings: ServerSettings) -> None:
        self.settings = settings
        if ":" in settings.host:
            self.address_family = socket.AF_INET6
        self.store = EpisodeStore(settings.episode_ttl_s, settings.max_episodes, settings.max_episodes_per_owner,
                                  settings.max_owners, settings.reserved_episodes_per_owner, settings.owner_ttl_s)
        self._connections = threading.BoundedSemaphore(settings.max_connections)
        self._idle_lock = threading.Lock()
        self._idle: dict[socket.socket, float] = {}
        """Connections waiting for a request to begin, and since when: the ones a full server evicts."""
        self._evicted: set[socket.socket] = set()
        super().__init__((settings.host, settings.port), Handler)

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that went away before its answer was written (a killed run, a timed-out or
        evicted connection) is routine for a server: nothing to print. Anything else keeps
        socketserver's traceback on stderr."""
        if isinstance(sys.exc_info()[1], (BrokenPipeError, ConnectionResetError)):
            return
        super().handle_error(request, client_address)

    def idle(self, sock: socket.socket) -> None:
        """``sock`` waits for a request to begin: it may be evicted for a new connection."""
        with self._idle_lock:
            self._idle[sock] = time.monotonic()

    def busy(self, sock: socket.socket) -> bool:
        """A request began on ``sock``; False if it was evicted first (then it is not served)."""
        with self._idle_lock:
            self._idle.pop(sock, None)
            return sock not in self._evicted

    def gone(self, sock: socket.socket) -> None:
        with self._idle_lock:
            self._idle.pop(sock, None)
            self._evicted.discard(sock)

    def _evict_idle(self) -> bool:
        """Close the connection idle longest (no request of it is in progress); False if none is idle."""
        with self._idle_lock:
            if not self._idle:
                return False
            sock = min(self._idle, key=self._idle.__getitem__)
            del self._idle[sock]
            self._evicted.add(sock)
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)
        return True

    def process_request(self, request: Any, client_address: Any) -> None:
        """One thread per connection, at most ``max_connections``: when all are taken, the one idle
        longest is closed to make room; only if none is idle, a 503 at once, without a thread."""
        if not self._connections.acquire(blocking=False) and not (
                self._evict_idle() and self._connections.acquire(timeout=2.0)):
            body = json.dumps({"error": f"the server is busy: {self.settings.max_connections} connections are "
                               "open and none is idle; retry later or raise deploy.max_connections",
                               "code": "too_many_connections", "service": SERVICE}).encode()
            with contextlib.suppress(OSError):
                request.sendall(b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n"
                                b"Connection: close\r\nContent-Length: " + str(len(body)).encode()
                                + b"\r\n\r\n" + body)
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


def start_in_thread(settings: ServerSettings | None = None) -> BabyAIServer:
    """Serve in a daemon thread of this process (tests, benchmarks); stop with ``.shutdown()``."""
    server = BabyAIServer(settings or ServerSettings(port=0))
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05},
                     name="babyai-server", daemon=True).start()
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
    server = BabyAIServer(settings)
    if parent_pid is not None:
        threading.Thread(target=_watch_parent, args=(server, parent_pid), daemon=True).start()
    print(f"BabyAI-Text server listening on {server.url}", file=sys.stderr, flush=True)
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
    parser.add_argument("--host", default=defaults.host, help="interface to bind (default loopback)")
    parser.add_argument("--port", type=int, default=defaults.port, help="TCP port")
    parser.add_argument("--episode-ttl-s", type=float, default=defaults.episode_ttl_s,
                        help="idle seconds before an episode expires")
    parser.add_argument("--max-episodes", type=int, default=defaults.max_episodes,
                        help="most episodes alive at once")
    parser.add_argument("--max-episodes-per-owner", type=int, default=defaults.max_episodes_per_owner,
                        help="most episodes one owner may have alive")
    parser.add_argument("--max-owners", type=int, default=defaults.max_owners, help="most owners known at once")
    parser.add_argument("--reserved-episodes-per-owner", type=int, default=defaults.reserved_episodes_per_owner,
                        help="episodes kept free for each known owner (0: none)")
    parser.add_argument("--request-timeout-s", type=float, default=defaults.request_timeout_s,
                        help="seconds a whole request may take from its first byte")
    parser.add_argument("--parent-pid", type=int, default=None,
                        help="exit when this process (the one that started us) exits")
    parser.add_argument("--verbose", action="store_true", help="log every request to stderr")
    args = parser.parse_args(argv)
    settings = ServerSettings(host=args.host, port=args.port, episode_ttl_s=args.episode_ttl_s,
                              max_episodes=args.max_episodes, max_episodes_per_owner=args.max_episodes_per_owner,
                              max_owners=args.max_owners, reserved_episodes_per_owner=args.reserved_episodes_per_owner,
                              request_timeout_s=args.request_timeout_s, verbose=args.verbose)
    serve(settings, parent_pid=args.parent_pid)


if __name__ == "__main__":
    main()
