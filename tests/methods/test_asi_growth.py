"""ASI's library is not capped by default: an inducer that adds 5 functions per successful
episode takes it past 160 functions (the paper's ASI library size), and it keeps learning.
Under the caps every run had before (40 functions) it stops at 40, and every rejected
induction is counted as a ``max_functions`` cap hit. Through a whole run (the runner, its
files and the report), the actor's skill-API prompt grows with the library."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

import pytest

from speedrunner.core.atomic import read_jsonl
from speedrunner.core.config.schema import BenchmarkConfig, RunConfig, RunSection
from speedrunner.core.method import MethodContext, SkillSupport
from speedrunner.core.reporting import build_report
from speedrunner.core.rundir import RUN_FORMAT
from speedrunner.core.runtime.loop import Runner
from speedrunner.core.runtime.skill_call import SkillRunner
from speedrunner.core.trajectory import ReplayResult
from speedrunner.methods.wake_sleep.asi import ASIMethod
from speedrunner.methods.wake_sleep.configs import ASIConfig
from tests.methods.test_asi import API, answer, episode, method
from tests.reporting.test_report_skill_metrics import table
from tests.runtime.fakes import CounterBenchmark, PolicyModel, smart_policy

PER_EPISODE, EPISODES, BATCH = 5, 36, 6


def function(name: str) -> str:
    return (
        f'def {name}(env) -> str:\n    """Turn left (skill {name}).\n\n'
        '    Returns:\n        The observation.\n    """\n'
        f'    return env.act("turn left")\n'
    )


def five_new(messages, purpose, call_id) -> str:
    """Five functions with names not yet in the codebook the prompt shows (all a model reads)."""
    shown = len(re.findall(r"^def ", messages[-1].content, re.M))
    names = [f"skill_{shown + k}" for k in range(PER_EPISODE)]
    return answer("".join(function(n) for n in names), f"{names[0]}()")


def grow(tmp_path, **config):
    asi, _ = method(tmp_path, {}, **config)
    asi.model.policy = five_new
    sizes, hits = [], []
    for b in range(EPISODES // BATCH):
        result = asi.sleep([episode(b * BATCH + i, version=b) for i in range(BATCH)], batch_index=b)
        sizes.append(len(result.knowledge.skills.signatures) if result.knowledge.skills else 0)
        hits.append(result.cap_hits["max_functions"])
    return asi, sizes, hits


def test_uncapped_asi_passes_160_functions_and_keeps_learning(tmp_path):
    asi, sizes, hits = grow(tmp_path)
    assert sizes == [30, 60, 90, 120, 150, 180] and sizes[-1] > 160
    assert hits == [0] * len(sizes)
    last = json.loads((tmp_path / "sleep" / "asi_0005.json").read_text())
    assert all(len(i["added"]) == PER_EPISODE for i in last["inductions"])  # still adding, at 180
    assert len(re.findall(r"^def ", (tmp_path / "codebook" / "gen_6.py").read_text(), re.M)) == 180


def test_under_the_old_cap_it_stops_at_40_and_every_rejection_is_counted(tmp_path):
    _, sizes, hits = grow(tmp_path, max_functions=40)
    assert sizes == [30, 40, 40, 40, 40, 40]
    # batch 1: two inductions fit (35, 40), the other four are rejected
    assert hits == [
        0,
        4,
        6,
        6,
        6,
        6,
    ]


def asi_run(
    run_dir: Path,
    inducer: Callable[..., str],
    *,
    rollouts: int,
    sleep_every: int,
    actor: Callable[..., str] = smart_policy,
    skills: Callable[[], SkillRunner] | None = None,
    **config,
) -> Path:
    """A whole ASI run in-process on the counting game: the real runner, ASI's sleep (skill
    validation with the smoke test faked) and run files, evaluated at 0 and at the end, with
    ``config.resolved.json`` as a train entry point writes it, so the report reads it."""
    run_config = RunConfig(
        run=RunSection(
            rollouts=rollouts,
            sleep_every=sleep_every,
            eval_every=rollouts,
            eval_episodes=3,
            parallel_episodes=1,
        ),
        method=ASIConfig(**config),
        benchmark=BenchmarkConfig(name="counter", task_set="count", max_llm_calls=6),
    )
    support = SkillSupport(
        api_module=API,
        api_names=(),
        primitives=("inc", "dec", "noop"),
        open_skills=lambda _: skills() if skills else None,
        smoke_test=lambda source: None,
        replay=lambda *a: ReplayResult(success=True),
        sandbox_tier="test-double",
    )

    def answers(messages, purpose, call_id) -> str:
        return (
            actor(messages, purpose, call_id)
            if purpose == "actor"
            else inducer(messages, purpose, call_id)
        )

    model = PolicyModel(answers)
    asi = ASIMethod(
        run_config.method,
        MethodContext(run_dir=run_dir, inducer=model, benchmark="counter", skills=support),
    )
    Runner(
        run_config,
        run_dir,
        benchmark=CounterBenchmark(),
        method=asi,
        actor=model,
        run_id=run_dir.name,
        scripted=False,
        skill_support=support,
    ).run()
    (run_dir / "config.resolved.json").write_text(json.dumps(run_config.model_dump(mode="json")))
    (run_dir / "provenance.json").write_text(
        json.dumps({"run_format": RUN_FORMAT, "run_id": run_dir.name})
    )
    return run_dir


@pytest.mark.slow  # about 15 s: each induction validates the whole library, up to 210 functions
def test_the_skill_api_in_every_actor_prompt_grows_with_the_library_in_metrics_and_the_report(
    tmp_path,
):
    run = asi_run(tmp_path / "asi", five_new, rollouts=42, sleep_every=BATCH)
    rows = read_jsonl(run / "metrics.jsonl")
    played = {
        r["knowledge_version"]: (r["library_public_functions"], r["skill_api_tokens"]) for r in rows
    }
    # past 160, still adding
    assert [n for n, _ in played.values()] == [
        0,
        30,
        60,
        90,
        120,
        150,
        180,
    ]
    tokens = [t for _, t in played.values()]
    assert tokens[0] == 0 and all(b > a for a, b in zip(tokens, tokens[1:], strict=False))
    assert tokens[-1] > 5 * tokens[1]  # 180 signatures with docstrings, not a constant

    report = build_report([run], tmp_path / "report")
    knowledge = {int(r["generation"]): r for r in table(report.out, "knowledge")}
    shown = [float(knowledge[g]["skill_api_tokens_mean"]) for g in range(8)]
    # generation 7 (210 functions): the final evaluation
    assert shown[:7] == tokens and shown[7] > shown[6]
    assert float(knowledge[7]["public_functions_mean"]) == 210
    [group] = report.groups  # what the figure draws: one point per generation, rising
    drawn = [(g, stats["skill_api_tokens"].mean) for g, stats in group.knowledge]
    assert drawn == list(enumerate(shown))
    assert "skill_api_tokens" in [p.name for p in report.plots]
