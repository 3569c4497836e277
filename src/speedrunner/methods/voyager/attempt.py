"""One action-agent answer made into a skill: parsed, validated with the library, and run in
the sandbox from the world's start (the env stays in this process; the skill's actions come
back over the sandbox's pipe).

The answer's last public function is the skill; the functions before it are its helpers
and join the library with it (a helper restated unchanged is skipped). If the skill's name
is taken, the old function is renamed ``nameV2`` (``nameV3``, ...) in the same edit batch.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from speedrunner.core.answers import fenced_blocks, label_lines, label_regex, strip_think
from speedrunner.core.codebook import (
    AddFunction,
    Author,
    Codebook,
    Edit,
    EditRejected,
    RenameFunction,
    Rules,
    apply_edits,
)
from speedrunner.core.codebook.parse import split_module
from speedrunner.core.env import TextEnv
from speedrunner.core.method import SkillSupport
from speedrunner.core.runtime.skill_call import SkillCall
from speedrunner.errors import InvalidActionError
from speedrunner.methods.voyager.state import retired_name
from speedrunner.methods.wake_sleep.asi_parse import parse_induction

__all__ = ["FENCE", "Attempt", "read_code", "write_and_run"]

FENCE = re.compile(r"```(?:python|py)?\s*\n(.*?)```", re.DOTALL)


_CODE_LABEL = label_regex("code")
_PYTHON = ("python", "py", "python3", "")


def read_code(text: str) -> tuple[str, str | None]:
    """(the plan, the code) of an action-agent answer; the code is every Python fenced block
    after the ``Code:`` label (any markdown or case; all blocks when there is no label),
    joined — the prompt asks for the skill with its helpers. ``<think>`` blocks never count,
    a fence may lack its language tag or its closing line (validation then judges the code),
    and ```` ``` ```` inside a string does not end a block."""
    body, _ = strip_think(text)
    labels = label_lines(body, _CODE_LABEL, "Code")
    cut = labels[0].start if labels else 0
    blocks = [b for b in fenced_blocks(body) if b.lang in _PYTHON]
    after = [b for b in blocks if b.start >= cut] or blocks
    plan = body[:labels[0].start] if labels else body
    if not after:
        return plan.strip(), None
    return plan.strip(), "\n\n".join(b.code.strip() for b in after) + "\n"


@dataclass
class Attempt:
    """One action-agent answer, validated and run."""

    code: str = ""
    plan: str = ""
    main: str | None = None
    edits: list[Edit] = field(default_factory=list)
    retired_as: str | None = None
    codebook: Codebook | None = None
    error: str | None = None
    tree: dict[str, Any] | None = None
    returned: Any = None
    executed: list[str] = field(default_factory=list)
    end: dict[str, Any] = field(default_factory=dict)
    end_text: str = ""
    done: bool = False
    info: dict[str, Any] = field(default_factory=dict)
    tier: str | None = None
    stopped_by: str | None = None
    """How the skill's call ended (``SkillOutcome.stopped_by``); ``None``: it never ran."""


def write_and_run(text: str, env: TextEnv, first_text: str, start: dict[str, Any], *, base: Codebook,
                  draft: Codebook, earlier: Sequence[Edit], rules: Rules, support: SkillSupport,
                  max_actions: int, timeout_s: float) -> Attempt:
    """``base``: the stored generation; ``earlier``: this batch's accepted edits on top of it
    (giving ``draft``). ``error`` is set when the code cannot run or the skill raised."""
    attempt = Attempt(end=start, end_text=first_text)
    attempt.plan, code = read_code(text)
    if code is None:
        attempt.error = "the answer has no ```python code block"
        return attempt
    attempt.code = code
    parsed = parse_induction(f"<functions>\n{attempt.code}\n</functions>")
    public = [f for f in parsed.functions if not f.name.startswith("_")]
    if parsed.problem or not public:
        attempt.error = parsed.problem or "the code defines no public function (the skill)"
        return attempt
    main = public[-1]
    attempt.main = main.name
    existing = {f.name: f.text.strip() for f in split_module(draft.source).functions}
    edits: list[Edit] = []
    if main.name in existing:
        attempt.retired_as = retired_name(main.name, set(existing))
        edits.append(RenameFunction(main.name, attempt.retired_as))
    for function in parsed.functions:
        if function is not main and existing.get(function.name) == function.source.strip():
            continue  # a helper restated unchanged
        edits.append(AddFunction("\n".join([*parsed.imports, function.source])))
    candidate = apply_edits(base, [*earlier, *edits], Author(method="voyager"), rules=rules)
    if isinstance(candidate, EditRejected):
        attempt.error = candidate.message
        return attempt
    attempt.edits = edits
    attempt.codebook = Codebook(candidate.source, candidate.meta)
    _run(attempt, env, start, first_text, support, max_actions, timeout_s)
    return attempt


def _run(attempt: Attempt, env: TextEnv, start: dict[str, Any], first_text: str, support: SkillSupport,
         max_actions: int, timeout_s: float) -> None:
    state: dict[str, Any] = {"text": first_text, "structured": start, "done": False}

    def act(action: str) -> dict[str, Any]:
        if state["done"]:
            return {"error": f"the episode is over; {action!r} was not taken"}
        try:
            result = env.step(action)
        except InvalidActionError as e:
            return {"error": str(e)}
        attempt.executed.append(action)
        attempt.info = result.info
        state.update(text=result.observation.text, structured=result.observation.structured, done=result.done)
        return dict(state)

    if attempt.codebook is None or attempt.main is None:
        raise RuntimeError("a skill ran before it was validated")  # our bug, not the model's
    runner = support.open_skills(attempt.codebook.to_skills(support.api_module))
    attempt.tier = runner.tier
    try:
        outcome = runner.call(SkillCall(attempt.main), step=act, observation=dict(state), max_actions=max_actions,
                              timeout_s=timeout_s)
    finally:
        runner.close()
    attempt.tree, attempt.returned, attempt.error = outcome.tree, outcome.returned, outcome.error
    attempt.stopped_by = outcome.stopped_by
    attempt.end, attempt.end_text, attempt.done = state["structured"], state["text"], state["done"]
