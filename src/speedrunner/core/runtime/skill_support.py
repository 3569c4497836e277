"""The run's side of LLM-written skills: the benchmark's skill API and the sandbox, for
the actor's skill calls (wake) and for codebook methods (an import smoke test of every
candidate generation, and ASI's replays)."""

from __future__ import annotations

import importlib
import threading
import time
from collections.abc import Callable
from contextlib import AbstractContextManager, closing
from functools import partial

from speedrunner.core.config.schema import RunConfig
from speedrunner.core.env import Observation, TextEnv
from speedrunner.core.method import SkillSupport
from speedrunner.core.runtime.replay import ReplayResult, replay_script
from speedrunner.core.runtime.skill_call import SkillRunner, Skills
from speedrunner.core.sandbox import available_tiers, open_skill_runner, resolve_tier
from speedrunner.core.sandbox.channel import ChannelTimeout
from speedrunner.core.sandbox.limits import Limits
from speedrunner.core.sandbox.process import SandboxDied, SandboxProcess, SandboxStartError
from speedrunner.core.sandbox.skills import launch_skill_process, load_codebook_in
from speedrunner.core.sandbox.tiers import check_analysis_tier
from speedrunner.errors import ConfigError, SandboxUnavailableError

__all__ = ["EnvLease", "ImportCheck", "build_skill_support", "first_observation", "fresh_envs",
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

    return SkillSupport(api_module=api_module, api_names=tuple(getattr(api, "__all__", ())), primitives=primitives,
                        open_skills=open_skills, smoke_test=ImportCheck(api_module, tier), replay=replay, sandbox_tier=tier,
                        observe=partial(first_observation, envs), sandbox_requested=config.run.sandbox)


def first_observation(envs: EnvLease, task: str, seed: int) -> Observation:
    """An env's observation after ``reset(task, seed)``: the same from a fresh env or a used one
    (the env checker requires a second reset to read as the first; episodes already rely on it,
    since the pool hands any free env to any episode)."""
    with envs() as env:
        return env.reset(task, seed)


class ImportCheck:
    """The smoke test of a candidate codebook: loads ``source`` in a fresh skill sandbox exactly
    as an episode's sandbox loads it (the same child, preloads and restricted loader); ``None``
    or what went wrong, from the codebook's own frames.

    Every edit and every submit of a sleep is checked, and a sandbox takes ~0.1 s of wall time to
    boot, which the inducer's turn would wait for (in the paper's BabyAI schedule at 100 ms per
    call, half of every sleep's time beyond its model calls). So when a check ends, the next
    check's sandbox is launched at once and boots while the inducer's next turn is with the model;
    it is fresh, never used, when the check takes it. Launched only from the main thread, where the
    sleep runs: a sandbox dies with the thread that started it (``SandboxProcess``). ``close()``
    kills the one kept ready.
    """

    def __init__(self, api_module: str, tier: str, limits: Limits | None = None) -> None:
        self.api_module = api_module
        self.tier = tier
        self.limits = limits or Limits()
        self._ready: SandboxProcess | None = None
        self._lock = threading.Lock()

    def __call__(self, source: str) -> str | None:
        process = self._take()
        try:
            verdict = self._load(process, source)
        finally:
            process.kill()
        self._launch_next()  # not after an interrupt or a broken sandbox: those propagate
        return verdict

    def _load(self, process: SandboxProcess, source: str) -> str | None:
        try:
            error = load_codebook_in(process, source, self.api_module, time.monotonic() + SMOKE_TIMEOUT_S)
        except ChannelTimeout:
            return f"importing the module did not finish within {SMOKE_TIMEOUT_S:.0f} s (top-level code must be cheap)"
        except SandboxDied as e:
            return f"importing the module failed: {e}"
        if error is None:
            return None
        lines = error.removeprefix("the codebook did not load:").strip("\n").splitlines()
        return "\n".join(["importing the module failed:", *(x for x in lines if x != "Traceback (most recent call last):")])

    def _take(self) -> SandboxProcess:
        with self._lock:
            process, self._ready = self._ready, None
        if process is not None:
            try:
                process.wait_ready()
                if process.alive:
                    return process
            except SandboxStartError:  # killed while it waited (or broken: a fresh start says so)
                pass
            process.kill()
        process = launch_skill_process(self.tier, self.limits, self.api_module)
        try:
            process.wait_ready()
        except BaseException:
            process.kill()
            raise
        return process

    def _launch_next(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return
        with self._lock:
            if self._ready is None:
                self._ready = launch_skill_process(self.tier, self.limits, self.api_module)

    def close(self) -> None:
        with self._lock:
            process, self._ready = self._ready, None
        if process is not None:
            process.kill()
