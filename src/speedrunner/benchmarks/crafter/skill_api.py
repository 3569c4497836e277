"""What LLM-written Crafter skills may call.

A skill gets a ``SkillEnv``: ``act(name)`` plays one primitive action (a BALROG name
such as ``"Move West"``) and returns the new observation text; ``text`` and ``state``
are the current observation. Everything else here is a pure function of ``state``
(``Observation.structured``, a JSON-able dict), so the same code runs unchanged in a
sandbox subprocess that receives the dict over a pipe while the env stays in the parent.
Offsets follow Crafter's grid: ``dx > 0`` is east, ``dy > 0`` is south.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from speedrunner.benchmarks.crafter.text import ACTION_NAMES

State = dict[str, Any]
Transport = Callable[[str], dict[str, Any]]
"""Sends one action to the env; answers ``{"text": str, "structured": dict, "done": bool}``."""

__all__ = ["ACTION_NAMES", "SkillEnv", "achievements", "facing", "inventory", "local_transport",
           "nearby", "nearest", "status"]


class SkillEnv:
    """The handle a skill receives: primitive actions in, observation text out."""

    def __init__(self, send: Transport, text: str, state: State, done: bool = False) -> None:
        self._send = send
        self.text = text
        self.state = state
        self.done = done

    def act(self, action: str) -> str:
        """Play one primitive action; returns the new observation text (``state`` updates too)."""
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


def nearby(state: State) -> list[dict[str, Any]]:
    """Every kind of thing in view, nearest first: ``{name, dx, dy, distance, direction}``."""
    return list(state["nearby"])


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
