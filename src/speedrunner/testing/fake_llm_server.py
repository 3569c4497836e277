"""A fake LLM HTTP server on 127.0.0.1 for tests and offline runs (``speedrunner fake-llm``
serves it with the answers of ``realistic.RealisticFake``).

Why a real HTTP server rather than mocks: the openai SDK (v3) talks through ``httpx2``, which
respx-style mocks do not see, and a socket exercises what mocks cannot — real timeouts,
retries, status codes, headers and concurrent connections. The same server answers
OpenAI-compatible chat completions (the ``openai`` and ``vllm`` providers) and Gemini's
``generateContent`` route (the ``gemini`` provider, pointed here through ``http_options``).

Drive it with a *script* (a list of :class:`Reply`, consumed in order, then ``default``) or a
*callback* ``(request_json) -> Reply``. Every request is recorded (``server.requests``) so a
test can assert which sampling parameters were sent, and ``max_in_flight`` shows the peak
number of concurrent requests.

    with FakeLLMServer([Reply(text="hi"), Reply.rate_limited(retry_after=0.05)]) as srv:
        client = OpenAI(base_url=srv.base_url, api_key="x")
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["FakeLLMServer", "RecordedRequest", "Reply", "fake_embedding"]


@dataclass
class Reply:
    """What the server answers to one request.

    Token counts follow each API's own convention: for chat completions ``prompt_tokens``
    includes ``cached_tokens`` and ``completion_tokens`` includes ``reasoning_tokens``; on the
    Gemini route ``completion_tokens`` becomes ``candidatesTokenCount`` and
    ``reasoning_tokens`` becomes ``thoughtsTokenCount`` (Gemini counts them separately).
    """

    text: str | None = "ok"
    """Message content (may contain ``<think>...</think>``); None sends ``content: null``."""
    reasoning: str | None = None
    """Sent as the message's ``reasoning_field`` (vLLM), or as a Gemini thought part."""
    reasoning_field: str = "reasoning_content"
    """Name of the chat message field carrying ``reasoning`` (vLLM uses both names)."""
    finish_reason: str = "stop"
    """Chat finish reason; mapped to STOP / MAX_TOKENS on the Gemini route."""
    prompt_tokens: int = 10
    cached_tokens: int | None = None
    completion_tokens: int = 5
    reasoning_tokens: int | None = None
    status: int = 200
    """HTTP status; non-200 sends an error body in the API's format."""
    retry_after: float | None = None
    """``Retry-After`` header value in seconds (sent with any status)."""
    delay_s: float = 0.0
    """Sleep before answering; longer than the client timeout simulates a timeout."""
    malformed: bool = False
    """Send a 200 with a body that is not valid JSON."""
    error_message: str | None = None
    """The error body's message for a non-200 status (default ``fake error <status>``)."""
    tool_calls: list[dict[str, Any]] | None = None
    """Native tool calls, each ``{"name": ..., "arguments": <JSON text or dict>}`` (optional
    ``"id"``): sent as the message's ``tool_calls`` (finish reason ``tool_calls`` unless
    ``finish_reason`` says otherwise) or, on the Gemini route, as ``functionCall`` parts."""

    @classmethod
    def rate_limited(cls, retry_after: float = 0.05) -> Reply:
        return cls(status=429, retry_after=retry_after, text=None)

    @classmethod
    def error(cls, status: int = 500) -> Reply:
        return cls(status=status, text=None)

    @classmethod
    def timeout(cls, delay_s: float = 2.0) -> Reply:
        return cls(delay_s=delay_s, text="too late")

    @classmethod
    def context_overflow(cls) -> Reply:
        """What vLLM and OpenAI answer when the prompt does not fit the context window."""
        return cls(
            status=400,
            text=None,
            error_message=(
                "This model's maximum context length is 32768 tokens. However, you requested "
                "40000 tokens. Please reduce the length of the messages."
            ),
        )

    @classmethod
    def malformed_json(cls) -> Reply:
        return cls(malformed=True)

    @classmethod
    def empty(cls, finish_reason: str = "stop") -> Reply:
        return cls(text="", completion_tokens=0, finish_reason=finish_reason)


@dataclass
class RecordedRequest:
    """One request as received: path, parsed JSON body (None if absent), lower-cased headers,
    and the body's exact bytes (what prefix caches key on)."""

    method: str
    path: str
    body: dict[str, Any] | None
    headers: dict[str, str]
    received_at: float = field(default_factory=time.monotonic)
    raw: bytes = b""


