"""A run's server-side episodes belong to it: the token the server's owner claim needs is kept
in the run directory, so a resumed process deletes what its killed predecessor left, and no
other client can (issue 22: ``DELETE ?owner=`` needed no proof of ownership)."""

from __future__ import annotations

import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from speedrunner.benchmarks.babyai.benchmark import OWNER_FILE, BabyAIBenchmark
from speedrunner.benchmarks.babyai.config import BabyAIConfig
from speedrunner.benchmarks.babyai.server import BabyAIServer, ServerSettings, start_in_thread

from .test_babyai_server import call


@pytest.fixture()
def server() -> Iterator[BabyAIServer]:
    srv = start_in_thread(ServerSettings(port=0))
    yield srv
    srv.shutdown()
    srv.server_close()


def bench(srv: BabyAIServer) -> BabyAIBenchmark:
    return BabyAIBenchmark(BabyAIConfig(server_url=srv.url, autostart_server=False), rollouts=4, eval_episodes=0)


def episodes(srv: BabyAIServer) -> int:
    return call(srv, "GET", "/health")[1]["episodes"]


def test_a_resumed_run_deletes_its_predecessors_episodes_with_the_stored_token(server, tmp_path: Path) -> None:
    killed = bench(server)
    killed.start_run("run-1", tmp_path)
    env = killed.make_env()
    env.reset("goto", 3)
    env.step("turn left")  # then the process is SIGKILLed: nothing closes the episode
    assert episodes(server) == 1
    saved = tmp_path / OWNER_FILE
    assert stat.S_IMODE(saved.stat().st_mode) == 0o600 and "run-1" in saved.read_text()

    status, payload = call(server, "DELETE", "/episodes?owner=run-1")  # another client: no token
    assert status == 403 and payload["code"] == "owner_token_mismatch" and episodes(server) == 1

    resumed = bench(server)
    resumed.start_run("run-1", tmp_path)
    assert episodes(server) == 0
    again = resumed.make_env()
    again.reset("goto", 4)  # and it goes on creating episodes as the same owner
    assert episodes(server) == 1
    again.close()


def test_a_tag_someone_else_claimed_gets_a_fresh_owner(server, tmp_path: Path) -> None:
    status, _ = call(server, "POST", "/owners", {"owner": "run-2", "owner_token": "squatter-token-0123456789"})
    assert status == 200
    b = bench(server)
    b.start_run("run-2", tmp_path)
    env = b.make_env()
    env.reset("goto", 1)  # not refused: the run plays under a fresh owner name
    assert b._owner != "run-2" and b._owner.startswith("run-2-")
    env.close()
