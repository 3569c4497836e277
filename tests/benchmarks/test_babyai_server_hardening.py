"""The BabyAI server under hostile input: oversized numbers, deep JSON, odd methods, lying
Content-Length, stalled and too many connections. Loopback only; every loop is bounded."""

from __future__ import annotations

import http.client
import json
import socket
import time
from collections.abc import Iterator

import pytest

from speedrunner.benchmarks.babyai.server import BabyAIServer, ServerSettings, start_in_thread

from .test_babyai_server import assert_still_serving, call


@pytest.fixture()
def server() -> Iterator[BabyAIServer]:
    srv = start_in_thread(ServerSettings(port=0, max_episodes=8, max_body_bytes=1 << 20,
                                         read_timeout_s=0.5, max_connections=6))
    yield srv
    srv.shutdown()
    srv.server_close()


def raw_exchange(srv: BabyAIServer, data: bytes, *, half_close: bool = False, wait_s: float = 5.0) -> bytes:
    """Send raw bytes; return everything the server answers before it closes (bounded wait)."""
    sock = socket.create_connection(srv.server_address[:2], timeout=wait_s)
    try:
        sock.sendall(data)
        if half_close:
            sock.shutdown(socket.SHUT_WR)
        chunks = []
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                return b"".join(chunks)
            chunks.append(chunk)
    finally:
        sock.close()


def episodes(srv: BabyAIServer) -> int:
    return call(srv, "GET", "/health")[1]["episodes"]


def test_a_5000_digit_seed_and_30000_deep_json_are_400s(server) -> None:
    status, payload = call(server, "POST", "/episodes", raw=b'{"task": "goto", "seed": ' + b"9" * 5000 + b"}")
    assert status == 400 and payload["code"] == "malformed_json"
    status, payload = call(server, "POST", "/episodes", raw=b"[" * 30000 + b"]" * 30000)
    assert status == 400 and payload["code"] == "malformed_json"
    assert_still_serving(server)


@pytest.mark.parametrize("method", ["HEAD", "OPTIONS", "TRACE", "PUT", "FROBNICATE"])
def test_other_methods_get_a_json_405_with_allow(server, method) -> None:
    host, port = server.server_address[:2]
    conn = http.client.HTTPConnection(host, port, timeout=5)
    conn.request(method, "/health")
    response = conn.getresponse()
    body = response.read()
    conn.close()
    assert response.status == 405 and response.getheader("Allow") == "GET"
    assert response.getheader("Content-Type") == "application/json"
    if method != "HEAD":  # a HEAD answer has headers only
        payload = json.loads(body)
        assert payload["code"] == "method_not_allowed" and payload["allowed"] == ["GET"]
    assert_still_serving(server)


@pytest.mark.parametrize("length", ["-1", "+5", "abc", " 1e3"])
def test_a_bad_content_length_is_refused_without_reading_to_eof(server, length) -> None:
    started = time.monotonic()
    answer = raw_exchange(server, f"POST /episodes HTTP/1.1\r\nHost: x\r\nContent-Length: {length}\r\n\r\n"
                          '{"task": "goto", "seed": 0}'.encode())
    assert answer.startswith(b"HTTP/1.1 400") and b"bad Content-Length" in answer
    assert time.monotonic() - started < 4  # answered at once, not after the client gave up
    assert episodes(server) == 0


def test_a_half_closed_short_body_creates_no_episode(server) -> None:
    answer = raw_exchange(server, b"POST /episodes HTTP/1.1\r\nHost: x\r\nContent-Length: 500\r\n\r\n"
                          b'{"task": "goto", "seed": 0}', half_close=True)
    assert answer.startswith(b"HTTP/1.1 400") and b"body ended after" in answer
    assert episodes(server) == 0


def test_stalled_connections_time_out_and_extra_ones_get_503(server) -> None:
    stalled = [socket.create_connection(server.server_address[:2], timeout=5) for _ in range(6)]
    try:
        time.sleep(0.2)  # let the server take all six
        extra = raw_exchange(server, b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
        assert extra.startswith(b"HTTP/1.1 503") and b"too_many_connections" in extra
        # The stalled ones are dropped after read_timeout_s; then the server serves again.
        for sock in stalled:
            assert sock.recv(1024) == b""  # closed by the server (recv times out after 5 s otherwise)
    finally:
        for sock in stalled:
            sock.close()
    time.sleep(0.1)
    assert_still_serving(server)


def test_a_stalled_body_gets_408(server) -> None:
    answer = raw_exchange(server, b"POST /episodes HTTP/1.1\r\nHost: x\r\nContent-Length: 40\r\n\r\n{\"ta")
    assert answer.startswith(b"HTTP/1.1 408") and b"request_timeout" in answer


def test_episodes_of_one_owner_are_deleted_together(server) -> None:
    mine = [call(server, "POST", "/episodes", {"task": "goto", "seed": s, "owner": "run-a"})[1]["episode_id"]
            for s in range(3)]
    other = call(server, "POST", "/episodes", {"task": "goto", "seed": 9, "owner": "run-b"})[1]["episode_id"]
    status, payload = call(server, "DELETE", "/episodes?owner=run-a")
    assert status == 200 and sorted(payload["deleted"]) == sorted(mine)
    assert call(server, "POST", f"/episodes/{mine[0]}/step", {"action": "turn left"})[0] == 404
    assert call(server, "POST", f"/episodes/{other}/step", {"action": "turn left"})[0] == 200
    assert call(server, "DELETE", "/episodes")[0] == 400
