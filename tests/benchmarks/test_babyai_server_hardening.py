"""The BabyAI server under hostile input: oversized numbers, deep JSON, odd methods, lying
Content-Length, stalled and too many connections. Loopback only; every loop is bounded."""

from __future__ import annotations

import contextlib
import http.client
import json
import socket
import time
from collections.abc import Callable, Iterator

import pytest

from speedrunner.benchmarks.babyai.server import BabyAIServer, ServerSettings, start_in_thread

from .test_babyai_server import assert_still_serving, auth_header, call


def auth_line(srv: BabyAIServer) -> bytes:
    """The header line every request needs (the server's token), for raw requests."""
    return f"Authorization: Bearer {srv.token}\r\n".encode()


@pytest.fixture()
def server() -> Iterator[BabyAIServer]:
    srv = start_in_thread(
        ServerSettings(
            port=0,
            max_episodes=8,
            max_body_bytes=1 << 20,
            read_timeout_s=0.5,
            first_byte_timeout_s=0.5,
            request_timeout_s=1.0,
            max_connections=6,
        )
    )
    yield srv
    srv.shutdown()
    srv.server_close()


def raw_exchange(
    srv: BabyAIServer, data: bytes, *, half_close: bool = False, wait_s: float = 5.0
) -> bytes:
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


@pytest.mark.parametrize(
    "authorization",
    ["", "Authorization: Bearer not-the-token-0123456789\r\n", "Authorization: not-the-token\r\n"],
)
def test_a_request_without_the_token_is_refused_before_any_work_and_its_connection_closed(
    server, authorization
) -> None:
    """Attack: any local user could play, create and delete on the server. Now only the holder of
    its token can: others get a JSON 401 at once (the announced body is never waited for), nothing
    is created, and the connection is closed (``raw_exchange`` reads until the server closes)."""
    answer = raw_exchange(
        server,
        (
            f"POST /episodes HTTP/1.1\r\nHost: x\r\n{authorization}Content-Length: 1000000\r\n\r\n"
        ).encode()
        + b'{"task": "goto", "seed": 1}',
    )
    head, _, payload = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 401") and b"Connection: close" in head, answer
    reply = json.loads(payload)
    assert reply["code"] == "unauthorized" and reply["service"] == "babyai-text"
    assert server.token not in answer.decode()
    assert episodes(server) == 0
    answer = raw_exchange(
        server, f"GET /health HTTP/1.1\r\nHost: x\r\n{authorization}\r\n".encode()
    )
    assert answer.startswith(b"HTTP/1.1 401")


def test_a_5000_digit_seed_and_30000_deep_json_are_400s(server) -> None:
    status, payload = call(
        server, "POST", "/episodes", raw=b'{"task": "goto", "seed": ' + b"9" * 5000 + b"}"
    )
    assert status == 400 and payload["code"] == "malformed_json"
    status, payload = call(server, "POST", "/episodes", raw=b"[" * 30000 + b"]" * 30000)
    assert status == 400 and payload["code"] == "malformed_json"
    assert_still_serving(server)


@pytest.mark.parametrize("method", ["HEAD", "OPTIONS", "TRACE", "PUT", "FROBNICATE"])
def test_other_methods_get_a_json_405_with_allow(server, method) -> None:
    host, port = server.server_address[:2]
    conn = http.client.HTTPConnection(host, port, timeout=5)
    conn.request(method, "/health", headers=auth_header(server))
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
    answer = raw_exchange(
        server,
        auth_line(server).join(
            [
                b"POST /episodes HTTP/1.1\r\n",
                f"Host: x\r\nContent-Length: {length}\r\n\r\n"
                '{"task": "goto", "seed": 0}'.encode(),
            ]
        ),
    )
    assert answer.startswith(b"HTTP/1.1 400") and b"bad Content-Length" in answer
    assert time.monotonic() - started < 4  # answered at once, not after the client gave up
    assert episodes(server) == 0


def test_a_half_closed_short_body_creates_no_episode(server) -> None:
    answer = raw_exchange(
        server,
        b"POST /episodes HTTP/1.1\r\n" + auth_line(server) + b"Host: x\r\n"
        b'Content-Length: 500\r\n\r\n{"task": "goto", "seed": 0}',
        half_close=True,
    )
    assert answer.startswith(b"HTTP/1.1 400") and b"body ended after" in answer
    assert episodes(server) == 0


