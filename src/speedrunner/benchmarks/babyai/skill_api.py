"""What LLM-written BabyAI skills may call.

Two halves, kept apart on purpose:

- ``SkillEnv`` (``speedrunner.core.skill``): the only way to change the world,
  ``act(action) -> text``, with the current ``text``, ``state`` and ``done``. A sandboxed
  skill's ``act`` is a pipe to the parent that owns the env.
- Pure functions over ``Observation.structured`` (a JSON-able dict; see ``text.py``), so
  they can run inside the sandbox on a dict received over that pipe and never see more
  than the actor's text shows. Positions are relative: ``dx`` steps right (negative =
  left), ``dy`` steps forward.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from speedrunner.benchmarks.babyai.text import ACTIONS
from speedrunner.core.skill import SkillEnv

__all__ = [
    "ACTIONS",
    "SeenObject",
    "SkillEnv",
    "carrying",
    "find",
    "in_front",
    "visible_objects",
    "wall_distance",
]

PRIMITIVE_ACTIONS: tuple[str, ...] = tuple(ACTIONS)
"""The env's action words (a skill may not shadow them)."""

# What the inducer is told about ``env.state`` and the geometry (``core/codebook/api_view``);
# checked against ``text.py`` and minigrid by tests/codebook/test_api_view.py.
STATE_LAYOUT = """\
{"carrying": {"type", "color"} or None,
 "walls": {"forward" | "left" | "right": steps},  (only directions whose first non-empty \
cell is a wall)
 "objects": [{"type", "color", "dx", "dy", "state" (doors only: open/closed/locked)}]}
Only what the agent's 7x7 view shows (walls and closed doors block it); the text lists the \
same facts."""
COORDINATES = """\
Egocentric, in steps from the agent: dx > 0 is to its right, dx < 0 to its left; dy > 0 is
ahead (dy = 0: level with the agent). The view covers dx -3..3, dy 0..6, nothing behind.
There is no compass direction and no absolute position: after `turn left` an object at
(dx, dy) is at (dy, -dx); after `turn right` at (-dy, dx); `go forward` (when not blocked)
lowers every dy by 1. `pick up` and `toggle` act on the cell at (0, 1), right in front."""


@dataclass(frozen=True)
class SeenObject:
    """One visible object. ``state`` is ``open``/``closed``/``locked`` for doors, else ``None``."""

    type: str
    color: str
    dx: int
    dy: int
    state: str | None = None

    @property
    def name(self) -> str:
        """``"<color> <type>"``, the way missions name objects (e.g. ``"red ball"``)."""
        return f"{self.color} {self.type}"

    @property
    def distance(self) -> int:
        """Manhattan distance in steps."""
        return abs(self.dx) + self.dy


def visible_objects(structured: dict[str, Any]) -> list[SeenObject]:
    """Every object in view, nearest first."""
    objs = [
        SeenObject(o["type"], o["color"], int(o["dx"]), int(o["dy"]), o.get("state"))
        for o in structured.get("objects", [])
    ]
    return sorted(objs, key=lambda o: (o.distance, o.dx, o.dy))


def find(structured: dict[str, Any], name: str) -> SeenObject | None:
    """The nearest visible object matching ``name`` (``"red ball"``, ``"ball"``, ``"door"``)."""
    words = name.lower().replace("the ", "").split()
    for obj in visible_objects(structured):
        if all(w in (obj.type, obj.color) for w in words):
            return obj
    return None


def in_front(structured: dict[str, Any]) -> SeenObject | None:
    """The object in the cell directly ahead (what ``pick up`` and ``toggle`` act on)."""
    for obj in visible_objects(structured):
        if obj.dx == 0 and obj.dy == 1:
            return obj
    return None


def carrying(structured: dict[str, Any]) -> str | None:
    """``"<color> <type>"`` of the carried object, or ``None``."""
    held = structured.get("carrying")
    return f"{held['color']} {held['type']}" if held else None


def wall_distance(structured: dict[str, Any], direction: str) -> int | None:
    """Steps to the wall ``forward``/``left``/``right`` when the text reports one, else ``None``."""
    return structured.get("walls", {}).get(direction)
