"""ASI, SpeedRunner and SpeedRunner without code execution share one ``CodebookMethod``: the
same state, the same knowledge for the actor and the same ``restore``; a new codebook method
writes only its ``sleep``."""

from __future__ import annotations

import pytest

from speedrunner.core.codebook import Author, apply_edits
from speedrunner.core.codebook.edits import AddFunction
from speedrunner.core.method import MethodContext, SkillSupport, SleepResult
from speedrunner.core.trajectory import ReplayResult
from speedrunner.errors import ConfigError
from speedrunner.methods.wake_sleep.asi import ASIMethod
from speedrunner.methods.wake_sleep.codebook_knowledge import CodebookMethod
from speedrunner.methods.wake_sleep.configs import (
    ASIConfig,
    SpeedRunnerConfig,
    SpeedRunnerNoCLConfig,
)
from speedrunner.methods.wake_sleep.speedrunner import SpeedRunnerMethod, SpeedRunnerNoCLMethod
from tests.runtime.fakes import PolicyModel

API = "speedrunner.benchmarks.babyai.skill_api"
SKILL = '''def turn_around(env) -> str:
    """Face the other way.

    Returns:
        The observation text after turning.
    """
    env.act("turn left")
    return env.act("turn left")
'''
METHODS = [
    (ASIMethod, ASIConfig),
    (SpeedRunnerMethod, SpeedRunnerConfig),
    (SpeedRunnerNoCLMethod, SpeedRunnerNoCLConfig),
]


def _context(tmp_path, skills: bool = True) -> MethodContext:
    support = SkillSupport(
        api_module=API,
        api_names=(),
        primitives=("turn left", "turn right", "go forward", "pick up", "drop", "toggle"),
        open_skills=lambda skills: None,
        smoke_test=lambda source: None,
        replay=lambda *a: ReplayResult(success=True),
        sandbox_tier="fake",
    )
    return MethodContext(
        run_dir=tmp_path,
        inducer=PolicyModel(lambda *a: ""),
        benchmark="babyai",
        skills=support if skills else None,
    )


class _OneSkill(CodebookMethod[ASIConfig]):
    """A codebook method of its own: only its sleep is written here (it keeps what it has)."""

    name = "one_skill"

    def sleep(self, batch, *, batch_index: int) -> SleepResult:
        return SleepResult(self.knowledge())


@pytest.mark.parametrize(("method", "config"), METHODS)
def test_each_codebook_method_is_one(method, config) -> None:
    assert issubclass(method, CodebookMethod)
    for shared in ("knowledge", "restore"):
        assert getattr(method, shared) is getattr(CodebookMethod, shared), (
            f"{method.__name__}.{shared}"
        )


@pytest.mark.parametrize(("method", "config"), [*METHODS, (_OneSkill, ASIConfig)])
def test_a_stored_generation_is_restored_and_shown_to_the_actor(tmp_path, method, config) -> None:
    m = method(config(), _context(tmp_path))
    m.restore(0)
    assert m.knowledge().version == 0 and m.knowledge().skills is None
    one = apply_edits(
        m.codebook, [AddFunction(SKILL)], Author(method=m.name, batch_index=0), rules=m.rules
    )
    one.commit(tmp_path)
    fresh = method(config(), _context(tmp_path))
    fresh.restore(1)
    knowledge = fresh.knowledge()
    assert knowledge.version == 1 and "turn_around()" in knowledge.text
    assert knowledge.skills.signatures == {"turn_around": "turn_around() -> str"}


@pytest.mark.parametrize(("method", "config"), METHODS)
def test_a_codebook_method_without_skill_support_says_how_to_start_it(
    tmp_path, method, config
) -> None:
    with pytest.raises(ConfigError, match="start it through a train entry point"):
        method(config(), _context(tmp_path, skills=False))
