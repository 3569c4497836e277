"""The ``method`` section of each wake/sleep method.

The method *name* alone decides behaviour: there is deliberately no switch that turns
``speedrunner`` into ``speedrunner_no_cl`` (or back), so a config name never lies.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from speedrunner.core.config.schema import MethodConfig, SkillCaps


class ReactConfig(MethodConfig):
    name: Literal["react"] = "react"
    """ReAct: the actor plays with no learned knowledge; sleep does nothing."""


class OPOConfig(MethodConfig):
    name: Literal["opo"] = "opo"
    """OPO: each sleep phase an LLM rewrites a prose strategy guide."""
    guide_max_chars: int = Field(6000, ge=200)
    """Length cap of the strategy guide; longer guides are cut at this many characters."""
    max_trajectory_chars: int = Field(12000, ge=500)
    """Per-trajectory character cap when the batch is shown to the guide writer."""
    max_batch_chars: int = Field(48000, ge=2000)
    """Cap on all trajectories together (about 12k tokens), so the guide prompt fits small
    contexts."""


class CodebookMethodConfig(MethodConfig):
    """Shared parameters of the codebook methods (speedrunner, speedrunner_no_cl, asi)."""

    max_skill_actions: int | None = Field(None, ge=1)
    """Cap on the primitive actions of one skill call; null (default) = the episode's remaining
    budget of env actions (Crafter: up to 2,000; BabyAI: the level's step limit; ScienceWorld:
    ``benchmark.env_step_limit``), so one high-level call may play the rest of an episode. The
    call stops cleanly at the cap; each such stop is counted as a ``max_skill_actions`` cap hit."""
    skill_timeout_s: float | None = Field(None, gt=0)
    """Wall-clock limit of one skill call in the sandbox; null (default) = 60 s + 0.25 s per action
    the call may take (its resolved action cap: 560 s for 2,000 actions). Each call killed by it is
    counted as a ``skill_timeout`` cap hit."""
    max_functions: int | None = Field(None, ge=1)
    """Cap on the codebook's functions (public and private); null (default) = no cap: how large
    the library grows is a finding (the paper's ASI library reaches about 160 functions). An edit
    that would exceed it is rejected and counted as a ``max_functions`` cap hit."""
    max_codebook_chars: int | None = Field(None, ge=1)
    """Cap on the whole codebook module's characters; null (default) = no cap, for speedrunner and
    speedrunner_no_cl too (a cap would make their library size a ceiling, not a result). An
    edit that would exceed it is rejected
    and counted as a ``max_codebook_chars`` cap hit."""
    max_inducer_turns: int = Field(20, ge=1)
    """Turns the sleep-phase inducer may take per sleep phase."""

    def skill_caps(self) -> SkillCaps:
        return SkillCaps(
            self.max_skill_actions,
            self.skill_timeout_s,
            self.max_functions,
            self.max_codebook_chars,
        )


class InducerConfig(CodebookMethodConfig):
    """Shared parameters of SpeedRunner's multi-turn inducer (with and without code execution)."""

    max_tool_output_chars: int = Field(4000, ge=200)
    """Cap on one tool result shown to the inducer (longer results are cut, with a note saying so),
    so a careless print cannot fill the context window."""
    max_trajectory_chars: int = Field(6000, ge=500)
    """Character cap of one episode shown by the ``view_episode`` tool."""

    def own_work_caps(self) -> list[str]:
        caps = [
            f"at most {self.max_inducer_turns} turns (then the last valid draft is submitted)",
            f"each tool result is cut at {self.max_tool_output_chars} characters (a note says so)",
            f"`view_episode` shows at most {self.max_trajectory_chars} characters of an episode",
        ]
        timeout = self.analysis_code_timeout_s()
        return (
            caps
            if timeout is None
            else [*caps, f"`run_python` code is stopped after {timeout:g} s"]
        )


class SpeedRunnerConfig(InducerConfig):
    name: Literal["speedrunner"] = "speedrunner"
    """SpeedRunner: a coding agent with a code interpreter refines the codebook."""
    analysis_timeout_s: float = Field(60.0, gt=0)
    """Wall-clock cap of one analysis-code execution during sleep."""

    def analysis_code_timeout_s(self) -> float | None:
        return self.analysis_timeout_s


class SpeedRunnerNoCLConfig(InducerConfig):
    name: Literal["speedrunner_no_cl"] = "speedrunner_no_cl"
    """SpeedRunner without code execution: the inducer reads trajectories but runs no code."""


class ASIConfig(CodebookMethodConfig):
    name: Literal["asi"] = "asi"
    """ASI: append-only skill induction from successful trajectories."""
    replay_verify: bool = False
    """Keep new functions only if replaying the rewritten trajectory in the sandbox, on the same
    task and seed, succeeds and calls them (the paper's main runs: off)."""
    max_functions_per_episode: int = Field(5, ge=1)
    """New functions one induction call may add (the rest of its answer is ignored)."""
    max_trajectory_chars: int = Field(12000, ge=500)
    """Character cap of the trajectory shown to the induction call."""

    def own_work_caps(self) -> list[str]:
        return [
            f"at most {self.max_functions_per_episode} new functions are read from one answer "
            "(later ones are ignored)",
            f"the episode is shown in at most {self.max_trajectory_chars} characters",
        ]


# Keys a user might reach for to change what a method name means; each points at the right name.
MEANING_CHANGING_KEYS = {
    "code_execution": (
        "whether the inducer executes code is decided by the method name: use 'speedrunner' "
        "(with) or 'speedrunner_no_cl' (without)"
    ),
    "code_interpreter": (
        "whether the inducer executes code is decided by the method name: use 'speedrunner' "
        "(with) or 'speedrunner_no_cl' (without)"
    ),
    "no_cl": "use method name 'speedrunner_no_cl' instead of a flag",
    "append_only": (
        "append-only induction is what 'asi' means; 'speedrunner' edits freely. Pick the method "
        "by name"
    ),
    "use_codebook": "pick 'react' or 'opo' for methods without a codebook; the method name decides",
    "use_guide": "pick 'opo' for a strategy guide; the method name decides",
}
