"""Kept Crafter start states: a copy plays exactly as a freshly generated world."""

from __future__ import annotations

import random
import threading
from typing import Any

import crafter
import pytest

from speedrunner.benchmarks.crafter.determinism import DeterministicCrafterEnv
from speedrunner.benchmarks.crafter.env import CrafterTextEnv, resolve_action
from speedrunner.benchmarks.crafter.start_states import StartStates
from speedrunner.benchmarks.crafter.text import ACTION_NAMES, observe

SMALL = (32, 32)
NOOP = resolve_action("Noop")


def _fresh(seed: int, area: tuple[int, int]) -> DeterministicCrafterEnv:
    env = DeterministicCrafterEnv(area=area, seed=seed, render_image=False)
    env.reset()
    env.step(NOOP)
    return env


def _state(env: DeterministicCrafterEnv) -> Any:
    """What the agent sees, and the whole world beneath it."""
    world = env._world
    objects = sorted(
        (type(o).__name__, tuple(int(p) for p in o.pos), o.health) for o in world.objects
    )
    return (
        observe(env),
        world._mat_map.tobytes(),
        objects,
        world.daylight,
        dict(env._player.inventory),
    )


def _trace(env: DeterministicCrafterEnv, seed: int, steps: int) -> list[Any]:
    """Every step's state and outcome along a random action script
    (nights and chunk balancing included)."""
    trace = [_state(env)]
    for name in random.Random(seed).choices(ACTION_NAMES, k=steps):
        _, reward, done, _ = env.step(resolve_action(name))
        trace.append((_state(env), reward, done))
        if done:
            break
    return trace


@pytest.mark.parametrize(("seed", "area"), [(5, (64, 64)), (12, SMALL), (13, SMALL)])
def test_a_kept_start_plays_exactly_like_a_freshly_generated_world(
    seed: int, area: tuple[int, int]
) -> None:
    states = StartStates()
    expected = _trace(_fresh(seed, area), seed, 400)
    first, _ = states.env(area, 10000, seed, NOOP)  # generated here
    assert _trace(first, seed, 400) == expected
    again, done = states.env(
        area, 10000, seed, NOOP
    )  # a copy of the kept start, after one was played
    assert not done
    assert _trace(again, seed, 400) == expected
    assert len(expected) > 140  # creatures balanced 14 times or more
    assert any(state[3] < 0.5 for state, _, _ in expected[1:])  # into the night: the noise draws


def test_repeated_seeds_are_generated_once_and_the_oldest_start_leaves_first(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    generated, loaded = [], []
    generate_world, textures = crafter.worldgen.generate_world, crafter.engine.Textures

    def counted_generate_world(world: Any, player: Any) -> None:
        generated.append(world)
        generate_world(world, player)

    def counted_textures(directory: Any) -> Any:
        loaded.append(directory)
        return textures(directory)

    monkeypatch.setattr(crafter.worldgen, "generate_world", counted_generate_world)
    monkeypatch.setattr(crafter.engine, "Textures", counted_textures)
    states = StartStates(capacity=2)
    for seed in (1, 2, 1, 1, 2):
        states.env(SMALL, 10000, seed, NOOP)
    assert len(generated) == 2  # seeds 1 and 2, once each
    states.env(SMALL, 10000, 3, NOOP)  # evicts seed 1, the least recently used
    states.env(SMALL, 10000, 2, NOOP)
    assert len(generated) == 3
    states.env(SMALL, 10000, 1, NOOP)
    assert len(generated) == 4
    states.env(SMALL, 500, 1, NOOP)  # another episode length is another start
    assert len(generated) == 5
    assert len(loaded) == 2  # textures decoded once per (area, length), not per episode


def test_threads_asking_for_the_same_seeds_all_get_the_fresh_worlds() -> None:
    states, seeds = StartStates(), [20, 21, 22] * 4
    expected = {seed: _trace(_fresh(seed, SMALL), seed, 60) for seed in set(seeds)}
    got: dict[int, list[Any]] = {}
    errors: list[BaseException] = []

    def play(index: int, seed: int) -> None:
        try:
            env, _ = states.env(SMALL, 10000, seed, NOOP)
            got[index] = _trace(env, seed, 60)
        except BaseException as error:  # noqa: BLE001 - reported by the assertion below
            errors.append(error)

    threads = [threading.Thread(target=play, args=(i, s)) for i, s in enumerate(seeds)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    assert all(got[i] == expected[seed] for i, seed in enumerate(seeds))


def test_the_text_env_replays_a_seed_after_other_episodes_identically() -> None:
    env, script = CrafterTextEnv(area=SMALL), random.Random(4).choices(ACTION_NAMES, k=80)

    def play(seed: int) -> list[str]:
        texts = [env.reset("crafter", seed).text]
        texts += [env.step(a).observation.text for a in script]
        return texts

    first = play(31)
    play(32)
    assert play(31) == first
