"""Every method's quick run on every benchmark it supports finishes against the realistic fake
at a 30 % variant rate (markdown, <think>, prose, truncation, JSON, wrong case, two calls,
wrong answers), through the real train entry points and the openai client, and loses at
most 1 % of its turns to variants that still carry one answer (judged by meaning,
``testing.format_audit``). On BabyAI, ASI's actor is minigrid's bot (dressed in the same
variants), so episodes succeed and ASI induces from them."""

from __future__ import annotations

import collections
import json

import pytest

from speedrunner.core.atomic import read_jsonl
from speedrunner.testing.babyai_expert import BabyAIExpert
from speedrunner.testing.fake_llm_server import FakeLLMServer
from speedrunner.testing.format_audit import audit_run
from speedrunner.testing.realistic import RealisticFake

from .harness import run, train_cmd

pytestmark = pytest.mark.slow
METHODS = {
    "babyai": ("react", "opo", "asi", "speedrunner", "speedrunner_no_cl"),
    "crafter": ("react", "opo", "asi", "speedrunner", "speedrunner_no_cl", "voyager"),
    "scienceworld": ("react", "opo", "asi", "speedrunner", "speedrunner_no_cl"),
}
SUFFIX = {"babyai": "seq", "crafter": "crafter", "scienceworld": "t4"}
CASES = [(b, m, "text") for b, ms in METHODS.items() for m in ms] + [
    ("babyai", "speedrunner", "native"),
    ("crafter", "voyager", "native"),
]
INDUCER = {
    "opo": "guide",
    "speedrunner": "inducer",
    "speedrunner_no_cl": "inducer",
    "voyager": "inducer",
}
"""The sleep-phase (Voyager: action-agent) calls every quick run makes; ASI induces only from a
successful episode, which BabyAI's expert actor plays (a fake that picks listed actions at
random rarely does in four)."""


@pytest.mark.parametrize("bench, method, protocol", CASES)
def test_a_quick_run_finishes_against_the_realistic_fake(tmp_path, bench, method, protocol):
    expert = (bench, method) == ("babyai", "asi")
    fake = RealisticFake(
        variants=0.3, seed=0, actor=BabyAIExpert.for_run(0, "seq", 8) if expert else None
    )
    server = FakeLLMServer(callback=fake, model_name="fake-model").start()
    run_dir = tmp_path / "run"
    try:
        cmd = train_cmd(
            bench,
            f"{method}-gpt-{SUFFIX[bench]}.yaml",
            run_dir,
            server.base_url,
            "--set",
            f"model.tool_protocol={protocol}",
            *(["--set", "benchmark.max_llm_calls=30"] if expert else []),
        )
        if method == "voyager":
            cmd[2] = "speedrunner.benchmarks.crafter.train_voyager"
        proc = run(cmd, timeout=600)
    finally:
        server.stop()
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert [m["rollout"] for m in read_jsonl(run_dir / "metrics.jsonl")] == [1, 2, 3, 4]
    assert (run_dir / "summary.json").is_file()
    calls = read_jsonl(run_dir / "llm_calls.jsonl")
    assert len(calls) == len(server.chat_requests()) > 0  # every answer recorded once
    served = collections.Counter(k.split("/")[1] for k in fake.counts.elements())
    assert sum(n for k, n in served.items() if k != "clean") > 0  # the run met real-model variants
    purposes = {c["purpose"] for c in calls}
    if method in INDUCER or expert:
        assert INDUCER.get(method, "inducer") in purposes
    if expert:  # episodes succeeded, and ASI induced from them
        inductions = [
            n
            for p in sorted((run_dir / "sleep").glob("asi_*.json"))
            for n in json.loads(p.read_text())["inductions"]
        ]
        assert inductions and any(n["added"] for n in inductions)
    if protocol == "native":
        assert all(c.get("tools_offered") for c in calls if c["purpose"] == "inducer")
    # Judged by meaning: at most 1 % of the turns lost to variants that carry one answer.
    audits = audit_run(run_dir, fake)
    turns = sum(a.turns for a in audits.values())
    lost = {role: a.examples for role, a in audits.items() if a.lost["unambiguous"]}
    assert turns > 0 and sum(a.lost["unambiguous"] for a in audits.values()) <= 0.01 * turns, lost
