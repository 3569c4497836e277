"""No local client can take the BabyAI-Text server away from a run.

Attacks on the landed server (one local client, no credentials): 512 connections that send
nothing held every slot for the 300 s idle timeout, and a run started meanwhile failed in 1 s
("something other than the BabyAI-Text server answers there"); 255 ``POST /owners`` with
invented names and no episode kept every new owner out (503 ``too_many_owners``), and a run
failed in 3 s calling it a "server-side bug". Here each flood runs (bounded, on loopback, and it
stops by itself) against a real server process while a legitimate run starts: its pre-flight,
owner claim, episode and every step of the bot's solution complete during the flood.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from speedrunner.benchmarks.babyai.benchmark import BabyAIBenchmark, ServerProcess, free_port
from speedrunner.benchmarks.babyai.config import BabyAIConfig
from speedrunner.benchmarks.babyai.preflight import check_server
from speedrunner.testing.babyai_expert import bot_actions

FLOOD_LIMIT_S = 90.0
"""Every flood stops by itself after this long, whatever the test does."""


@pytest.fixture()
def server() -> Iterator[ServerProcess]:
    srv = ServerProcess("127.0.0.1", free_port())
    srv.start(30.0)
    yield srv
    srv.stop()


def idle_flood(srv: ServerProcess, stop: threading.Event, connections: int = 512) -> threading.Thread:
    """``connections`` sockets that never send a byte, reopened as the server closes them."""

    def run() -> None:
        socks: list[socket.socket] = []
        deadline = time.monotonic() + FLOOD_LIMIT_S
        try:
            while not stop.is_set() and time.monotonic() < deadline:
                alive = []
                for sock in socks:
                    try:
                        sock.setblocking(False)
                        closed = sock.recv(1) == b""
                    except BlockingIOError:
                        closed = False
                    except OSError:
                        closed = True
                    if closed:
                        sock.close()
                    else:
                        alive.append(sock)
                socks = alive
                while len(socks) < connections and not stop.is_set():
                    try:
                        socks.append(socket.create_connection((srv.host, srv.port), timeout=2))
                    except OSError:
                        break
                stop.wait(0.2)
        finally:
            for sock in socks:
                sock.close()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def owner_flood(srv: ServerProcess, stop: threading.Event, owners: int = 255) -> threading.Thread:
    """``POST /owners`` with invented names and no episode, ``owners`` at a time, over and over."""

    def run() -> None:
        deadline, n = time.monotonic() + FLOOD_LIMIT_S, 0
        conn = http.client.HTTPConnection(srv.host, srv.port, timeout=5)
        try:
            while not stop.is_set() and time.monotonic() < deadline:
                for _ in range(owners):
                    n += 1
                    with contextlib.suppress(OSError, http.client.HTTPException):
                        conn.request("POST", "/owners", body=json.dumps({"owner": f"invented-{n}"}))
                        conn.getresponse().read()
                        continue
                    conn.close()
                stop.wait(0.1)
        finally:
            conn.close()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def legitimate_run(srv: ServerProcess, run_dir: Path, capsys: pytest.CaptureFixture[str]) -> str:
    """What a BabyAI run does with the server: pre-flight, claim its owner, play a level to the
    end (the bot's solution), close. Returns what it told the user on stderr."""
    config = BabyAIConfig(server_url=srv.url, autostart_server=False)
    check_server(config)
    bench = BabyAIBenchmark(config, rollouts=1, eval_episodes=0)
    bench.start_run("legit-run", run_dir)
    env = bench.make_env()
    try:
        env.reset("goto", 7)
        for action in bot_actions("goto", 7):
            result = env.step(action)
        assert result.done and env.success
    finally:
        env.close()
        bench.close()
    return capsys.readouterr().err


def health(srv: ServerProcess) -> int:
    conn = http.client.HTTPConnection(srv.host, srv.port, timeout=10)
    try:
        conn.request("GET", "/health")
        return conn.getresponse().status
    finally:
        conn.close()


@pytest.mark.parametrize("floods", [("idle",), ("owners",), ("idle", "owners")])
def test_a_run_started_during_a_flood_completes(server, tmp_path, capsys, floods) -> None:
    stop = threading.Event()
    threads = []
    if "idle" in floods:
        threads.append(idle_flood(server, stop))
    if "owners" in floods:
        threads.append(owner_flood(server, stop))
    try:
        time.sleep(3.0)  # the flood holds every slot / has invented its owners
        told = legitimate_run(server, tmp_path, capsys)
        assert health(server) == 200
    finally:
        stop.set()
        for thread in threads:
            thread.join(timeout=30)
    assert not any(t.is_alive() for t in threads)
    assert "server-side bug" not in told and "something other" not in told


def test_a_busy_server_is_waited_for_and_said_to_be_busy(capsys) -> None:
    """Both connection slots held by requests in progress (nothing idle to evict): a client's
    request gets 503 ``too_many_connections`` and retries until a slot frees (before: the 503
    came back at once)."""
    from speedrunner.benchmarks.babyai.env import ServerConnection
    from speedrunner.benchmarks.babyai.server import ServerSettings, start_in_thread

    srv = start_in_thread(ServerSettings(port=0, max_connections=2, request_timeout_s=2.0))
    slow = []
    try:
        for _ in range(2):
            sock = socket.create_connection(srv.server_address[:2], timeout=5)
            sock.sendall(b"POST /episodes HTTP/1.1\r\nHost: x\r\n")  # a request begun, never finished
            slow.append(sock)
        time.sleep(0.3)
        conn = ServerConnection(srv.url, 10.0)
        status, payload = conn.request("GET", "/health", busy_wait_s=20.0)
        conn.close()
        assert status == 200 and payload["service"] == "babyai-text"
        assert "is busy" in capsys.readouterr().err
    finally:
        for sock in slow:
            sock.close()
        srv.shutdown()
        srv.server_close()


def test_a_run_refused_an_owner_plays_without_one(tmp_path, capsys) -> None:
    """Every owner slot held by an owner that plays (none can be evicted): the run is told the
    server has no room for its owner and plays owner-less episodes, instead of failing."""
    from speedrunner.benchmarks.babyai.server import ServerSettings, start_in_thread

    srv = start_in_thread(ServerSettings(port=0, max_owners=1))
    try:
        conn = http.client.HTTPConnection(*srv.server_address[:2], timeout=5)
        conn.request("POST", "/episodes", body=json.dumps({"task": "goto", "seed": 1, "owner": "squatter"}))
        assert conn.getresponse().status == 200
        conn.close()
        config = BabyAIConfig(server_url=srv.url, autostart_server=False)
        bench = BabyAIBenchmark(config, rollouts=1, eval_episodes=0)
        bench.start_run("legit-run", tmp_path)
        env = bench.make_env()
        env.reset("goto", 7)
        for action in bot_actions("goto", 7):
            result = env.step(action)
        assert result.done and env.success
        env.close()
        told = capsys.readouterr().err
        assert "did not register owner 'legit-run'" in told and "without an owner" in told, told
        assert "server-side bug" not in told
    finally:
        srv.shutdown()
        srv.server_close()


def test_a_full_server_is_called_busy_not_broken() -> None:
    from speedrunner.benchmarks.babyai.env import ServerBusyError, _raise_for

    for code in ("too_many_connections", "too_many_episodes", "too_many_owners"):
        with pytest.raises(ServerBusyError, match="the server is busy") as caught:
            _raise_for(503, {"error": "full", "code": code}, "reset('goto', 1)")
        assert "server-side bug" not in str(caught.value)
    with pytest.raises(Exception, match="server-side bug"):
        _raise_for(500, {"error": "boom", "code": "internal"}, "step('left')")
