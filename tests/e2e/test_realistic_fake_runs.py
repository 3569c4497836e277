"""Every method's quick run on every benchmark it supports finishes against the realistic fake
at a 30 % variant rate (markdown, <think>, prose, truncation, JSON, wrong case, two calls,
wrong answers), through the real train entry points and the openai client."""

from __future__ import annotations

import collections

import pytest

from speedrunner.core.atomic import read_jsonl
from speedrunner.testing.fake_llm_server import FakeLLMServer
from speedrunner.testing.realistic import RealisticFake

from .harness import run, train_cmd

pytestmark = pytest.mark.slow
METHODS = {
    "babyai": ("react", "opo", "asi", "speedrunner", "speedrunner_no_cl"),
    "crafter": ("react", "opo", "asi", "speedrunner", "speedrunner_no_cl", "voyager"),
    "scienceworld": ("react", "opo", "asi", "speedrunner", "speedrunner_no_cl"),
}
SUFFIX = {"babyai": "seq", "crafter": "crafter", "scienceworld": "t4"}
CASES = [(b, m, "text") for b, ms in METHODS.items() for m in ms] + [("babyai", "speedrunner", "native")]
INDUCER = {"opo": "guide", "speedrunner": "inducer", "speedrunner_no_cl": "inducer"}
"""The sleep-phase calls every quick run makes (ASI induces only from a successful episode,
which a fake that picks listed actions at random rarely plays in four)."""


@pytest.mark.parametrize("bench, method, protocol", CASES)
def test_a_quick_run_finishes_against_the_realistic_fake(tmp_path, bench, method, protocol):
    fake = RealisticFake(variants=0.3, seed=0)
    server = FakeLLMServer(callback=fake, model_name="fake-model").start()
    run_dir = tmp_path / "run"
    try:
        cmd = train_cmd(bench, f"{method}-gpt-{SUFFIX[bench]}.yaml", run_dir, server.base_url,
                        "--set", f"model.tool_protocol={protocol}")
        if method == "voyager":
            cmd[2] = "speedrunner.benchmarks.crafter.train_voyager"
        proc = run(cmd, timeout=600)
    finally:
        server.stop()
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert [m["rollout"] for m in read_jsonl(run_dir / "metrics.jsonl")] == [1, 2, 3, 4]
    assert (run_dir / "summary.json").is_file()
    calls = read_jsonl(run_dir / "llm_calls.jsonl")
    assert len(calls) == len(server.chat_requests()) > 0          # every answer recorded once
    served = collections.Counter(k.split("/")[1] for k in fake.counts.elements())
    assert sum(n for k, n in served.items() if k != "clean") > 0    # the run met real-model variants
    purposes = {c["purpose"] for c in calls}
    if method in INDUCER:
        assert INDUCER[method] in purposes
    if protocol == "native":
        assert all(c.get("tools_offered") for c in calls if c["purpose"] == "inducer")
