"""Crafter text env: action mapping, faithfulness to the raw simulator, golden text, metrics.

BALROG parity of the text itself is tested in ``test_crafter_balrog_text.py``."""

from __future__ import annotations

import json
import math
import os
import random
from pathlib import Path

import crafter
import pytest

from speedrunner.benchmarks.crafter import skill_api
from speedrunner.benchmarks.crafter.benchmark import CrafterBenchmark
from speedrunner.benchmarks.crafter.config import CrafterConfig
from speedrunner.benchmarks.crafter.determinism import DeterministicCrafterEnv
from speedrunner.benchmarks.crafter.env import CrafterTextEnv, resolve_action
from speedrunner.benchmarks.crafter.text import (
    ACHIEVEMENT_ORDER,
    ACHIEVEMENTS,
    ACTION_NAMES,
    achievement_success_rates,
    crafter_score,
    observe,
)
from speedrunner.core.env import TextEnv
from speedrunner.core.runtime.actor import render_actions
from speedrunner.core.seeding import episode_seed
from speedrunner.core.skill import local_transport
from speedrunner.errors import EnvError, InvalidActionError

GOLDEN = Path(__file__).parents[1] / "fixtures" / "crafter" / "golden_seed7.json"
SMALL = (32, 32)  # world generation dominates test time; the wrapper does not care about size


def action_script(seed: int, n: int) -> list[str]:
    return random.Random(seed).choices(ACTION_NAMES, k=n)


def test_action_names_map_to_crafter_indices() -> None:
    expected = {
        "Noop": "noop",
        "Move West": "move_left",
        "Move East": "move_right",
        "Move North": "move_up",
        "Move South": "move_down",
        "Do": "do",
        "Sleep": "sleep",
        "Place Table": "place_table",
        "Make Iron Sword": "make_iron_sword",
    }
    assert len(ACTION_NAMES) == 17
    for name, inner in expected.items():
        assert crafter.constants.actions[resolve_action(name)] == inner
    assert resolve_action("  move   west ") == resolve_action("Move West")
    assert sorted(resolve_action(a) for a in ACTION_NAMES) == list(range(17))


def test_invalid_action_lists_valid_ones_and_takes_no_step() -> None:
    """BALROG would play a Noop for an unknown action; we refuse it and the world waits."""
    env = CrafterTextEnv(area=SMALL)
    start = env.reset("crafter", 1).structured["step"]
    with pytest.raises(InvalidActionError, match="Move West") as err:
        env.step("Move Wset")
    assert "did you mean" in str(err.value)
    assert env.step("Noop").observation.structured["step"] == start + 1


def test_reset_plays_one_hidden_noop_like_balrog() -> None:
    """The first observation is the state after one Noop, as BALROG's ``reset`` returns."""
    raw = DeterministicCrafterEnv(seed=3, area=SMALL, render_image=False)
    raw.reset()
    raw.step(resolve_action("Noop"))
    obs = CrafterTextEnv(area=SMALL).reset("crafter", 3)
    assert obs.structured["step"] == 1
    assert (obs.text, obs.structured) == observe(raw)


def test_prompt_describes_every_action_and_numbers_the_achievements() -> None:
    env = CrafterTextEnv(area=SMALL)
    assert list(env.action_descriptions) == ACTION_NAMES
    assert all(d and "\n" not in d for d in env.action_descriptions.values())
    shown = render_actions(env.actions, env.action_descriptions)
    assert "\n- Make Iron Pickaxe: craft an iron pickaxe" in shown
    assert tuple(sorted(ACHIEVEMENT_ORDER)) == ACHIEVEMENTS
    numbered = [line for line in env.instruction.splitlines() if line[:1].isdigit()]
    assert numbered == [
        f"{i}. {a.replace('_', ' ').title()}" for i, a in enumerate(ACHIEVEMENT_ORDER, 1)
    ]
    assert numbered[0] == "1. Collect Wood" and numbered[-1] == "22. Collect Diamond"


def test_achievement_list_matches_package() -> None:
    assert tuple(sorted(crafter.constants.achievements)) == ACHIEVEMENTS
    assert len(ACHIEVEMENTS) == 22


def test_protocol_and_errors() -> None:
    env = CrafterTextEnv()
    assert isinstance(env, TextEnv)
    with pytest.raises(EnvError, match="reset"):
        env.step("Noop")
    with pytest.raises(EnvError, match="unknown Crafter task"):
        env.reset("crafterr", 0)


