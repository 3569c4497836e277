"""An actor action that calls a skill: ``go_to("red ball")`` parsed with ``ast``, never run here.

Only a call of a listed public skill with literal arguments is a skill call. Anything
else that looks like a call — an unknown name, a variable, an expression, a nested call —
is an invalid action with feedback, like any other unparseable answer. The call itself
runs in the episode's sandbox behind the ``SkillRunner`` protocol. The types the episode
and the runner exchange live in ``core/skill_types.py`` (below the sandbox) and are
re-exported here.
"""

from __future__ import annotations

import ast
from typing import Any

from speedrunner.core import pyast
from speedrunner.core.skill_types import SkillCall, SkillOutcome, SkillRunner, Skills

__all__ = [
    "SkillCall",
    "SkillOutcome",
    "SkillRunner",
    "Skills",
    "looks_like_call",
    "outcome_note",
    "parse_skill_call",
]


def looks_like_call(text: str) -> bool:
    """``name(...)``: the shape the actor uses for skills (primitive actions never have it)."""
    stripped = text.strip().strip("`").strip()
    head, paren, _ = stripped.partition("(")
    return bool(paren) and stripped.endswith(")") and head.strip().isidentifier()


def parse_skill_call(text: str, skills: dict[str, str]) -> SkillCall | str:
    """The ``SkillCall`` in ``text``, or an error message for the actor.

    ``skills`` maps each public skill name to its signature (shown in the error).
    """
    source = text.strip().strip("`").strip().rstrip(";")
    try:
        tree = pyast.parse_expression(source)
    except SyntaxError as e:
        return f"{source!r} is not a valid Python call ({e.msg})"
    call = tree.body
    if not isinstance(call, ast.Call) or not isinstance(call.func, ast.Name):
        return f"{source!r} is not a call of a skill by name"
    name = call.func.id
    if name not in skills:
        known = ", ".join(skills) or "none yet"
        return f"{name!r} is not a skill (skills: {known})"
    args: list[Any] = []
    kwargs: dict[str, Any] = {}
    try:
        for node in call.args:
            if isinstance(node, ast.Starred):
                raise ValueError("*args")
            args.append(pyast.literal_eval(node))
        for kw in call.keywords:
            if kw.arg is None:
                raise ValueError("**kwargs")
            kwargs[kw.arg] = pyast.literal_eval(kw.value)
    except ValueError:
        return (
            f"the arguments of {name}(...) must be literals (strings, numbers, True/False/None, "
            f"lists, tuples, dicts); use {skills[name]}"
        )
    return SkillCall(name, args, kwargs)


def outcome_note(
    call: SkillCall,
    outcome: SkillOutcome,
    actions: int,
    max_chars: int = 300,
    *,
    per_call_cap: bool = True,
) -> str:
    """The concise result the actor sees after the call's final observation; ``per_call_cap``
    False: a ``max_actions`` stop was the episode's budget running out, not the call's cap."""
    took = f"{actions} action{'s' if actions != 1 else ''}"
    if outcome.error is not None:
        lines = [line for line in outcome.error.strip().splitlines() if line.strip()]
        what = "raised " + " | ".join(lines[-3:])
    elif outcome.stopped_by == "max_actions":
        what = (
            "stopped at the per-call action cap"
            if per_call_cap
            else "stopped: the episode's action budget is spent"
        )
    elif outcome.stopped_by == "timeout":
        what = "stopped at the per-call time limit"
    elif outcome.stopped_by == "episode_done":
        what = "stopped: the episode ended"
    else:
        what = f"returned {outcome.returned!r}"
    return f"[skill {call.text} took {took}; {what}]"[:max_chars]
