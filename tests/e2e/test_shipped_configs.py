"""Every shipped experiment, run as shipped: for each benchmark x method the shipped configs
cover, the real train entry point runs the shipped config with its own parallelism and caps,
only the schedule shortened (one sleep between two evaluations, small eval sets), against one
fake LLM that reads only the prompt (``shipped_fakes``). Knowledge must really be installed (a
codebook the actor calls, or a guide) and evaluated in parallel episodes.

ScienceWorld is held to the issue's figures: the prompt-only player succeeds on >= 0.9 of the
held-out t4 episodes before any sleep, and with the installed codebook each episode takes at
most 2 LLM calls.
"""

from __future__ import annotations

import json
import socket
import sys
import threading
from pathlib import Path

import pytest
import yaml

from speedrunner.core.specs import METHODS as METHOD_SPECS
from speedrunner.testing.fake_llm_server import Reply

from .harness import PRICES, REPO, run, start_server
from .shipped_fakes import ShippedFake, babyai_levels

pytestmark = pytest.mark.slow
ENTRY = {
    "babyai": "speedrunner.benchmarks.babyai.train",
    "crafter": "speedrunner.benchmarks.crafter.train",
    "scienceworld": "speedrunner.benchmarks.scienceworld.train",
}
METHODS = ("asi", "opo", "react", "speedrunner", "speedrunner_no_cl")
CONFIGS = (
    [("babyai", f"{m}-gpt-seq.yaml") for m in METHODS]
    + [("crafter", f"{m}-gpt-crafter.yaml") for m in METHODS]
    + [("scienceworld", f"{m}-gpt-t4.yaml") for m in METHODS]
    + [("scienceworld", "speedrunner-gpt-t3.yaml"), ("scienceworld", "speedrunner-gpt-t3t4.yaml")]
)
ROLLOUTS = {
    "babyai": 4,
    "crafter": 2,
    "scienceworld": 2,
}  # two episodes at once already run in parallel;
EVAL = {"babyai": 4, "crafter": 2, "scienceworld": 2}  # each ScienceWorld one is a JVM of its own
T4_EVAL = 10  # the issue's >= 0.9 before any sleep, measured on more than a handful


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def shipped(bench: str, name: str) -> dict:
    return yaml.safe_load((REPO / "configs" / bench / name).read_text())


def test_the_matrix_covers_every_shipped_benchmark_and_method() -> None:
    """A new shipped method or benchmark must join the matrix (Voyager has its own e2e test)."""
    covered = {(b, shipped(b, n)["method"]["name"]) for b, n in CONFIGS}
    every = {
        (p.parent.name, yaml.safe_load(p.read_text())["method"]["name"])
        for p in (REPO / "configs").glob("*/*.yaml")
        if p.parent.name in ENTRY
    }
    assert every - covered == {("crafter", "voyager")}


class Concurrency:
    """Wraps the fake: the most actor calls in flight at once (episodes really ran in parallel)."""

    def __init__(self, fake: ShippedFake) -> None:
        self.fake, self.inflight, self.peak, self.actor_calls = fake, 0, 0, 0
        self.overlapped = threading.Event()
        self._lock = threading.Lock()

    def __call__(self, body: dict) -> Reply:
        actor = "You are an agent playing a text game" in body["messages"][0]["content"]
        first = False
        if actor:
            with self._lock:
                self.inflight += 1
                self.actor_calls += 1
                first = self.actor_calls == 1
                self.peak = max(self.peak, self.inflight)
                if self.peak >= 2:
                    self.overlapped.set()
        try:
            if (
                first
            ):  # the run's first answer waits for a second episode's call: parallel ones come
                self.overlapped.wait(120)
            return self.fake(body)
        finally:
            if actor:
                with self._lock:
                    self.inflight -= 1


def evals(run_dir: Path, point: int) -> list[dict]:
    folder = run_dir / "episodes" / "eval" / f"at{point:04d}"
    return [json.loads(p.read_text()) for p in sorted(folder.glob("*.json"))]


