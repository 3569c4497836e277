"""An actor action that calls a skill: ``go_to("red ball")`` parsed with ``ast``, never run here.

Only a call of a listed public skill with literal arguments is a skill call. Anything
else that looks like a call — an unknown name, a variable, an expression, a nested call —
is an invalid action with feedback, like any other unparseable answer. Parsing is all
this module does: the call itself runs in the episode's sandbox.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Any

__all__ = ["SkillCall", "looks_like_call", "parse_skill_call"]


@dataclass(frozen=True)
class SkillCall:
    """A parsed skill call; ``text`` is its canonical form, as history records it."""

    name: str
    args: list[Any] = field(default_factory=list)
    kwargs: dict[str, Any] = field(default_factory=dict)

    @property
    def text(self) -> str:
        parts = [repr(a) for a in self.args] + [f"{k}={v!r}" for k, v in self.kwargs.items()]
        return f"{self.name}({', '.join(parts)})"


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
        tree = ast.parse(source, mode="eval")
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
            args.append(ast.literal_eval(node))
        for kw in call.keywords:
            if kw.arg is None:
                raise ValueError("**kwargs")
            kwargs[kw.arg] = ast.literal_eval(kw.value)
    except ValueError:
        return (f"the arguments of {name}(...) must be literals (strings, numbers, True/False/None, "
                f"lists, tuples, dicts); use {skills[name]}")
    return SkillCall(name, args, kwargs)
