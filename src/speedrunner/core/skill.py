"""The handle an LLM-written skill acts through, the same for every benchmark.

``SkillEnv`` holds the current observation (``text`` and ``state``, the JSON-able
``Observation.structured``) and changes the world only through ``act``. It talks to the
env through a ``Transport`` — one action in, one JSON-able reply out — so the same skill
code runs in-process (``local_transport``) or in a sandbox subprocess whose transport is
a pipe to the parent that owns the env. Each benchmark's ``skill_api`` adds pure views
over ``state``.

The types a skill call crosses the sandbox boundary with (``SkillCall``, ``Skills``,
``SkillOutcome``, the ``SkillRunner`` protocol) live here too, below both the sandbox that
runs calls and the runtime that issues them (``core/runtime/skill_call.py`` re-exports them).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from speedrunner.core import pyast
from speedrunner.core.env import TextEnv
from speedrunner.errors import EnvError

SKILL_TIMEOUT_BASE_S = 60.0
"""Wall clock of a skill call that may take no action at all (loading, planning); with
``SKILL_TIMEOUT_PER_ACTION_S`` the default of ``skill_timeout_s``."""
SKILL_TIMEOUT_PER_ACTION_S = 0.25
"""Per action the call may take: a primitive step costs milliseconds here (Crafter, BabyAI;
a ScienceWorld step tens of), so this leaves a skill's own planning per step ample room."""

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

    def __init__(self, send: Transport, text: str, state: State, done: bool = False, *,
                 actions_left: int | None = None, scratch: dict[str, Any] | None = None) -> None:
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
        return {"text": result.observation.text, "structured": result.observation.structured,
                "done": result.done}

    return send


@dataclass(frozen=True)
class SkillCall:
    """A parsed skill call; ``text`` is its canonical form, as history records it."""

    name: str
    args: list[Any] = field(default_factory=list)
    kwargs: dict[str, Any] = field(default_factory=dict)

    @property
    def text(self) -> str:
        parts = [repr(a) for a in self.args] + [f"{k}={v!r}" for k, v in self.kwargs.items()]
        return f"{self.name}({', '.join(parts)})"


@dataclass(frozen=True)
class Skills:
    """The callable skills of one knowledge version (a codebook generation).

    ``source`` is the codebook module the sandbox loads; ``signatures`` maps each public
    skill to the signature the actor is shown; ``api_module`` is the benchmark's skill API
    that skill code imports.
    """

    generation: int
    source: str
    signatures: dict[str, str]
    api_module: str
    functions: frozenset[str] = field(init=False, compare=False, repr=False)
    """The codebook's top-level function names, parsed here, once per version, before any episode
    opens a sandbox: the runners of parallel episodes share it (``core/pyast.py`` says why)."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "functions", pyast.top_level_functions(self.source))


@dataclass
class SkillOutcome:
    """What one skill call did, as the sandbox reports it.

    ``tree`` is the full call tree (nested calls, every primitive action with the
    observation it produced, return values, errors with the skill's own traceback lines),
    JSON-able, stored in the trajectory. ``stopped_by`` is ``returned``, ``error``,
    ``max_actions``, ``timeout`` or ``episode_done``.
    """

    tree: dict[str, Any]
    returned: Any = None
    error: str | None = None
    stopped_by: str = "returned"


class SkillRunner(Protocol):
    """Runs skill calls of one episode (one sandbox process, reused for every call)."""

    tier: str
    """The isolation tier that runs the code (``bwrap``, ``unshare``, ``rlimits``)."""

    def call(self, call: SkillCall, *, step: Callable[[str], dict[str, Any]],
             observation: dict[str, Any], max_actions: int, timeout_s: float) -> SkillOutcome:
        """Run ``call``; its primitive actions go through ``step`` (the env stays here).

        ``observation`` is the current ``{"text", "structured", "done"}``; ``step(action)``
        answers the same shape, or ``{"error": ...}`` for an action the env refused.
        """
        ...

    def close(self) -> None: ...
