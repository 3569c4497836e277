"""A sweep on a real Ray cluster: a head (``ray start --head`` on loopback ports) and a second
node process with its own resources, the sweep sent through ``--address``. Runs land on both
nodes and their results are in the shared run root; when the worker node is killed mid-sweep,
Ray retries its task, which resumes the run: nothing finished is repeated, and the fake
server answers each LLM call once."""

from __future__ import annotations

import collections
import contextlib
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from speedrunner.sweep.spec import load_sweep

from .test_sweep_runs import BABYAI, env

pytestmark = pytest.mark.slow
ray = pytest.importorskip("ray", reason='Ray is an optional extra: pip install -e ".[ray]"')
RAY = str(Path(sys.executable).parent / "ray")


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


TOKEN_FILE: Path | None = None
"""The cluster's token, written by the fixture: every process (head, second node, driver, the
sweep) reads it from ``RAY_AUTH_TOKEN_PATH``, as every node of a real cluster needs it."""


def cluster_env() -> dict[str, str]:
    """Token authentication on, as recent Ray turns it on for ``ray start --head``; the token
    lives in the test's own file, never in ``~/.ray``."""
    out = {**env(), "RAY_USAGE_STATS_ENABLED": "0", "RAY_AUTH_MODE": "token"}
    if TOKEN_FILE is not None:
        out["RAY_AUTH_TOKEN_PATH"] = str(TOKEN_FILE)
    return out


def ray_cmd(*args: str, temp: Path) -> subprocess.CompletedProcess:
    return subprocess.run([RAY, *args], env=cluster_env(), capture_output=True, text=True, timeout=180, cwd=temp)


@pytest.fixture
def cluster(tmp_path):
    import tempfile

    port = _port()
    global TOKEN_FILE
    temp = Path(tempfile.mkdtemp(prefix="ray-", dir="/tmp"))   # unix socket paths must stay short
    TOKEN_FILE = temp / "auth_token"
    TOKEN_FILE.write_text(secrets.token_hex(32))
    common = ["--node-ip-address=127.0.0.1", "--num-cpus=1", "--disable-usage-stats"]
    head = ray_cmd("start", "--head", f"--port={port}", f"--temp-dir={temp}", "--include-dashboard=false",
                   '--resources={"head_node": 1}', *common, temp=temp)
    assert head.returncode == 0, head.stdout + head.stderr
    address = f"127.0.0.1:{port}"
    worker = subprocess.Popen([RAY, "start", f"--address={address}", '--resources={"second_node": 1}',
                               "--block", *common], env=cluster_env(),
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    yield address, worker
    with_pgid_kill(worker)
    ray_cmd("stop", "--force", temp=temp)
    import shutil

    shutil.rmtree(temp, ignore_errors=True)


def with_pgid_kill(proc: subprocess.Popen) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)


def nodes_alive(address: str) -> int:
    probe = subprocess.run([sys.executable, "-c", f"import ray; ray.init(address='{address}', log_to_driver=False); "
                            "print(sum(n['Alive'] for n in ray.nodes()))"], env=cluster_env(), capture_output=True,
                           text=True, timeout=120)
    return int(probe.stdout.strip().splitlines()[-1]) if probe.returncode == 0 else 0


