"""``benchmarks/real_model.py`` judges a run from what it stored: on ScienceWorld, where any
text reaches the simulator, a turn acted only when the simulator understood the command."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("real_model", REPO / "benchmarks" / "real_model.py")
real_model = sys.modules.setdefault("real_model", importlib.util.module_from_spec(_spec))
_spec.loader.exec_module(real_model)  # (registered first: its dataclasses look their module up)


def test_an_action_line_names_a_listed_action_with_its_description_or_alone():
    actions, help_ = ["turn left", "go forward"], {"turn left": "rotate 90 degrees in place"}
    assert real_model.names_listed_action(
        "Action: Turn left (rotate 90 degrees in place)", actions, help_
    )
    assert real_model.names_listed_action("Action: rotate 90 degrees in place", actions, help_)
    assert not real_model.names_listed_action("Action: jump", actions, help_)
    assert not real_model.names_listed_action(
        "Thought: turn left", actions, help_
    )  # no Action line
    # ScienceWorld's commands are whole: more words make another command
    assert real_model.names_listed_action(
        "Action: Go to kitchen.", ["go to kitchen"], {}, whole=True
    )
    assert not real_model.names_listed_action(
        "Action: go to kitchen now", ["go to kitchen"], {}, whole=True
    )


@pytest.mark.slow
def test_a_scienceworld_turn_names_a_valid_command_by_replay_and_acts_only_if_understood(tmp_path):
    """Judged against the real simulator: the valid commands at each step come from replaying
    the episode, and a command the simulator did not understand did not act."""
    from speedrunner.benchmarks.scienceworld.env import ScienceWorldTextEnv

    task, seed = "4-1/train#0", 7
    env = ScienceWorldTextEnv()
    try:
        env.reset(task, seed)
        valid = next(a for a in env.actions if a.startswith("look"))
        reply = env.step(valid).observation.text
    finally:
        env.close()
    run = tmp_path / "run"
    (run / "episodes" / "train").mkdir(parents=True)
    (run / "config.resolved.json").write_text(
        json.dumps(
            {
                "benchmark": {
                    "simplification": "easy",
                    "env_step_limit": 10000,
                    "jvm_options": "-Xmx512m -XX:+UseSerialGC",
                }
            }
        )
    )
    steps = [
        {
            "raw_text": f"Thought: x\nAction: {valid.upper()}.",
            "observation": "start",
            "executed": [valid],
            "usage": {"output": 20},
        },
        {
            "raw_text": "Action: move the agent to the yellow box",
            "observation": reply,
            "executed": ["move the agent to the yellow box"],
            "usage": {"output": 30},
        },
    ]
    (run / "episodes" / "train" / "000000.json").write_text(
        json.dumps(
            {
                "task": task,
                "seed": seed,
                "steps": steps,
                "final_observation": "No known action matches that input.",
            }
        )
    )
    row = real_model.audit(run, real_model.Row("scienceworld", "react", "after"))
    assert (row.actor_turns, row.acted) == (2, 1)
    assert (row.naming, row.naming_acted) == (1, 1)
    assert row.actor_output_tokens == 50
