"""Crafter's text observation, identical to BALROG's, plus action names and metrics.

The observation is built from ``env._world`` and ``env._player`` restricted to the 9x7
local view the image shows (4 cells east/west, 3 north/south of the player), so it tells
the agent nothing the pixels do not. The text follows BALROG's ``CrafterLanguageWrapper``
(its default settings) character for character, so results compare with BALROG's::

    You see:
    - grass 1 step to your west
    - tree 3 steps to your north-west
                                          (blank lines separate the sections)
    You face grass at your front.

    Your status:
    - health: 9/9
    - food: 9/9
    - drink: 9/9
    - energy: 9/9

    Your inventory:                       ("You have nothing in your inventory." if empty)
    - wood: 2

"You see nothing away from you." replaces the list when nothing is in view. While asleep
the text opens with ``SLEEPING`` and three blank lines (BALROG ends that sentence with a
blank line and adds another); after death with ``DIED`` the same way (not when asleep too:
BALROG then prints only the sleeping sentence).

What is listed is what BALROG's semantic map shows: a creature or plant hides the ground
it stands on, and a plant is "plant" ripe or not. Each kind appears once, at its nearest
cell; kinds are listed in the order BALROG's column scan first meets them (west to east,
each column north to south), and a distance tie goes to the cell met first (west-most,
then north-most). Distances are Manhattan (steps), directions compass words: north = up
on screen = Crafter's ``-y``; west = ``-x``.

One difference is on purpose: within 4 cells of the west edge or 3 of the north edge
BALROG's slice of the map comes back empty and it says "You see nothing away from you.
You face nothing at your front."; we describe the view that is there.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

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

ACTION_DESCRIPTIONS: dict[str, str] = {
    "Noop": "wait: do nothing this turn",
    "Move West": "walk one cell west over flat ground (grass, sand or path)",
    "Move East": "walk one cell east over flat ground (grass, sand or path)",
    "Move North": "walk one cell north over flat ground (grass, sand or path)",
    "Move South": "walk one cell south over flat ground (grass, sand or path)",
    "Do": "use the cell in front of you: gather its material, drink the water, or strike the "
    "creature there",
    "Sleep": "go to sleep; worth it only when energy is below its maximum",
    "Place Stone": "put a stone down in front of you",
    "Place Table": "put a table down",
    "Place Furnace": "put a furnace down",
    "Place Plant": "plant a sapling",
    "Make Wood Pickaxe": "craft a wood pickaxe (needs a table nearby and wood in your inventory)",
    "Make Stone Pickaxe": "craft a stone pickaxe (needs a table nearby, and wood and stone in "
    "your inventory)",
    "Make Iron Pickaxe": "craft an iron pickaxe (needs a table and a furnace nearby, and wood, "
    "coal and iron in your inventory)",
    "Make Wood Sword": "craft a wood sword (needs a table nearby and wood in your inventory)",
    "Make Stone Sword": "craft a stone sword (needs a table nearby, and wood and stone in your "
    "inventory)",
    "Make Iron Sword": "craft an iron sword (needs a table and a furnace nearby, and wood, coal "
    "and iron in your inventory)",
}
"""One line per action for the actor's prompt: what BALROG's prompt says each action does,
in our words."""

ACHIEVEMENTS: tuple[str, ...] = (
    "collect_coal",
    "collect_diamond",
    "collect_drink",
    "collect_iron",
    "collect_sapling",
    "collect_stone",
    "collect_wood",
    "defeat_skeleton",
    "defeat_zombie",
    "eat_cow",
    "eat_plant",
    "make_iron_pickaxe",
    "make_iron_sword",
    "make_stone_pickaxe",
    "make_stone_sword",
    "make_wood_pickaxe",
    "make_wood_sword",
    "place_furnace",
    "place_plant",
    "place_stone",
    "place_table",
    "wake_up",
)
ACHIEVEMENT_ORDER: tuple[str, ...] = (
    "collect_wood",
    "place_table",
    "eat_cow",
    "collect_sapling",
    "collect_drink",
    "make_wood_pickaxe",
    "make_wood_sword",
    "place_plant",
    "defeat_zombie",
    "collect_stone",
    "place_stone",
    "eat_plant",
    "defeat_skeleton",
    "make_stone_pickaxe",
    "make_stone_sword",
    "wake_up",
    "place_furnace",
    "collect_coal",
    "collect_iron",
    "make_iron_pickaxe",
    "make_iron_sword",
    "collect_diamond",
)
"""The achievements in the order BALROG's prompt numbers them (roughly the tech tree)."""
STATUS: tuple[str, ...] = ("health", "food", "drink", "energy")
STATUS_MAX = 9

SLEEPING = "You are sleeping, and will not be able take actions until energy is full."
"""BALROG's sentence, its grammar included ("able take"), so the texts stay identical."""
DIED = "You died."

VIEW_RADIUS = (4, 3)  # cells east/west and north/south of the player that the image shows