@pytest.mark.timeout(
    1500
)  # JVMs and 2,000-action Crafter episodes at the shipped caps, on a busy machine
@pytest.mark.parametrize(
    ("bench", "name"), CONFIGS, ids=[n.removesuffix(".yaml") for _, n in CONFIGS]
)
def test_the_shipped_config_runs_as_shipped(tmp_path: Path, bench: str, name: str) -> None:
    config = shipped(bench, name)
    method = config["method"]["name"]
    rollouts = ROLLOUTS[bench]
    n_eval = T4_EVAL if name == "speedrunner-gpt-t4.yaml" else EVAL[bench]
    fake = Concurrency(
        ShippedFake(bench, levels=babyai_levels(rollouts, n_eval) if bench == "babyai" else None)
    )
    server = start_server(fake)
    run_dir = tmp_path / "run"
    extra = (
        ["--set", f"benchmark.server_url=http://127.0.0.1:{free_port()}"]
        if bench == "babyai"
        else []
    )
    cmd = [
        sys.executable,
        "-m",
        ENTRY[bench],
        "--config_file",
        str(REPO / "configs" / bench / name),
        "--run_dir",
        str(run_dir),
        "--set",
        "model.provider=vllm",
        "--set",
        f"model.base_url={server.base_url}",
        "--set",
        "model.name=fake-model",
        "--set",
        PRICES,
        "--set",
        f"run.rollouts={rollouts}",
        "--set",
        f"run.sleep_every={rollouts}",
        "--set",
        f"run.eval_every={rollouts}",
        "--set",
        f"run.eval_episodes={n_eval}",
        *extra,
    ]
    try:
        proc = run(cmd, timeout=1400)
    finally:
        server.stop()
    assert proc.returncode == 0, proc.stderr[-4000:]
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["status"] == "finished"
    assert config["run"]["parallel_episodes"] in (
        "all",
        10,
    )  # as shipped: nothing here overrides it
    assert fake.peak >= 2, "the episodes never overlapped"

    before, after = evals(run_dir, 0), evals(run_dir, rollouts)
    assert len(before) == len(after) == n_eval
    assert {e["knowledge_version"] for e in before} == {0}
    if method == "react":
        assert {e["knowledge_version"] for e in after} == {0}
    elif method == "asi" and bench == "crafter":
        # Crafter's success is all 22 achievements: no episode succeeds, so ASI induces nothing.
        assert "asi" not in fake.fake.calls
    else:
        assert {e["knowledge_version"] for e in after} == {1}, "no knowledge was installed"
    skill = fake.fake.skill
    if method in ("asi", "speedrunner", "speedrunner_no_cl") and not (
        method == "asi" and bench == "crafter"
    ):
        gen_1 = (run_dir / "codebook" / "gen_1.py").read_text()
        assert f"def {skill}(" in gen_1
        title = METHOD_SPECS.get(method).knowledge_title
        assert gen_1.startswith('"""Skills written by the sleep phase') and (
            f'Generated by {title}."""' in gen_1.splitlines()[0]
        ), "the codebook's header does not name the method that wrote it"
        if (
            bench != "babyai"
        ):  # BabyAI's expert calls go_forward_n only where the level has a straight run
            assert all(e["steps"][0]["skill_call"]["name"] == skill for e in after), (
                "the actor never called the skill"
            )
        assert all(e.get("sandbox_violations", 0) == 0 for e in after)
    if bench == "scienceworld" and name.endswith("-t4.yaml"):
        rate = sum(e["success"] for e in before) / n_eval
        assert rate >= 0.9, f"the prompt-only player before any sleep: {rate}"
        if method in ("asi", "speedrunner", "speedrunner_no_cl"):
            assert all(e["success"] and e["llm_calls"] <= 2 for e in after), [
                (e["task"], e["success"], e["llm_calls"]) for e in after
            ]