Responder = Callable[[dict[str, Any]], Reply]


class _Server(ThreadingHTTPServer):
    # The default backlog of 5 drops connections when 30 episodes call at once; the clients
    # then see "connection failed" and back off, which no real endpoint would cause.
    request_queue_size = 256


class FakeLLMServer:
    """OpenAI-compatible + Gemini ``generateContent`` HTTP server on 127.0.0.1 (an ephemeral
    port unless ``port`` is given)."""

    def __init__(
        self,
        script: Iterable[Reply] | None = None,
        *,
        callback: Responder | None = None,
        default: Reply | None = None,
        latency_s: float = 0.0,
        model_name: str = "fake-model",
        port: int = 0,
        probe: Responder | None = None,
        honour_stop: bool = False,
    ) -> None:
        if script is not None and callback is not None:
            raise ValueError("give a script or a callback, not both")
        self._script = list(script or [])
        self._callback = callback
        self._probe = probe
        self.probes: list[RecordedRequest] = []
        """The pre-flight's probe requests (``core.llm.preflight``): answered by ``probe``, else
        honestly (a short answer cut at the limit asked for), and kept apart from
        ``requests`` so that neither a test's counts nor its script see them."""
        self.default = default or Reply()
        self.honour_stop = honour_stop
        """Cut each answer at the request's first stop sequence (chat ``stop``, Gemini
        ``generationConfig.stopSequences``), leaving it out, as real servers do; off, the
        answer is written whole, like a server that ignores ``stop``."""
        self.latency_s = latency_s
        self.model_name = model_name
        self._port = port
        """0: an ephemeral port (tests); ``speedrunner fake-llm --port N`` picks one."""
        self.requests: list[RecordedRequest] = []
        self.answered: list[dict[str, Any]] = []
        """Bodies of the requests answered with 200 (the response was written out): what a
        provider would bill."""
        self.in_flight = 0
        self.max_in_flight = 0
        self._lock = threading.Lock()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle ---------------------------------------------------------------------------
    def start(self) -> FakeLLMServer:
        handler = _make_handler(self)
        self._httpd = _Server(("127.0.0.1", self._port), handler)
        self._httpd.daemon_threads = True  # a sleeping "timeout" reply must not block close
        self._httpd.block_on_close = False
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None

    def __enter__(self) -> FakeLLMServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        if self._httpd is None:
            raise RuntimeError("server not started")
        return int(self._httpd.server_address[1])

    @property
    def base_url(self) -> str:
        """OpenAI-compatible base URL (what ``OpenAI(base_url=...)`` and vllm configs take)."""
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def root_url(self) -> str:
        """Server root (what Gemini's ``HttpOptions(base_url=...)`` takes)."""
        return f"http://127.0.0.1:{self.port}"

    # -- script ------------------------------------------------------------------------------
    def push(self, *replies: Reply) -> None:
        """Append replies to the script (thread-safe)."""
        with self._lock:
            self._script.extend(replies)

    def chat_requests(self) -> list[dict[str, Any]]:
        """Bodies of the chat/generateContent requests received, in arrival order."""
        with self._lock:
            return [r.body for r in self.requests if r.method == "POST" and r.body is not None]

    def _next_reply(self, body: dict[str, Any]) -> Reply:
        if is_probe(body):
            if self._probe is not None:
                return self._probe(body)
            limit = body.get("max_tokens") or body.get("max_completion_tokens") or 8
            return Reply(
                text="one, two, three", finish_reason="length", completion_tokens=min(int(limit), 8)
            )
        if self._callback is not None:
            return self._callback(body)
        with self._lock:
            return self._script.pop(0) if self._script else self.default

    def _stopped(self, reply: Reply, body: dict[str, Any]) -> Reply:
        """``reply`` cut at the first of the request's stop sequences (when honoured)."""
        stops = body.get("stop") or (body.get("generationConfig") or {}).get("stopSequences") or []
        if not self.honour_stop or not reply.text or not isinstance(stops, list):
            return reply
        found = [
            i for i in (reply.text.find(s) for s in stops if isinstance(s, str) and s) if i >= 0
        ]
        if not found:
            return reply
        return dataclasses.replace(reply, text=reply.text[: min(found)], finish_reason="stop")

    def _record(self, req: RecordedRequest) -> None:
        with self._lock:
            (
                self.probes if isinstance(req.body, dict) and is_probe(req.body) else self.requests
            ).append(req)

    def _enter(self) -> None:
        with self._lock:
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)

    def _leave(self) -> None:
        with self._lock:
            self.in_flight -= 1


