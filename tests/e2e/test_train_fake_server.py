"""End to end: `python -m speedrunner.benchmarks.<b>.train` with react and opo, through the
real openai client to a fake OpenAI-compatible server, checking the run directory."""

import json

import pytest

from speedrunner.core.atomic import read_jsonl

from .harness import GUIDE, policy_reply, run, start_server, train_cmd

CASES = [
    ("babyai", "react-gpt-seq.yaml"),
    ("babyai", "opo-gpt-seq.yaml"),
    ("crafter", "react-gpt-crafter.yaml"),
    ("crafter", "opo-gpt-crafter.yaml"),
    ("scienceworld", "react-gpt-t4.yaml"),
    ("scienceworld", "opo-gpt-t3t4.yaml"),
]


@pytest.mark.slow
@pytest.mark.parametrize("bench, config", CASES)
def test_quick_run_writes_a_complete_run_directory(tmp_path, bench, config):
    server = start_server(policy_reply)
    try:
        proc = run(train_cmd(bench, config, tmp_path / "run", server.base_url))
    finally:
        server.stop()
    assert proc.returncode == 0, proc.stderr[-3000:]
    run_dir = tmp_path / "run"
    method = config.split("-")[0]

    metrics = read_jsonl(run_dir / "metrics.jsonl")
    assert [m["rollout"] for m in metrics] == [1, 2, 3, 4]  # quick test: 4 rollouts
    evals = read_jsonl(run_dir / "eval.jsonl")
    assert [e["rollout"] for e in evals] == [0, 4] and all(e["episodes"] == 2 for e in evals)
    if bench == "crafter":  # the benchmark's own summary: the Crafter score over the eval episodes
        assert all(0.0 <= e["benchmark_metrics"]["crafter_score"] <= 100.0 for e in evals)
    calls = read_jsonl(run_dir / "llm_calls.jsonl")
    chat = server.chat_requests()
    assert len(calls) == len(chat) > 0  # every call recorded once
    assert {c["purpose"] for c in calls} == ({"actor", "guide"} if method == "opo" else {"actor"})
    first_prompt = chat[0]["messages"][1]["content"]
    if bench == "scienceworld":  # command templates, not thousands of concrete commands
        assert "focus on OBJ" in first_prompt and "- OBJ: " in first_prompt
    if bench == "babyai":  # what each action does, incl. "pick up" = the cell in front
        assert (
            "- pick up:" in first_prompt
            and "front" in first_prompt.split("- pick up:")[1].splitlines()[0]
        )
    # Sampling parameters are sent explicitly.
    assert all({"temperature", "top_p", "max_tokens"} <= set(body) for body in chat)

    budget_key = "env_actions" if bench == "crafter" else "llm_calls"
    limit = 30 if bench == "crafter" else {"babyai": 6, "scienceworld": 5}[bench]
    for m in metrics:
        assert m[budget_key] <= limit
        assert m["scripted"] is False
        actor_calls = m["llm_calls"]
        # 100 prompt tokens of which 60 cached, 12 output per actor call; prices 1.0/0.1/2.0 per 1M.
        assert m["tokens"] == {
            "input_uncached": 40 * actor_calls,
            "input_cached": 60 * actor_calls,
            "output": 12 * actor_calls,
            "reasoning": 0,
        }
        assert m["cost_episode_usd"] == pytest.approx(
            actor_calls * (40 * 1.0 + 60 * 0.1 + 12 * 2.0) / 1e6
        )
        if method == "opo":  # one guide call per batch of 2: (500*1.0 + 40*2.0)/1e6 shared by 2
            assert m["cost_sleep_share_usd"] == pytest.approx((500 + 80) / 1e6 / 2)
        else:
            assert m["cost_sleep_share_usd"] == 0.0
    assert [m["knowledge_version"] for m in metrics] == (
        [0, 0, 1, 1] if method == "opo" else [0] * 4
    )

    train = sorted((run_dir / "episodes" / "train").glob("*.json"))
    assert [p.stem for p in train] == ["0000", "0001", "0002", "0003"]
    episode = json.loads(train[0].read_text())
    assert episode["steps"] and episode["steps"][0]["raw_text"].startswith("Thought:")
    steps = [s for p in train for s in json.loads(p.read_text())["steps"]]
    invalid = [s for s in steps if s["parsed_action"] is None]
    if (
        bench == "scienceworld"
    ):  # free text: "fly away" reaches the simulator, which answers it itself
        assert not invalid and any(s["executed"] == ["fly away"] for s in steps)
    else:
        assert invalid and all("not a valid action" in s["error"] for s in invalid)
    assert len(list((run_dir / "episodes" / "eval").rglob("*.json"))) == 4
    if method == "opo":
        assert (run_dir / "guide" / "gen_2.md").read_text().startswith(GUIDE[7:30])
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["scripted"] is False and summary["training"]["episodes"] == 4
    checkpoint = json.loads((run_dir / "checkpoint.json").read_text())
    assert checkpoint["completed_batches"] == 2 and checkpoint["metrics_rows"] == 4
    # The run's last line: episodes, success, LLM calls, tokens, what they cost, wall time.
    last = proc.stdout.strip().splitlines()[-1]
    spent = sum(c["spent_usd"] for c in calls)
    assert last.startswith("run summary: 4 training episodes, training success ")
    assert f"| {len(calls)} LLM calls, " in last and f"| spent ${spent:.4f} | wall time " in last
    assert (run_dir / "speedrun.json").exists()
