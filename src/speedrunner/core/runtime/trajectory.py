"""Experience: every episode as a structured trajectory, stored one JSON file per episode.

Files are written atomically when an episode ends, so an episode file on disk is
always complete; a resumed run treats its presence as "this episode is done".
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from speedrunner.core.atomic import atomic_write_json
from speedrunner.core.llm.types import Usage
from speedrunner.core.runtime.actor import ActorStep

StopReason = Literal[
    "success", "env_done", "max_llm_calls", "max_env_actions", "wall_clock", "context_length",
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
    (absent: never; each call's tree says ``stopped_by``). Older files have no field: none counted."""

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Trajectory:
        data = dict(data)
        data["usage"] = Usage(**data["usage"])
        steps = []
        for raw in data["steps"]:
            raw = dict(raw)
            raw["usage"] = Usage(**raw["usage"])
            steps.append(ActorStep(**raw))
        data["steps"] = steps
        return cls(**data)

    def summary(self, max_chars: int = 4000) -> str:
        """A compact text rendering for sleep-phase prompts (outcome first, then the turns)."""
        head = (f"Task: {self.instruction}\nOutcome: {'SUCCESS' if self.success else 'FAILURE'} "
                f"(progress {self.progress:.2f}, stopped by {self.stop_reason}, {self.llm_calls} LLM calls, "
                f"{self.env_actions} env actions)\n")
        lines = []
        for step in self.steps:
            action = step.parsed_action if step.parsed_action is not None else f"INVALID ({step.error})"
            if step.skill_call is not None:
                action += f"  -> {len(step.executed)} actions: {', '.join(step.executed[:20])}"
                action += " ..." if len(step.executed) > 20 else ""
            obs = " | ".join(step.observation.splitlines())
            lines.append(f"[{step.index}] obs: {obs}\n    thought: {step.thought}\n    action: {action}")
        if self.final_observation:
            lines.append(f"[end] obs: {' | '.join(self.final_observation.splitlines())}")
        body = "\n".join(lines)
        if len(head) + len(body) > max_chars:
            keep = max_chars - len(head) - 40
            body = body[: keep // 3] + "\n... (middle of the episode omitted) ...\n" + body[-(keep - keep // 3):]
        return head + body


    def skill_calls(self) -> list[dict[str, Any]]:
        """Every top-level skill call: step index, call tree, primitive actions (sleep-phase analysis)."""
        return [{"step": s.index, "call": s.parsed_action, "tree": s.skill_call, "actions": list(s.executed)}
                for s in self.steps if s.skill_call is not None]

    def primitive_actions(self) -> list[str]:
        """Every primitive action the episode took, in order, whether the actor or a skill chose it."""
        return [a for s in self.steps for a in s.executed]


def episode_path(run_dir: Path, split: str, index: int, eval_point: int | None = None) -> Path:
    if split == "eval":
        return run_dir / "episodes" / "eval" / f"at{eval_point:04d}" / f"{index:04d}.json"
    return run_dir / "episodes" / split / f"{index:04d}.json"


def save_trajectory(run_dir: Path, trajectory: Trajectory) -> Path:
    path = episode_path(run_dir, trajectory.split, trajectory.index, trajectory.eval_point)
    atomic_write_json(path, trajectory.to_json(), indent=None)
    return path


def load_trajectory(path: Path) -> Trajectory:
    return Trajectory.from_json(json.loads(path.read_text("utf-8")))


def load_experience(run_dir: Path, split: str = "train") -> list[Trajectory]:
    """All stored trajectories of a split, in index order (for sleep-phase analysis code)."""
    root = run_dir / "episodes" / split
    return [load_trajectory(p) for p in sorted(root.rglob("*.json"))]