def test_a_sweep_on_two_nodes_survives_the_loss_of_one(cluster, tmp_path):
    from speedrunner.testing.fake_llm_server import FakeLLMServer

    from ..e2e.harness import policy_reply

    address, worker = cluster
    deadline = time.monotonic() + 60
    while nodes_alive(address) < 2 and time.monotonic() < deadline:
        time.sleep(1)
    assert nodes_alive(address) == 2

    answered: collections.Counter = collections.Counter()

    def policy(body):
        answered[json.dumps(body["messages"], sort_keys=True)] += 1
        time.sleep(0.05)  # a run takes long enough to be caught mid-way
        return policy_reply(body)

    server = FakeLLMServer(callback=policy, model_name="fake-model").start()
    path = tmp_path / "cluster.yaml"
    path.write_text(textwrap.dedent(f"""
        name: cluster
        configs: [{BABYAI}/react-gpt-seq.yaml]
        output_root: {tmp_path / "out"}
        resources: {{num_cpus: 1}}
        set:
          model.provider: vllm
          model.base_url: {server.base_url}
          model.name: fake-model
          model.prices: {{input: 1.0, cached_input: 0.1, output: 2.0}}
          run.rollouts: 40
          run.sleep_every: 4
          run.eval_every: 40
          run.eval_episodes: 1
          run.parallel_episodes: 1
          benchmark.max_llm_calls: 6
        grid:
          run.seed: [0, 1, 2, 3]
    """))
    runs = load_sweep(path).runs
    try:
        proc = subprocess.Popen([sys.executable, "-m", "speedrunner.cli", "sweep", str(path), "--backend", "ray",
                                 "--address", address], env=cluster_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, cwd=tmp_path)
        # One CPU per node and per run: two runs at a time, one on each node. Kill the second
        # node while both are mid-run.
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline:
            going = [r for r in runs if (r.run_dir / "summary.json").exists()
                     and json.loads((r.run_dir / "summary.json").read_text())["status"] == "running"
                     and len(list((r.run_dir / "episodes" / "train").glob("*.json"))) >= 2]
            if len(going) == 2 or proc.poll() is not None:
                break
            time.sleep(0.2)
        assert len(going) == 2, "the two nodes never ran a run each at once: " + (
            "".join(proc.communicate()) if proc.poll() is not None else "")
        with_pgid_kill(worker)                     # the node's raylet, its workers and their runs die
        out, err = proc.communicate(timeout=400)
    finally:
        server.stop()
    assert proc.returncode == 0, out[-3000:] + err[-3000:]
    for r in runs:
        assert json.loads((r.run_dir / "summary.json").read_text())["status"] == "finished"
    nodes = {line.split("=== Ray node ", 1)[1].strip() for r in runs
             for line in r.log_file.read_text().splitlines() if line.startswith("=== Ray node ")}
    assert len(nodes) == 2, out                                    # runs landed on both nodes
    assert "Ray retried the task, which resumed the run" in out     # the sweep says what happened
    resumed = [r for r in runs if json.loads((r.run_dir / "provenance.json").read_text()).get("resumes")]
    assert len(resumed) == 1                                        # only the killed node's run
    paid: collections.Counter = collections.Counter()
    for r in runs:
        for line in (r.run_dir / "llm_calls.jsonl").read_text().splitlines():
            row = json.loads(line)
            if not row["cache_hit"] and row["response"] is not None:
                paid[(row["namespace"], row["call_id"])] += 1
    assert max(paid.values()) == 1                                  # no call paid twice
    assert sum(answered.values()) >= sum(paid.values())


def test_one_llm_limit_per_endpoint_holds_across_the_clusters_nodes(cluster, tmp_path):
    """Two nodes, four runs at once (two per node), one endpoint with max_concurrency 1: the
    fake server never sees two calls in flight. Slot files could not do it on a real cluster
    (each machine has its own), so a Ray-cluster sweep takes its slots from one named actor."""
    from speedrunner.testing.fake_llm_server import FakeLLMServer

    from ..e2e.harness import policy_reply

    address, _ = cluster
    deadline = time.monotonic() + 60
    while nodes_alive(address) < 2 and time.monotonic() < deadline:
        time.sleep(1)
    lock = threading.Lock()
    state = {"in_flight": 0, "peak": 0, "calls": 0}

    def policy(body):
        with lock:
            state["in_flight"] += 1
            state["calls"] += 1
            state["peak"] = max(state["peak"], state["in_flight"])
        time.sleep(0.05)
        with lock:
            state["in_flight"] -= 1
        return policy_reply(body)

    server = FakeLLMServer(callback=policy, model_name="fake-model").start()
    url = server.base_url.rstrip("/")
    path = tmp_path / "limited.yaml"
    path.write_text(textwrap.dedent(f"""
        name: limited
        configs: [{BABYAI}/react-gpt-seq.yaml]
        output_root: {tmp_path / "out"}
        resources: {{num_cpus: 0.5}}
        set:
          model.provider: vllm
          model.base_url: {server.base_url}
          model.name: fake-model
          model.max_concurrency: 1
          model.prices: {{input: 1.0, cached_input: 0.1, output: 2.0}}
          run.rollouts: 8
          run.sleep_every: 4
          run.eval_every: 8
          run.eval_episodes: 1
          run.parallel_episodes: 2
          benchmark.max_llm_calls: 5
        grid:
          run.seed: [0, 1, 2, 3]
    """))
    try:
        proc = subprocess.run([sys.executable, "-m", "speedrunner.cli", "sweep", str(path), "--backend", "ray",
                               "--address", address], env=cluster_env(), capture_output=True, text=True,
                              timeout=600, cwd=tmp_path)
    finally:
        server.stop()
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    nodes = {line.split("=== Ray node ", 1)[1].strip() for r in load_sweep(path).runs
             for line in r.log_file.read_text().splitlines() if line.startswith("=== Ray node ")}
    assert len(nodes) == 2                                          # runs on both nodes at once
    assert state["calls"] > 20 and state["peak"] == 1, state
    # The cluster's one limiter held it (not this machine's slot files, which on a real
    # cluster every node would have on its own).
    assert f"LLM limit across the cluster: vllm {url}: at most 1 call(s) in flight" in proc.stdout
