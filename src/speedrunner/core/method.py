"""What a method is to the runner: knowledge for the actor's prompt, and a sleep phase.

The runner calls only this base class. A new method copies ``methods/wake_sleep/opo.py``
and changes its prompt context (``knowledge``) and ``sleep``.
"""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar, Protocol

from speedrunner.core.llm.types import Completion, Model
from speedrunner.core.skill_types import SkillRunner, Skills

if TYPE_CHECKING:
    from speedrunner.core.config.schema import MethodConfig
    from speedrunner.core.env import Budget, EpisodeSpec, Observation, TextEnv
    from speedrunner.core.trajectory import ReplayResult, Trajectory


@dataclass(frozen=True)
class Knowledge:
    """What the actor knows at one version: rendered once per batch, then fixed.

    ``title``/``text`` become a section of the actor's first message (nothing when empty).
    """

    version: int
    title: str = ""
    text: str = ""
    skills: Skills | None = None
    """The skills the actor may call at this version (codebook methods); ``text`` shows their
    API."""

    def prompt_section(self) -> tuple[str, str] | None:
        return (self.title, self.text) if self.text else None


@dataclass
class SleepResult:
    """The new knowledge and the LLM calls the sleep phase paid for (amortised over its batch)."""

    knowledge: Knowledge
    completions: list[Completion] = field(default_factory=list)
    cap_hits: dict[str, int] = field(default_factory=dict)
    """Edits the library caps rejected this sleep phase: ``max_functions`` /
    ``max_codebook_chars`` -> count."""


class AnalysisOutput(Protocol):
    """What one run of analysis code did (``core.sandbox.analysis.AnalysisResult``)."""

    @property
    def stdout(self) -> str: ...
    @property
    def error(self) -> str | None: ...
    @property
    def timed_out(self) -> bool: ...
    @property
    def violation(self) -> str | None:
        """Set when the code broke the sandbox's protocol (e.g. wrote a reply of its own)."""


class AnalysisSandbox(Protocol):
    """A sandboxed Python session for a sleep phase's analysis code; its variables persist
    between ``run`` calls until a timeout, a crash or ``restart`` (``core.sandbox.analysis``)."""

    @property
    def tier(self) -> str: ...
    @property
    def isolation(self) -> str | None:
        """The weak-isolation note to record (``core.sandbox.tiers.isolation_note``) or ``None``."""

    def run(self, code: str, timeout_s: float) -> AnalysisOutput:
        """Run ``code``; never raises for anything the code does."""

    def restart(self) -> None: ...
    def close(self) -> None: ...


class OpenAnalysis(Protocol):
    def __call__(self, *, mounts: Sequence[Path], preload: Sequence[str]) -> AnalysisSandbox:
        """Start a session in which ``mounts`` are readable (read-only, at the same paths) and
        ``preload`` modules are imported before it drops privileges."""


@dataclass(frozen=True)
class SkillSupport:
    """What codebook methods get from the run: the benchmark's skill API and primitive
    actions, and the sandbox (an import smoke test for candidate codebooks, a replayer that
    plays a script of actions on one task and seed, for ASI's verification, and a session for
    analysis code). A method uses the sandbox only through these, never its internals."""

    api_module: str
    """The module skills import, e.g. ``speedrunner.benchmarks.babyai.skill_api``."""
    api_names: tuple[str, ...]
    """Its public names; a skill may not shadow them."""
    primitives: tuple[str, ...]
    """The primitive actions (empty for free-text envs); a skill may not shadow them."""
    open_skills: Callable[[Skills], SkillRunner]
    """A sandboxed runner for one episode's skill calls."""
    smoke_test: Callable[[str], str | None]
    """Import a candidate codebook's source in the sandbox: ``None`` or what went wrong."""
    replay: Callable[[str, int, Skills, list[str]], ReplayResult]
    """``replay(task, seed, skills, lines)``: play a script of actor actions, no LLM."""
    sandbox_tier: str
    """The isolation tier skill code runs under (``bwrap``, ``unshare``, ``rlimits``)."""
    observe: Callable[[str, int], Observation] | None = None
    """``observe(task, seed)``: an env's first observation on that task and seed (the inducer's
    example of ``env.state``; episodes store only the text). In a run, an env of the run's own
    pool: no new JVM or server connection per sleep. ``None``: not offered."""
    sandbox_requested: str | None = None
    """What ``run.sandbox`` asked for (``auto`` or a tier): analysis code over the run directory
    runs under ``rlimits`` only if it was named (``None``: whoever built this named
    ``sandbox_tier``)."""

    open_analysis: OpenAnalysis | None = None
    """Starts a sandboxed session for analysis code over the run's files (SpeedRunner's
    ``run_python``), under the run's tier; ``None``: not offered."""
    prepare: Callable[[int], None] | None = None
    """``prepare(n)``: boot ``n`` skill sandboxes ahead for the episodes the next phase starts at
    once (``open_skills`` hands them out); called when a sleep starts. ``None``: not offered."""
    on_close: Callable[[], None] | None = None
    """Stops what is kept ready (booted sandboxes); the run calls ``close()`` when it ends."""

    def close(self) -> None:
        if self.on_close is not None:
            self.on_close()


