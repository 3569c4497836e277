"""A small sweep (2 configs x 2 seeds, scripted model, tiny schedule) on the local pool and on
Ray: it finishes; SIGKILLed mid-way and rerun, it finishes with the same results and pays
no call twice; a rerun of a finished sweep skips everything; a failing run is reported."""

from __future__ import annotations

import collections
import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from speedrunner.sweep.cli import run_sweep
from speedrunner.sweep.spec import load_sweep

REPO = Path(__file__).resolve().parents[2]
BABYAI = REPO / "configs" / "babyai"
WALL_CLOCK = {"wall_time_s", "latency_s", "cached", "elapsed_s"}
RESULT_FILES = ("metrics.jsonl", "eval.jsonl")


def sweep_file(where: Path, output_root: Path, *, name: str = "tiny", extra: str = "") -> Path:
    path = where / f"{output_root.name}.yaml"
    path.write_text(
        textwrap.dedent(f"""
        name: {name}
        configs: [{BABYAI}/opo-scripted-seq.yaml, {BABYAI}/react-gpt-seq.yaml]
        output_root: {output_root}
        set:
          model.provider: scripted
          run.rollouts: 3
          run.sleep_every: 1
          run.eval_every: 3
          run.eval_episodes: 1
          run.parallel_episodes: 1
          benchmark.max_llm_calls: 6
        grid:
          run.seed: [0, 1]
        {extra}
    """)
    )
    return path


def env() -> dict[str, str]:
    out = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    src = str(REPO / "src")
    out["PYTHONPATH"] = os.pathsep.join(p for p in (src, os.environ.get("PYTHONPATH")) if p)
    return out


def sweep_cmd(path: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "speedrunner.cli", "sweep", str(path), "--workers", "2", *extra]


def strip(value):
    if isinstance(value, dict):
        return {k: strip(v) for k, v in value.items() if k not in WALL_CLOCK}
    if isinstance(value, list):
        return [strip(v) for v in value]
    return value


def results(output_root: Path) -> dict[str, object]:
    """Every run's result files, keyed by path relative to the output root (wall clock removed)."""
    out: dict[str, object] = {}
    for run in load_sweep(output_root.parent / f"{output_root.name}.yaml").runs:
        rel = run.run_dir.relative_to(output_root)
        for name in RESULT_FILES:
            out[f"{rel}/{name}"] = [
                strip(json.loads(line)) for line in (run.run_dir / name).read_text().splitlines()
            ]
        for episode in sorted((run.run_dir / "episodes").rglob("*.json")):
            out[f"{rel}/{episode.relative_to(run.run_dir)}"] = strip(
                json.loads(episode.read_text())
            )
    return out


