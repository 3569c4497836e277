"""Observation text in BALROG's BabyAI-Text format, plus the same facts as a JSON-able dict.

The text is built only from the agent's 7x7 egocentric view (with minigrid's occlusion)
and what it carries, exactly what BALROG shows. One line each, in this order:

- ``You carry a <color> <type>`` (when carrying something);
- ``a wall N step(s) forward|left|right`` (only when the first non-empty visible cell in
  that straight line is a wall);
- each visible object, scanning the view left to right, far to near:
  ``a <color> <type> X step(s) left|right and Y step(s) forward``; the lateral part is
  omitted when the object is dead ahead, the forward part when it is level with the agent.
  Doors read ``a <open|closed|locked> <color> door ...`` (BALROG's wording, "a open" too).

``structured`` carries the same information (and nothing more) for skills:
``{"carrying": {"type", "color"} | None, "walls": {"forward"|"left"|"right": int},
"objects": [{"type", "color", "state", "dx", "dy"}]}`` where ``dx`` is steps to the right
(negative = left) and ``dy`` steps forward.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # minigrid costs ~0.7 s to import; skills and clients need only the constants
    import numpy as np
    from minigrid.minigrid_env import MiniGridEnv

ACTIONS = ("turn left", "turn right", "go forward", "pick up", "drop", "toggle")
"""Primitive action names, in minigrid's action-index order (0..5)."""
ACTION_INDEX = {name: i for i, name in enumerate(ACTIONS)}
ACTION_DESCRIPTIONS = {
    "turn left": "turn left (rotate 90 degrees in place)",
    "turn right": "turn right (rotate 90 degrees in place)",
    "go forward": "take one step forward (blocked by walls, closed doors and objects)",
    "pick up": "pick up the object in the cell directly in front of you (one step forward)",
    "drop": "drop the object you carry into the empty cell directly in front of you",
    "toggle": "toggle the object in front of you (open or close a door; a locked door "
    "opens only while you carry the key of its color)",
}
"""Action help for prompts. ``pick up`` acts on the cell in *front* (BALROG says "below")."""

DOOR_STATES = {0: "open", 1: "closed", 2: "locked"}
_UNSEEN, _EMPTY, _WALL, _DOOR = 0, 1, 2, 4


def instruction(mission: str) -> str:
    """The instruction shown to the actor for a mission string."""
    return f"Your goal is to {mission}"


def _steps(n: int, direction: str) -> str:
    return f"{n} step{'s' if n > 1 else ''} {direction}"


def _wall_distances(image: np.ndarray, ax: int, ay: int) -> dict[str, int]:
    """Walls straight ahead/left/right, if the first non-empty seen cell on that line is a wall."""
    walls: dict[str, int] = {}
    lines = {
        "forward": [(ax, j) for j in range(ay - 1, -1, -1)],
        "left": [(i, ay) for i in range(ax - 1, -1, -1)],
        "right": [(i, ay) for i in range(ax + 1, image.shape[0])],
    }
    kinds = image[:, :, 0].tolist()
    for direction, cells in lines.items():
        for dist, (i, j) in enumerate(cells, start=1):
            kind = kinds[i][j]
            if kind in (_UNSEEN, _EMPTY):
                continue
            if kind == _WALL:
                walls[direction] = dist
            break
    return walls


def _visible_objects(image: np.ndarray, ax: int, ay: int) -> list[dict[str, Any]]:
    """Objects (not walls/empty/unseen) in view, left to right and far to near,
    as BALROG lists them."""
    from minigrid.core.constants import IDX_TO_COLOR, IDX_TO_OBJECT

    objects = []
    mask = image[:, :, 0] > _WALL  # object codes follow unseen, empty, wall
    mask[ax, ay] = False  # the agent's own cell shows what it carries
    for i, j in zip(*mask.nonzero(), strict=True):  # row-major: same order as BALROG's loops
        kind, color, state = (int(v) for v in image[i, j])
        obj: dict[str, Any] = {
            "type": IDX_TO_OBJECT[kind],
            "color": IDX_TO_COLOR[color],
            "dx": int(i) - ax,
            "dy": ay - int(j),
        }
        if kind == _DOOR:
            obj["state"] = DOOR_STATES[state]
        objects.append(obj)
    return objects


def object_line(obj: dict[str, Any]) -> str:
    """One BALROG object line from a structured object entry."""
    state = f"{obj['state']} " if "state" in obj else ""
    parts = []
    if obj["dx"] != 0:
        parts.append(_steps(abs(obj["dx"]), "right" if obj["dx"] > 0 else "left"))
    if obj["dy"] != 0 or obj["dx"] == 0:
        parts.append(_steps(obj["dy"], "forward"))
    return f"a {state}{obj['color']} {obj['type']} " + " and ".join(parts)


def structured_view(env: MiniGridEnv, image: np.ndarray | None = None) -> dict[str, Any]:
    """What the agent sees, as a JSON-serializable dict (the text is rendered from this).

    ``image`` is minigrid's encoded egocentric view for the current state (``obs["image"]``
    from ``step``); pass it to avoid recomputing the view, which costs more than the text.
    """
    if image is None:
        grid, vis_mask = env.gen_obs_grid()
        image = grid.encode(vis_mask)
    ax, ay = image.shape[0] // 2, image.shape[1] - 1
    carrying = None
    if env.carrying is not None:
        carrying = {"type": env.carrying.type, "color": env.carrying.color}
    return {
        "carrying": carrying,
        "walls": _wall_distances(image, ax, ay),
        "objects": _visible_objects(image, ax, ay),
    }


def render_text(view: dict[str, Any]) -> str:
    """BALROG's observation text for a structured view (one fact per line)."""
    lines = []
    if view["carrying"]:
        lines.append(f"You carry a {view['carrying']['color']} {view['carrying']['type']}")
    lines += [f"a wall {_steps(n, d)}" for d, n in view["walls"].items()]
    lines += [object_line(obj) for obj in view["objects"]]
    return "\n".join(lines)


def observe(env: MiniGridEnv, image: np.ndarray | None = None) -> tuple[str, dict[str, Any]]:
    """(text, structured) for the env's current state (``image``: see ``structured_view``)."""
    view = structured_view(env, image)
    return render_text(view), view
