"""BabyAIBenchmark: deterministic episode specs, server autostart/stop, clear errors, skill API."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time

import pytest

from speedrunner.benchmarks.babyai import skill_api
from speedrunner.benchmarks.babyai.benchmark import BabyAIBenchmark, probe
from speedrunner.benchmarks.babyai.config import TASK_KINDS, BabyAIConfig
from speedrunner.benchmarks.babyai.levels import kind_for_seed
from speedrunner.benchmarks.babyai.server import start_in_thread
from speedrunner.core.env import TextEnv
from speedrunner.core.seeding import episode_seed
from speedrunner.core.skill import local_transport
from speedrunner.errors import ServerUnavailableError


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie child still "exists"; treat it as gone
    with open(f"/proc/{pid}/stat") as f:
        return f.read().split()[2] != "Z"


def wait_gone(pid: int, timeout_s: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not pid_alive(pid):
            return True
        time.sleep(0.05)
    return False


def test_specs_are_deterministic_and_split() -> None:
    bench = BabyAIBenchmark(BabyAIConfig(task_set="mixed"), rollouts=200, eval_episodes=30)
    spec = bench.train_episode(3, 17)
    assert spec.seed == episode_seed(3, "train", 17) and spec.split == "train" and spec.index == 17
    assert spec.task == kind_for_seed(spec.seed)
    evals = bench.eval_episodes(3)
    assert evals == bench.eval_episodes(3) and len(evals) == 30
    assert {e.split for e in evals} == {"eval"} and [e.index for e in evals] == list(range(30))
    train_seeds = {bench.train_episode(3, i).seed for i in range(200)}
    assert not train_seeds & {e.seed for e in evals}
    assert {bench.train_episode(3, i).task for i in range(200)} == set(TASK_KINDS)
    seq = BabyAIBenchmark(BabyAIConfig(), rollouts=10, eval_episodes=5)
    assert {seq.train_episode(0, i).task for i in range(10)} == {"pick_up_seq_go_to"}


def test_autostart_starts_and_stops_a_local_server() -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    bench = BabyAIBenchmark(BabyAIConfig(server_url=url), rollouts=10, eval_episodes=2)
    assert not probe(url)
    env = bench.make_env()
    spec = bench.eval_episodes(0)[0]
    obs = env.reset(spec.task, spec.seed)
    assert obs.text and env.instruction.startswith("Your goal is to ")
    pid = bench._server._proc.pid  # type: ignore[union-attr]
    env2 = bench.make_env()  # reuses the running server
    assert bench._server._proc.pid == pid  # type: ignore[union-attr]
    env2.close()
    env.close()
    bench.close()
    assert wait_gone(pid) and not probe(url)
    bench.close()  # idempotent


def test_concurrent_runs_get_private_servers_and_never_stop_each_other() -> None:
    blocker = socket.socket()  # bound, never listening: connections to this port are refused
    blocker.bind(("127.0.0.1", 0))
    url = f"http://127.0.0.1:{blocker.getsockname()[1]}"
    first = BabyAIBenchmark(BabyAIConfig(server_url=url), rollouts=10, eval_episodes=2)
    second = BabyAIBenchmark(BabyAIConfig(server_url=url), rollouts=10, eval_episodes=2)
    env1, env2 = first.make_env(), second.make_env()
    assert first._server.url != second._server.url  # type: ignore[union-attr]
    first.close()  # the first run ends ...
    spec = second.eval_episodes(0)[0]
    assert env2.reset(spec.task, spec.seed).text  # ... the second keeps playing
    env1.close()
    env2.close()
    second.close()
    blocker.close()


def test_a_server_started_by_hand_is_used_and_left_running() -> None:
    srv = start_in_thread()
    try:
        bench = BabyAIBenchmark(BabyAIConfig(server_url=srv.url), rollouts=10, eval_episodes=1)
        env = bench.make_env()
        assert bench._server is None and env.reset("goto", 0).text
        env.close()
        bench.close()
        assert probe(srv.url)
    finally:
        srv.shutdown()
        srv.server_close()


_ORPHAN_SCRIPT = """
import os, sys
from speedrunner.benchmarks.babyai.benchmark import BabyAIBenchmark
from speedrunner.benchmarks.babyai.config import BabyAIConfig
bench = BabyAIBenchmark(BabyAIConfig(server_url=sys.argv[1]), rollouts=10, eval_episodes=1)
env = bench.make_env()
env.reset("goto", 0)
print(bench._server._proc.pid, flush=True)
if sys.argv[2] == "hang":
    import time; time.sleep(60)
