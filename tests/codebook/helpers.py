"""Shared rules and builders for the codebook tests (a fake skill API, no sandbox)."""

from __future__ import annotations

import textwrap

from speedrunner.core.codebook import Author, Codebook, Problem, Rules, apply_edits
from speedrunner.core.codebook.edits import Candidate

API = "fake_skill_api"
RULES = Rules(
    api_module=API,
    api_names=frozenset({"find", "SkillEnv", "ACTIONS"}),
    primitive_actions=("go forward", "pick up", "Move West", "focus on OBJ"),
    smoke_test=None,
)
AUTHOR = Author(method="speedrunner", batch_index=3, scripted=False)


def module(*parts: str) -> str:
    """A codebook module: a docstring, then each part dedented, PEP 8 spacing."""
    body = "\n\n\n".join(textwrap.dedent(p).strip("\n") for p in parts)
    return f'"""Test codebook."""\n\n{body}\n'


def only(problems: list[Problem] | tuple[Problem, ...], rule: str) -> Problem:
    """The one problem of ``rule``; fails listing all problems otherwise."""
    matching = [p for p in problems if p.rule == rule]
    assert len(matching) == 1, [str(p) for p in problems]
    return matching[0]


def build(*edits, rules: Rules = RULES, base: Codebook | None = None) -> Candidate:
    """A candidate that must be accepted."""
    result = apply_edits(base or Codebook.empty(), list(edits), AUTHOR, rules=rules)
    assert isinstance(result, Candidate), result.message
    return result


def built(*edits, rules: Rules = RULES, base: Codebook | None = None) -> Codebook:
    """The candidate of ``build`` as an (unstored) codebook, to edit further."""
    candidate = build(*edits, rules=rules, base=base)
    return Codebook(candidate.source, candidate.meta)


GO_TO = '''
def go_to(env, name: str, steps: int = 10) -> bool:
    """Walk to the nearest visible ``name``; True when next to it."""
    for _ in range(steps):
        if _step(env, name):
            return True
    return False
'''

STEP = """
def _step(env, name):
    target = find(env.state, name)
    if target is None:
        return False
    env.act("go forward")
    return target.distance <= 1
"""

IMPORT_FIND = f"from {API} import find"
