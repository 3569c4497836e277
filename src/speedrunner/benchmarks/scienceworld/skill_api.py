"""What LLM-written ScienceWorld skills may call.

A skill gets a ``SkillEnv``: ``act(text)`` sends one action string (e.g. ``"open door
to kitchen"``) and returns the simulator's reply; ``text`` and ``state`` are the current
observation. The views below are pure functions of ``state`` (``Observation.structured``:
look, inventory, task, valid_actions — only what the text API shows), so the same code
runs in a sandbox subprocess that receives the dict over a pipe.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

State = dict[str, Any]
Transport = Callable[[str], dict[str, Any]]
"""Sends one action to the env; answers ``{"text": str, "structured": dict, "done": bool}``."""

__all__ = ["SkillEnv", "inventory", "local_transport", "look", "room", "task", "valid_actions",
           "visible"]


class SkillEnv:
    """The handle a skill receives: action text in, observation text out."""

    def __init__(self, send: Transport, text: str, state: State, done: bool = False) -> None:
        self._send = send
        self.text = text
        self.state = state
        self.done = done

    def act(self, action: str) -> str:
        """Send one action; returns the simulator's reply (``state`` updates too)."""
        reply = self._send(action)
        self.text, self.state, self.done = reply["text"], reply["structured"], reply["done"]
        return self.text


def local_transport(env: Any) -> Transport:
    """A ``Transport`` over an in-process ``TextEnv`` (tests, or when no sandbox is used)."""

    def send(action: str) -> dict[str, Any]:
        result = env.step(action)
        return {"text": result.observation.text, "structured": result.observation.structured,
                "done": result.done}

    return send


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
