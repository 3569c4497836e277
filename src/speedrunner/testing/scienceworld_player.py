"""A prompt-only ScienceWorld task-4 player: what a competent model would type, one action a turn.

It reads nothing but the actor's conversation (the instruction, the observations, its own
earlier actions): the rooms it has looked at, their doors, what it focused on and picked up.
It walks from room to room through the doors it has seen ("go to ROOM", opening a closed
door first, "look around" on arrival), focuses on a thing of the asked kind (an animal's egg
outside, an adult plant in the greenhouse, a non-living object in the box's room), picks it up
(a plant with its flower pot) and moves it to the box. It never sees the valid-action list or
the gold path, so every command it types goes to the simulator as free text: the player that
finds the runtime's mistakes (answers read against the start room's actions, free text refused).

``CODEBOOK`` is the same plan as one skill, ``solve_task``, for fakes that install a codebook.
"""

from __future__ import annotations

import re
from collections import deque
from dataclasses import dataclass, field

__all__ = ["CODEBOOK", "TaskGoal", "next_action", "parse_goal"]

_GOAL = re.compile(
    r"find a\(n\) (?P<kind>[\w -]+?)\. First, focus on the thing\. Then, move it to the "
    r"(?P<color>\w+) box in the (?P<room>[\w ]+?)\."
)
_LOOK = re.compile(r"This (?:room|outside location) is called the (?P<room>[\w ]+?)\.")
_MOVED = re.compile(r"^You move to the (?P<room>[\w ]+?)\.", re.MULTILINE)
_DOOR = re.compile(r"A door to the (?P<room>[\w ]+?) \(that is (?P<state>open|closed)\)")
_ACTION = re.compile(r"^Action:\s*(.+?)\s*$", re.MULTILINE)
_POT_PLANT = re.compile(
    r"(?P<pot>flower pot \d+) \(containing an? (?P<plant>[\w ]+?) "
    r"in the (?:adult|reproducing) stage"
)
_SKIP = (
    "agent",
    "air",
    "box",
    "door",
    "egg",
    "flower pot",
    "plant",
    "tree",
    "hive",
    "substance called water",
)
SEARCH_ROOM = {"animal": "outside", "living thing": "outside", "plant": "greenhouse"}


@dataclass(frozen=True)
class TaskGoal:
    kind: str
    color: str
    box_room: str


@dataclass
class _Memory:
    """What the conversation so far says: rooms seen, where the player is, what it did."""

    looks: dict[str, str] = field(default_factory=dict)
    room: str = ""
    looked_here: bool = False
    focused: str | None = None
    carried: str | None = None
    last: str = ""


def parse_goal(text: str) -> TaskGoal | None:
    m = _GOAL.search(text)
    return None if m is None else TaskGoal(m["kind"], m["color"], m["room"])


def _observation(user_message: str) -> str:
    return user_message.rsplit("Observation:\n", 1)[-1]


def _remember(memory: _Memory, action: str | None, text: str) -> None:
    memory.last = text
    if (look := _LOOK.search(text)) is not None:
        memory.room, memory.looked_here = look["room"], True
        memory.looks[look["room"]] = text
    elif (moved := _MOVED.search(text)) is not None:
        memory.room, memory.looked_here = moved["room"], False
    if text.startswith("You focus on the "):
        memory.focused = text.removeprefix("You focus on the ").rstrip(".")
    if action and text.startswith("You move the ") and text.rstrip().endswith("to the inventory."):
        memory.carried = action.removeprefix("pick up ").strip()


def _doors(look: str) -> dict[str, str]:
    return {m["room"]: m["state"] for m in _DOOR.finditer(look)}


def _route(memory: _Memory, target: str) -> str:
    """The next move towards ``target``: through known rooms when a path is known, else towards
    the nearest room with a door not yet walked through."""
    if not memory.looked_here:
        return "look around"
    parent: dict[str, str | None] = {memory.room: None}
    queue = deque([memory.room])
    frontier: str | None = None
    while queue:
        here = queue.popleft()
        for there in _doors(memory.looks.get(here, "")):
            if there in parent:
                continue
            parent[there] = here
            if there == target:
                return _step_towards(memory, parent, there)
            if there in memory.looks:
                queue.append(there)
            elif frontier is None:
                frontier = there
    if frontier is None:
        return "look around"
    return _step_towards(memory, parent, frontier)


def _step_towards(memory: _Memory, parent: dict[str, str | None], goal: str) -> str:
    hop = goal
    while parent[hop] != memory.room:
        hop = parent[hop]  # type: ignore[assignment]
    if _doors(memory.looks[memory.room]).get(hop) == "closed":
        return f"open door to {hop}"
    return f"go to {hop}"


def _name(line: str) -> str:
    name = re.split(r"[.(,]", line.strip(), maxsplit=1)[0].strip()
    return re.sub(r"^(?:an?|the|a substance called)\s+", "", name)


