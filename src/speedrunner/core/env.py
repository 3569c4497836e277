"""The narrow base class every benchmark's env subclasses, in the manner of Gymnasium's ``Env``.

An env reports only the task's own end (``done``); the runner decides and records why
an episode stopped (success, failure, budget). Observations carry text plus a small
structured dict derived from the *same* information the text shows, never privileged
simulator internals, so skills may read it without seeing more than the actor.

One episode is named by an ``EpisodeSpec`` (which task, which seed) and limited by a
``Budget``; a ``Benchmark`` (``benchmark.py``) makes the specs.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, Literal

Split = Literal["train", "eval"]


@dataclass(frozen=True)
class EpisodeSpec:
    """One episode to play: ``env.reset(task, seed)`` reproduces it in any process."""

    split: Split
    index: int
    task: str
    seed: int


@dataclass(frozen=True)
class Budget:
    """Per-episode limits. ``None`` means unlimited for that counter."""

    max_llm_calls: int | None
    max_env_actions: int | None
    wall_clock_s: float


@dataclass(frozen=True)
class Observation:
    """What the agent sees after reset or a step."""

    text: str
    structured: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class StepResult:
    observation: Observation
    reward: float
    done: bool
    info: dict[str, Any] = field(default_factory=dict)


class TextEnv(ABC):
    """A text game. One instance plays one episode at a time and may be reset many times.

    Subclass it, as Gymnasium's ``Env``: the abstract members are required, the rest are
    optional hooks with defaults the runner calls directly (override them in SOME subclasses).

    ``reset(task, seed)``: ``task`` is a benchmark task id (e.g. ``"4-1"`` or
    ``"pick_up_seq_go_to"``), ``seed`` picks the episode deterministically.
    ``actions``: the primitive action vocabulary for this episode (free-text benchmarks
    such as ScienceWorld list the currently valid actions; anything may still be tried).
    ``progress()``: the benchmark metric in [0, 1] for the episode so far.
    ``success``: whether the task has been achieved.
    ``accepts_free_text``: what ``step`` accepts, declared once per env class (``check_text_env``
    verifies it). ``False``: only the strings in ``actions``; anything else raises
    ``InvalidActionError``. ``True``: any text reaches the simulator, whose own reply (e.g.
    ScienceWorld's "No known action matches that input.") is the observation. The actor may type
    exactly what ``step`` accepts, as skills may: each turn its answer is matched against the
    ``actions`` valid *now*, and on a free-text env an answer matching none is sent as typed.
    """

    accepts_free_text: bool
    """Set in every subclass (a class attribute); ``check_text_env`` verifies it."""

    @property
    @abstractmethod
    def instruction(self) -> str: ...

    @property
    @abstractmethod
    def actions(self) -> list[str]: ...

    @property
    @abstractmethod
    def success(self) -> bool: ...

    @abstractmethod
    def reset(self, task: str, seed: int) -> Observation: ...

    @abstractmethod
    def step(self, action: str) -> StepResult: ...

    @abstractmethod
    def progress(self) -> float: ...

    # ----------------------------------------------------------- optional hooks
    @property
    def prompt_actions(self) -> list[str] | None:
        """What the actor's first prompt lists instead of ``actions`` (ScienceWorld: command
        templates rather than thousands of concrete commands); ``None``: ``actions``."""
        return None

    @property
    def action_descriptions(self) -> dict[str, str] | None:
        """What each action does, shown beside it in the prompt (BabyAI: "pick up" = in front)."""
        return None

    @property
    def step_limit(self) -> int | None:
        """The episode's own cap on env actions (BabyAI's level ``max_steps``, ScienceWorld's
        ``env_step_limit``); a skill call never plans past it. ``None``: the env has none."""
        return None

    def close(self) -> None:
        """Release what the env holds (a server connection, a JVM); nothing by default."""
        return None
