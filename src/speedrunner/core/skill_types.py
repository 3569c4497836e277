"""The types a skill call crosses the sandbox boundary with, below both the sandbox that
runs calls and the runtime (and the ``Method`` base) that name them: ``Skills`` (one
knowledge version's callable skills), ``SkillCall``, ``SkillOutcome`` and the
``SkillRunner`` protocol. The handle a skill acts through is ``core/skill.py``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol


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

    def call(
        self,
        call: SkillCall,
        *,
        step: Callable[[str], dict[str, Any]],
        observation: dict[str, Any],
        max_actions: int,
        timeout_s: float,
    ) -> SkillOutcome:
        """Run ``call``; its primitive actions go through ``step`` (the env stays here).

        ``observation`` is the current ``{"text", "structured", "done"}``; ``step(action)``
        answers the same shape, or ``{"error": ...}`` for an action the env refused.
        """
        ...

    def close(self) -> None: ...