def _pick(goal: TaskGoal, look: str) -> tuple[str, str] | None:
    """(what to focus on, what to carry) in this look text, or None."""
    lines = [line.strip() for line in look.splitlines() if line.startswith("\t")]
    if goal.kind in ("animal", "living thing"):
        eggs = [_name(line) for line in lines if _name(line).endswith(" egg")]
        return (eggs[0],) * 2 if eggs else None
    if goal.kind == "plant":
        for line in lines:
            if (m := _POT_PLANT.search(line)) is not None:
                return m["plant"], m["pot"]
        return None
    things = [line for line in lines if not any(word in _name(line) for word in _SKIP)]
    # no fittings
    small = [line for line in things if _name(line) == re.sub(r"^(?:an?|the)\s+", "", line)]
    chosen = (small or things)[:1]
    return (_name(chosen[0]),) * 2 if chosen else None


def next_action(messages: list[dict[str, str]]) -> str:
    """The player's next command for the actor conversation ``messages`` (system, user, ...)."""
    goal = parse_goal(messages[1]["content"])
    if goal is None:
        return "look around"
    memory = _Memory()
    _remember(memory, None, _observation(messages[1]["content"]))
    for i in range(2, len(messages) - 1, 2):
        found = _ACTION.search(messages[i]["content"])
        _remember(
            memory, found.group(1) if found else None, _observation(messages[i + 1]["content"])
        )
    if memory.last.startswith("Ambiguous request"):
        return "0"
    search = SEARCH_ROOM.get(goal.kind, goal.box_room)
    if memory.focused is None:
        if memory.room == search and memory.looked_here:
            picked = _pick(goal, memory.looks[memory.room])
            if picked is not None:
                return f"focus on {picked[0]}"
        return _route(memory, search)
    if memory.carried is None and goal.kind in SEARCH_ROOM:
        picked = _pick(goal, memory.looks.get(memory.room, ""))
        return f"pick up {picked[1] if picked else memory.focused}"
    thing = memory.carried or memory.focused
    if memory.room == goal.box_room:
        return f"move {thing} to {goal.color} box"
    return _route(memory, goal.box_room)


CODEBOOK = r'''import re


def solve_task(env) -> str:
    """Solve a find-and-move task ("find a(n) animal ... move it to the red box in the kitchen").

    Walks through open doors to where such things are (animals' eggs outside, adult plants in
    the greenhouse, any object in the box's room), focuses on one, carries it to the box.

    Returns:
        The observation text after the last action.
    """
    goal = re.search(r"find a\(n\) ([\w -]+?)\. .* the (\w+) box in the ([\w ]+?)\.", env.state["task"])
    kind, color, box_room = goal.group(1), goal.group(2), goal.group(3)
    search = {"animal": "outside", "living thing": "outside", "plant": "greenhouse"}.get(kind, box_room)
    text = _walk_to(env, search)
    focus, carry = _pick(kind, env.state["look"])
    text = env.act("focus on " + focus)
    if kind != "non-living thing":
        text = env.act("pick up " + carry)
    _walk_to(env, box_room)
    if not env.done:
        text = env.act("move " + carry + " to " + color + " box")
    return text


def _here(env) -> str:
    found = re.search(r"is called the ([\w ]+?)\.", env.state["look"])
    return found.group(1) if found else ""


def _walk_to(env, target: str) -> str:
    """Breadth-first over the doors seen so far, looking around in every room entered."""
    doors = {}
    text = env.text
    for _ in range(40):
        here = _here(env)
        doors[here] = re.findall(r"A door to the ([\w ]+?) \(", env.state["look"])
        if here == target or env.done:
            return text
        path = _path(doors, here, target)
        text = env.act("go to " + path[0]) if path else env.act("look around")
    return text


def _path(doors: dict, start: str, target: str) -> list:
    queue = [[start]]
    seen = {start}
    frontier = None
    while queue:
        route = queue.pop(0)
        for there in doors.get(route[-1], []):
            if there in seen:
                continue
            seen.add(there)
            if there == target:
                return route[1:] + [there]
            if there in doors:
                queue.append(route + [there])
            elif frontier is None:
                frontier = route[1:] + [there]
    return frontier or []


def _pick(kind: str, look: str) -> tuple:
    names = []
    for line in look.splitlines():
        if line.startswith("\t"):
            name = re.split(r"[.(,]", line.strip(), maxsplit=1)[0].strip()
            names.append(re.sub(r"^(?:an?|the|a substance called)\s+", "", name))
    if kind in ("animal", "living thing"):
        egg = [n for n in names if n.endswith(" egg")][0]
        return egg, egg
    if kind == "plant":
        found = re.search(r"(flower pot \d+) \(containing an? ([\w ]+?) in the (?:adult|reproducing) stage", look)
        return found.group(2), found.group(1)
    skip = ("agent", "air", "box", "door", "egg", "flower pot", "plant", "tree", "hive", "substance called water")
    things = [n for n in names if not any(word in n for word in skip)]
    small = [n for n in things if re.search(r"\t(?:an?|the) " + n + "$", look, re.MULTILINE)]
    thing = (small or things)[0]
    return thing, thing
'''  # noqa: E501 (skill source, kept byte for byte)
"""One public skill, ``solve_task()``: the player's plan in one call (no LLM turn per action)."""