# The local view's offsets in BALROG's scan order: columns west to east, each north to
# south. The order decides both the listing order and which cell wins a distance tie.
SCAN_ORDER: tuple[tuple[int, int], ...] = tuple(
    (dx, dy)
    for dx in range(-VIEW_RADIUS[0], VIEW_RADIUS[0] + 1)
    for dy in range(-VIEW_RADIUS[1], VIEW_RADIUS[1] + 1)
    if dx or dy
)


def direction(dx: int, dy: int) -> str:
    """Compass words for an offset in Crafter's grid (``+y`` is south): ``"north-west"``."""
    ns = "north" if dy < 0 else "south" if dy > 0 else ""
    ew = "west" if dx < 0 else "east" if dx > 0 else ""
    return "-".join(part for part in (ns, ew) if part)


def object_name(obj: Any) -> str:
    """A Crafter object's name as BALROG's semantic map gives it: the class name, so a ripe
    plant is "plant" too (the map does not tell them apart)."""
    return type(obj).__name__.lower()


def cell_name(world: Any, x: int, y: int) -> str | None:
    """What the semantic map shows at ``(x, y)``: the object there, else the material
    (``None`` outside the world). An object hides the ground under it."""
    if not (0 <= x < world.area[0] and 0 <= y < world.area[1]):
        return None
    index = world._obj_map[x, y]
    if index:
        return object_name(world._objects[index])
    return world._mat_names[world._mat_map[x, y]]


def _visible_cells(world: Any, pos: Any) -> Iterator[tuple[str, int, int]]:
    """``(name, dx, dy)`` of every named cell in view but the player's own, in scan order."""
    px, py = int(pos[0]), int(pos[1])
    for dx, dy in SCAN_ORDER:
        name = cell_name(world, px + dx, py + dy)
        if name is not None:
            yield name, dx, dy


def _nearby(world: Any, pos: Any) -> list[dict[str, Any]]:
    """The nearest cell of each kind in view, kinds in order of first sight (BALROG's rule:
    a kind keeps its first-seen slot, a strictly nearer cell replaces its position)."""
    nearest: dict[str, tuple[int, int]] = {}
    for name, dx, dy in _visible_cells(world, pos):
        best = nearest.get(name)
        if best is None or abs(dx) + abs(dy) < abs(best[0]) + abs(best[1]):
            nearest[name] = (dx, dy)
    return [
        {
            "name": name,
            "dx": dx,
            "dy": dy,
            "distance": abs(dx) + abs(dy),
            "direction": direction(dx, dy),
        }
        for name, (dx, dy) in nearest.items()
    ]


def observe(env: Any) -> tuple[str, dict[str, Any]]:
    """Text and JSON-able structured view of a (reset) Crafter env's current state."""
    world, player = env._world, env._player
    fx, fy = int(player.facing[0]), int(player.facing[1])
    front = cell_name(world, int(player.pos[0]) + fx, int(player.pos[1]) + fy)
    inv = player.inventory
    status = {name: int(inv[name]) for name in STATUS}
    structured = {
        "step": int(env._step),
        "sleeping": bool(player.sleeping),
        "dead": status["health"] <= 0,
        "nearby": _nearby(world, player.pos),
        "facing": {"name": front or "nothing", "dx": fx, "dy": fy, "direction": direction(fx, fy)},
        "status": status,
        "inventory": {k: int(v) for k, v in inv.items() if k not in STATUS and v > 0},
        "achievements": sorted(k for k, v in player.achievements.items() if v > 0),
    }
    return render(structured), structured


def _condition(structured: dict[str, Any]) -> str | None:
    """BALROG's one condition sentence: sleeping wins over dead (it checks sleep first)."""
    if structured["sleeping"]:
        return SLEEPING
    if structured["dead"]:
        return DIED
    return None


def _seen(nearby: list[dict[str, Any]]) -> str:
    if not nearby:
        return "You see nothing away from you."
    lines = [
        f"- {o['name']} {o['distance']} step{'s' if o['distance'] > 1 else ''} "
        f"to your {o['direction']}"
        for o in nearby
    ]
    return "You see:\n" + "\n".join(lines)


def _inventory(inventory: dict[str, int]) -> str:
    if not inventory:
        return "You have nothing in your inventory."
    return "Your inventory:\n" + "\n".join(f"- {k}: {v}" for k, v in inventory.items())


def render(structured: dict[str, Any]) -> str:
    """The observation text for a structured view (see the module docstring for the format)."""
    status = "Your status:\n" + "\n".join(
        f"- {k}: {v}/{STATUS_MAX}" for k, v in structured["status"].items()
    )
    sections = [
        _seen(structured["nearby"]),
        f"You face {structured['facing']['name']} at your front.",
        status,
        _inventory(structured["inventory"]),
    ]
    condition = _condition(structured)
    if condition is not None:
        # BALROG ends its condition sentence with a blank line, then adds the usual one.
        sections.insert(0, condition + "\n\n")
    return "\n\n".join(sections)


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
