"""No local client can take the BabyAI-Text server away from a run.

Attacks (one local client): 512 connections that send nothing held every slot for the 300 s
idle timeout, and a run started meanwhile failed in 1 s; 512 connections that always hold a
*begun* request were never idle, so eviction never freed one, and a run got no slot in 60 s.
Here each flood runs (bounded, on loopback, and it stops by itself) while a legitimate run
starts: its pre-flight, owner, episode and every step of the bot's solution complete during it.
"""

from __future__ import annotations

import http.client
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

FLOOD_LIMIT_S = 60.0
"""Every flood stops by itself after this long, whatever the test does."""


@pytest.fixture()
def server() -> Iterator[ServerProcess]:
    srv = ServerProcess("127.0.0.1", free_port())
    srv.start(30.0)
    yield srv
    srv.stop()


def idle_flood(
    srv: ServerProcess, stop: threading.Event, connections: int = 512
) -> threading.Thread:
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


def begun_flood(
    host: str, port: int, stop: threading.Event, connections: int, token: str | None = None
) -> threading.Thread:
    """``connections`` sockets that always hold a *begun* request: each sends a whole request plus
    the first byte of the next, and completes it as soon as the answer comes (so it is never idle);
    reopened as the server closes them. Sends ``token`` if given (a runaway client of the user's
    own), else none (another local user)."""
    auth = f"Authorization: Bearer {token}\r\n" if token else ""
    rest = f"ET /health HTTP/1.1\r\nHost: x\r\n{auth}\r\nG".encode()

    def run() -> None:
        socks: list[socket.socket] = []
        deadline = time.monotonic() + FLOOD_LIMIT_S
        try:
            while not stop.is_set() and time.monotonic() < deadline:
                alive = []
                for sock in socks:
                    try:
                        got = sock.recv(65536)
                        if got:
                            sock.sendall(
                                rest
                            )  # the begun request, completed, and the next one begun
                        closed = not got
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
                        sock = socket.create_connection((host, port), timeout=2)
                        sock.sendall(b"G" + rest)
                        sock.setblocking(False)
                        socks.append(sock)
                    except OSError:
                        break
                stop.wait(0.02)
        finally:
            for sock in socks:
                sock.close()

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
        conn.request("GET", "/health", headers={"Authorization": f"Bearer {srv.token}"})
        return conn.getresponse().status
    finally:
        conn.close()


def test_a_run_started_during_an_idle_flood_completes(server, tmp_path, capsys) -> None:
    stop = threading.Event()
    thread = idle_flood(server, stop)
    try:
        time.sleep(3.0)  # the flood holds every slot
        told = legitimate_run(server, tmp_path, capsys)
        assert health(server) == 200
    finally:
        stop.set()
        thread.join(timeout=30)
    assert not thread.is_alive()
    assert "server-side bug" not in told and "something other" not in told


@pytest.mark.parametrize("attacker", ["another user", "a runaway client with the token"])
def test_connections_that_always_hold_a_begun_request_do_not_lock_a_run_out(
    tmp_path, capsys, attacker
) -> None:
    """Attack (512 slots, scaled down to 16): every connection always holds a begun request (the
    first byte of the next request sent with the end of the last), so none was ever idle and
    eviction never freed one: a run got no slot in 60 s, then ``ServerUnavailableError``. Now a
    request still arriving gives its slot to a newcomer (and another user is refused at once):
    the run plays a level to the end within seconds, during the flood."""
    from speedrunner.benchmarks.babyai.server import ServerSettings, start_in_thread

    srv = start_in_thread(ServerSettings(port=0, max_connections=16))
    stop = threading.Event()
    host, port = srv.server_address[:2]
    thread = begun_flood(host, port, stop, 16, srv.token if attacker.endswith("token") else None)
    try:
        time.sleep(1.5)  # the flood holds every slot
        started = time.monotonic()
        told = legitimate_run(srv, tmp_path, capsys)
        took = time.monotonic() - started
    finally:
        stop.set()
        thread.join(timeout=30)
        srv.shutdown()
        srv.server_close()
    assert not thread.is_alive()
    assert took < 20, f"the run took {took:.1f} s during the flood"
    assert "is busy" not in told and "server-side bug" not in told, told


def test_a_busy_server_is_waited_for_and_said_to_be_busy(capsys) -> None:
    """Both connection slots executing a request (here: steps of one episode whose lock the test
    holds for a second), so none can be given to a newcomer: a client's request gets 503
    ``too_many_connections`` and retries until a slot frees, saying the server is busy."""
    from speedrunner.benchmarks.babyai.env import ServerConnection
    from speedrunner.benchmarks.babyai.server import ServerSettings, start_in_thread

    srv = start_in_thread(ServerSettings(port=0, max_connections=2))
    slow = []
    try:
        conn = ServerConnection(srv.url, 10.0)
        episode = conn.request("POST", "/episodes", {"task": "goto", "seed": 1})[1]["episode_id"]
        conn.close()
        step = (
            f"POST /episodes/{episode}/step HTTP/1.1\r\nHost: x\r\n"
            f"Authorization: Bearer {srv.token}\r\n"
            'Content-Length: 24\r\n\r\n{"action": "turn left"}\n'
        ).encode()
        lock = srv.store.get(episode).lock
        lock.acquire()
        threading.Timer(1.0, lock.release).start()  # the two steps execute for a second
        for _ in range(2):
            sock = socket.create_connection(srv.server_address[:2], timeout=5)
            sock.sendall(step)
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


def test_a_full_server_is_called_busy_not_broken() -> None:
    from speedrunner.benchmarks.babyai.env import ServerBusyError, _raise_for

    for code in ("too_many_connections", "too_many_episodes"):
        with pytest.raises(ServerBusyError, match="the server is busy") as caught:
            _raise_for(503, {"error": "full", "code": code}, "reset('goto', 1)")
        assert "server-side bug" not in str(caught.value)
    with pytest.raises(Exception, match="server-side bug"):
        _raise_for(500, {"error": "boom", "code": "internal"}, "step('left')")
