"""A BabyAI connection closed while a request waits for its answer (a run shutting down) fails
that request as an unavailable server, a named error, never an ``AttributeError`` from inside
the client (what once turned a Ctrl-C during an evaluation into exit 1 and a ``failed`` run)."""

from __future__ import annotations

import contextlib
import http.client
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from speedrunner.benchmarks.babyai.env import ServerConnection
from speedrunner.errors import ServerUnavailableError


@pytest.fixture
def server_url():
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - http.server's naming
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            body = json.dumps({"ok": True}).encode()
            with contextlib.suppress(OSError):  # the client may be gone
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_a_request_whose_connection_is_closed_under_it_fails_as_server_unavailable(
    server_url, monkeypatch
) -> None:
    conn = ServerConnection(server_url, timeout_s=5)
    connect = conn._connect

    def connect_then_close_after_sending() -> http.client.HTTPConnection:
        http_conn = connect()
        send = http_conn.request

        def request(*args, **kwargs) -> None:
            send(*args, **kwargs)
            conn.close()  # the shutdown path closing it between sending and reading the answer

        http_conn.request = request  # type: ignore[method-assign]
        return http_conn

    monkeypatch.setattr(conn, "_connect", connect_then_close_after_sending)
    with pytest.raises(ServerUnavailableError, match="did not answer POST /episodes/x/step"):
        conn.request("POST", "/episodes/x/step", {"action": "go forward"})
