"""What LLM-written ScienceWorld skills may call.

A skill gets a ``SkillEnv``: ``act(text)`` sends one action string (e.g. ``"open door
to kitchen"``) and returns the simulator's reply; ``text`` and ``state`` are the current
observation. The views below are pure functions of ``state`` (``Observation.structured``:
look, inventory, task, valid_actions — only what the text API shows), so the same code
runs in a sandbox subprocess that receives the dict over a pipe.
"""

from __future__ import annotations

import re

from speedrunner.core.skill import SkillEnv, State

__all__ = ["SkillEnv", "inventory", "look", "room", "task", "valid_actions", "visible"]

PRIMITIVE_ACTIONS: tuple[str, ...] = ()
"""The env's action words (a skill may not shadow them); none: actions are free text."""

# What the inducer is told about ``env.state`` and the world's conventions
# (``core/codebook/api_view``); checked against ``env.py`` by tests/codebook/test_api_view.py.
STATE_LAYOUT = """\
{"look": str (what "look around" shows here), "inventory": str (what "inventory" shows),
 "task": str (the task description), "valid_actions": [action strings accepted now]}"""
COORDINATES = """\
No coordinates: the world is rooms joined by doors. `go to ROOM` moves to an adjacent room
whose door is open (`open door to ROOM` first); `look around` lists the current room's
contents. Actions are free text: unknown input answers "No known action matches that
input."; an ambiguous one answers with a numbered list (act the number to choose).
`focus on X` on the wrong object ends the episode as a failure."""


def look(state: State) -> str:
    """What "look around" shows in the current room."""
    return state["look"]


def inventory(state: State) -> str:
    """What "inventory" shows."""
    return state["inventory"]


def task(state: State) -> str:
    """The task description."""
    return state["task"]


def valid_actions(state: State) -> list[str]:
    """The action strings the simulator currently accepts."""
    return list(state["valid_actions"])


def room(state: State) -> str:
    """The current location's name, from the look text ("This room is called the kitchen.")."""
    match = re.search(r"is called the (.+?)\.", state["look"])
    return match.group(1) if match else ""


def visible(state: State) -> list[str]:
    """One entry per tab-indented line of the look text: the things and doors in view."""
    return [line.strip() for line in state["look"].splitlines() if line.startswith("\t")]