def is_probe(body: dict[str, Any]) -> bool:
    """A request of the pre-flight's probe (its fixed prompt opens the body's messages)."""
    from speedrunner.core.llm.preflight import PROBE_PROMPTS

    items = body.get("messages") or body.get("contents") or ""
    # Only the opening message: dumping the whole conversation made every request O(history)
    # under the server's lock, a cost the full-schedule benchmark then charged to the runtime.
    head = json.dumps(items[:1] if isinstance(items, list) else items)[:400]
    return any(p in head for p in PROBE_PROMPTS)


# -- response bodies ---------------------------------------------------------------------------
def _chat_body(reply: Reply, model: str) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": reply.text}
    if reply.reasoning is not None:
        message[reply.reasoning_field] = reply.reasoning
    finish = reply.finish_reason
    if reply.tool_calls:
        message["tool_calls"] = [
            {
                "id": c.get("id") or f"call_{i}",
                "type": "function",
                "function": {
                    "name": c["name"],
                    "arguments": _arguments_text(c.get("arguments", {})),
                },
            }
            for i, c in enumerate(reply.tool_calls)
        ]
        finish = "tool_calls" if finish == "stop" else finish
    usage: dict[str, Any] = {
        "prompt_tokens": reply.prompt_tokens,
        "completion_tokens": reply.completion_tokens,
        "total_tokens": reply.prompt_tokens + reply.completion_tokens,
    }
    if reply.cached_tokens is not None:
        usage["prompt_tokens_details"] = {"cached_tokens": reply.cached_tokens}
    if reply.reasoning_tokens is not None:
        usage["completion_tokens_details"] = {"reasoning_tokens": reply.reasoning_tokens}
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": usage,
    }


_GEMINI_FINISH = {"stop": "STOP", "length": "MAX_TOKENS"}


def _arguments_text(arguments: str | dict[str, Any]) -> str:
    """Chat completions carry arguments as JSON text (possibly invalid: a real model's may be)."""
    return arguments if isinstance(arguments, str) else json.dumps(arguments)


def _arguments_object(arguments: str | dict[str, Any]) -> dict[str, Any]:
    """Gemini carries arguments as an object."""
    if isinstance(arguments, dict):
        return arguments
    try:
        value = json.loads(arguments)
    except json.JSONDecodeError:
        return {}
    return value if isinstance(value, dict) else {}


EMBEDDING_DIMS = 64


def fake_embedding(text: str) -> list[float]:
    """A deterministic bag-of-words vector: each lower-case word adds 1 to a dimension chosen
    by its hash, so texts sharing words have a high cosine similarity (what retrieval tests
    need)."""
    vector = [0.0] * EMBEDDING_DIMS
    for word in re.findall(r"[a-z0-9]+", text.lower().replace("_", " ")):
        vector[int(hashlib.sha256(word.encode()).hexdigest(), 16) % EMBEDDING_DIMS] += 1.0
    return vector


def _embeddings_body(body: dict[str, Any]) -> dict[str, Any]:
    """``POST /v1/embeddings`` (OpenAI's format): one ``fake_embedding`` per input text."""
    texts = body.get("input", [])
    texts = [texts] if isinstance(texts, str) else list(texts)
    tokens = sum(len(str(t).split()) for t in texts)
    return {
        "object": "list",
        "model": body.get("model", "fake-embedding"),
        "data": [
            {"object": "embedding", "index": i, "embedding": fake_embedding(str(t))}
            for i, t in enumerate(texts)
        ],
        "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
    }


