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
    out = {
        **env(),
        "RAY_USAGE_STATS_ENABLED": "0",
        "RAY_AUTH_MODE": "token",
        # A killed node is declared dead after 3 failed health checks a second apart (Ray's
        # defaults: 5 checks 3 s apart); each check still has Ray's 10 s to answer.
        "RAY_health_check_period_ms": "1000",
        "RAY_health_check_failure_threshold": "3",
    }
    if TOKEN_FILE is not None:
        out["RAY_AUTH_TOKEN_PATH"] = str(TOKEN_FILE)
    return out


class Cluster:
    """A head and a second node, each ``ray start --block`` in a session of its own, so the
    teardown stops exactly their processes (``ray stop`` would stop every Ray on the machine).
    Started once for the module; a test that kills the second node leaves the next test a new
    one (``two_nodes``)."""

    COMMON = ("--node-ip-address=127.0.0.1", "--num-cpus=1", "--disable-usage-stats", "--block")

    def __init__(self, temp: Path) -> None:
        self.temp, port = temp, _port()
        self.address = f"127.0.0.1:{port}"
        self.worker: subprocess.Popen | None = None
        self.head = subprocess.Popen(
            [
                RAY,
                "start",
                "--head",
                f"--port={port}",
                f"--temp-dir={temp}",
                "--include-dashboard=false",
                '--resources={"head_node": 1}',
                *self.COMMON,
            ],
            env=cluster_env(),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
            cwd=temp,
        )
        deadline = time.monotonic() + 120
        while not _listening(port):
            assert self.head.poll() is None and time.monotonic() < deadline, (
                "the Ray head did not start"
            )
            time.sleep(0.5)

    def two_nodes(self) -> tuple[str, subprocess.Popen]:
        """The head and a live second node (started anew if a test killed the last one)."""
        if self.worker is None or self.worker.poll() is not None:
            self.worker = subprocess.Popen(
                [
                    RAY,
                    "start",
                    f"--address={self.address}",
                    '--resources={"second_node": 1}',
                    *self.COMMON,
                ],
                env=cluster_env(),
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
                cwd=self.temp,
            )
        deadline = time.monotonic() + 60
        while (alive := nodes_alive(self.address)) != 2 and time.monotonic() < deadline:
            time.sleep(1)  # joining, or a killed node not yet seen dead
        assert alive == 2, f"{alive} Ray nodes alive, not 2: the second node did not join"
        return self.address, self.worker

    def stop(self) -> None:
        for proc in (self.worker, self.head):
            if proc is not None:
                kill_session(proc)


@pytest.fixture(scope="module")
def ray_cluster():
    """One cluster for the module's tests: starting one costs ~10 s of two CPUs."""
    import shutil
    import tempfile

    global TOKEN_FILE
    temp = Path(tempfile.mkdtemp(prefix="ray-", dir="/tmp"))  # unix socket paths must stay short
    TOKEN_FILE = temp / "auth_token"
    TOKEN_FILE.write_text(secrets.token_hex(32))
    made = None
    try:
        made = Cluster(temp)
        yield made
    finally:
        if made is not None:
            made.stop()
        shutil.rmtree(temp, ignore_errors=True)


@pytest.fixture
def cluster(ray_cluster: Cluster) -> tuple[str, subprocess.Popen]:
    return ray_cluster.two_nodes()


