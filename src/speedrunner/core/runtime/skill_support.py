"""The run's side of LLM-written skills: the benchmark's skill API and the sandbox, for
the actor's skill calls (wake) and for codebook methods (an import smoke test of every
candidate generation, and ASI's replays)."""

from __future__ import annotations

import importlib
import threading
import time
from collections.abc import Callable
from contextlib import AbstractContextManager, closing
from dataclasses import dataclass
from functools import partial

from speedrunner.core.config.schema import RunConfig
from speedrunner.core.env import Observation, TextEnv
from speedrunner.core.method import SkillSupport
from speedrunner.core.runtime.replay import replay_script
from speedrunner.core.runtime.skill_call import SkillRunner, Skills
from speedrunner.core.sandbox import (
    available_tiers,
    open_analysis_session,
    open_skill_runner,
    resolve_tier,
)
from speedrunner.core.sandbox.channel import ChannelTimeout
from speedrunner.core.sandbox.limits import ProcessLimits
from speedrunner.core.sandbox.process import SandboxDied, SandboxProcess, SandboxStartError
from speedrunner.core.sandbox.skills import (
    SandboxSkillRunner,
    launch_skill_process,
    load_codebook_in,
)
from speedrunner.core.sandbox.tiers import check_analysis_tier
from speedrunner.core.sandbox.tracing import LOAD_FAILED
from speedrunner.core.trajectory import ReplayResult
from speedrunner.errors import ConfigError, SandboxUnavailableError

__all__ = [
    "EnvLease",
    "ImportCheck",
    "SkillApi",
    "SkillSandboxes",
    "build_skill_support",
    "check_skill_api_in_sandbox",
    "first_observation",
    "fresh_envs",
    "load_skill_api",
    "sandbox_tier",
    "skill_api_module",
]

SMOKE_TIMEOUT_S = 20.0

EnvLease = Callable[[], AbstractContextManager[TextEnv]]
"""Lends an env for a ``with`` block: the run's ``EnvPool.env`` (the sleep phase's replays and
first observations then use the episodes' envs; on ScienceWorld a fresh env is a new JVM,
seconds of CPU before it is warm), or ``fresh_envs(make_env)``."""


def fresh_envs(make_env: Callable[[], TextEnv]) -> EnvLease:
    """An ``EnvLease`` that makes a new env for every ``with`` block and closes it after."""
    return lambda: closing(make_env())


def skill_api_module(benchmark: str) -> str:
    """The skill API module the benchmark's spec declares; a ``ConfigError`` when it declares
    none."""
    from speedrunner.core.specs import BENCHMARKS

    spec = BENCHMARKS.get(benchmark)
    if spec.skill_api is None:
        raise ConfigError(
            f"benchmark {benchmark!r} declares no skill API (BenchmarkSpec.skill_api), so a "
            "method with skills cannot run on it; pick a method without skills (e.g. the "
            "baseline), or declare one (docs/add-benchmark.md)"
        )
    return spec.skill_api


@dataclass(frozen=True)
class SkillApi:
    """A benchmark's skill API, imported and checked: what skills may call and must not shadow."""

    module: str
    names: tuple[str, ...]
    primitives: tuple[str, ...]


def load_skill_api(benchmark: str) -> SkillApi:
    """Import the benchmark's declared skill API; a ``ConfigError`` that says why when it cannot
    be used."""
    module = skill_api_module(benchmark)
    try:
        api = importlib.import_module(module)
    except Exception as e:  # any failure of someone else's module is the user's to fix, not a crash
        raise ConfigError(
            f"benchmark {benchmark!r}: its skill API {module} cannot be imported "
            f"({type(e).__name__}: {e}); fix that module or BenchmarkSpec.skill_api"
        ) from None
    primitives = vars(api).get("PRIMITIVE_ACTIONS")
    names = vars(api).get("__all__")
    if not isinstance(primitives, (tuple, list)) or not all(isinstance(a, str) for a in primitives):
        raise ConfigError(
            f"benchmark {benchmark!r}: its skill API {module} must declare PRIMITIVE_ACTIONS, "
            "a tuple of the env's action words (() when actions are free text); "
            "see docs/add-benchmark.md"
        )
    if not isinstance(names, (tuple, list)) or not all(isinstance(n, str) for n in names):
        raise ConfigError(
            f"benchmark {benchmark!r}: its skill API {module} must declare __all__, the "
            "names skills may use; see docs/add-benchmark.md"
        )
    return SkillApi(module, tuple(names), tuple(primitives))


