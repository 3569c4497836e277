"""When the BabyAI server dies mid-run: the run's own server is restarted and the affected
episodes replayed (results unchanged, no call paid twice); a server the user started is
theirs, and the run stops saying so. A resume deletes what its killed predecessor left."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
from pathlib import Path

import pytest

from speedrunner.benchmarks.babyai.server import ServerSettings, start_in_thread
from speedrunner.core.atomic import read_jsonl
from speedrunner.testing.fake_llm_server import FakeLLMServer

from .harness import REPO, clean_env, policy_reply, rows, train_cmd

pytestmark = pytest.mark.slow

MORE = ("--set", "run.rollouts=6", "--set", "run.sleep_every=3", "--set", "run.eval_every=6")


def babyai_server_pids(parent: int) -> list[int]:
    """The autostarted BabyAI server(s) among ``parent``'s children (from /proc)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            cmdline = (entry / "cmdline").read_bytes()
        except (OSError, IndexError, ValueError):
            continue
        if ppid == parent and b"speedrunner.benchmarks.babyai.server" in cmdline:
            pids.append(int(entry.name))
    return pids


class ServerKiller:
    """Answers like ``policy_reply`` and SIGKILLs the run's BabyAI server at chosen requests."""

    def __init__(self, kill_at: tuple[int, ...]) -> None:
        self.kill_at, self.seen, self.pid, self.killed = set(kill_at), 0, None, 0
        self._lock = threading.Lock()

    def __call__(self, body: dict):
        with self._lock:
            self.seen += 1
            if self.seen in self.kill_at and self.pid is not None:
                for pid in babyai_server_pids(self.pid):
                    os.kill(pid, signal.SIGKILL)
                    self.killed += 1
        return policy_reply(body)


def play(
    tmp_path: Path, name: str, killer: ServerKiller | None, *extra: str
) -> tuple[subprocess.CompletedProcess, Path]:
    server = FakeLLMServer(callback=killer or policy_reply, model_name="fake-model").start()
    run_dir = tmp_path / name
    try:
        proc = subprocess.Popen(
            train_cmd("babyai", "react-gpt-seq.yaml", run_dir, server.base_url, *MORE, *extra),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=REPO,
            env=clean_env(),
        )
        if killer is not None:
            killer.pid = proc.pid
        out, err = proc.communicate(timeout=300)
    finally:
        server.stop()
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err), run_dir


def test_the_runs_own_server_is_restarted_and_results_are_unchanged(tmp_path: Path) -> None:
    reference, ref_dir = play(tmp_path, "reference", None)
    assert reference.returncode == 0, reference.stderr[-3000:]
    killer = ServerKiller(kill_at=(7, 25))
    proc, run_dir = play(tmp_path, "killed", killer)
    assert killer.killed == 2
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "died; restarting it" in proc.stderr
    restarts = read_jsonl(run_dir / "env_restarts.jsonl")
    assert len(restarts) >= 2 and all("error" in r for r in restarts)
    for name in ("metrics.jsonl", "eval.jsonl"):
        assert rows(run_dir / name) == rows(ref_dir / name), name
    paid = [r for r in read_jsonl(run_dir / "llm_calls.jsonl") if not r["cache_hit"]]
    ref_paid = [r for r in read_jsonl(ref_dir / "llm_calls.jsonl") if not r["cache_hit"]]
    assert sorted(r["call_id"] for r in paid) == sorted(
        r["call_id"] for r in ref_paid
    )  # nothing paid twice


def test_restarts_are_bounded(tmp_path: Path) -> None:
    killer = ServerKiller(kill_at=(5, 9))
    proc, _ = play(tmp_path, "bounded", killer, "--set", "benchmark.max_server_restarts=1")
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert "--resume" in proc.stderr


def test_a_server_the_user_started_is_not_restarted(tmp_path: Path) -> None:
    import sys
    import time

    from speedrunner.benchmarks.babyai.benchmark import free_port, probe

    port = free_port()
    shared = subprocess.Popen(
        [sys.executable, str(REPO / "BALROG" / "deploy_env.py"), f"deploy.port={port}"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=clean_env(),
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while not probe(url) and time.monotonic() < deadline:
            time.sleep(0.1)

        class StopShared(ServerKiller):
            def __call__(self, body: dict):
                with self._lock:
                    self.seen += 1
                    if self.seen == 5:
                        shared.kill()
                return policy_reply(body)

        proc, _ = play(tmp_path, "shared", StopShared(()), "--set", f"benchmark.server_url={url}")
    finally:
        shared.kill()
        shared.wait()
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert "which this run did not start, stopped answering" in proc.stderr
    assert "--resume" in proc.stderr


def test_a_resume_deletes_what_its_killed_predecessor_left(tmp_path: Path) -> None:
    shared = start_in_thread(ServerSettings(port=0))
    try:
        from .harness import KillingPolicy, run

        policy = KillingPolicy(kill_at=6)
        llm = FakeLLMServer(callback=policy, model_name="fake-model").start()
        run_dir = tmp_path / "run"
        cmd = train_cmd(
            "babyai",
            "react-gpt-seq.yaml",
            run_dir,
            llm.base_url,
            "--set",
            f"benchmark.server_url={shared.url}",
        )
        proc = subprocess.Popen(
            cmd,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=REPO,
            env=clean_env(),
        )
        policy.pid = proc.pid
        proc.communicate(timeout=300)
        assert proc.returncode == -9
        left = len(shared.store)
        assert left > 0  # the killed run could not delete its episodes
        resumed = run([*cmd[:3], "--resume", str(run_dir)])
        llm.stop()
        assert resumed.returncode == 0, resumed.stderr[-3000:]
        assert (
            f"deleted {left} episode(s) an earlier process of this run left behind"
            in resumed.stderr
        )
        assert len(shared.store) == 0
    finally:
        shared.shutdown()
        shared.server_close()
