"""Fixtures for the sandbox tests: every tier this machine has (and ``rlimits`` always), a
codebook full of good and bad skills, and a fake env whose ``step`` the parent serves."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from speedrunner.core.runtime.skill_call import SkillCall, SkillOutcome, Skills
from speedrunner.core.sandbox import (
    ProcessLimits,
    SandboxSkillRunner,
    available_tiers,
    open_skill_runner,
)
from speedrunner.core.sandbox.commands import TIERS as ALL_TIERS

TIERS = [t for t in ALL_TIERS if t in set(available_tiers()) | {"rlimits"}]
API = "speedrunner.benchmarks.babyai.skill_api"
OPENAI_KEY = "sk-plantedSANDBOXkey0123456789"
GEMINI_KEY = "plantedGEMINIsandboxKEY0123456789"
LIMITS = ProcessLimits(memory_mb=512, max_print_chars=2000)


class CounterEnv:
    """``inc`` adds one; ``noop`` does nothing; anything else is refused; done at ``done_at``."""

    def __init__(self, done_at: int | None = None) -> None:
        self.value = 0
        self.steps: list[str] = []
        self.done_at = done_at

    @property
    def done(self) -> bool:
        return self.done_at is not None and self.value >= self.done_at

    def observation(self) -> dict[str, Any]:
        return {
            "text": f"The counter shows {self.value}.",
            "structured": {"value": self.value},
            "done": self.done,
        }

    def step(self, action: str) -> dict[str, Any]:
        if action not in ("inc", "noop"):
            return {"error": f"{action!r} is not an action (actions: inc, noop)"}
        self.steps.append(action)
        self.value += action == "inc"
        return self.observation()


def call(
    runner: SandboxSkillRunner,
    name: str,
    *args: Any,
    env: CounterEnv | None = None,
    max_actions: int = 50,
    timeout_s: float = 5.0,
    **kwargs: Any,
) -> SkillOutcome:
    env = env or CounterEnv()
    return runner.call(
        SkillCall(name, list(args), kwargs),
        step=env.step,
        observation=env.observation(),
        max_actions=max_actions,
        timeout_s=timeout_s,
    )


def still_works(runner: SandboxSkillRunner) -> None:
    """The containment contract: after whatever happened, the same runner runs a normal call."""
    env = CounterEnv()
    outcome = call(runner, "forward", 2, env=env)
    assert (outcome.stopped_by, outcome.returned, outcome.error) == ("returned", 2, None), (
        outcome.tree
    )
    assert env.steps == ["inc", "inc"]


@pytest.fixture(autouse=True)
def _planted_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    """Keys and proxy settings in the parent's environment that no child may see."""
    monkeypatch.setenv("OPENAI_API_KEY", OPENAI_KEY)
    monkeypatch.setenv("GEMINI_API_KEY", GEMINI_KEY)
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.invalid:3128")


@pytest.fixture(params=TIERS)
def tier(request: pytest.FixtureRequest) -> str:
    return request.param


def open_runner(tier: str, source: str, limits: ProcessLimits = LIMITS) -> SandboxSkillRunner:
    return open_skill_runner(Skills(1, source, {}, API), tier=tier, limits=limits)


@pytest.fixture
def runner(tier: str) -> Iterator[SandboxSkillRunner]:
    r = open_runner(tier, CODEBOOK)
    yield r
    r.close()


CODEBOOK = '''
"""A test codebook: every skill takes the env first."""
import itertools
import math
import re
from collections import Counter, deque
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from speedrunner.benchmarks.babyai.skill_api import SkillEnv, find


def forward(env, n):
    """Press inc n times; return the counter."""
    for _ in range(n):
        env.act("inc")
    return env.state["value"]


def _half(env, n):
    return forward(env, n // 2)


def climb(env, n, *, label="climb"):
    print(label, "start")
    _half(env, n)
    _half(env, n - n // 2)
    return {"label": label, "value": env.state["value"]}


def uses_the_allowed_modules(env):
    @dataclass
    class P:
        x: int

    @lru_cache
    def sq(v):
        return v * v

    words = re.findall(r"[a-z]+", "a bb a")
    return [math.floor(2.5), list(itertools.islice(itertools.count(), 3)), Counter(words)["a"],
        len(deque([1, 2])), P(3).x, sq(4), isinstance(env, SkillEnv), find({"objects": []}, "ball")]


def dotted_import(env):
    import speedrunner.benchmarks.babyai.skill_api as api
    import collections.abc
    return [api.carrying({"carrying": None}), isinstance([], collections.abc.Sequence)]


def catches_everything(env):
    while True:
        try:
            env.act("inc")
        except Exception:
            pass


def swallows_the_stop(env):
    for _ in range(1000):
        try:
            env.act("inc")
        except BaseException:
            pass
    return "kept going"


def refused(env):
    try:
        env.act("jump")
    except Exception as e:
        return "refused: " + type(e).__name__
    return "taken"


def refused_uncaught(env):
    env.act("jump")


def spin(env):
    while True:
        pass


def eat_memory(env):
    blocks = []
    while True:
        blocks.append(bytearray(64 * 1024 * 1024))


def recurse(env, n=0):
    return recurse(env, n + 1)


def shout(env):
    print("x" * 20_000_000)
    for i in range(100_000):
        print("line", i)
    return "shouted"


def exits(env):
    raise SystemExit(3)


def calls_exit(env):
    exit(4)


def import_os(env):
    import os
    return os.getpid()


def import_socket(env):
    import socket
    return socket.socket()


def import_signal(env):
    import signal
    return signal.SIGTERM


def import_builtins(env):
    import builtins
    return builtins.open


def import_importlib(env):
    import importlib
    return importlib.import_module("os")


def dunder_import(env):
    return __import__("os")


def getattr_escape(env):
    return getattr((), "__class__")


def subclasses_escape(env):
    return ().__class__.__base__.__subclasses__()


def module_escape(env):
    import typing
    return typing.sys


def opens_a_file(env):
    return open("/etc/hostname").read()


def returns_object(env):
    return object()


def returns_set(env):
    env.act("inc")
    return {1, 2}


def returns_nan(env):
    return float("nan")


def bad_arithmetic(env):
    return helper_that_fails(env)


def helper_that_fails(env):
    return 1 / 0
'''
