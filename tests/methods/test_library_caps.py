"""Every codebook edit a library cap rejects is counted in the sleep record and the
``SleepResult`` (from there in metrics.jsonl, summary.json and the report)."""

from __future__ import annotations

import json

from tests.methods import test_asi as asi_helpers
from tests.methods import test_speedrunner as sr_helpers


def test_asi_counts_inductions_rejected_by_max_functions_and_keeps_learning_when_uncapped(tmp_path):
    answers = {0: asi_helpers.answer(asi_helpers.TURN_AROUND), 1: asi_helpers.answer(asi_helpers.STEP_BACK)}
    capped, _ = asi_helpers.method(tmp_path / "capped", answers, max_functions=1)
    result = capped.sleep([asi_helpers.episode(0), asi_helpers.episode(1)], batch_index=0)
    record = json.loads((tmp_path / "capped" / "sleep" / "asi_0000.json").read_text())
    assert record["cap_hits"] == {"max_functions": 1, "max_codebook_chars": 0} == result.cap_hits
    assert record["inductions"][1]["cap_hits"] == ["max_functions"]
    assert "method.max_functions" in record["inductions"][1]["rejected"]

    free, _ = asi_helpers.method(tmp_path / "free", answers)
    result = free.sleep([asi_helpers.episode(0), asi_helpers.episode(1)], batch_index=0)
    assert result.cap_hits == {"max_functions": 0, "max_codebook_chars": 0}
    assert sorted(result.knowledge.skills.signatures) == ["step_back", "turn_around"]


def test_speedrunner_counts_edits_rejected_by_max_codebook_chars(tmp_path):
    turns = [sr_helpers.tool("add_function", sr_helpers.TURN_AROUND), sr_helpers.tool("add_function", sr_helpers.STEP),
             sr_helpers.tool("submit")]
    m, _ = sr_helpers.method(tmp_path, turns, max_codebook_chars=300)
    result = m.sleep(sr_helpers.stored(tmp_path, [sr_helpers.episode(0)]), batch_index=0)
    record = json.loads((tmp_path / "sleep" / "batch_0000" / "sleep.json").read_text())
    assert record["cap_hits"] == {"max_functions": 0, "max_codebook_chars": 1} == result.cap_hits
    assert "method.max_codebook_chars" in sr_helpers.turn_record(tmp_path, 0, 1)["result"]
    assert list(result.knowledge.skills.signatures) == ["turn_around"]