"""


@pytest.mark.parametrize("how", ["exit", "sigkill"])
def test_no_orphan_server_when_the_owner_exits(how: str) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    owner = subprocess.Popen(
        [sys.executable, "-c", _ORPHAN_SCRIPT, url, "hang" if how == "sigkill" else "exit"],
        stdout=subprocess.PIPE,
        text=True,
    )
    server_pid = int(owner.stdout.readline())  # type: ignore[union-attr]
    if how == "sigkill":  # no atexit: the server must notice its parent is gone
        owner.send_signal(signal.SIGKILL)
    owner.wait(timeout=30)
    owner.stdout.close()  # type: ignore[union-attr]
    assert wait_gone(server_pid), f"server {server_pid} outlived its owner ({how})"


def test_remote_unreachable_url_is_a_clear_error() -> None:
    url = f"http://127.0.0.2:{free_port()}"  # not "local" for autostart; refuses at once
    bench = BabyAIBenchmark(BabyAIConfig(server_url=url), rollouts=10, eval_episodes=1)
    with pytest.raises(ServerUnavailableError, match=r"127\.0\.0\.2.*deploy_env\.py"):
        bench.make_env()


def test_local_without_autostart_says_how_to_start() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    cfg = BabyAIConfig(server_url=url, autostart_server=False)
    with pytest.raises(ServerUnavailableError, match="deploy_env.py.*autostart_server"):
        BabyAIBenchmark(cfg, rollouts=10, eval_episodes=1).make_env()


def test_skill_api_over_an_env() -> None:
    srv = start_in_thread()
    try:
        bench = BabyAIBenchmark(BabyAIConfig(server_url=srv.url), rollouts=1, eval_episodes=1)
        env = bench.make_env()
        assert isinstance(env, TextEnv)
        # Find a layout where turning in place brings the object dead ahead (deterministic).
        for seed in range(50):
            first = env.reset("pickup", seed)
            api = skill_api.SkillEnv(local_transport(env), first.text, first.structured)
            assert api.text == first.text
            json.dumps(first.structured)
            for _ in range(4):
                seen = skill_api.visible_objects(api.state)
                if seen and seen[0].dx == 0:
                    break
                api.act("turn left")
            if seen and seen[0].dx == 0:
                break
        target = seen[0]
        assert skill_api.find(api.state, target.name) == target
        while skill_api.in_front(api.state) is None:
            api.act("go forward")
        api.act("pick up")
        assert skill_api.carrying(api.state) == target.name
        assert api.done and env.success
        with pytest.raises(Exception, match="over"):
            api.act("turn left")
        env.close()
        bench.close()
    finally:
        srv.shutdown()
        srv.server_close()


def test_skill_views_are_pure_functions_of_the_dict() -> None:
    view = {
        "carrying": {"type": "key", "color": "red"},
        "walls": {"left": 2},
        "objects": [
            {"type": "door", "color": "blue", "state": "locked", "dx": 2, "dy": 3},
            {"type": "ball", "color": "green", "dx": 0, "dy": 1},
        ],
    }
    objs = skill_api.visible_objects(view)
    assert [o.name for o in objs] == ["green ball", "blue door"]
    assert skill_api.in_front(view) == objs[0]
    assert skill_api.find(view, "the blue door").state == "locked"  # type: ignore[union-attr]
    assert skill_api.find(view, "red ball") is None
    assert skill_api.carrying(view) == "red key"
    assert (
        skill_api.wall_distance(view, "left") == 2
        and skill_api.wall_distance(view, "forward") is None
    )


def test_env_passes_check_text_env() -> None:
    from speedrunner.core.env_checker import check_text_env

    srv = start_in_thread()
    try:
        env = BabyAIBenchmark(
            BabyAIConfig(server_url=srv.url), rollouts=1, eval_episodes=1
        ).make_env()
        for kind in (*TASK_KINDS, "mixed"):
            check_text_env(env, kind, 12345)
        env.close()
    finally:
        srv.shutdown()
        srv.server_close()