def _gemini_body(reply: Reply) -> dict[str, Any]:
    parts: list[dict[str, Any]] = []
    if reply.reasoning is not None:
        parts.append({"text": reply.reasoning, "thought": True})
    if reply.text is not None:
        parts.append({"text": reply.text})
    for c in reply.tool_calls or ():
        parts.append(
            {
                "functionCall": {
                    "name": c["name"],
                    "args": _arguments_object(c.get("arguments", {})),
                },
                "thoughtSignature": "ZmFrZS1zaWduYXR1cmU=",
            }
        )
    usage: dict[str, Any] = {
        "promptTokenCount": reply.prompt_tokens,
        "candidatesTokenCount": reply.completion_tokens,
        "totalTokenCount": reply.prompt_tokens
        + reply.completion_tokens
        + (reply.reasoning_tokens or 0),
    }
    if reply.cached_tokens is not None:
        usage["cachedContentTokenCount"] = reply.cached_tokens
    if reply.reasoning_tokens is not None:
        usage["thoughtsTokenCount"] = reply.reasoning_tokens
    return {
        "candidates": [
            {
                "content": {"role": "model", "parts": parts},
                "finishReason": _GEMINI_FINISH.get(
                    reply.finish_reason, reply.finish_reason.upper()
                ),
                "index": 0,
            }
        ],
        "usageMetadata": usage,
        "modelVersion": "fake",
    }


def _error_body(status: int, gemini: bool, message: str | None = None) -> dict[str, Any]:
    message = message or f"fake error {status}"
    if gemini:
        return {"error": {"code": status, "message": message, "status": "FAKE"}}
    return {"error": {"message": message, "type": "fake", "code": status}}


def _make_handler(server: FakeLLMServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True  # headers and body are separate writes: avoid 40 ms stalls

        def log_message(self, format: str, *args: Any) -> None:  # keep test output quiet
            return

        def _send(self, status: int, payload: bytes, headers: dict[str, str] | None = None) -> bool:
            try:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(payload)
                self.wfile.flush()
                return True
            except (BrokenPipeError, ConnectionResetError):
                return False  # the client gave up (timeout test): nothing to deliver

        def do_GET(self) -> None:
            server._record(
                RecordedRequest(
                    "GET", self.path, None, {k.lower(): v for k, v in self.headers.items()}
                )
            )
            path = self.path.split("?", 1)[0].rstrip("/")
            if path.endswith("/models"):
                data = {
                    "object": "list",
                    "data": [{"id": server.model_name, "object": "model", "owned_by": "fake"}],
                }
                self._send(200, json.dumps(data).encode())
            elif path.endswith(f"/models/{server.model_name}"):  # Gemini's models.get
                data = {"name": f"models/{server.model_name}", "displayName": "fake"}
                self._send(200, json.dumps(data).encode())
            else:
                self._send(404, json.dumps(_error_body(404, False)).encode())

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            try:
                body = json.loads(raw) if raw else {}
            except json.JSONDecodeError:
                body = {"_unparseable": raw.decode("utf-8", "replace")}
            path = self.path.split("?", 1)[0]
            if path.endswith("/embeddings"):
                server._record(
                    RecordedRequest(
                        "POST", self.path, body, {k.lower(): v for k, v in self.headers.items()}
                    )
                )
                self._send(200, json.dumps(_embeddings_body(body)).encode())
                return
            gemini = ":generateContent" in path
            if not gemini and not path.endswith("/chat/completions"):
                server._record(
                    RecordedRequest(
                        "POST", self.path, body, {k.lower(): v for k, v in self.headers.items()}
                    )
                )
                self._send(404, json.dumps(_error_body(404, False)).encode())
                return
            server._record(
                RecordedRequest(
                    "POST",
                    self.path,
                    body,
                    {k.lower(): v for k, v in self.headers.items()},
                    raw=raw,
                )
            )
            # In flight from arrival until the answer is about to be written: a client can only
            # start its next call after reading this answer, so counting past the write would
            # see a limit-respecting client's next call overlap this one.
            server._enter()
            try:
                reply = server._stopped(server._next_reply(body), body)
                delay = server.latency_s + reply.delay_s
                if delay:
                    time.sleep(delay)
            finally:
                server._leave()
            headers = {}
            if reply.retry_after is not None:
                headers["Retry-After"] = f"{reply.retry_after:g}"
            if reply.status != 200:
                self._send(
                    reply.status,
                    json.dumps(_error_body(reply.status, gemini, reply.error_message)).encode(),
                    headers,
                )
            elif reply.malformed:
                self._send(200, b'{"id": "chatcmpl-fake", "choices": [{"mess', headers)
            else:
                payload = (
                    _gemini_body(reply)
                    if gemini
                    else _chat_body(reply, body.get("model", server.model_name))
                )
                if self._send(200, json.dumps(payload).encode(), headers) and not is_probe(body):
                    with server._lock:
                        server.answered.append(body)

    return Handler