@dataclass(frozen=True)
class MethodContext:
    """What a method is built with: where to store its knowledge, which model sleeps, and
    (for codebook methods) the run's skill support."""

    run_dir: Path
    inducer: Model
    benchmark: str
    skills: SkillSupport | None = None
    knowledge_title: str | None = None
    """The method's display name (its spec's ``knowledge_title``), for what its stored knowledge
    says wrote it; ``None``: its registered name."""


@dataclass(frozen=True)
class TrainingContext:
    """What a method with its own training phase gets instead of the actor's episodes.

    A method may set ``Method.own_training`` and override ``train_batch(specs, ctx)`` (Voyager:
    one world per rollout, its iterations continuing in it); the runner then calls it for each batch
    instead of playing the actor, and writes the metrics rows, sleep, checkpoint and evaluation as
    for any method. It must save each trajectory (``save_trajectory``) and be deterministic given
    the stored knowledge and the model's answers: a batch killed midway is re-run from its start.
    """

    env: Callable[[], AbstractContextManager[TextEnv]]
    """Borrow an env from the run's pool for one rollout."""
    budget: Budget
    """The benchmark's per-rollout budget."""
    stop: threading.Event
    """Set when the run stops; check it before each paid call."""
    on_episode: Callable[[Trajectory], None]
    """Report a finished rollout (the progress line)."""


class Method(ABC):
    """Subclass it: ``knowledge``, ``sleep`` and ``restore`` are required; a method with its own
    training phase sets ``own_training`` and overrides ``train_batch``."""

    name: str
    """Set in every subclass (a class attribute): the method's registered name."""

    own_training: ClassVar[bool] = False
    """True in methods whose ``train_batch`` replaces the actor's episodes (Voyager)."""

    @abstractmethod
    def knowledge(self) -> Knowledge:
        """The knowledge the actor uses now."""

    @abstractmethod
    def sleep(self, batch: list[Trajectory], *, batch_index: int) -> SleepResult:
        """Update the knowledge from one batch of training trajectories.

        Must be deterministic given the batch and the model's answers, and must store the
        new generation atomically before returning (a killed sleep is simply re-run; its
        LLM calls replay from the cache because their call ids are stable).
        """

    @abstractmethod
    def restore(self, version: int) -> None:
        """Load knowledge generation ``version`` from the run directory (on resume)."""

    # ----------------------------------------------------------- optional hook
    def train_batch(self, specs: list[EpisodeSpec], ctx: TrainingContext) -> list[Trajectory]:
        """Play one training batch in the method's own way (``TrainingContext``); called instead
        of the actor's episodes when ``own_training`` is set."""
        raise TypeError(
            f"{type(self).__name__} sets own_training = True but does not define train_batch: "
            "define it, or leave own_training False so the actor plays the batch"
        )


class MethodFactory(Protocol):
    def __call__(self, config: MethodConfig, ctx: MethodContext) -> Method: ...