def sandbox_tier(requested: str) -> str:
    """The tier skill code will run under: the best one here for ``auto``, else the named
    one, which must work here (a config that asks for bwrap on a machine without it fails
    loudly instead of running with less isolation)."""
    try:
        return resolve_tier(requested)
    except SandboxUnavailableError as e:
        raise ConfigError(
            f"run.sandbox: {e}; use run.sandbox=auto (this machine offers: "
            f"{', '.join(available_tiers()) or 'none'})"
        ) from e


def check_skill_api_in_sandbox(benchmark: str, requested_tier: str) -> None:
    """Boot one skill sandbox of the tier the run will use and import the skill API in it: a
    ``ConfigError`` naming the module and the fix when it does not import there (before the run,
    not at its first sleep, after a batch and an evaluation were paid for)."""
    api = load_skill_api(benchmark)
    tier = sandbox_tier(requested_tier)
    try:
        launch_skill_process(tier, ProcessLimits(), api.module, wait=True).kill()
    except SandboxStartError as e:
        lines = [x.strip() for x in str(e).splitlines() if x.strip()]
        cause = lines[-1] if lines else str(e)
        raise ConfigError(
            f"benchmark {benchmark!r}: its skill API {api.module} imports here but not in the "
            f"{tier} sandbox that runs skill code ({cause}). The sandbox sees the interpreter and "
            "its site-packages, speedrunner, and the package the skill API is loaded from, nothing "
            f"else of this environment; fix: have everything {api.module} imports installed (pip "
            "install, or pip install -e for a package under development) rather than found "
            "through PYTHONPATH or a path hook, and readable by every user (docs/add-benchmark.md, "
            "'Your skill API in the sandbox')"
        ) from None