def test_steps_match_raw_env_step_by_step() -> None:
    """Rewards, done and achievements equal the raw (fixed, rendering) env's, >= 300 steps
    (the raw env plays our reset's hidden Noop itself)."""
    ours, seed, steps = CrafterTextEnv(area=SMALL), 11, 0
    for actions in (action_script(5, 400), action_script(6, 400), action_script(7, 400)):
        raw = DeterministicCrafterEnv(seed=seed, area=SMALL)
        raw.reset()
        raw.step(resolve_action("Noop"))
        ours.reset("crafter", seed)
        for action in actions:
            _, r_raw, d_raw, info = raw.step(resolve_action(action))
            res = ours.step(action)
            steps += 1
            unlocked = sorted(k for k, v in info["achievements"].items() if v > 0)
            assert (res.reward, res.done) == (r_raw, d_raw), f"step {steps}"
            assert res.info["achievements"] == unlocked
            assert res.observation.structured["inventory"] == {
                k: v
                for k, v in info["inventory"].items()
                if k not in ("health", "food", "drink", "energy") and v > 0
            }
            assert res.observation.structured["status"]["health"] == info["inventory"]["health"]
            if res.done:
                break
        seed += 1
    assert steps >= 300


def _play(seed: int, actions: list[str], area: tuple[int, int] = (64, 64)) -> list[dict]:
    env = CrafterTextEnv(area=area)
    rows = [{"action": None, "text": env.reset("crafter", seed).text}]
    for action in actions:
        res = env.step(action)
        rows.append(
            {"action": action, "text": res.observation.text, "reward": res.reward, "done": res.done}
        )
        if res.done:
            break
    return rows


def test_golden_text() -> None:
    actions = [
        "Do",
        "Move West",
        "Move West",
        "Move North",
        "Move North",
        "Move North",
        "Do",
        "Do",
        "Do",
        "Do",
        "Do",
        "Place Table",
        "Make Wood Pickaxe",
        "Move South",
        "Sleep",
        "Noop",
        "Move East",
        "Do",
    ]
    rows = _play(7, actions)
    if os.environ.get("SPEEDRUNNER_REGEN_FIXTURES"):
        GOLDEN.write_text(json.dumps({"seed": 7, "steps": rows}, indent=1) + "\n")
    golden = json.loads(GOLDEN.read_text())
    assert rows == golden["steps"]


def test_same_seed_same_texts_and_reset_restarts_world() -> None:
    env = CrafterTextEnv(area=SMALL)
    actions = action_script(3, 120)
    first = _play(21, actions, SMALL)
    texts = [env.reset("crafter", 21).text]
    texts += [env.step(a).observation.text for a in actions[: len(first) - 1]]
    assert texts == [r["text"] for r in first]
    assert env.reset("crafter", 22).text != first[0]["text"]


def test_structured_is_json_and_agrees_with_text() -> None:
    env = CrafterTextEnv()
    obs = env.reset("crafter", 4)
    json.dumps(obs.structured)
    for item in obs.structured["nearby"]:
        assert f"- {item['name']} {item['distance']} step" in obs.text
    assert f"You face {obs.structured['facing']['name']} at your front." in obs.text
    assert "- health: 9/9" in obs.text and "You have nothing in your inventory." in obs.text
    assert env.progress() == 0.0 and not env.success


def test_progress_and_crafter_score() -> None:
    env = CrafterTextEnv(area=SMALL)
    env.reset("crafter", 7)
    for action in action_script(8, 60):
        if env.step(action).done:
            break
    assert env.progress() == len(env.achievements) / 22
    assert crafter_score([]) == 0.0
    assert crafter_score([ACHIEVEMENTS] * 3) == pytest.approx(100.0)
    rates = achievement_success_rates([["collect_wood"], []])
    assert rates["collect_wood"] == 50.0 and rates["wake_up"] == 0.0
    expected = math.exp((math.log(51.0) + 21 * math.log(1.0)) / 22) - 1
    assert crafter_score([["collect_wood"], []]) == pytest.approx(expected)


def test_skill_api_views_are_pure_functions_of_state() -> None:
    env = CrafterTextEnv(area=SMALL)
    obs = env.reset("crafter", 7)
    handle = skill_api.SkillEnv(local_transport(env), obs.text, obs.structured)
    text = handle.act("Move North")
    assert text == handle.text and handle.state["step"] == obs.structured["step"] + 1
    state = json.loads(json.dumps(handle.state))  # what a sandbox would receive
    assert skill_api.facing(state) == state["facing"]["name"]
    assert skill_api.status(state)["health"] == 9
    assert skill_api.nearest(state, "no-such-thing") is None
    first = skill_api.nearby(state)[0]
    assert skill_api.nearest(state, first["name"]) == first
    distances = [o["distance"] for o in skill_api.nearby(state)]
    assert distances == sorted(distances) and len(distances) == len(state["nearby"])
    assert skill_api.inventory(state) == {} and skill_api.achievements(state) == []


def test_benchmark_specs() -> None:
    bench = CrafterBenchmark(CrafterConfig(area=list(SMALL)), rollouts=20, eval_episodes=5)
    spec = bench.train_episode(3, 4)
    assert (spec.split, spec.index, spec.task, spec.seed) == (
        "train",
        4,
        "crafter",
        episode_seed(3, "train", 4),
    )
    evals = bench.eval_episodes(3)
    assert [e.index for e in evals] == list(range(5)) and {e.split for e in evals} == {"eval"}
    assert evals == bench.eval_episodes(3)
    env = bench.make_env()
    assert env.reset(spec.task, spec.seed).text
    bench.close()
