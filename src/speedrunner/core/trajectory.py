"""Experience: every episode as a structured trajectory, stored one JSON file per episode.

The records (``Trajectory``, its ``ActorStep`` turns, ``StopReason``, a replayed script's
``ReplayResult``) sit below the codebook, ``Method`` and the runtime that all use them.

Conversion never recurses on stored data: ``to_json`` converts iteratively and cuts anything
nested deeper than ``MAX_STORED_DEPTH`` (call trees come bounded from the sandbox already;
this is the belt to those braces). Files: ``core/episode_files.py``.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Literal

from speedrunner.core.llm.types import Usage


@dataclass
class ActorStep:
    """One actor turn, as stored in the trajectory and rendered back into the prompt."""

    index: int
    call_id: str
    observation: str
    raw_text: str
    reasoning: str | None
    thought: str
    parsed_action: str | None
    raw_action: str = ""
    executed: list[str] = field(default_factory=list)
    error: str | None = None
    reward: float = 0.0
    usage: Usage = field(default_factory=Usage)
    cost_usd: float | None = None
    latency_s: float = 0.0
    cached: bool = False
    finish_reason: str | None = None
    """``"length"`` when the answer was cut at ``max_tokens`` (``core.answers.TRUNCATED``)."""
    answer_format: str = "ok"
    """``ok`` / ``repaired`` / ``lost``: how the answer's form was read
    (``ParsedAnswer.format``)."""
    effect: str = ""
    """What the turn did to the env: ``acted`` (a primitive action ran), ``skill_call`` (a
    skill was called), ``refused`` (nothing ran: no valid action was read, or the env refused
    it). A well-formed answer can still be refused; format and effect are counted apart.
    Empty in trajectories stored before it existed (``core.answer_counts.step_effect``)."""
    skill_call: dict[str, Any] | None = None
    """The call tree when the action called a skill (``SkillOutcome.tree``); its primitive
    actions are in ``executed``."""


StopReason = Literal[
    "success",
    "env_done",
    "max_llm_calls",
    "max_env_actions",
    "wall_clock",
    "context_length",
    "iteration_end",  # a Voyager world: it played method.max_iterations_per_world iterations
]


@dataclass
class Trajectory:
    """One played episode. ``scripted`` marks trajectories whose actor was not an LLM."""

    split: str
    index: int
    task: str
    seed: int
    knowledge_version: int
    instruction: str
    steps: list[ActorStep] = field(default_factory=list)
    final_observation: str = ""
    stop_reason: StopReason = "env_done"
    success: bool = False
    progress: float = 0.0
    llm_calls: int = 0
    env_actions: int = 0
    usage: Usage = field(default_factory=Usage)
    cost_usd: float | None = 0.0
    wall_time_s: float = 0.0
    scripted: bool = False
    eval_point: int | None = None
    final_info: dict[str, Any] = field(default_factory=dict)
    """The env's ``info`` after the last action (e.g. Crafter's unlocked achievements)."""
    context_error: str | None = None
    """The provider's message when the history outgrew the context window."""
    sandbox_tier: str | None = None
    """The isolation tier that ran this episode's skill calls (None: no skill was called)."""
    method_info: dict[str, Any] = field(default_factory=dict)
    """What a method with its own training phase records about the rollout (Voyager: the
    iterations played in this world, in order: run-wide number, number in the world, task,
    attempt, skill added). Empty for the actor's episodes."""
    cap_hits: dict[str, int] = field(default_factory=dict)
    """Skill calls stopped by a per-call cap: ``max_skill_actions`` or ``skill_timeout`` -> count
    (absent: never; each call's tree says ``stopped_by``); a Voyager world ended by
    ``method.max_iterations_per_world`` also has ``max_iterations_per_world: 1``. Older files
    have no field: none counted."""
    sandbox_violations: int = 0
    """Skill calls that ended because the sandbox broke the protocol (each restarted it)."""

    def to_json(self) -> dict[str, Any]:
        return to_plain(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Trajectory:
        """Raises ``CorruptTrajectory`` for anything that is not a stored trajectory."""
        try:
            data = _known(cls, data)
            data["usage"] = Usage(**_known(Usage, data.get("usage", {})))
            steps = []
            for raw in data.get("steps", []):
                raw = _known(ActorStep, raw)
                raw["usage"] = Usage(**_known(Usage, raw.get("usage", {})))
                if raw.get("skill_call") is not None and not isinstance(raw["skill_call"], dict):
                    raise TypeError("a skill call tree that is not an object")
                steps.append(ActorStep(**raw))
            data["steps"] = steps
            return cls(**data)
        except (TypeError, ValueError, AttributeError) as e:
            raise CorruptTrajectory(
                f"not a stored trajectory ({type(e).__name__}: {str(e)[:200]})"
            ) from None

    def summary(self, max_chars: int = 4000) -> str:
        """A compact text rendering for sleep-phase prompts (outcome first, then the turns)."""
        head = (
            f"Task: {self.instruction}\nOutcome: {'SUCCESS' if self.success else 'FAILURE'} "
            f"(progress {self.progress:.2f}, stopped by {self.stop_reason}, "
            f"{self.llm_calls} LLM calls, "
            f"{self.env_actions} env actions)\n"
        )
        lines = []
        for step in self.steps:
            action = (
                step.parsed_action if step.parsed_action is not None else f"INVALID ({step.error})"
            )
            if step.skill_call is not None:
                action += f"  -> {len(step.executed)} actions: {', '.join(step.executed[:20])}"
                action += " ..." if len(step.executed) > 20 else ""
            obs = " | ".join(step.observation.splitlines())
            lines.append(
                f"[{step.index}] obs: {obs}\n    thought: {step.thought}\n    action: {action}"
            )
        if self.final_observation:
            lines.append(f"[end] obs: {' | '.join(self.final_observation.splitlines())}")
        body = "\n".join(lines)
        if len(head) + len(body) > max_chars:
            keep = max_chars - len(head) - 40
            body = (
                body[: keep // 3]
                + "\n... (middle of the episode omitted) ...\n"
                + body[-(keep - keep // 3) :]
            )
        return head + body

    def skill_calls(self) -> list[dict[str, Any]]:
        """Every top-level skill call: step index, call tree, primitive actions (sleep-phase
        analysis)."""
        return [
            {
                "step": s.index,
                "call": s.parsed_action,
                "tree": s.skill_call,
                "actions": list(s.executed),
            }
            for s in self.steps
            if s.skill_call is not None
        ]

    def primitive_actions(self) -> list[str]:
        """Every primitive action the episode took, in order, whether the actor or a skill
        chose it."""
        return [a for s in self.steps for a in s.executed]


@dataclass
class ReplayResult:
    """A written-down script played on one task and seed (``core.runtime.replay``)."""

    success: bool
    called: set[str] = field(default_factory=set)
    """Every skill the script called, directly or from another skill."""
    env_actions: int = 0
    error: str | None = None
    """Why the replay stopped early (an invalid line, a skill error), if it did."""
    final_text: str = ""
    """The observation text when the replay stopped (what SpeedRunner's ``test_skill`` shows)."""
    returned: Any = None
    """What the last skill call returned."""


MAX_STORED_DEPTH = 200
"""Nesting kept when a trajectory is written; deeper parts become a marker string."""


class CorruptTrajectory(ValueError):
    """A stored episode file cannot be read back (torn by a disk fault, edited, or from a bug)."""


def _known(cls: type, data: Any) -> dict[str, Any]:
    """``data``'s keys that are fields of ``cls`` (files of a newer version may carry more)."""
    if not isinstance(data, dict):
        raise TypeError(f"expected an object for {cls.__name__}, got {type(data).__name__}")
    names = {f.name for f in dataclasses.fields(cls)}
    return {k: v for k, v in data.items() if k in names}


def to_plain(obj: Any, max_depth: int = MAX_STORED_DEPTH) -> Any:
    """``obj`` (dataclasses, dicts, lists, tuples, scalars) as JSON-able data, without recursion;
    containers nested deeper than ``max_depth`` are replaced by a marker string."""
    root: list[Any] = [None]
    stack: list[tuple[Any, Any, Any, int]] = [
        (obj, root, 0, 0)
    ]  # (value, parent container, key, depth)
    while stack:
        value, parent, key, depth = stack.pop()
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            value = {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
        if isinstance(value, dict | list | tuple) and depth >= max_depth:
            parent[key] = f"[cut: nested deeper than {max_depth} levels]"
        elif isinstance(value, dict):
            out: dict[str, Any] = {}
            parent[key] = out
            for k, v in value.items():
                stack.append((v, out, str(k), depth + 1))
        elif isinstance(value, list | tuple):
            items: list[Any] = [None] * len(value)
            parent[key] = items
            for i, v in enumerate(value):
                stack.append((v, items, i, depth + 1))
        else:
            parent[key] = value
    return root[0]
