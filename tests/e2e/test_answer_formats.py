"""End to end: a model that writes like a real one (markdown, <think>, cut answers) through
the real openai client and train entry point; what was repaired or lost is counted per role
in summary.json, per phase in the sleep record, and shown in the report."""

import json

from speedrunner.core.llm.provider_scripted import choose_action
from speedrunner.core.reporting import build_report
from speedrunner.testing.fake_llm_server import Reply

from .harness import run, start_server, train_cmd


def realistic(body: dict) -> Reply:
    """Actor turn k: 0 exact, 1 bold labels, 2 cut at max_tokens (no Action line),
    3 <think> + JSON."""
    turns = [(m["role"], m["content"]) for m in body["messages"]]
    if "strategy guide" in turns[0][1]:
        return Reply(
            text="<think>doors matter</think>\n<guide>Open doors first.",
            finish_reason="length",
            prompt_tokens=500,
            completion_tokens=40,
        )
    action = choose_action(turns, "fake") or "go forward"
    turn = sum(role == "assistant" for role, _ in turns) % 4
    text = [
        f"Thought: go.\nAction: {action}",
        f"**Thought:** go.\n**Action:** {action}",
        "Thought: I will first consider every object in the room, starting with",
        f'<think>hm</think>\n{{"thought": "go", "action": "{action}"}}',
    ][turn]
    return Reply(
        text=text,
        finish_reason="length" if turn == 2 else "stop",
        prompt_tokens=100,
        completion_tokens=12,
    )


def test_repaired_lost_and_cut_answers_are_counted_per_role(tmp_path):
    server = start_server(realistic)
    try:
        proc = run(train_cmd("babyai", "opo-gpt-seq.yaml", tmp_path / "run", server.base_url))
    finally:
        server.stop()
    assert proc.returncode == 0, proc.stderr[-3000:]
    run_dir = tmp_path / "run"
    steps = [
        s
        for p in sorted((run_dir / "episodes").rglob("*.json"))
        for s in json.loads(p.read_text())["steps"]
    ]
    forms = {(s["answer_format"], s["finish_reason"]) for s in steps}
    assert forms <= {("ok", "stop"), ("repaired", "stop"), ("lost", "length")} and len(forms) == 3
    cut = [s for s in steps if s["finish_reason"] == "length"]
    assert all("your answer was cut off at max_tokens=" in s["error"] for s in cut)
    summary = json.loads((run_dir / "summary.json").read_text())
    actor = summary["format"]["actor"]
    repaired = sum(s["answer_format"] == "repaired" for s in steps)
    assert actor == {
        "turns": len(steps),
        "ok": len(steps) - repaired - len(cut),
        "repaired": repaired,
        "lost": len(cut),
        "truncated": len(cut),
        "dropped_calls": 0,
        "acted": len(steps) - len(cut),
        "refused": len(cut),
        "skill_calls": 0,
    }
    assert summary["actor_warning"] is None
    guide = summary["format"]["guide"]
    sleeps = sorted((run_dir / "sleep").glob("opo_*.json"))
    assert guide == {
        "turns": len(sleeps),
        "ok": 0,
        "repaired": len(sleeps),
        "lost": 0,
        "truncated": len(sleeps),
        "dropped_calls": 0,
    }
    record = json.loads(sleeps[0].read_text())
    assert record["truncated_turns"] == 1 and record["repairs"] == [
        "no closing </guide> tag"
    ]  # the provider split off <think>
    assert "Open doors first." in (run_dir / "guide" / "gen_1.md").read_text()

    build_report([run_dir], tmp_path / "report")
    table = (tmp_path / "report" / "tables" / "answers.csv").read_text().splitlines()
    assert table[0] == (
        "benchmark,task_set,method,model,seed,run_id,role,turns,ok,repaired,lost,truncated,dropped_calls,"
        "acted,refused,skill_calls"
    )
    assert any(
        f",actor,{actor['turns']},{actor['ok']},{actor['repaired']},{actor['lost']},{actor['truncated']},0,"
        f"{actor['acted']},{actor['refused']},0" in r
        for r in table
    )
