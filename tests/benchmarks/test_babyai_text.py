"""BALROG-format observation text: hand-checked cases, golden fixtures, determinism,
quiet stdout."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from minigrid.core.grid import Grid
from minigrid.core.world_object import Ball, Box, Door, Key
from minigrid.envs.babyai.core.roomgrid_level import RoomGridLevel
from minigrid.utils.baby_ai_bot import BabyAIBot

from speedrunner.benchmarks.babyai import levels
from speedrunner.benchmarks.babyai.config import TASK_KINDS
from speedrunner.benchmarks.babyai.levels import MixedTrainLocalLevel, make_level
from speedrunner.benchmarks.babyai.text import ACTION_DESCRIPTIONS, ACTIONS, observe, render_text
from speedrunner.errors import UnknownNameError

GOLDEN = Path(__file__).parents[1] / "fixtures" / "babyai" / "observations.json"
GOLDEN_SEEDS = (0, 1, 2)


def _empty_room(agent: tuple[int, int], direction: int) -> MixedTrainLocalLevel:
    """An 8x8 walled room with nothing in it; direction 0=east 1=south 2=west 3=north."""
    level = make_level("goto", 0)
    level.grid = Grid(8, 8)
    level.grid.wall_rect(0, 0, 8, 8)
    level.agent_pos, level.agent_dir, level.carrying = agent, direction, None
    return level


def test_hand_placed_objects_read_as_balrog_does() -> None:
    level = _empty_room((3, 6), 3)  # bottom row, facing north (up)
    level.grid.set(3, 2, Ball("red"))  # dead ahead, 4 forward
    level.grid.set(1, 5, Key("blue"))  # 2 left, 1 forward
    level.grid.set(5, 6, Box("green"))  # level with the agent, 2 right
    level.grid.set(4, 6, None)
    text, structured = observe(level)
    assert text.splitlines() == [
        "a wall 3 steps left",
        "a blue key 2 steps left and 1 step forward",
        "a red ball 4 steps forward",
        "a green box 2 steps right",
    ]
    assert structured["walls"] == {"left": 3}
    assert {(o["color"], o["dx"], o["dy"]) for o in structured["objects"]} == {
        ("blue", -2, 1),
        ("red", 0, 4),
        ("green", 2, 0),
    }
    json.dumps(structured)  # JSON-serializable


def test_walls_carrying_and_doors() -> None:
    level = _empty_room((1, 1), 0)  # top-left corner, facing east
    level.carrying = Ball("purple")
    level.grid.set(3, 2, Door("yellow", is_open=False, is_locked=True))
    level.grid.set(4, 2, Door("grey", is_open=True))
    lines = observe(level)[0].splitlines()
    assert lines[0] == "You carry a purple ball"
    assert lines[1:3] == ["a wall 6 steps forward", "a wall 1 step left"]
    assert "a locked yellow door 1 step right and 2 steps forward" in lines
    assert "a open grey door 1 step right and 3 steps forward" in lines


def test_render_text_omits_parts_like_balrog() -> None:
    view = {
        "carrying": None,
        "walls": {"forward": 1},
        "objects": [
            {"type": "key", "color": "red", "dx": 0, "dy": 1},
            {"type": "door", "color": "blue", "state": "closed", "dx": -1, "dy": 0},
        ],
    }
    assert (
        render_text(view)
        == "a wall 1 step forward\na red key 1 step forward\na closed blue door 1 step left"
    )


def test_pick_up_description_says_in_front() -> None:
    assert ACTIONS == ("turn left", "turn right", "go forward", "pick up", "drop", "toggle")
    assert "in front" in ACTION_DESCRIPTIONS["pick up"]
    assert "below" not in ACTION_DESCRIPTIONS["pick up"]
    # ... and it is true: an object directly ahead is what "pick up" takes.
    level = _empty_room((3, 6), 3)
    level.grid.set(3, 5, Key("red"))
    assert observe(level)[0].splitlines()[-1] == "a red key 1 step forward"
    level.step(ACTIONS.index("pick up"))
    assert observe(level)[0].splitlines()[0] == "You carry a red key"


def _golden_cases() -> list[dict]:
    cases = []
    for kind in TASK_KINDS:
        for seed in GOLDEN_SEEDS:
            level = make_level(kind, seed)
            bot, texts, actions, done = (
                BabyAIBot(make_level(kind, seed)),
                [observe(level)[0]],
                [],
                False,
            )
            while not done:
                action = int(bot.replan())
                bot.mission.step(action)
                _, _, term, trunc, _ = level.step(action)
                actions.append(ACTIONS[action])
                texts.append(observe(level)[0])
                done = term or trunc
            cases.append(
                {
                    "task": kind,
                    "seed": seed,
                    "mission": level.mission,
                    "actions": actions,
                    "observations": texts,
                }
            )
    return cases


def test_golden_observation_texts() -> None:
    cases = _golden_cases()
    if os.environ.get("SPEEDRUNNER_UPDATE_GOLDEN"):
        GOLDEN.parent.mkdir(parents=True, exist_ok=True)
        GOLDEN.write_text(json.dumps(cases, indent=1) + "\n")
    assert cases == json.loads(GOLDEN.read_text()), (
        "observation text changed; if intended, rerun with SPEEDRUNNER_UPDATE_GOLDEN=1 and review "
        "the diff"
    )


_FIRST_OBS = (
    "import json; from speedrunner.benchmarks.babyai.levels import make_level;from "
    "speedrunner.benchmarks.babyai.text import observe;print(json.dumps([[make_level(k, "
    "s).mission, *observe(make_level(k, s))] for k in "
    "['goto','pickup','open','putnext','pick_up_seq_go_to','mixed'] for s in (7, 123456)]))"
)


def test_same_seed_same_first_observation_across_processes() -> None:
    outs = [
        subprocess.run(
            [sys.executable, "-c", _FIRST_OBS],
            capture_output=True,
            text=True,
            check=True,
            env={**os.environ, "PYTHONHASHSEED": str(h)},
        ).stdout
        for h in (1, 2)
    ]
    assert outs[0] == outs[1]
    assert json.loads(outs[0])[0][1] == observe(make_level("goto", 7))[0]


def test_mixed_and_prefixed_task_ids() -> None:
    kinds = {levels.kind_for_seed(s) for s in range(50)}
    assert kinds == set(TASK_KINDS)
    assert make_level("mixed", 11).kind == levels.kind_for_seed(11)
    assert (
        make_level("BabyAI-MixedTrainLocal-v0/putnext", 3).mission
        == make_level("putnext", 3).mission
    )
    with pytest.raises(UnknownNameError, match="did you mean 'pickup'"):
        make_level("pickupp", 0)


def test_missions_have_balrog_shapes() -> None:
    seq = {make_level("pick_up_seq_go_to", s).mission for s in range(20)}
    assert any(", then go to the " in m for m in seq)
    assert any(" after you pick up the " in m for m in seq)
    assert all(make_level("open", s).mission.startswith("open the ") for s in range(5))
    assert all(make_level("putnext", s).mission.startswith("put the ") for s in range(5))


class _UpstreamGen(MixedTrainLocalLevel):
    """Same level with upstream's printing rejection loop, to prove the capfd test bites."""

    _gen_grid = RoomGridLevel._gen_grid


def test_sampling_rejected_never_reaches_stdout(capfd: pytest.CaptureFixture[str]) -> None:
    for seed in range(60):
        _UpstreamGen("putnext").reset(seed=seed)
    assert "Sampling rejected" in capfd.readouterr().out  # upstream does print
    for kind in TASK_KINDS:
        for seed in range(60):
            make_level(kind, seed)
    assert "Sampling rejected" not in capfd.readouterr().out