def test_stalled_connections_time_out_and_make_room_for_new_ones(server) -> None:
    stalled = [socket.create_connection(server.server_address[:2], timeout=5) for _ in range(6)]
    try:
        time.sleep(0.2)  # let the server take all six
        extra = raw_exchange(
            server,
            b"GET /health HTTP/1.1\r\n"
            + auth_line(server)
            + b"Host: x\r\nConnection: close\r\n\r\n",
        )
        assert extra.startswith(b"HTTP/1.1 200"), extra  # the one idle longest was closed for it
        # The stalled ones are dropped after read_timeout_s; then the server serves again.
        for sock in stalled:
            assert (
                sock.recv(1024) == b""
            )  # closed by the server (recv times out after 5 s otherwise)
    finally:
        for sock in stalled:
            sock.close()
    time.sleep(0.1)
    assert_still_serving(server)


def test_a_stalled_body_gets_408(server) -> None:
    answer = raw_exchange(
        server,
        b"POST /episodes HTTP/1.1\r\n"
        + auth_line(server)
        + b'Host: x\r\nContent-Length: 40\r\n\r\n{"ta',
    )
    assert answer.startswith(b"HTTP/1.1 408") and b"request_timeout" in answer


def test_episodes_of_one_owner_are_deleted_together(server) -> None:
    mine = [
        call(server, "POST", "/episodes", {"task": "goto", "seed": s, "owner": "run-a"})[1][
            "episode_id"
        ]
        for s in range(3)
    ]
    other = call(server, "POST", "/episodes", {"task": "goto", "seed": 9, "owner": "run-b"})[1][
        "episode_id"
    ]
    status, payload = call(server, "DELETE", "/episodes?owner=run-a")
    assert status == 200 and sorted(payload["deleted"]) == sorted(mine)
    assert call(server, "POST", f"/episodes/{mine[0]}/step", {"action": "turn left"})[0] == 404
    assert call(server, "POST", f"/episodes/{other}/step", {"action": "turn left"})[0] == 200
    assert call(server, "DELETE", "/episodes")[0] == 400


def test_one_owner_cannot_fill_the_store_for_another() -> None:
    """Attack: 1,011 creates filled the 1,024-episode store and a legitimate create got 503 (no
    per-client quota). Scaled down to the same ratio: 64 episodes, 16 per owner; sent one after
    another on one keep-alive connection (the concurrent test below uses many)."""
    srv = start_in_thread(ServerSettings(port=0, max_episodes=64, max_episodes_per_owner=16))
    try:
        host, port = srv.server_address[:2]
        conn = http.client.HTTPConnection(
            host, port, timeout=10
        )  # keep-alive: one connection for all
        statuses: list[int] = []
        for seed in range(1011):
            body = {"task": "goto", "seed": seed, "owner": "flood"}
            conn.request("POST", "/episodes", body=json.dumps(body), headers=auth_header(srv))
            response = conn.getresponse()
            response.read()
            statuses.append(response.status)
        conn.close()
        assert statuses.count(200) == 16 and statuses.count(429) == 1011 - 16
        status, payload = call(
            srv, "POST", "/episodes", {"task": "goto", "seed": 5, "owner": "legit"}
        )
        assert status == 200, payload
        assert_still_serving(srv)  # clients without an owner have their own quota too
    finally:
        srv.shutdown()
        srv.server_close()


def trickle(
    srv: BabyAIServer, head: bytes, piece: Callable[[int], bytes], rounds: int = 40
) -> tuple[bytes, int]:
    """Send ``head``, then ``piece(i)`` every 0.3 s (inside the 0.5 s read timeout) until the server
    answers or closes; (its answer, the round it came in). Bounded: 12 s at most."""
    sock = socket.create_connection(srv.server_address[:2], timeout=5)
    answer = b""
    try:
        sock.sendall(head)
        for i in range(rounds):
            time.sleep(0.3)
            try:
                sock.sendall(piece(i))
            except OSError:  # the server closed: what did it say?
                break
            sock.settimeout(0.01)
            with contextlib.suppress(TimeoutError):
                answer += sock.recv(65536)
            sock.settimeout(5)
            if answer:
                break
        with contextlib.suppress(OSError):
            answer += sock.recv(65536)
    finally:
        sock.close()
    return answer, i


def test_a_trickled_request_gets_408_at_its_deadline(server) -> None:
    """Attack: a client sending a header line now and then reset the read timeout for ever. Now the
    whole request has ``request_timeout_s`` (1 s here) from its first byte, and trickling is cut
    off with a JSON 408."""
    answer, rounds = trickle(
        server, b"GET /health HTTP/1.1\r\n", lambda i: f"X-Trickle-{i}: 1\r\n".encode()
    )
    assert answer.startswith(b"HTTP/1.1 408") and b'"code":"request_timeout"' in answer
    assert rounds < 39