def real_calls(run_dir: Path) -> list[str]:
    """call_ids answered by the model itself (not replayed from the run's cache)."""
    rows = [json.loads(line) for line in (run_dir / "llm_calls.jsonl").read_text().splitlines()]
    return [r["call_id"] for r in rows if not r["cache_hit"]]


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """The same sweep, uninterrupted."""
    tmp = tmp_path_factory.mktemp("sweep")
    path = sweep_file(tmp, tmp / "reference")
    proc = subprocess.run(
        sweep_cmd(path), env=env(), capture_output=True, text=True, timeout=300, cwd=tmp
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return tmp, path, proc.stdout


@pytest.mark.slow
def test_a_local_sweep_runs_every_run_to_the_end(reference):
    tmp, path, stdout = reference
    runs = load_sweep(path).runs
    assert len(runs) == 4
    # One BabyAI server serves the whole sweep: every run was pointed at it.
    url = stdout.split("one BabyAI server for this machine's runs at ")[1].split()[0]
    assert {
        json.loads((r.run_dir / "config.resolved.json").read_text())["benchmark"]["server_url"]
        for r in runs
    } == {url}
    for r in runs:
        summary = json.loads((r.run_dir / "summary.json").read_text())
        assert summary["status"] == "finished" and summary["training"]["episodes"] == 3
        assert summary["seed"] == int(r.label[-1]) and summary["scripted"]
        assert r.log_file.is_file() and "run directory: " in r.log_file.read_text()
        # One line per run: status, progress, cost, run dir.
        line = next(ln for ln in stdout.splitlines() if ln.endswith(str(r.run_dir)))
        assert line.startswith("finished") and " 3/3 " in line and "$0.0000 scripted" in line
    assert f"report over the sweep's runs:\n  speedrunner report {path}" in stdout

    # A rerun finds every run finished and starts nothing.
    before = {r.run_id: (r.run_dir / "llm_calls.jsonl").read_bytes() for r in runs}
    again = subprocess.run(
        sweep_cmd(path), env=env(), capture_output=True, text=True, timeout=120, cwd=tmp
    )
    assert again.returncode == 0, again.stderr[-2000:]
    assert again.stdout.count("] finished*") == 4 and "BabyAI server" not in again.stdout
    assert {r.run_id: (r.run_dir / "llm_calls.jsonl").read_bytes() for r in runs} == before


@pytest.mark.slow
def test_a_sweep_killed_mid_way_finishes_on_the_rerun_with_identical_results(reference):
    tmp, ref_path, _ = reference
    root = tmp / "killed"
    path = sweep_file(tmp, root)
    runs = load_sweep(path).runs
    proc = subprocess.Popen(
        sweep_cmd(path),
        env=env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        cwd=tmp,
        start_new_session=True,
    )  # its own process group: kill it whole
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if any(
            len(list((r.run_dir / "episodes" / "train").glob("*.json"))) >= 1
            for r in runs
            if r.run_dir.exists()
        ):
            break
        time.sleep(0.01)
    os.killpg(proc.pid, signal.SIGKILL)
    assert proc.wait(timeout=30) == -signal.SIGKILL
    statuses = [
        json.loads((r.run_dir / "summary.json").read_text())["status"]
        if (r.run_dir / "summary.json").exists()
        else "missing"
        for r in runs
    ]
    assert statuses.count("finished") < 4, statuses  # really killed mid-way
    calls_before = {
        r.run_id: real_calls(r.run_dir) if (r.run_dir / "llm_calls.jsonl").exists() else []
        for r in runs
    }

    rerun = subprocess.run(
        sweep_cmd(path), env=env(), capture_output=True, text=True, timeout=300, cwd=tmp
    )
    assert rerun.returncode == 0, rerun.stdout[-3000:] + rerun.stderr[-3000:]
    assert results(root) == results(tmp / "reference")
    # No call was paid twice: each call_id was answered by the model once over both attempts,
    # and together they are exactly the uninterrupted sweep's calls.
    for r, ref in zip(runs, load_sweep(ref_path).runs, strict=True):
        assert r.run_id == ref.run_id
        answered = collections.Counter(real_calls(r.run_dir))
        assert max(answered.values()) == 1
        assert answered == collections.Counter(real_calls(ref.run_dir))
        assert collections.Counter(calls_before[r.run_id]) <= answered
    assert any(calls_before.values())  # the killed attempt had answered calls ...
    assert any(
        "=== sweep resume" in r.log_file.read_text() for r in runs
    )  # ... and the rerun resumed


@pytest.mark.slow
def test_a_failing_run_is_reported_with_its_exit_code_and_log(tmp_path):
    path = tmp_path / "failing.yaml"
    path.write_text(
        textwrap.dedent(f"""
        name: failing
        configs: [{BABYAI}/react-gpt-seq.yaml]
        output_root: {tmp_path / "out"}
        set: {{model.api_key_env: SWEEP_TEST_MISSING_KEY}}
    """)
    )
    proc = subprocess.run(
        sweep_cmd(path), env=env(), capture_output=True, text=True, timeout=120, cwd=tmp_path
    )
    assert proc.returncode == 1
    run = load_sweep(path).runs[0]
    assert f"react-gpt-seq: not started (exit code 2); log {run.log_file}" in proc.stderr
    assert (
        "SWEEP_TEST_MISSING_KEY" in proc.stderr
    )  # the run's own error, from the last lines of its log


@pytest.mark.slow
def test_a_sweep_on_ray_in_local_mode(tmp_path, capsys):
    ray = pytest.importorskip("ray", reason='Ray is an optional extra: pip install -e ".[ray]"')
    path = sweep_file(tmp_path, tmp_path / "ray", extra="resources: {num_cpus: 1}")
    sweep = load_sweep(path)
    old = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = env()["PYTHONPATH"]  # Ray's workers start from this environment
    try:
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
        code = run_sweep(sweep, sweep.runs, backend="ray")
    finally:
        ray.shutdown()
        if old is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = old
    out = capsys.readouterr().out
    assert code == 0, out
    for r in sweep.runs:
        summary = json.loads((r.run_dir / "summary.json").read_text())
        assert summary["status"] == "finished" and summary["training"]["episodes"] == 3
    assert out.count("\nfinished ") == 4
    assert "one BabyAI server for this machine's runs" in out  # a local Ray shares it too


@pytest.mark.slow
def test_runs_of_a_sweep_share_each_endpoints_concurrency_limit(tmp_path):
    from speedrunner.testing.fake_llm_server import FakeLLMServer

    from ..e2e.harness import policy_reply

    path = tmp_path / "limited.yaml"
    server = FakeLLMServer(callback=policy_reply, model_name="fake-model", latency_s=0.05).start()
    try:
        path.write_text(
            textwrap.dedent(f"""
            name: limited
            configs: [{BABYAI}/react-gpt-seq.yaml]
            output_root: {tmp_path / "out"}
            set:
              model.provider: vllm
              model.base_url: {server.base_url}
              model.name: fake-model
              model.max_concurrency: 2       # per endpoint, across both runs
              run.parallel_episodes: 2
              run.rollouts: 8
              run.sleep_every: 4
              run.eval_every: 4
              run.eval_episodes: 0
              benchmark.max_llm_calls: 4
            grid:
              run.seed: [0, 1]
        """)
        )
        environment = {**env(), "SPEEDRUNNER_LLM_SLOTS_DIR": str(tmp_path / "slots")}
        proc = subprocess.run(
            sweep_cmd(path),
            env=environment,
            capture_output=True,
            text=True,
            timeout=300,
            cwd=tmp_path,
        )
    finally:
        server.stop()
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert len(server.chat_requests()) == 2 * 8 * 4
    # Two runs x two parallel episodes could put 4 calls in flight; the shared limit keeps 2.
    assert server.max_in_flight == 2


@pytest.mark.slow
def test_sigterm_stops_the_sweep_and_its_runs_resumably(tmp_path):
    path = sweep_file(tmp_path, tmp_path / "stopped")
    runs = load_sweep(path).runs
    cmd = [*sweep_cmd(path)[:-2], "--workers", "1"]
    proc = subprocess.Popen(
        cmd, env=env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path
    )
    first = runs[0].run_dir / "episodes" / "train"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not (first.is_dir() and any(first.glob("*.json"))):
        time.sleep(0.01)
    proc.send_signal(signal.SIGTERM)  # to the sweep only, as SLURM's time limit would
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 143, stderr[-2000:]
    assert json.loads((runs[0].run_dir / "summary.json").read_text())["status"] == "interrupted"
    table = {
        ln.split()[-1]: ln
        for ln in stdout.splitlines()
        if ln.split() and not ln.startswith(" ") and ln.split()[-1].startswith(str(tmp_path))
    }
    assert table[str(runs[0].run_dir)].startswith("interrupted")
    assert all(table[str(r.run_dir)].startswith("not started") for r in runs[1:])
    assert "rerun `speedrunner sweep" in stderr


@pytest.mark.slow
def test_a_rerun_after_a_crash_pays_no_call_twice_on_a_real_endpoint(tmp_path):
    """Against the fake OpenAI-compatible server: the sweep is SIGKILLed (process group) at a
    request; over both attempts the server answers each call of each run exactly once."""
    from speedrunner.testing.fake_llm_server import FakeLLMServer, Reply

    from ..e2e.harness import policy_reply

    state = {"seen": 0, "answered": 0, "pgid": None, "kill_at": 30}

    def policy(body: dict) -> Reply:
        state["seen"] += 1
        if state["pgid"] is not None and state["seen"] == state["kill_at"]:
            os.killpg(state["pgid"], signal.SIGKILL)
            return Reply.error(500)  # never answered: the kill came first
        state["answered"] += 1
        return policy_reply(body)

    server = FakeLLMServer(callback=policy, model_name="fake-model").start()
    path = tmp_path / "paid.yaml"
    path.write_text(
        textwrap.dedent(f"""
        name: paid
        configs: [{BABYAI}/react-gpt-seq.yaml]
        output_root: {tmp_path / "out"}
        set:
          model.provider: vllm
          model.base_url: {server.base_url}
          model.name: fake-model
          model.prices: {{input: 1.0, cached_input: 0.1, output: 2.0}}
          run.rollouts: 4
          run.sleep_every: 4
          run.eval_every: 4
          run.eval_episodes: 1
          run.parallel_episodes: 1
          benchmark.max_llm_calls: 4
        grid:
          run.seed: [0, 1]
    """)
    )
    cmd = [
        *sweep_cmd(path)[:-2],
        "--workers",
        "1",
    ]  # one call in flight at a time: the kill is exact
    try:
        proc = subprocess.Popen(
            cmd,
            env=env(),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            cwd=tmp_path,
            start_new_session=True,
        )
        state["pgid"] = proc.pid
        assert proc.wait(timeout=120) == -signal.SIGKILL
        rerun = subprocess.run(
            cmd, env=env(), capture_output=True, text=True, timeout=300, cwd=tmp_path
        )
    finally:
        server.stop()
    assert rerun.returncode == 0, rerun.stdout[-3000:] + rerun.stderr[-3000:]
    runs = load_sweep(path).runs
    first, second = (ln for ln in rerun.stdout.splitlines() if re.match(r"\[\d+/\d+\] ", ln))
    assert "finished*" in first and "finished " in second  # run 0 had finished, run 1 was resumed
    assert (
        f"[resume] {runs[1].label} (continuing (" in rerun.stdout
        and f"log {runs[1].log_file}" in rerun.stdout
    )
    assert (
        f"[start] {runs[0].label}" not in rerun.stdout
        and f"[resume] {runs[0].label}" not in rerun.stdout
    )
    paid: collections.Counter = collections.Counter()
    for r in runs:
        for line in (r.run_dir / "llm_calls.jsonl").read_text().splitlines():
            row = json.loads(line)
            if not row["cache_hit"] and row["response"] is not None:
                paid[(row["namespace"], row["call_id"])] += 1
    assert max(paid.values()) == 1
    assert state["answered"] == sum(paid.values()) == 2 * (4 + 2) * 4
    cost = [ln for ln in rerun.stdout.splitlines() if ln.startswith("finished")]
    assert all("$0.0" in ln and "scripted" not in ln for ln in cost)
