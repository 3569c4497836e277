"""Non-zero counts of the wake and library caps, end to end: an ASI run (in-process, the real
runner and sleep) whose skill calls time out and whose sleeps hit a library cap and the
per-answer cap writes each count in metrics.jsonl, summary.json and the report's
``tables/caps.csv``. The sandbox is a test double that reports a timeout (the sandbox's own
tests kill real skills at the limit); everything after the call is the run's own code."""

from __future__ import annotations

import json
import re

from speedrunner.core.atomic import read_jsonl
from speedrunner.core.reporting import build_report
from speedrunner.core.runtime.skill_call import SkillOutcome
from tests.methods.test_asi import answer
from tests.methods.test_asi_growth import asi_run, function
from tests.reporting.test_report_skill_metrics import table
from tests.runtime.fakes import smart_policy

HANG = '''def hang(env) -> str:
    """Wait for the counter to change by itself (it never does).

    Returns:
        Never returns.
    """
    while not env.done:
        pass
    return env.text
'''


class TimingOutRunner:
    """What the sandbox reports for a call killed at its wall-clock limit."""

    tier = "test-double"

    def call(self, call, *, step, observation, max_actions, timeout_s) -> SkillOutcome:
        tree = {
            "name": call.name,
            "args": [],
            "kwargs": {},
            "calls": [],
            "actions": [],
            "returned": None,
            "error": f"stopped: the call ran past its {timeout_s:g} s limit",
            "prints": "",
            "stopped_by": "timeout",
        }
        return SkillOutcome(tree, error=tree["error"], stopped_by="timeout")

    def close(self) -> None:
        pass


def six_functions(messages, purpose, call_id) -> str:
    """``hang`` and five functions with new names: one more than ``max_functions_per_episode``
    (5)."""
    shown = len(re.findall(r"^def ", messages[-1].content, re.M))
    return answer(
        HANG + "\n\n" + "\n\n".join(function(f"skill_{shown + k}") for k in range(5)), "hang()"
    )


def hang_first(messages, purpose, call_id) -> str:
    """The actor calls ``hang()`` once it is offered, then counts up."""
    if "hang()" in messages[1].content and not any(m.role == "assistant" for m in messages):
        return "Thought: let the skill do it.\nAction: hang()"
    return smart_policy(messages, purpose, call_id)


LIBRARY_CAPS = {"max_functions": 6, "max_codebook_chars": 1000}
"""Each lets the first sleep's first answer in (hang and 4 functions, about 880 characters) and
rejects every later one (9 functions, about 1,400 characters)."""


def test_library_and_timeout_hits_reach_metrics_summary_and_the_caps_table(tmp_path):
    """Per library cap, one run: two batches of two episodes, then three evaluation episodes.
    Sleep 0: the first answer adds ``hang`` and 4 functions (the 6th is beyond the per-answer
    cap), the second is rejected by the library cap; sleep 1 rejects both. Batch 1's episodes
    and the final evaluation's call ``hang`` once each, and each call is killed at the time
    limit."""
    runs = {
        cap: asi_run(
            tmp_path / cap,
            six_functions,
            rollouts=4,
            sleep_every=2,
            actor=hang_first,
            skills=TimingOutRunner,
            max_functions_per_episode=5,
            **{cap: setting},
        )
        for cap, setting in LIBRARY_CAPS.items()
    }
    caps_rows = {
        row["run_id"]: row
        for row in table(build_report(list(runs.values()), tmp_path / "report").out, "caps")
    }
    for cap, run in runs.items():
        rows = read_jsonl(run / "metrics.jsonl")
        assert [r["cap_hits"]["skill_timeout"] for r in rows] == [0, 0, 1, 1]
        assert [r["sleep_cap_hits"][cap] for r in rows] == [1, 1, 2, 2]
        assert [r["sleep_cap_hits"]["max_functions_per_episode"] for r in rows] == [2, 2, 2, 2]
        assert [r["library_public_functions"] for r in rows] == [0, 0, 5, 5]

        expected = {
            "max_skill_actions": 0,
            "skill_timeout": 2,
            "max_iterations_per_world": 0,
            "max_functions": 0,
            "max_codebook_chars": 0,
            "max_functions_per_episode": 4,
            "max_inducer_turns": 0,
            cap: 3,
        }
        summary = json.loads((run / "summary.json").read_text())
        assert summary["cap_hits"] == expected
        assert summary["eval_cap_hits"] == {"max_skill_actions": 0, "skill_timeout": 3}

        row = caps_rows[cap]  # the run's directory name is its id
        assert {k: row[f"train_{k}"] for k in expected} == {
            **{k: str(v) for k, v in expected.items()},
            "max_iterations_per_world": "n/a",
            "max_inducer_turns": "n/a",
        }
        assert (row["eval_skill_timeout"], row["eval_max_skill_actions"]) == ("3", "0")
        assert f"{cap}={LIBRARY_CAPS[cap]}" in row["caps_in_force"]
        assert "max_functions_per_episode=5" in row["caps_in_force"]
