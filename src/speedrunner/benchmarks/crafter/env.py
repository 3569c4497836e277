"""Crafter as a ``TextEnv``: BALROG action names in, text + structured view out.

Each ``reset(task, seed)`` starts a fresh world from ``seed`` alone (a new
``DeterministicCrafterEnv``, or a copy of the one this process already generated for that
seed: ``start_states.py``), because a second ``reset()`` on one Crafter env mixes an
episode counter into the seed and would give a different world. The same (task, seed)
therefore gives the identical episode in any process. Frames are never rendered: the
text is built from the world directly (see ``text.py``).

Like BALROG's ``CrafterLanguageWrapper``, ``reset`` plays one hidden ``Noop`` before the
first observation, so the same seed starts from the same state (and text) as BALROG's.
That step is the environment's, not the agent's: it is not counted against the episode's
action budget, though Crafter's own step counter (``structured["step"]``, and the
``length`` limit) includes it, as in BALROG.
"""

from __future__ import annotations

from typing import Any

import crafter

from speedrunner.benchmarks.crafter.determinism import DeterministicCrafterEnv
from speedrunner.benchmarks.crafter.start_states import START_STATES
from speedrunner.benchmarks.crafter.text import (
    ACHIEVEMENT_ORDER,
    ACHIEVEMENTS,
    ACTION_DESCRIPTIONS,
    ACTIONS,
    observe,
)
from speedrunner.core.env import Observation, StepResult, TextEnv
from speedrunner.core.names import unknown
from speedrunner.errors import EnvError, InvalidActionError

TASK = "crafter"
HIDDEN_RESET_ACTION = "Noop"
"""What ``reset`` plays before the first observation, as BALROG's wrapper does."""


def achievement_list() -> str:
    """The achievements numbered in BALROG's order, one per line: ``1. Collect Wood``."""
    return "\n".join(
        f"{i}. {name.replace('_', ' ').title()}" for i, name in enumerate(ACHIEVEMENT_ORDER, 1)
    )


INSTRUCTION = (
    "You are playing Crafter, a 2D open-world survival game. Survive (keep health, food, "
    "drink and energy up; eat, drink water, sleep at night, avoid or fight zombies and "
    "skeletons) and get as far as possible by unlocking these "
    f"{len(ACHIEVEMENT_ORDER)} achievements:\n" + achievement_list() + "\n"
    "Pickaxes and swords are made next to a table (iron ones also need a "
    "furnace nearby); you act on the cell you face."
)
_ACTION_INDEX = {name: crafter.constants.actions.index(inner) for name, inner in ACTIONS.items()}
_BY_LOWER = {name.lower(): name for name in ACTIONS}


def resolve_action(action: str) -> int:
    """Crafter's action index for a BALROG action name (case and spacing are forgiven)."""
    name = _BY_LOWER.get(" ".join(action.split()).lower())
    if name is None:
        raise InvalidActionError(unknown("Crafter action", action, ACTIONS))
    return _ACTION_INDEX[name]


class CrafterTextEnv(TextEnv):
    """One Crafter episode at a time; ``progress()`` is unlocked achievements / 22."""

    accepts_free_text = False  # step() refuses anything not in actions (InvalidActionError)

    def __init__(self, *, area: tuple[int, int] = (64, 64), length: int = 10000) -> None:
        self._area = tuple(area)
        self._length = length
        self._env: DeterministicCrafterEnv | None = None
        self._done = False
        self._structured: dict[str, Any] = {}

    def __repr__(self) -> str:
        return f"CrafterTextEnv(area={self._area}, length={self._length})"

    @property
    def instruction(self) -> str:
        return INSTRUCTION

    @property
    def actions(self) -> list[str]:
        return list(ACTIONS)

    @property
    def action_descriptions(self) -> dict[str, str]:
        """One line per action for the actor's prompt (BALROG gives its agent the same)."""
        return dict(ACTION_DESCRIPTIONS)

    @property
    def achievements(self) -> list[str]:
        """Achievements unlocked so far in this episode, sorted."""
        return list(self._structured.get("achievements", []))

    @property
    def success(self) -> bool:
        """Crafter has no single goal; success means all 22 achievements unlocked."""
        return len(self.achievements) == len(ACHIEVEMENTS)

    def progress(self) -> float:
        return len(self.achievements) / len(ACHIEVEMENTS)

    def reset(self, task: str, seed: int) -> Observation:
        if task != TASK:
            raise EnvError(unknown("Crafter task", task, [TASK]))
        self._env, self._done = START_STATES.env(
            self._area, self._length, int(seed), _ACTION_INDEX[HIDDEN_RESET_ACTION]
        )
        return self._observe()

    def step(self, action: str) -> StepResult:
        if self._env is None:
            raise EnvError("CrafterTextEnv.step() before reset(): call reset(task, seed) first")
        if self._done:
            raise EnvError("the Crafter episode is over; call reset(task, seed) to start another")
        index = resolve_action(action)
        _, reward, done, info = self._env.step(index)
        self._done = bool(done)
        observation = self._observe()
        return StepResult(
            observation=observation,
            reward=float(reward),
            done=self._done,
            info={
                "achievements": observation.structured["achievements"],
                "discount": float(info["discount"]),
            },
        )

    def close(self) -> None:
        self._env = None

    def _observe(self) -> Observation:
        text, self._structured = observe(self._env)
        return Observation(text=text, structured=self._structured)
