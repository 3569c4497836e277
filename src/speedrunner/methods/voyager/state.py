"""What Voyager carries from one iteration to the next, and the skill manager's bookkeeping.

``VoyagerState`` is the curriculum's lists (completed, failed), the task in progress with
its attempts (the previous attempt's code, error and critique feed the next one), and the
library's descriptions. It is stored with every codebook generation as
``voyager/state_<g>.json`` (atomically, after the generation), so ``restore(g)`` brings
back exactly what batch ``g`` started from.

Versioning (skill manager): a successful skill whose name is already in the library takes
that name, and the old one is renamed ``nameV2`` (then ``nameV3``, ...) — nothing is lost.
The rename is the codebook's own ``RenameFunction``, so skills that called the old version
keep calling the code they were verified with; retrieval shows only the newest.
"""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from speedrunner.core.atomic import atomic_write_json
from speedrunner.errors import CheckpointError

__all__ = [
    "SkillEntry",
    "VoyagerState",
    "load_state",
    "refuse_world_per_iteration_runs",
    "retired_name",
    "save_state",
    "state_path",
]

STATE_DIR = "voyager"


class SkillEntry(BaseModel):
    model_config = ConfigDict(extra="forbid")

    description: str
    """The LLM-written description retrieval ranks (no function name in it)."""
    task: str
    """The task the skill was written for."""
    iteration: int
    """The Voyager iteration (run-wide number) whose attempt succeeded."""
    world: int | None = None
    """The training world (rollout index) it succeeded in."""
    superseded_by: str | None = None
    """For a kept old version (``nameV2``): the name that now holds the newer skill."""


class VoyagerState(BaseModel):
    model_config = ConfigDict(extra="forbid")

    completed: list[str] = Field(default_factory=list)
    failed: list[str] = Field(default_factory=list)
    task: str | None = None
    """The task being attempted; ``None``: the curriculum proposes the next one."""
    attempts: int = 0
    """Attempts made at ``task`` so far."""
    last_code: str | None = None
    last_error: str | None = None
    last_critique: str | None = None
    last_end: dict = Field(default_factory=dict)
    """Inventory and achievements when the previous attempt's skill stopped (a record; the
    next iteration starts from that state when it plays in the same world)."""
    skills: dict[str, SkillEntry] = Field(default_factory=dict)
    iterations: int = 0
    """Iterations played so far in the run, over all worlds (the next one's number)."""
    scripted: bool = False
    """True once any answer came from the scripted stand-in rather than an LLM."""

    def active(self) -> dict[str, str]:
        """Name -> description of the skills retrieval may return (newest versions only)."""
        return {n: s.description for n, s in self.skills.items() if s.superseded_by is None}

    def complete(self, task: str) -> None:
        """A completed task joins ``completed`` once and leaves ``failed``."""
        if task not in self.completed:
            self.completed.append(task)
        self.failed = [t for t in self.failed if t != task]
        self._next_task()

    def fail(self, task: str) -> None:
        """Out of attempts: the task joins ``failed`` (unless it was completed before)."""
        if task not in self.failed and task not in self.completed:
            self.failed.append(task)
        self._next_task()

    def _next_task(self) -> None:
        self.task, self.attempts = None, 0
        self.last_code = self.last_error = self.last_critique = None

    def add_skill(self, name: str, entry: SkillEntry, retired_as: str | None) -> None:
        """Record a new skill; the version it replaced (if any) is kept as ``retired_as``."""
        if retired_as is not None:
            old = self.skills.pop(name)
            self.skills[retired_as] = old.model_copy(update={"superseded_by": name})
        self.skills[name] = entry


def retired_name(name: str, taken: set[str]) -> str:
    """``name`` -> ``nameV2`` (or the first free ``nameV<k>``)."""
    k = 2
    while f"{name}V{k}" in taken:
        k += 1
    return f"{name}V{k}"


def state_path(run_dir: Path, generation: int) -> Path:
    return Path(run_dir) / STATE_DIR / f"state_{generation}.json"


def save_state(run_dir: Path, generation: int, state: VoyagerState) -> None:
    atomic_write_json(state_path(run_dir, generation), state.model_dump(mode="json"))


def load_state(run_dir: Path, generation: int) -> VoyagerState:
    path = state_path(run_dir, generation)
    if not path.exists():
        if generation == 0:
            return VoyagerState()
        raise CheckpointError(
            f"Voyager's state for codebook generation {generation} is missing: {path}"
        )
    try:
        return VoyagerState.model_validate(json.loads(path.read_text("utf-8")))
    except (ValueError, UnicodeDecodeError) as e:
        raise CheckpointError(f"Voyager's state {path} is corrupt: {e}") from e


def refuse_world_per_iteration_runs(run_dir: Path) -> None:
    """Refuse to resume a run made when every Voyager iteration had a fresh world.

    Those runs stored ``voyager/iterations/<i>.json`` (one file per iteration, directly in
    that folder); now one rollout is one world that iterations continue in, stored as
    ``voyager/iterations/<world>/<k>.json``. Resuming one with this code would mix the two
    protocols in one run, so it stops before anything is written."""
    folder = Path(run_dir) / STATE_DIR / "iterations"
    old = sorted(p.name for p in folder.glob("*.json")) if folder.is_dir() else []
    if old:
        raise CheckpointError(
            f"{run_dir} is a Voyager run from before tasks continued in one world (each "
            f"iteration then played a fresh world: {folder / old[0]}); this version plays one "
            "world per rollout and cannot continue it. Start a new run, or resume this one with a "
            "SpeedRunner checkout from before the change."
        )
