"""A run's server-side episodes belong to it: the owners it created them under are kept in the
run directory, so a resumed process deletes what its killed predecessor left; and no owner name
can stop a run: another user cannot reach the server, and an owner without room is replaced."""

from __future__ import annotations

import json
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
    return BabyAIBenchmark(
        BabyAIConfig(server_url=srv.url, autostart_server=False), rollouts=4, eval_episodes=0
    )


def episodes(srv: BabyAIServer) -> int:
    return call(srv, "GET", "/health")[1]["episodes"]


def test_a_resumed_run_deletes_its_predecessors_episodes(server, tmp_path: Path) -> None:
    killed = bench(server)
    killed.start_run("run-1", tmp_path)
    env = killed.make_env()
    env.reset("goto", 3)
    env.step("turn left")  # then the process is SIGKILLed: nothing closes the episode
    assert episodes(server) == 1
    saved = tmp_path / OWNER_FILE
    assert stat.S_IMODE(saved.stat().st_mode) == 0o600
    owner = json.loads(saved.read_text())["owner"]
    assert owner.startswith("run-1-")  # the run's tag and a random part nobody can guess

    status, payload = call(
        server, "DELETE", f"/episodes?owner={owner}", authorized=False
    )  # another user
    assert status == 401 and payload["code"] == "unauthorized" and episodes(server) == 1

    resumed = bench(server)
    resumed.start_run("run-1", tmp_path)
    assert episodes(server) == 0
    again = resumed.make_env()
    again.reset("goto", 4)  # and it goes on creating episodes as the same owner
    assert episodes(server) == 1 and json.loads(saved.read_text())["owner"] == owner
    again.close()


def test_a_squatted_owner_name_does_not_stop_the_run(tmp_path: Path) -> None:
    """Attack: a run's owner was ``<run tag>``, which any local user computes from its command line.
    Between episodes the owner had none; invented owners pushed it out and the attacker claimed the
    name: the run's next ``POST /episodes`` got 403 ``owner_token_mismatch`` and the run stopped.
    Now the attacker cannot reach the server (401), and the run's next episode starts."""
    srv = start_in_thread(ServerSettings(port=0, max_episodes=8))
    try:
        run = bench(srv)
        run.start_run("run-1", tmp_path)
        env = run.make_env()
        env.reset("goto", 1)
        env.close()  # between episodes: the owner has none
        squat = [
            call(srv, "POST", "/owners", {"owner": f"invented-{i}"}, authorized=False)[0]
            for i in range(12)
        ]
        squat.append(
            call(
                srv,
                "POST",
                "/owners",
                {"owner": "run-1", "owner_token": "squatter-token-0123456789"},
                authorized=False,
            )[0]
        )
        env = run.make_env()
        assert env.reset("goto", 2).text  # the run's next episode starts (before: EnvError, 403)
        env.close()
        assert squat == [401] * 13
    finally:
        srv.shutdown()
        srv.server_close()


def test_an_owner_without_room_is_replaced_by_a_fresh_one_and_the_run_says_so(
    tmp_path: Path, capsys
) -> None:
    """Another client of the user's (say a second process of the same run) filled the run's owner
    quota: the run's next episode starts under a fresh owner, said in one line, and a resume
    deletes the episodes of both."""
    srv = start_in_thread(ServerSettings(port=0, max_episodes_per_owner=2))
    try:
        run = bench(srv)
        run.start_run("run-1", tmp_path)
        first = json.loads((tmp_path / OWNER_FILE).read_text())["owner"]
        for seed in range(2):
            status, payload = call(
                srv, "POST", "/episodes", {"task": "goto", "seed": seed, "owner": first}
            )
            assert status == 200, payload
        env = run.make_env()
        assert env.reset(
            "goto", 5
        ).text  # before: 429 owner_quota, an EnvError that stopped the run
        told = capsys.readouterr().err
        assert (
            told.count("\n") == 1
            and f"no room for owner {first!r}" in told
            and "fresh owner" in told
        ), told
        owners = json.loads((tmp_path / OWNER_FILE).read_text())["owners"]
        assert owners[0] == first and len(owners) == 2 and owners[1] in told
        env.step(
            "turn left"
        )  # the process is killed here: three episodes are left, under two owners
        assert episodes(srv) == 3
        bench(srv).start_run("run-1", tmp_path)
        assert episodes(srv) == 0
        assert "deleted 3 episode(s)" in capsys.readouterr().err
    finally:
        srv.shutdown()
        srv.server_close()
