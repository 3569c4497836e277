"""``benchmarks/real_model.py`` judges a run from what it stored: on ScienceWorld, where any
text reaches the simulator, a turn acted only when the simulator understood the command."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("real_model", REPO / "benchmarks" / "real_model.py")
real_model = sys.modules.setdefault("real_model", importlib.util.module_from_spec(_spec))
_spec.loader.exec_module(real_model)  # (registered first: its dataclasses look their module up)

TEMPLATES = ["open OBJ", "go to LOC", "move OBJ to OBJ", "look around", "focus on OBJ"]


def test_an_action_line_filling_a_template_names_a_listed_command():
    assert real_model.names_a_template("Thought: x\nAction: Go to the kitchen!", TEMPLATES)
    assert real_model.names_a_template("Action: move the agent to the yellow box", TEMPLATES)
    assert real_model.names_a_template("Action: look around", TEMPLATES)
    assert not real_model.names_a_template("Action: walk to the kitchen", TEMPLATES)
    assert not real_model.names_a_template("Action: look around the room", TEMPLATES)
    assert not real_model.names_a_template("Thought: go to kitchen", TEMPLATES)  # no Action line


def _step(raw: str, observation: str, tokens: int) -> dict:
    return {"raw_text": raw, "observation": observation, "executed": [raw.split("Action: ")[-1]],
            "usage": {"output": tokens}}


def test_a_scienceworld_command_the_simulator_did_not_understand_did_not_act(tmp_path):
    run = tmp_path / "run"
    (run / "episodes" / "train").mkdir(parents=True)
    first = "Available actions: " + ", ".join(TEMPLATES) + "\n\nYour task is to boil water.\n\nObservation:\nA hallway."
    (run / "llm_calls.jsonl").write_text(json.dumps({"purpose": "actor", "last_message": first}) + "\n")
    steps = [_step("Action: move the agent to the yellow box", "A hallway.", 20),
             _step("Action: go to kitchen", "No known action matches that input.", 10),
             _step("Action: walk around", "You move to the kitchen.", 30)]
    (run / "episodes" / "train" / "000000.json").write_text(json.dumps(
        {"steps": steps, "final_observation": "No known action matches that input."}))
    row = real_model.audit(run, real_model.Row("scienceworld", "react", "after"))
    assert (row.actor_turns, row.acted) == (3, 1)          # only "go to kitchen" was understood
    assert (row.naming, row.naming_acted) == (2, 1)        # "walk around" fills no template
    assert row.actor_output_tokens == 60
