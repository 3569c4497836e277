"""The library caps (``method.max_functions``, ``method.max_codebook_chars``): none by
default, so a library may grow as large as its method makes it; when set, the validator
rejects an edit that exceeds one and says which cap it was."""

from __future__ import annotations

import dataclasses

from speedrunner.core.codebook import (
    AddFunction,
    Codebook,
    CodebookSizeLimits,
    EditRejected,
    apply_edits,
)
from speedrunner.core.runtime.caps import codebook_limits, rejected_caps
from speedrunner.methods.voyager.config import VoyagerConfig
from speedrunner.methods.wake_sleep.configs import (
    ASIConfig,
    SpeedRunnerConfig,
    SpeedRunnerNoCLConfig,
)

from .helpers import AUTHOR, RULES, build


def function(i: int) -> str:
    return (
        f'def skill_{i}(env) -> str:\n    """Skill number {i}."""\n'
        '    return env.act("go forward")\n'
    )


def test_by_default_no_method_caps_its_library_and_200_functions_validate():
    for config in (ASIConfig(), SpeedRunnerConfig(), SpeedRunnerNoCLConfig()):
        assert codebook_limits(config) == CodebookSizeLimits()
        assert (config.max_functions, config.max_codebook_chars) == (None, None)
    assert codebook_limits(VoyagerConfig()) == CodebookSizeLimits()
    candidate = build(*(AddFunction(function(i)) for i in range(200)))
    assert len(candidate.meta.functions) == 200 and len(candidate.source) > 15_000


def test_a_set_cap_rejects_the_edit_that_exceeds_it_and_names_the_cap():
    rules = dataclasses.replace(
        RULES, limits=codebook_limits(ASIConfig(max_functions=3, max_codebook_chars=10_000))
    )
    assert (
        len(build(*(AddFunction(function(i)) for i in range(3)), rules=rules).meta.functions) == 3
    )
    edits = [AddFunction(function(i)) for i in range(4)]
    rejected = apply_edits(_empty(), edits, AUTHOR, rules=rules)
    assert isinstance(rejected, EditRejected)
    assert rejected_caps(rejected.problems) == ["max_functions"]
    assert "more than the cap of 3 (method.max_functions)" in rejected.message

    chars = dataclasses.replace(
        RULES, limits=codebook_limits(SpeedRunnerConfig(max_codebook_chars=300))
    )
    rejected = apply_edits(
        _empty(), [AddFunction(function(i)) for i in range(4)], AUTHOR, rules=chars
    )
    assert isinstance(rejected, EditRejected) and rejected_caps(rejected.problems) == [
        "max_codebook_chars"
    ]
    assert "(method.max_codebook_chars)" in rejected.message


def test_a_per_function_cap_is_not_a_library_cap_hit():
    long = 'def walk(env):\n    """Walk."""\n' + "    env.act('go forward')\n" * 70
    rejected = apply_edits(_empty(), [AddFunction(long)], AUTHOR, rules=RULES)
    assert isinstance(rejected, EditRejected) and "more than the cap of 60" in rejected.message
    assert rejected_caps(rejected.problems) == []


def _empty() -> Codebook:
    return Codebook.empty()
