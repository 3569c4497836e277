"""What LLM-written Crafter skills may call.

A skill gets a ``SkillEnv``: ``act(name)`` plays one primitive action (a BALROG name
such as ``"Move West"``) and returns the new observation text; ``text`` and ``state``
are the current observation. Everything else here is a pure function of ``state``
(``Observation.structured``, a JSON-able dict), so the same code runs unchanged in a
sandbox subprocess that receives the dict over a pipe while the env stays in the parent.
Offsets follow Crafter's grid: ``dx > 0`` is east, ``dy > 0`` is south.
"""

from __future__ import annotations

from typing import Any

from speedrunner.benchmarks.crafter.text import ACTION_NAMES
from speedrunner.core.skill import SkillEnv, State

__all__ = [
    "ACTION_NAMES",
    "SkillEnv",
    "achievements",
    "facing",
    "inventory",
    "nearby",
    "nearest",
    "status",
]

PRIMITIVE_ACTIONS: tuple[str, ...] = tuple(ACTION_NAMES)
"""The env's action words (a skill may not shadow them)."""

# What the inducer is told about ``env.state`` and the geometry (``core/codebook/api_view``);
# checked against ``text.py`` and Crafter by tests/codebook/test_api_view.py.
STATE_LAYOUT = """\
{"step": int, "sleeping": bool, "dead": bool,
 "nearby": [{"name", "dx", "dy", "distance", "direction"}],  (nearest cell of each kind in view)
 "facing": {"name", "dx", "dy", "direction"},  (the cell in front; dx, dy is the facing offset)
 "status": {"health", "food", "drink", "energy": 0..9},
 "inventory": {item: count > 0}, "achievements": [names unlocked so far, sorted]}
The text shows the same facts ("You see:", "You face ...", status, inventory)."""
COORDINATES = """\
Offsets from the player on Crafter's grid: dx > 0 is east, dx < 0 west; dy > 0 is south,
dy < 0 north (north is up on screen). The view covers dx -4..4, dy -3..3. distance is
|dx| + |dy| (steps); direction is compass words ("north-west"). `Move North` etc. turn the
player to face that way and step there only if the cell is free (grass, sand or path, no creature);
`Do` and `Place ...` act on the faced cell, so e.g. a tree at distance 1 is collected by
moving towards it (which turns you to face it) and then `Do`."""


def nearby(state: State) -> list[dict[str, Any]]:
    """Every kind of thing in view, nearest first: ``{name, dx, dy, distance, direction}``.

    The observation lists them in BALROG's scan order instead; skills get them sorted by
    distance (ties keep the text's order) so "the closest thing" is simply ``[0]``."""
    return sorted(state["nearby"], key=lambda o: o["distance"])


def nearest(state: State, name: str) -> dict[str, Any] | None:
    """The nearest visible ``name`` (e.g. ``"tree"``, ``"cow"``) or ``None`` if out of view."""
    return next((o for o in state["nearby"] if o["name"] == name), None)


def facing(state: State) -> str:
    """What is on the cell in front of the player (material or creature name)."""
    return state["facing"]["name"]


def status(state: State) -> dict[str, int]:
    """Health, food, drink and energy, each 0..9."""
    return dict(state["status"])


def inventory(state: State) -> dict[str, int]:
    """Items held (only those with a positive count)."""
    return dict(state["inventory"])


def achievements(state: State) -> list[str]:
    """Achievements unlocked so far this episode."""
    return list(state["achievements"])
