"""The run's side of LLM-written skills: the benchmark's skill API and the sandbox, for
the actor's skill calls (wake) and for codebook methods (an import smoke test of every
candidate generation, and ASI's replays)."""

from __future__ import annotations

import importlib
import json
from collections.abc import Callable
from contextlib import AbstractContextManager, closing
from functools import partial

from speedrunner.core.config.schema import RunConfig
from speedrunner.core.env import Observation, TextEnv
from speedrunner.core.method import SkillSupport
from speedrunner.core.runtime.replay import ReplayResult, replay_script
from speedrunner.core.runtime.skill_call import SkillRunner, Skills
from speedrunner.core.sandbox import (
    available_tiers,
    open_analysis_session,
    open_skill_runner,
    resolve_tier,
)
from speedrunner.core.sandbox.tiers import check_analysis_tier
from speedrunner.errors import ConfigError, SandboxUnavailableError

__all__ = ["EnvLease", "build_skill_support", "first_observation", "fresh_envs", "import_in_sandbox",
           "sandbox_tier", "skill_api_module"]

SMOKE_TIMEOUT_S = 20.0

EnvLease = Callable[[], AbstractContextManager[TextEnv]]
"""Lends an env for a ``with`` block: the run's ``EnvPool.env`` (the sleep phase's replays and
first observations then use the episodes' envs; on ScienceWorld a fresh env is a new JVM,
~2 s and 6 CPU-seconds before it is warm), or ``fresh_envs(make_env)``."""


def fresh_envs(make_env: Callable[[], TextEnv]) -> EnvLease:
    """An ``EnvLease`` that makes a new env for every ``with`` block and closes it after."""
    return lambda: closing(make_env())


def skill_api_module(benchmark: str) -> str:
    return f"speedrunner.benchmarks.{benchmark}.skill_api"


def sandbox_tier(requested: str) -> str:
    """The tier skill code will run under: the best one here for ``auto``, else the named
    one, which must work here (a config that asks for bwrap on a machine without it fails
    loudly instead of running with less isolation)."""
    try:
        return resolve_tier(requested)
    except SandboxUnavailableError as e:
        raise ConfigError(f"run.sandbox: {e}; use run.sandbox=auto (this machine offers: "
                          f"{', '.join(available_tiers()) or 'none'})") from e


def build_skill_support(config: RunConfig, envs: EnvLease) -> SkillSupport:
    api_module = skill_api_module(config.benchmark.name)
    api = importlib.import_module(api_module)
    primitives = tuple(getattr(api, "ACTIONS", None) or getattr(api, "ACTION_NAMES", None) or ())
    tier = sandbox_tier(config.run.sandbox)
    if getattr(config.method, "analysis_timeout_s", None) is not None:  # it runs analysis code over the run
        try:
            check_analysis_tier(config.run.sandbox, tier)
        except SandboxUnavailableError as e:
            raise ConfigError(f"run.sandbox: {e}") from e
    open_skills: Callable[[Skills], SkillRunner] = partial(open_skill_runner, tier=tier)
    method = config.method

    def replay(task: str, seed: int, skills: Skills, lines: list[str]) -> ReplayResult:
        with envs() as env:
            return replay_script(env, task, seed, lines, skills=skills, open_skills=open_skills,
                                 max_skill_actions=getattr(method, "max_skill_actions", None),
                                 timeout_s=getattr(method, "skill_timeout_s", None),
                                 max_env_actions=config.benchmark.max_env_actions)

    def smoke_test(source: str) -> str | None:
        return import_in_sandbox(source, api_module, tier)

    return SkillSupport(api_module=api_module, api_names=tuple(getattr(api, "__all__", ())), primitives=primitives,
                        open_skills=open_skills, smoke_test=smoke_test, replay=replay, sandbox_tier=tier,
                        observe=partial(first_observation, envs), sandbox_requested=config.run.sandbox)


def first_observation(envs: EnvLease, task: str, seed: int) -> Observation:
    """An env's observation after ``reset(task, seed)``: the same from a fresh env or a used one
    (the env checker requires a second reset to read as the first; episodes already rely on it,
    since the pool hands any free env to any episode)."""
    with envs() as env:
        return env.reset(task, seed)


def import_in_sandbox(source: str, api_module: str, tier: str) -> str | None:
    """Load ``source`` as the sandbox loads a codebook; ``None`` or the error it raised."""
    code = ("from speedrunner.core.sandbox.restrict import load_codebook\n"
            f"load_codebook({json.dumps(source)}, {json.dumps(api_module)})\n")
    session = open_analysis_session(tier=tier)
    try:
        result = session.run(code, timeout_s=SMOKE_TIMEOUT_S)
    finally:
        session.close()
    if result.timed_out:
        return f"importing the module did not finish within {SMOKE_TIMEOUT_S:.0f} s (top-level code must be cheap)"
    if result.error is None:
        return None
    # The author needs the module's own frames and the error, not the sandbox's loader.
    lines = result.error.strip().splitlines()
    own = next((i for i, line in enumerate(lines) if 'File "codebook.py"' in line), None)
    return "importing the module failed:\n" + "\n".join(lines[own:] if own is not None else lines[-1:])
