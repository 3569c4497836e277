"""Format and effect are counted apart: a run of well-formed answers that the env never takes
(what a real small model did: 31 'ok' turns, none acted) says so in every record and loudly
at the end."""

import json

from speedrunner.core.atomic import read_jsonl

from .fakes import PolicyModel, smart_policy
from .test_loop import make_runner


def well_formed_but_invalid(messages, purpose, call_id):
    if purpose != "actor":
        return smart_policy(messages, purpose, call_id)
    return "Thought: I will jump over it.\nAction: jump"


def test_a_run_whose_turns_never_act_says_so_everywhere(tmp_path, capsys):
    runner, _ = make_runner(tmp_path, PolicyModel(well_formed_but_invalid))
    runner.run()
    summary = json.loads((tmp_path / "summary.json").read_text())
    actor = summary["format"]["actor"]
    assert actor["ok"] == actor["turns"] > 0 and actor["lost"] == 0  # the form was fine ...
    assert (actor["acted"], actor["refused"]) == (0, actor["turns"])  # ... and nothing happened
    assert summary["actor_warning"].startswith(
        f"only 0 of {actor['turns']} actor turns made the env act"
    )
    row = read_jsonl(tmp_path / "metrics.jsonl")[0]
    assert row["actor_turns"]["refused"] == row["actor_turns"]["turns"] == row["llm_calls"]
    steps = json.loads(next((tmp_path / "episodes").rglob("*.json")).read_text())["steps"]
    assert {s["effect"] for s in steps} == {"refused"}
    captured = capsys.readouterr()
    assert "WARNING: only 0 of" in captured.err
    assert "env acted 0/" in captured.out


def test_a_run_that_acts_carries_no_warning(tmp_path, capsys):
    runner, _ = make_runner(tmp_path, PolicyModel(smart_policy))
    runner.run()
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["actor_warning"] is None and summary["format"]["actor"]["acted"] > 0
    assert "WARNING" not in capsys.readouterr().err
