"""Crafter's text observation (BALROG/SmartPlay style), its action names and its metrics.

The observation is built from ``env._world`` and ``env._player`` restricted to the 9x7
local view the image shows (4 cells east/west, 3 north/south of the player), so it tells
the agent nothing the pixels do not. Format, one line each::

    You are sleeping.                     (only while asleep)
    You died.                             (only when health reached 0)
    You see:
    - grass 1 step to your west
    - tree 3 steps to your north-west     (nearest cell of each kind, nearest first)
    You face grass at your front.
    Your status:
    - health: 9/9
    - food: 9/9
    - drink: 9/9
    - energy: 9/9
    Your inventory:                       ("You have nothing in your inventory." if empty)
    - wood: 2

Distances are Manhattan (steps), directions compass words: north = up on screen = Crafter's
``-y``; west = ``-x``. Ties in distance go to the cell further north, then further west,
so the text is a pure function of the world. Creatures and placed things (cow, zombie,
skeleton, arrow, plant, ripe plant, fence) are listed alongside materials.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

# BALROG action names -> Crafter's internal names; the dict order is Crafter's action index.
ACTIONS: dict[str, str] = {
    "Noop": "noop",
    "Move West": "move_left",
    "Move East": "move_right",
    "Move North": "move_up",
    "Move South": "move_down",
    "Do": "do",
    "Sleep": "sleep",
    "Place Stone": "place_stone",
    "Place Table": "place_table",
    "Place Furnace": "place_furnace",
    "Place Plant": "place_plant",
    "Make Wood Pickaxe": "make_wood_pickaxe",
    "Make Stone Pickaxe": "make_stone_pickaxe",
    "Make Iron Pickaxe": "make_iron_pickaxe",
    "Make Wood Sword": "make_wood_sword",
    "Make Stone Sword": "make_stone_sword",
    "Make Iron Sword": "make_iron_sword",
}
ACTION_NAMES: list[str] = list(ACTIONS)

ACHIEVEMENTS: tuple[str, ...] = (
    "collect_coal", "collect_diamond", "collect_drink", "collect_iron", "collect_sapling",
    "collect_stone", "collect_wood", "defeat_skeleton", "defeat_zombie", "eat_cow",
    "eat_plant", "make_iron_pickaxe", "make_iron_sword", "make_stone_pickaxe",
    "make_stone_sword", "make_wood_pickaxe", "make_wood_sword", "place_furnace",
    "place_plant", "place_stone", "place_table", "wake_up",
)
STATUS: tuple[str, ...] = ("health", "food", "drink", "energy")
STATUS_MAX = 9

VIEW_RADIUS = (4, 3)  # cells east/west and north/south of the player that the image shows


def _view_offsets() -> tuple[np.ndarray, np.ndarray]:
    """Offsets of the local view without the player's own cell, nearest first."""
    rx, ry = VIEW_RADIUS
    cells = [(dx, dy) for dx in range(-rx, rx + 1) for dy in range(-ry, ry + 1) if dx or dy]
    cells.sort(key=lambda c: (abs(c[0]) + abs(c[1]), c[1], c[0]))
    return np.array([c[0] for c in cells]), np.array([c[1] for c in cells])


_DX, _DY = _view_offsets()


def direction(dx: int, dy: int) -> str:
    """Compass words for an offset in Crafter's grid (``+y`` is south): ``"north-west"``."""
    ns = "north" if dy < 0 else "south" if dy > 0 else ""
    ew = "west" if dx < 0 else "east" if dx > 0 else ""
    return "-".join(part for part in (ns, ew) if part)


def object_name(obj: Any) -> str:
    """What the image shows for a Crafter object (a ripe plant looks different)."""
    name = type(obj).__name__.lower()
    if name == "plant" and obj.ripe:
        return "ripe plant"
    return name