def _listening(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def kill_session(proc: subprocess.Popen) -> None:
    """SIGKILL every process of the session ``proc`` leads (Ray's workers make process groups
    of their own, but stay in the session), then reap ``proc``."""
    listing = subprocess.run(["ps", "-eo", "pid=,sid="], capture_output=True, text=True).stdout
    for line in listing.splitlines():
        pid, sid = (int(x) for x in line.split())
        if sid == proc.pid:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    proc.wait(timeout=30)


def nodes_alive(address: str) -> int:
    probe = subprocess.run(
        [
            sys.executable,
            "-c",
            f"import ray; ray.init(address='{address}', log_to_driver=False); "
            "print(sum(n['Alive'] for n in ray.nodes()))",
        ],
        env=cluster_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    return int(probe.stdout.strip().splitlines()[-1]) if probe.returncode == 0 else 0


def test_a_sweep_on_two_nodes_survives_the_loss_of_one(cluster, tmp_path):
    from speedrunner.core.llm.accounting import messages_digest
    from speedrunner.core.llm.types import Message
    from speedrunner.testing.fake_llm_server import FakeLLMServer

    from ..e2e.harness import policy_reply

    address, worker = cluster

    answered: collections.Counter = collections.Counter()  # prompt digest -> times answered

    def policy(body):
        answered[
            messages_digest(
                [Message(role=m["role"], content=m["content"]) for m in body["messages"]]
            )
        ] += 1
        time.sleep(0.05)  # a run takes long enough to be caught mid-way
        return policy_reply(body)

    server = FakeLLMServer(callback=policy, model_name="fake-model").start()
    path = tmp_path / "cluster.yaml"
    path.write_text(
        textwrap.dedent(f"""
        name: cluster
        configs: [{BABYAI}/react-gpt-seq.yaml]
        output_root: {tmp_path / "out"}
        resources: {{num_cpus: 1}}
        set:
          model.provider: vllm
          model.base_url: {server.base_url}
          model.name: fake-model
          model.prices: {{input: 1.0, cached_input: 0.1, output: 2.0}}
          run.rollouts: 16
          run.sleep_every: 4
          run.eval_every: 16
          run.eval_episodes: 1
          run.parallel_episodes: 1
          benchmark.max_llm_calls: 6
        grid:
          run.seed: [0, 1, 2, 3]
    """)
    )
    runs = load_sweep(path).runs
    try:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "speedrunner.cli",
                "sweep",
                str(path),
                "--backend",
                "ray",
                "--address",
                address,
            ],
            env=cluster_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=tmp_path,
        )
        # One CPU per node and per run: two runs at a time, one on each node. Kill the second
        # node while both are mid-run.
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline:
            going = [
                r
                for r in runs
                if (r.run_dir / "summary.json").exists()
                and json.loads((r.run_dir / "summary.json").read_text())["status"] == "running"
                and len(list((r.run_dir / "episodes" / "train").glob("*.json"))) >= 2
            ]
            if len(going) == 2 or proc.poll() is not None:
                break
            time.sleep(0.2)
        assert len(going) == 2, "the two nodes never ran a run each at once: " + (
            "".join(proc.communicate()) if proc.poll() is not None else ""
        )
        kill_session(worker)  # the node's raylet, its workers and their runs die
        out, err = proc.communicate(timeout=400)
    finally:
        server.stop()
    assert proc.returncode == 0, out[-3000:] + err[-3000:]
    for r in runs:
        assert json.loads((r.run_dir / "summary.json").read_text())["status"] == "finished"
    nodes = {
        line.split("=== Ray node ", 1)[1].strip()
        for r in runs
        for line in r.log_file.read_text().splitlines()
        if line.startswith("=== Ray node ")
    }
    assert len(nodes) == 2, out  # runs landed on both nodes
    assert "Ray retried the task, which resumed the run" in out  # the sweep says what happened
    resumed = [
        r for r in runs if json.loads((r.run_dir / "provenance.json").read_text()).get("resumes")
    ]
    assert len(resumed) == 1  # only the killed node's run
    attempts = {r.run_id: r.log_file.read_text().count("=== Ray node ") for r in runs}
    assert attempts == {r.run_id: 2 if r in resumed else 1 for r in runs}, (
        attempts
    )  # nothing run again
    paid: collections.Counter = collections.Counter()
    paid_prompts: collections.Counter = collections.Counter()
    for r in runs:
        for line in (r.run_dir / "llm_calls.jsonl").read_text().splitlines():
            row = json.loads(line)
            if not row["cache_hit"] and row["response"] is not None:
                paid[(row["namespace"], row["call_id"])] += 1
                paid_prompts[row["messages_sha256"]] += 1
    assert max(paid.values()) == 1  # no call paid twice
    assert not paid_prompts - answered  # every paid answer came from the server
    # The server answered each request once, but the one the killed node had in flight (answered,
    # never recorded, asked again by the resumed run).
    assert sum((answered - paid_prompts).values()) <= 1, answered - paid_prompts


def test_a_driver_without_the_clusters_token_is_told_what_to_set(cluster, tmp_path):
    """Ray 2.60 reports a missing token as "Failed to connect" (or an AuthenticationError):
    the sweep exits 2 naming what a machine needs to join, and starts nothing."""
    address, _ = cluster
    path = tmp_path / "s.yaml"
    path.write_text(
        f"name: s\nconfigs: [{BABYAI}/react-gpt-seq.yaml]\noutput_root: {tmp_path / 'out'}\n"
    )
    for mode in ("token", None):  # with RAY_AUTH_MODE=token, and without it
        e = {
            k: v
            for k, v in cluster_env().items()
            if k not in ("RAY_AUTH_TOKEN_PATH", "RAY_AUTH_MODE")
        }
        e.update(HOME=str(tmp_path / "home"), **({"RAY_AUTH_MODE": mode} if mode else {}))
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "speedrunner.cli",
                "sweep",
                str(path),
                "--backend",
                "ray",
                "--address",
                address,
            ],
            env=e,
            capture_output=True,
            text=True,
            timeout=180,
            cwd=tmp_path,
        )
        assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-2000:]
        assert (
            "RAY_AUTH_MODE=token" in proc.stderr and "ray get-auth-token --generate" in proc.stderr
        )
        assert "RAY_AUTH_TOKEN_PATH" in proc.stderr, proc.stderr[-2000:]
        assert not (tmp_path / "out").exists()


def test_one_llm_limit_per_endpoint_holds_across_the_clusters_nodes(cluster, tmp_path):
    """Two nodes, four runs at once (two per node), one endpoint with max_concurrency 1: the
    fake server never sees two calls in flight. Slot files could not do it on a real cluster
    (each machine has its own), so a Ray-cluster sweep takes its slots from one named actor."""
    from speedrunner.testing.fake_llm_server import FakeLLMServer

    from ..e2e.harness import policy_reply

    address, _ = cluster
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
    path.write_text(
        textwrap.dedent(f"""
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
    """)
    )
    try:
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "speedrunner.cli",
                "sweep",
                str(path),
                "--backend",
                "ray",
                "--address",
                address,
            ],
            env=cluster_env(),
            capture_output=True,
            text=True,
            timeout=600,
            cwd=tmp_path,
        )
    finally:
        server.stop()
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    nodes = {
        line.split("=== Ray node ", 1)[1].strip()
        for r in load_sweep(path).runs
        for line in r.log_file.read_text().splitlines()
        if line.startswith("=== Ray node ")
    }
    assert len(nodes) == 2  # runs on both nodes at once
    assert state["calls"] > 20 and state["peak"] == 1, state
    # The cluster's one limiter held it (not this machine's slot files, which on a real
    # cluster every node would have on its own).
    assert f"LLM limit across the cluster: vllm {url}: at most 1 call(s) in flight" in proc.stdout
