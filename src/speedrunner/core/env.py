"""The narrow protocol every benchmark implements, in the manner of Gymnasium's ``Env``.

An env reports only the task's own end (``done``); the runner decides and records why
an episode stopped (success, failure, budget). Observations carry text plus a small
structured dict derived from the *same* information the text shows, never privileged
simulator internals, so skills may read it without seeing more than the actor.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable


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


@runtime_checkable
class TextEnv(Protocol):
    """A text game. One instance plays one episode at a time and may be reset many times.

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

    @property
    def instruction(self) -> str: ...

    @property
    def actions(self) -> list[str]: ...

    @property
    def success(self) -> bool: ...

    def reset(self, task: str, seed: int) -> Observation: ...

    def step(self, action: str) -> StepResult: ...

    def progress(self) -> float: ...

    def close(self) -> None: ...
