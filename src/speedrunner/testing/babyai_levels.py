"""Which BabyAI level an actor conversation plays, and the bot's moves from where it stands.

A fake server is not told a run's seed, so it recognises an episode as the test expert
does (the mission and first observation of its first message), among the levels of run
seeds 0 to ``run_seeds - 1`` (default 0-9): a kind's index is built when a mission of that
kind first arrives, for the first ``first_episodes`` episodes of each split, and doubled
when an episode is not found, up to ``max_episodes`` (default 512). After a skill call the
agent's state is no longer known from the actions the conversation shows, so it is found
again: the first agent cell, direction and carried object (in a fixed order) whose
observation text is the one shown; the bot plans afresh from there.
"""

from __future__ import annotations

import itertools
import threading
from dataclasses import dataclass, field
from functools import cache
from typing import Any

__all__ = ["LevelIndex", "bot_moves_from", "kind_of_mission", "locate"]


def kind_of_mission(mission: str) -> str:
    """The task kind whose missions read like ``mission``."""
    if " then " in mission or " after you " in mission:
        return "pick_up_seq_go_to"
    for prefix, kind in (("put ", "putnext"), ("open ", "open"), ("pick up ", "pickup")):
        if mission.startswith(prefix):
            return kind
    return "goto"


@dataclass
class LevelIndex:
    """(mission, first observation) -> (kind, seed), over the episodes of a range of run seeds."""

    run_seeds: int = 10
    first_episodes: int = 32
    max_episodes: int = 512
    _levels: dict[str, dict[tuple[str, str], int]] = field(default_factory=dict)
    _covered: dict[str, int] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def find(self, mission: str, observation: str) -> tuple[str, int] | None:
        """(kind, seed) of the level with this mission and first observation, or None."""
        kind = kind_of_mission(mission)
        with self._lock:  # the server answers requests on several threads
            index = self._levels.setdefault(kind, {})
            while (mission, observation) not in index:
                done = self._covered.get(kind, 0)
                if done >= self.max_episodes:
                    return None
                self._extend(kind, done, min(max(self.first_episodes, 2 * done), self.max_episodes))
            return kind, index[(mission, observation)]

    def _extend(self, kind: str, start: int, stop: int) -> None:
        from speedrunner.benchmarks.babyai.levels import make_level
        from speedrunner.benchmarks.babyai.text import observe
        from speedrunner.core.seeding import episode_seed

        index = self._levels[kind]
        for run_seed, split, i in itertools.product(
            range(self.run_seeds), ("train", "eval"), range(start, stop)
        ):
            seed = episode_seed(run_seed, split, i)
            level = make_level(kind, seed)
            index.setdefault((level.mission, observe(level)[0]), seed)
        self._covered[kind] = stop


def locate(kind: str, seed: int, observation: str) -> Any | None:
    """The level at the state whose observation text is ``observation`` (objects where the
    level put them, bar a carried one), or None when no agent cell, direction and carried
    object shows that text."""
    from speedrunner.benchmarks.babyai.levels import make_level
    from speedrunner.benchmarks.babyai.text import observe

    probe = make_level(kind, seed)
    pickable = [None] + [
        (o.type, o.color) for o in probe.grid.grid if o is not None and o.can_pickup()
    ]
    for carried in pickable:
        level = make_level(kind, seed)
        held = _take(level, carried)
        for x, y in itertools.product(range(level.grid.width), range(level.grid.height)):
            cell = level.grid.get(x, y)
            if cell is not None and not (cell.type == "door" and cell.is_open):
                continue
            for direction in range(4):
                level.agent_pos, level.agent_dir, level.carrying = (x, y), direction, held
                if observe(level)[0] == observation:
                    return level
    return None


def _take(level: Any, carried: tuple[str, str] | None) -> Any | None:
    if carried is None:
        return None
    for obj in level.grid.grid:
        if obj is not None and (obj.type, obj.color) == carried:
            level.grid.set(*obj.cur_pos, None)
            obj.cur_pos = (-1, -1)
            return obj
    return None


@cache
def _cached_moves(kind: str, seed: int, observation: str) -> tuple[str, ...] | None:
    level = locate(kind, seed, observation)
    return None if level is None else bot_moves_from(level)


def bot_moves_from(level: Any, limit: int = 200) -> tuple[str, ...]:
    """The bot's moves from ``level``'s current state to the end of what is left of its
    mission (a step already done — the object of a first "pick up" carried — is dropped)."""
    from minigrid.envs.babyai.core.verifier import AfterInstr, BeforeInstr, PickupInstr
    from minigrid.utils.baby_ai_bot import BabyAIBot

    from speedrunner.benchmarks.babyai.text import ACTIONS

    instrs = level.instrs
    if isinstance(instrs, BeforeInstr | AfterInstr):
        first, then = (
            (instrs.instr_a, instrs.instr_b)
            if isinstance(instrs, BeforeInstr)
            else (instrs.instr_b, instrs.instr_a)
        )
        held = level.carrying
        if (
            isinstance(first, PickupInstr)
            and held is not None
            and (first.desc.type == held.type and first.desc.color in (None, held.color))
        ):
            level.instrs = then
            then.reset_verifier(level)
    bot, moves = BabyAIBot(level), []
    for _ in range(limit):
        try:
            action = int(bot.replan())
        except Exception:  # noqa: BLE001 - the bot gives up on states it cannot plan from
            break
        moves.append(ACTIONS[action])
        _, _, terminated, truncated, _ = level.step(action)
        if terminated or truncated:
            break
    return tuple(moves)


def moves_after_skill(kind: str, seed: int, observation: str) -> tuple[str, ...] | None:
    """The bot's moves from the state a skill call left (found from its observation text)."""
    return _cached_moves(kind, seed, observation)