def _nearby(world: Any, pos: np.ndarray) -> list[dict[str, Any]]:
    xs, ys = _DX + int(pos[0]), _DY + int(pos[1])
    inside = (xs >= 0) & (ys >= 0) & (xs < world.area[0]) & (ys < world.area[1])
    order = np.flatnonzero(inside)
    xs, ys = xs[order], ys[order]
    found: dict[str, int] = {}  # name -> index into ``order`` of its nearest cell
    materials = world._mat_map[xs, ys]
    ids, first = np.unique(materials, return_index=True)
    for mat_id, k in zip(ids.tolist(), first.tolist(), strict=True):
        name = world._mat_names[mat_id]
        if name is not None:
            found[name] = k
    objects = world._obj_map[xs, ys]
    for k in np.flatnonzero(objects).tolist():
        name = object_name(world._objects[objects[k]])
        found.setdefault(name, k)
    nearby = []
    for name, k in found.items():
        dx, dy = int(_DX[order[k]]), int(_DY[order[k]])
        nearby.append({"name": name, "dx": dx, "dy": dy, "distance": abs(dx) + abs(dy),
                       "direction": direction(dx, dy)})
    nearby.sort(key=lambda o: (o["distance"], o["dy"], o["dx"], o["name"]))
    return nearby


def observe(env: Any) -> tuple[str, dict[str, Any]]:
    """Text and JSON-able structured view of a (reset) Crafter env's current state."""
    world, player = env._world, env._player
    nearby = _nearby(world, player.pos)
    fx, fy = int(player.facing[0]), int(player.facing[1])
    material, obj = world[(player.pos[0] + fx, player.pos[1] + fy)]
    front = object_name(obj) if obj is not None else (material or "nothing")
    inv = player.inventory
    status = {name: int(inv[name]) for name in STATUS}
    inventory = {k: int(v) for k, v in inv.items() if k not in STATUS and v > 0}
    structured = {
        "step": int(env._step),
        "sleeping": bool(player.sleeping),
        "dead": status["health"] <= 0,
        "nearby": nearby,
        "facing": {"name": front, "dx": fx, "dy": fy, "direction": direction(fx, fy)},
        "status": status,
        "inventory": inventory,
        "achievements": sorted(k for k, v in player.achievements.items() if v > 0),
    }
    return render(structured), structured


def render(structured: dict[str, Any]) -> str:
    """The observation text for a structured view (see the module docstring for the format)."""
    lines = []
    if structured["sleeping"]:
        lines.append("You are sleeping.")
    if structured["dead"]:
        lines.append("You died.")
    if structured["nearby"]:
        lines.append("You see:")
        for o in structured["nearby"]:
            d = o["distance"]
            lines.append(f"- {o['name']} {d} step{'' if d == 1 else 's'} to your {o['direction']}")
    else:
        lines.append("You see nothing around you.")
    lines.append(f"You face {structured['facing']['name']} at your front.")
    lines.append("Your status:")
    lines.extend(f"- {k}: {v}/{STATUS_MAX}" for k, v in structured["status"].items())
    if structured["inventory"]:
        lines.append("Your inventory:")
        lines.extend(f"- {k}: {v}" for k, v in structured["inventory"].items())
    else:
        lines.append("You have nothing in your inventory.")
    return "\n".join(lines)


def achievement_success_rates(episodes: Iterable[Iterable[str]]) -> dict[str, float]:
    """Per-achievement success rate in percent over episodes (each: its unlocked names)."""
    unlocked = [set(e) for e in episodes]
    if not unlocked:
        return {name: 0.0 for name in ACHIEVEMENTS}
    return {name: 100.0 * sum(name in e for e in unlocked) / len(unlocked) for name in ACHIEVEMENTS}


def crafter_score(episodes: Iterable[Iterable[str]]) -> float:
    """Crafter score: ``exp(mean_i ln(1 + s_i)) - 1`` over the 22 success rates ``s_i`` (%)."""
    rates: Sequence[float] = list(achievement_success_rates(episodes).values())
    return math.exp(sum(math.log1p(s) for s in rates) / len(rates)) - 1.0
