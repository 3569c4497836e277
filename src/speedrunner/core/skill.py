"""The handle an LLM-written skill acts through, the same for every benchmark.

``SkillEnv`` holds the current observation (``text`` and ``state``, the JSON-able
``Observation.structured``) and changes the world only through ``act``. It talks to the
env through a ``Transport`` — one action in, one JSON-able reply out — so the same skill
code runs in-process (``local_transport``) or in a sandbox subprocess whose transport is
a pipe to the parent that owns the env. Each benchmark's ``skill_api`` adds pure views
over ``state``.

The types a skill call crosses the sandbox boundary with (``SkillCall``, ``Skills``,
``SkillOutcome``, the ``SkillRunner`` protocol) live in ``core/skill_types.py``, which a
method's types reach without this handle; they are re-exported here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from speedrunner.core.env import TextEnv
from speedrunner.core.skill_types import (  # noqa: F401  (re-exported for the sandbox and the codebook)
    SkillCall,
    SkillOutcome,
    SkillRunner,
    Skills,
)
from speedrunner.errors import EnvError

SKILL_TIMEOUT_BASE_S = 60.0
"""Wall clock of a skill call that may take no action at all (loading, planning); with
``SKILL_TIMEOUT_PER_ACTION_S`` the default of ``skill_timeout_s``."""
SKILL_TIMEOUT_PER_ACTION_S = 0.25
"""Per action the call may take: a primitive step costs milliseconds here (Crafter, BabyAI;
a ScienceWorld step tens of), so this leaves a skill's own planning per step ample room."""

# What one skill call may hand back to the parent; the sandbox enforces them, the skill API view
# states them to the skills' author.
MAX_RETURN_BYTES = 8_000
"""JSON characters of a skill's returned value (the actor sees its first few hundred; a longer
value is an error): with ``MAX_SCRATCH_CHARS`` and the tree's budget it bounds what one reply
may make the parent decode and check."""
MAX_RETURN_VALUES = 2_000
"""``channel.separators`` of a returned value (about its number of JSON items; more is an error):
the parent's cost of decoding a reply grows with its values far more than with its bytes."""
MAX_SCRATCH_CHARS = 8_000
"""``value_cost`` of ``env.scratch``, the per-episode state a skill may keep between calls."""
MAX_SCRATCH_VALUES = 2_000
"""``channel.separators`` of ``env.scratch`` (a 40x40 grid as lists of numbers fits; as a list
of row strings, a far larger one)."""
MAX_ACTION_CHARS = 1_000
"""Longest action string a skill may send; a longer one is refused in the child."""
SKILL_IMPORTS = (
    "re",
    "math",
    "itertools",
    "collections",
    "collections.abc",
    "functools",
    "dataclasses",
    "typing",
)
"""The standard modules skill code may import besides the benchmark's skill API module: the
codebook validator refuses any other, and the sandbox preloads these and refuses the rest."""

State = dict[str, Any]
Transport = Callable[[str], dict[str, Any]]
"""Sends one action to the env; answers ``{"text": str, "structured": dict, "done": bool}``."""


class SkillEnv:
    """Primitive actions in, observation text out; ``state`` follows every action.

    - ``text``, ``state``, ``done``: the current observation;
    - ``actions_left``: primitive actions this call may still take (the smaller of the
      per-call cap and the episode's remaining action budget; ``None``: not capped here).
      Every ``act`` that reaches the env counts, a refused one too;
    - ``scratch``: a dict of JSON values that the next skill call of the same episode sees
      again (the parent keeps it, so it survives a sandbox restart; at most
      ``tracing.MAX_SCRATCH_CHARS`` of JSON). A call that times out or breaks the protocol
      loses its changes; a new episode starts empty. Module-level constants are read-only:
      this is the one place for state between calls.
    """

    # Documented here because the inducer's view of ``env`` is rendered from this class.
    text: str
    """The current observation text, as the actor sees it."""
    state: State
    """The current observation as a JSON-able dict (the same facts as ``text``)."""
    done: bool
    """True once the episode has ended: return then (a further ``act`` ends the skill call)."""
    actions_left: int | None
    """Primitive actions this call may still take (None: not capped); every ``act`` counts."""
    scratch: dict[str, Any]
    """Per-episode notes (JSON values) the next skill call of this episode sees again; survives
    a sandbox restart; the only state allowed between calls (module constants are read-only)."""

    def __init__(
        self,
        send: Transport,
        text: str,
        state: State,
        done: bool = False,
        *,
        actions_left: int | None = None,
        scratch: dict[str, Any] | None = None,
    ) -> None:
        self._send = send
        self.text = text
        self.state = state
        self.done = done
        self.actions_left = actions_left
        self.scratch: dict[str, Any] = {} if scratch is None else scratch

    def act(self, action: str) -> str:
        """Take one primitive action; returns the new observation text (``state`` updates too)."""
        if self.done:
            raise EnvError(f"the episode is over; {action!r} was not taken")
        if self.actions_left is not None and isinstance(action, str):
            self.actions_left = max(self.actions_left - 1, 0)
        reply = self._send(action)
        self.text, self.state, self.done = reply["text"], reply["structured"], reply["done"]
        return self.text


def local_transport(env: TextEnv) -> Transport:
    """A ``Transport`` over an in-process ``TextEnv`` (tests, or code that needs no sandbox)."""

    def send(action: str) -> dict[str, Any]:
        result = env.step(action)
        return {
            "text": result.observation.text,
            "structured": result.observation.structured,
            "done": result.done,
        }

    return send
