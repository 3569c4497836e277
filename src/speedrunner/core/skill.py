"""The handle an LLM-written skill acts through, the same for every benchmark.

``SkillEnv`` holds the current observation (``text`` and ``state``, the JSON-able
``Observation.structured``) and changes the world only through ``act``. It talks to the
env through a ``Transport`` — one action in, one JSON-able reply out — so the same skill
code runs in-process (``local_transport``) or in a sandbox subprocess whose transport is
a pipe to the parent that owns the env. Each benchmark's ``skill_api`` adds pure views
over ``state``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from speedrunner.core.env import TextEnv
from speedrunner.errors import EnvError

State = dict[str, Any]
Transport = Callable[[str], dict[str, Any]]
"""Sends one action to the env; answers ``{"text": str, "structured": dict, "done": bool}``."""


class SkillEnv:
    """Primitive actions in, observation text out; ``state`` follows every action."""

    # Documented here because the inducer's view of ``env`` is rendered from this class.
    text: str
    """The current observation text, as the actor sees it."""
    state: State
    """The current observation as a JSON-able dict (the same facts as ``text``)."""
    done: bool
    """True once the episode has ended: return then (a further ``act`` ends the skill call)."""

    def __init__(self, send: Transport, text: str, state: State, done: bool = False) -> None:
        self._send = send
        self.text = text
        self.state = state
        self.done = done

    def act(self, action: str) -> str:
        """Take one primitive action; returns the new observation text (``state`` updates too)."""
        if self.done:
            raise EnvError(f"the episode is over; {action!r} was not taken")
        reply = self._send(action)
        self.text, self.state, self.done = reply["text"], reply["structured"], reply["done"]
        return self.text


def local_transport(env: TextEnv) -> Transport:
    """A ``Transport`` over an in-process ``TextEnv`` (tests, or code that needs no sandbox)."""

    def send(action: str) -> dict[str, Any]:
        result = env.step(action)
        return {"text": result.observation.text, "structured": result.observation.structured,
                "done": result.done}

    return send
