"""Shared rules and builders for the codebook tests (a fake skill API, no sandbox)."""

from __future__ import annotations

import textwrap

from speedrunner.core.codebook import Problem, Rules

API = "fake_skill_api"
RULES = Rules(api_module=API, api_names=frozenset({"find", "SkillEnv", "ACTIONS"}),
              primitive_actions=("go forward", "pick up", "Move West", "focus on OBJ"), smoke_test=None)


def module(*parts: str) -> str:
    """A codebook module: a docstring, then each part dedented, PEP 8 spacing."""
    body = "\n\n\n".join(textwrap.dedent(p).strip("\n") for p in parts)
    return f'"""Test codebook."""\n\n{body}\n'


def only(problems: list[Problem] | tuple[Problem, ...], rule: str) -> Problem:
    """The one problem of ``rule``; fails listing all problems otherwise."""
    matching = [p for p in problems if p.rule == rule]
    assert len(matching) == 1, [str(p) for p in problems]
    return matching[0]


GO_TO = '''
def go_to(env, name: str, steps: int = 10) -> bool:
    """Walk to the nearest visible ``name``; True when next to it."""
    for _ in range(steps):
        if _step(env, name):
            return True
    return False
'''

STEP = '''
def _step(env, name):
    target = find(env.state, name)
    if target is None:
        return False
    env.act("go forward")
    return target.distance <= 1
'''

IMPORT_FIND = f"from {API} import find"