def build_skill_support(config: RunConfig, envs: EnvLease) -> SkillSupport:
    api = load_skill_api(config.benchmark.name)
    api_module = api.module
    tier = sandbox_tier(config.run.sandbox)
    if config.method.analysis_code_timeout_s() is not None:  # it runs analysis code over the run
        try:
            check_analysis_tier(config.run.sandbox, tier)
        except SandboxUnavailableError as e:
            raise ConfigError(f"run.sandbox: {e}") from e
    open_skills: Callable[[Skills], SkillRunner] = partial(open_skill_runner, tier=tier)
    caps = config.method.skill_caps()

    def replay(task: str, seed: int, skills: Skills, lines: list[str]) -> ReplayResult:
        with envs() as env:
            return replay_script(
                env,
                task,
                seed,
                lines,
                skills=skills,
                open_skills=open_skills,
                max_skill_actions=caps.max_skill_actions,
                timeout_s=caps.skill_timeout_s,
                max_env_actions=config.benchmark.max_env_actions,
            )

    check, sandboxes = ImportCheck(api_module, tier), SkillSandboxes(tier, api_module)

    def close() -> None:
        check.close()
        sandboxes.close()

    return SkillSupport(
        api_module=api_module,
        api_names=api.names,
        primitives=api.primitives,
        open_skills=sandboxes.open,
        smoke_test=check,
        replay=replay,
        sandbox_tier=tier,
        observe=partial(first_observation, envs),
        sandbox_requested=config.run.sandbox,
        open_analysis=partial(open_analysis_session, tier=tier, requested=config.run.sandbox),
        prepare=sandboxes.prepare,
        on_close=close,
    )


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

    Every edit and every submit of a sleep is checked, and a sandbox's boot would add to every
    inducer turn's wait (with a fast model, a large share of a sleep's time beyond its model
    calls). So when a check ends, the next
    check's sandbox is launched at once and boots while the inducer's next turn is with the model;
    it is fresh, never used, when the check takes it. Launched only from the main thread, where the
    sleep runs: a sandbox dies with the thread that started it (``SandboxProcess``). ``close()``
    kills the one kept ready.
    """

    def __init__(self, api_module: str, tier: str, limits: ProcessLimits | None = None) -> None:
        self.api_module = api_module
        self.tier = tier
        self.limits = limits or ProcessLimits()
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
            error = load_codebook_in(
                process, source, self.api_module, time.monotonic() + SMOKE_TIMEOUT_S
            )
        except ChannelTimeout:
            return (
                f"importing the module did not finish within {SMOKE_TIMEOUT_S:.0f} s "
                "(top-level code must be cheap)"
            )
        except SandboxDied as e:
            return f"importing the module failed: {e}"
        if error is None:
            return None
        lines = error.removeprefix(f"{LOAD_FAILED}:").strip("\n").splitlines()
        return "\n".join(
            [
                "importing the module failed:",
                *(x for x in lines if x != "Traceback (most recent call last):"),
            ]
        )

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
        return launch_skill_process(self.tier, self.limits, self.api_module, wait=True)

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


class SkillSandboxes:
    """Opens each episode's skill runner, on a sandbox booted ahead when one is ready.

    An episode that holds skills launches its sandbox before its first model call, but when ten
    or thirty episodes start at once on a small machine their boots (and the launches' share of
    the run's own CPU) outlast that call, and the first skill calls wait for them.
    ``prepare(n)``, called by the run loop when a sleep starts, boots ``n`` sandboxes, one at a
    time, while the sleep waits for its model; ``open`` hands one out (fresh, never used; the
    codebook is loaded at the first call as always) or, when none is ready, launches one as before
    and one fewer is booted ahead. The launches run
    on one thread that lives until ``close()``: a sandbox dies with the thread that started it
    (``SandboxProcess``), so ``close()`` only when no episode is running. A launch that fails
    here is dropped: the episode launches its own and reports why.
    """

    def __init__(self, tier: str, api_module: str, limits: ProcessLimits | None = None) -> None:
        self.tier = tier
        self.api_module = api_module
        self.limits = limits or ProcessLimits()
        self._ready: list[SandboxProcess] = []
        self._to_launch = 0
        self._booting = 0
        self._closed = False
        self._changed = threading.Condition()
        self._launcher: threading.Thread | None = None

    def open(self, skills: Skills) -> SkillRunner:
        process = None
        if skills.api_module == self.api_module:
            with self._changed:
                if self._ready:
                    process = self._ready.pop(0)
                elif self._to_launch:  # the phase has begun: this episode launches its own instead
                    self._to_launch -= 1
        if process is not None and not process.alive:  # died while it waited (killed from outside)
            process.kill()
            process = None
        return SandboxSkillRunner(skills, self.tier, self.limits, process=process)

    def prepare(self, n: int) -> None:
        with self._changed:
            if self._closed:
                return
            self._to_launch = max(self._to_launch, n - len(self._ready) - self._booting)
            if self._launcher is None:
                self._launcher = threading.Thread(
                    target=self._launch_loop, name="speedrunner-sandbox-launcher", daemon=True
                )
                self._launcher.start()
            self._changed.notify()

    @property
    def ready(self) -> int:
        """Sandboxes launched ahead and not yet handed out."""
        with self._changed:
            return len(self._ready)

    def _launch_loop(self) -> None:
        while True:
            with self._changed:
                while not self._closed and self._to_launch == 0:
                    self._changed.wait()
                if self._closed:
                    return
                self._to_launch -= 1
                self._booting += 1
            try:
                # One boot at a time, so they take one CPU and leave the other to the sleep.
                process = launch_skill_process(self.tier, self.limits, self.api_module, wait=True)
            except Exception:  # e.g. no processes left: the episodes launch their own and say why
                with self._changed:
                    self._to_launch, self._booting = 0, 0
                continue
            with self._changed:
                self._booting -= 1
                if not self._closed:
                    self._ready.append(process)
                    continue
            process.kill()
            return

    def close(self) -> None:
        with self._changed:
            self._closed = True
            ready, self._ready = self._ready, []
            self._changed.notify_all()
        for process in ready:
            process.kill()
        if self._launcher is not None:
            self._launcher.join(timeout=10)
