"""Every time a sleep-phase cap binds it is counted in the sleep record and the
``SleepResult`` (from there in metrics.jsonl, summary.json and the report): each codebook
edit a library cap rejects, each ASI answer cut at ``max_functions_per_episode``, each
SpeedRunner phase ended by ``max_inducer_turns``."""

from __future__ import annotations

import json

from tests.methods import test_asi as asi_helpers
from tests.methods import test_speedrunner as sr_helpers


def test_asi_counts_inductions_rejected_by_max_functions_and_keeps_learning_when_uncapped(tmp_path):
    answers = {
        0: asi_helpers.answer(asi_helpers.TURN_AROUND),
        1: asi_helpers.answer(asi_helpers.STEP_BACK),
    }
    capped, _ = asi_helpers.method(tmp_path / "capped", answers, max_functions=1)
    result = capped.sleep([asi_helpers.episode(0), asi_helpers.episode(1)], batch_index=0)
    record = json.loads((tmp_path / "capped" / "sleep" / "asi_0000.json").read_text())
    assert (
        record["cap_hits"]
        == {
            "max_functions": 1,
            "max_codebook_chars": 0,
            "max_functions_per_episode": 0,
            "max_inducer_turns": 0,
        }
        == result.cap_hits
    )
    assert record["inductions"][1]["cap_hits"] == ["max_functions"]
    assert "method.max_functions" in record["inductions"][1]["rejected"]

    free, _ = asi_helpers.method(tmp_path / "free", answers)
    result = free.sleep([asi_helpers.episode(0), asi_helpers.episode(1)], batch_index=0)
    assert result.cap_hits == {
        "max_functions": 0,
        "max_codebook_chars": 0,
        "max_functions_per_episode": 0,
        "max_inducer_turns": 0,
    }
    assert sorted(result.knowledge.skills.signatures) == ["step_back", "turn_around"]


def test_speedrunner_counts_edits_rejected_by_max_codebook_chars(tmp_path):
    turns = [
        sr_helpers.tool("add_function", sr_helpers.TURN_AROUND),
        sr_helpers.tool("add_function", sr_helpers.STEP),
        sr_helpers.tool("submit"),
    ]
    m, _ = sr_helpers.method(tmp_path, turns, max_codebook_chars=300)
    result = m.sleep(sr_helpers.stored(tmp_path, [sr_helpers.episode(0)]), batch_index=0)
    record = json.loads((tmp_path / "sleep" / "batch_0000" / "sleep.json").read_text())
    assert (
        record["cap_hits"]
        == {
            "max_functions": 0,
            "max_codebook_chars": 1,
            "max_functions_per_episode": 0,
            "max_inducer_turns": 0,
        }
        == result.cap_hits
    )
    assert "method.max_codebook_chars" in sr_helpers.turn_record(tmp_path, 0, 1)["result"]
    assert list(result.knowledge.skills.signatures) == ["turn_around"]


def test_asi_counts_an_answer_cut_at_max_functions_per_episode_and_names_what_it_ignored(tmp_path):
    functions = "\n\n".join(
        asi_helpers.TURN_AROUND.replace("turn_around", f"turn_{k}") for k in range(3)
    )
    asi, _ = asi_helpers.method(
        tmp_path,
        {0: asi_helpers.answer(functions), 1: asi_helpers.answer(asi_helpers.STEP_BACK)},
        max_functions_per_episode=2,
    )
    result = asi.sleep([asi_helpers.episode(0), asi_helpers.episode(1)], batch_index=0)
    record = json.loads((tmp_path / "sleep" / "asi_0000.json").read_text())
    first, second = record["inductions"]
    assert (first["added"], first["beyond_cap"], first["cap_hits"]) == (
        ["turn_0", "turn_1"],
        ["turn_2"],
        ["max_functions_per_episode"],
    )
    assert second["cap_hits"] == [] and "beyond_cap" not in second
    assert (
        record["cap_hits"]["max_functions_per_episode"]
        == result.cap_hits["max_functions_per_episode"]
        == 1
    )
    assert sorted(result.knowledge.skills.signatures) == ["step_back", "turn_0", "turn_1"]


def test_speedrunner_counts_a_phase_that_ran_out_of_turns_not_one_that_submitted(tmp_path):
    turns = [sr_helpers.tool("add_function", sr_helpers.TURN_AROUND), "Tool: view_codebook"]
    out, _ = sr_helpers.method(tmp_path / "out", turns, max_inducer_turns=2)
    result = out.sleep(sr_helpers.stored(tmp_path / "out", [sr_helpers.episode(0)]), batch_index=0)
    record = json.loads((tmp_path / "out" / "sleep" / "batch_0000" / "sleep.json").read_text())
    assert record["ended_by"] == "out_of_turns"
    assert record["cap_hits"]["max_inducer_turns"] == result.cap_hits["max_inducer_turns"] == 1

    done, _ = sr_helpers.method(
        tmp_path / "done", [turns[0], sr_helpers.tool("submit")], max_inducer_turns=2
    )
    result = done.sleep(
        sr_helpers.stored(tmp_path / "done", [sr_helpers.episode(0)]), batch_index=0
    )
    assert result.cap_hits["max_inducer_turns"] == 0
