"""What LLM-written ScienceWorld skills may call.

A skill gets a ``SkillEnv``: ``act(text)`` sends one action string (e.g. ``"open door
to kitchen"``) and returns the simulator's reply; ``text`` and ``state`` are the current
observation. The views below are pure functions of ``state`` (``Observation.structured``:
look, inventory, task, valid_actions — only what the text API shows), so the same code
runs in a sandbox subprocess that receives the dict over a pipe.
"""

from __future__ import annotations

import re

from speedrunner.core.skill import SkillEnv, State, local_transport

__all__ = ["SkillEnv", "inventory", "local_transport", "look", "room", "task", "valid_actions",
           "visible"]


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