def test_a_body_shorter_than_its_content_length_is_cut_off_at_the_deadline(server) -> None:
    """Attack: a body shorter than its Content-Length held a thread for the read timeout (300 s),
    and for ever if it trickled. The thread is free at the request's deadline (1 s here): a JSON
    408, connection closed, the server serving."""
    answer, rounds = trickle(
        server,
        b"POST /episodes HTTP/1.1\r\n"
        + auth_line(server)
        + b"Host: x\r\nContent-Length: 400\r\n\r\n{",
        lambda i: b" ",
    )
    assert answer.startswith(b"HTTP/1.1 408") and b"request_timeout" in answer and rounds < 39
    assert_still_serving(server)


@pytest.mark.parametrize(
    ("data", "code"),
    [
        (bytes.fromhex("160301020001") + b"\x00" * 200, "not_http"),  # a TLS ClientHello
        (b"GET /health\r\n", "http_0_9"),
        (b"POST /episodes\r\n", "http_0_9"),
        (b"GET /health HTTP/1.1\r\nBad Header Line\r\n\r\n", "bad_request"),
        (b"GET /health HTTP/1.1\r\n" + b"X: y\r\n" * 200 + b"\r\n", "headers_too_large"),
        (b"GET /health HTTP/9.1\r\n\r\n", "http_version_not_supported"),
        (b"\x00\xff garbage \x01\r\n\r\n", "bad_request"),
        (b"\r\n", "bad_request"),
    ],
)
def test_malformed_requests_get_json_errors(server, data, code) -> None:
    """Attack: TLS bytes and HTTP/0.9 got the stdlib's HTML page (or nothing), not JSON."""
    answer = raw_exchange(server, data)
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 4") or head.startswith(b"HTTP/1.1 5"), answer[:200]
    assert b"Content-Type: application/json" in head
    assert json.loads(body)["code"] == code
    assert_still_serving(server)


def test_slow_connections_do_not_take_health_down() -> None:
    """Attack: with deploy.max_connections=150, 200 slow connections made /health answer 503
    for 30 s. Each slow connection now holds its thread only until its request deadline, and the
    default connection limit leaves room: /health answers while 200 connections trickle."""
    srv = start_in_thread(ServerSettings(port=0, request_timeout_s=2.0))
    slow: list[socket.socket] = []
    try:
        for _ in range(200):
            sock = socket.create_connection(srv.server_address[:2], timeout=5)
            sock.sendall(b"POST /episodes HTTP/1.1\r\nHost: x\r\n")  # and never the rest
            slow.append(sock)
        for _ in range(3):
            status, payload = call(srv, "GET", "/health")
            assert status == 200 and payload["status"] == "ok"
        answers = []
        for sock in slow[:5]:  # cut off at their deadline, with a JSON 408
            data = b""
            with contextlib.suppress(OSError):
                while chunk := sock.recv(65536):
                    data += chunk
            answers.append(data)
        assert all(a.startswith(b"HTTP/1.1 408") for a in answers), answers
    finally:
        for sock in slow:
            sock.close()
        srv.shutdown()
        srv.server_close()


def test_a_client_gone_before_its_answer_prints_nothing_but_a_real_error_does(
    server, capsys
) -> None:
    """Killed runs and evicted connections are routine: no traceback on the server's stderr for
    them (CI logs filled with BrokenPipeError), while a bug still prints one."""
    for gone in (
        BrokenPipeError(32, "Broken pipe"),
        ConnectionResetError(104, "Connection reset by peer"),
    ):
        try:
            raise gone
        except OSError:
            server.handle_error(None, ("127.0.0.1", 1))
    assert capsys.readouterr().err == ""
    try:
        raise KeyError("a bug")
    except KeyError:
        server.handle_error(None, ("127.0.0.1", 1))
    assert "KeyError: 'a bug'" in capsys.readouterr().err


@pytest.mark.parametrize("cap", [{"max_requests_per_connection": 3}, {"max_connection_age_s": 0.5}])
def test_no_connection_keeps_its_slot_for_ever(cap) -> None:
    """A connection is closed after ``max_requests_per_connection`` requests or past
    ``max_connection_age_s`` (announced with ``Connection: close`` on its last answer), so no
    client holds a slot for ever; a run's client simply reconnects."""
    from speedrunner.benchmarks.babyai.env import ServerConnection

    srv = start_in_thread(ServerSettings(port=0, **cap))
    try:
        conn = http.client.HTTPConnection(*srv.server_address[:2], timeout=5)
        closing = []
        for _ in range(3):
            if "max_connection_age_s" in cap:
                time.sleep(0.3)
            conn.request("GET", "/health", headers=auth_header(srv))
            response = conn.getresponse()
            response.read()
            closing.append(response.getheader("Connection") == "close")
        assert closing == [False, False, True]
        assert conn.sock is None or conn.sock.recv(1) == b""  # the server closed it
        conn.close()
        client = ServerConnection(srv.url, 5.0)
        assert [client.request("GET", "/health")[0] for _ in range(7)] == [200] * 7
        client.close()
    finally:
        srv.shutdown()
        srv.server_close()
