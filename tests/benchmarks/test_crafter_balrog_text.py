"""Our Crafter text against BALROG's: a recorded fixture, and the rules behind it.

``crafter_balrog_text.jsonl.gz`` holds 20 worlds recorded from BALROG's Crafter env (world
seed S, creature balancing in position order, as ``DeterministicCrafterEnv`` does): its
first observation (after its hidden Noop) and up to 147 steps, each with BALROG's text,
reward, done, inventory and achievements.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np

from speedrunner.benchmarks.crafter.env import CrafterTextEnv
from speedrunner.benchmarks.crafter.text import DIED, SLEEPING, STATUS, VIEW_RADIUS, observe, render

FIXTURE = Path(__file__).parents[1] / "fixtures" / "crafter" / "crafter_balrog_text.jsonl.gz"
BALROG_EMPTY_VIEW = "You see nothing away from you.\n\nYou face nothing at your front."
MIN_MATCH = 0.98


def load_fixture() -> list[dict[str, Any]]:
    with gzip.open(FIXTURE, "rt") as f:
        return [json.loads(line) for line in f]


def balrog_view_is_broken(pos: Any) -> bool:
    """BALROG slices its map ``[x-4 : x+5, y-3 : y+4]``; a negative start wraps around and
    the slice comes back empty, so near the west or north edge it sees nothing."""
    return int(pos[0]) < VIEW_RADIUS[0] or int(pos[1]) < VIEW_RADIUS[1]


def _replay(world: dict[str, Any]) -> list[tuple[str, str, bool]]:
    """(our text, BALROG's text, BALROG's view broken) per state: reset, then every step,
    checking reward, done, inventory and achievements against the recording on the way."""
    env = CrafterTextEnv()
    obs = env.reset("crafter", world["seed"])
    states = [(obs.text, world["reset_text"], balrog_view_is_broken(env._env._player.pos))]
    for i, step in enumerate(world["steps"]):
        res = env.step(step["action"])
        where = f"seed {world['seed']} step {i}"
        assert (res.reward, res.done) == (step["reward"], step["done"]), where
        structured = res.observation.structured
        held = {k: v for k, v in step["inventory"].items() if k not in STATUS and v > 0}
        assert structured["inventory"] == held, where
        assert structured["status"] == {k: step["inventory"][k] for k in STATUS}, where
        assert structured["achievements"] == sorted(step["achievements"]), where
        states.append(
            (res.observation.text, step["text"], balrog_view_is_broken(env._env._player.pos))
        )
    return states


def test_text_matches_balrog_on_recorded_worlds() -> None:
    """Every recorded state compared; the edge-of-map bug states are counted and excluded."""
    compared = identical = excluded = 0
    mismatches: list[str] = []
    for world in load_fixture():
        for ours, theirs, broken in _replay(world):
            if broken:
                assert theirs.startswith(BALROG_EMPTY_VIEW), theirs  # the bug, nothing else
                excluded += 1
                continue
            compared += 1
            identical += ours == theirs
            if ours != theirs and len(mismatches) < 3:
                mismatches.append(f"ours:\n{ours}\nBALROG:\n{theirs}")
    rate = identical / compared
    summary = (
        f"BALROG text match: {identical}/{compared} states identical ({100 * rate:.1f}%); "
        f"{excluded} edge-of-map states excluded"
    )
    print(summary)
    assert compared > 0
    assert rate >= MIN_MATCH, summary + "\n\n" + "\n\n".join(mismatches)


class Cow:
    """Stands in for ``crafter.objects.Cow`` (the text uses the class name)."""


class Plant:
    def __init__(self, ripe: bool) -> None:
        self.ripe = ripe


def stub_env(
    area: tuple[int, int],
    pos: tuple[int, int],
    facing: tuple[int, int] = (0, 1),
    materials: dict[tuple[int, int], str] | None = None,
    objects: dict[tuple[int, int], object] | None = None,
) -> SimpleNamespace:
    """A world of grass with the given materials and objects; just what ``observe`` reads."""
    names = [None, "grass", "sand", "tree", "water"]
    mat_map = np.full(area, names.index("grass"), dtype=np.uint8)
    for cell, name in (materials or {}).items():
        mat_map[cell] = names.index(name)
    obj_map = np.zeros(area, dtype=np.uint32)
    placed: list[object | None] = [None]
    for cell, obj in (objects or {}).items():
        obj_map[cell] = len(placed)
        placed.append(obj)
    world = SimpleNamespace(
        area=area,
        _mat_map=mat_map,
        _mat_names=dict(enumerate(names)),
        _obj_map=obj_map,
        _objects=placed,
    )
    inventory = {"health": 9, "food": 9, "drink": 9, "energy": 9, "wood": 0}
    player = SimpleNamespace(
        pos=np.array(pos),
        facing=np.array(facing),
        sleeping=False,
        inventory=inventory,
        achievements={},
    )
    return SimpleNamespace(_world=world, _player=player, _step=1)


def test_listing_follows_column_scan_and_ties_go_west() -> None:
    """Kinds appear in the order the west-to-east column scan meets them; of two cells at the
    same distance the west-most wins; a creature hides the ground it stands on."""
    env = stub_env(
        (20, 20),
        (10, 10),
        materials={(11, 9): "tree", (9, 11): "tree", (6, 10): "water", (10, 12): "sand"},
        objects={(10, 12): Cow()},
    )
    text, structured = observe(env)
    assert text.startswith(
        "You see:\n- grass 1 step to your west\n- water 4 steps to your west\n"
        "- tree 2 steps to your south-west\n- cow 2 steps to your south\n\n"
        "You face grass at your front.\n\nYour status:\n- health: 9/9\n"
    )
    assert text.endswith("- energy: 9/9\n\nYou have nothing in your inventory.")
    assert [o["name"] for o in structured["nearby"]] == ["grass", "water", "tree", "cow"]
    json.dumps(structured)


def test_a_ripe_plant_reads_plant_as_in_balrog() -> None:
    env = stub_env((20, 20), (10, 10), facing=(1, 0), objects={(11, 10): Plant(ripe=True)})
    text, _ = observe(env)
    assert "- plant 1 step to your east" in text and "You face plant at your front." in text


def test_near_the_north_west_corner_the_view_is_described() -> None:
    """BALROG sees nothing here (its bug); we list what the image shows."""
    env = stub_env((20, 20), (1, 0), facing=(-1, 0), materials={(0, 0): "tree", (3, 2): "water"})
    text, structured = observe(env)
    assert text.startswith(
        "You see:\n- tree 1 step to your west\n- grass 1 step to your south\n"
        "- water 4 steps to your south-east\n\nYou face tree at your front."
    )
    assert all(o["dx"] >= -1 and o["dy"] >= 0 for o in structured["nearby"])


def test_only_one_condition_sentence_and_sleep_wins() -> None:
    """BALROG checks sleep first, so a player who dies asleep is only "sleeping"; the
    sentence is followed by three blank lines, as in BALROG's text."""
    _, structured = observe(stub_env((20, 20), (10, 10)))
    awake = render(structured)
    assert awake.startswith("You see:")
    asleep_dead = render({**structured, "sleeping": True, "dead": True})
    assert asleep_dead == f"{SLEEPING}\n\n\n\n{awake}" and DIED not in asleep_dead
    assert render({**structured, "dead": True}) == f"{DIED}\n\n\n\n{awake}"
