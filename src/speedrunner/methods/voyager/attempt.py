"""One action-agent answer made into a skill: parsed, validated with the library, and run in
the sandbox from the world's start (the env stays in this process; the skill's actions come
back over the sandbox's pipe).

The answer's last public function is the skill; the functions before it are its helpers
and join the library with it (a helper restated unchanged is skipped). If the skill's name
is taken, the old function is renamed ``nameV2`` (``nameV3``, ...) in the same edit batch.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from speedrunner.core.answers import (
    THINK,
    AnswerReader,
    Block,
    JsonField,
    ReadOutcome,
    distinct,
    fenced_blocks,
    json_answer,
    label_lines,
    label_regex,
    strip_think,
)
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
from speedrunner.core.llm.types import ToolSpec, ToolUse
from speedrunner.core.method import SkillSupport
from speedrunner.core.runtime.skill_call import SkillCall
from speedrunner.errors import InvalidActionError
from speedrunner.methods.voyager.state import retired_name
from speedrunner.methods.wake_sleep.asi_parse import parse_induction

__all__ = [
    "CODE_READER",
    "FENCE",
    "NATIVE_NOTE",
    "SUBMIT_SKILL",
    "Attempt",
    "CodeAnswer",
    "read_code",
    "read_skill_call",
    "write_and_run",
]

FENCE = re.compile(r"```(?:python|py)?\s*\n(.*?)```", re.DOTALL)


_CODE_LABEL = label_regex("code")
_PYTHON = ("python", "py", "python3", "")
_CODE_KEYS = ("code", "python", "source", "skill", "function")
_DEF = re.compile(r"^(?:async\s+)?def\s+([A-Za-z_]\w*)", re.MULTILINE)


@dataclass(frozen=True)
class CodeAnswer(ReadOutcome):
    """What an action-agent answer holds: its plan, its code, or why no code was read."""

    plan: str
    code: str | None
    problem: str | None = None
    repairs: tuple[str, ...] = ()
    """What tolerance reading it needed (empty: the asked-for ``Code:`` + one python block)."""
    dropped_calls: int = 0
    """Native tool calls of the turn after the first, which were not read."""


def read_code(text: str) -> CodeAnswer:
    """The plan and the code of an action-agent answer; the code is every Python fenced block
    after the ``Code:`` label (any markdown or case; all blocks when there is no label),
    joined — the prompt asks for the skill with its helpers. ``<think>`` blocks never count,
    a fence may lack its language tag or its closing line (validation then judges the code),
    and ```` ``` ```` inside a string does not end a block. An answer written as JSON
    (``{"plan": ..., "code": "def ..."}``, or the text answer under ``answer``; bare or in a
    ```` ```json ```` fence) is read from its decoded strings; two JSON answers whose code
    differs are not chosen between."""
    reading = CODE_READER.read(text)
    if (answer := reading.value) is None:
        return _from_text(reading.text, reading.repairs)
    return dataclasses.replace(answer, repairs=(*reading.repairs, *answer.repairs))


SUBMIT_SKILL = ToolSpec(
    "submit_skill",
    "Submit the skill for the task: helper functions first, "
    "then the main function `def name(env) -> str`.",
    {
        "type": "object",
        "properties": {
            "plan": {
                "type": "string",
                "description": "step by step, how the skill completes the task",
            },
            "code": {
                "type": "string",
                "description": "Python source: helpers, then the main function (no fences)",
            },
        },
        "required": ["code"],
    },
)
"""The action agent's one native tool (``model.tool_protocol: native``)."""
NATIVE_NOTE = (
    "\n\nSubmit the skill through the function-calling interface: call `submit_skill` once, "
    "with the plan and the code as its JSON arguments (code as a string, no fences), "
    "instead of writing the Code block."
)
"""Appended to the action agent's system prompt under the native protocol."""


def read_skill_call(text: str, uses: tuple[ToolUse, ...]) -> CodeAnswer:
    """A native turn's skill: the first ``submit_skill`` call's code. A turn without a call is
    read as text (models sometimes write the code anyway); calls after the first are not read
    (counted in ``dropped_calls``); arguments that are not one JSON object with ``code`` are a
    problem that names what was wrong."""
    if not uses:
        return read_code(text)
    use, dropped = uses[0], len(uses) - 1
    repairs = (f"{len(uses)} tool calls in one turn; only the first was read",) if dropped else ()
    if use.name != SUBMIT_SKILL.name:
        return CodeAnswer(
            "", None, f"unknown tool {use.name!r}; the one tool is submit_skill", repairs, dropped
        )
    try:
        raw = json.loads(use.arguments) if use.arguments.strip() else {}
    except json.JSONDecodeError as e:
        return CodeAnswer(
            "",
            None,
            f"the arguments of `submit_skill` are not valid JSON ({e.msg} at character "
            f'{e.pos}); send one JSON object with "code"',
            repairs,
            dropped,
        )
    code = raw.get("code") if isinstance(raw, dict) else None
    if not isinstance(code, str) or not code.strip():
        return CodeAnswer(
            "",
            None,
            '`submit_skill` needs "code": the skill\'s Python source as a string',
            repairs,
            dropped,
        )
    plan = raw.get("plan") if isinstance(raw.get("plan"), str) else ""
    if _python_blocks(code):  # fenced anyway: the blocks are the code
        fenced = _from_text(code, ())
        return CodeAnswer(plan, fenced.code, None, (*repairs, "fenced code in the call"), dropped)
    return CodeAnswer(plan, code.strip() + "\n", None, repairs, dropped)


def _python_blocks(body: str) -> list[Block]:
    return [b for b in fenced_blocks(body) if b.lang in _PYTHON and b.code.strip()]


def _from_text(body: str, repairs: tuple[str, ...]) -> CodeAnswer:
    labels = label_lines(body, _CODE_LABEL, "Code")
    cut = labels[0].start if labels else 0
    blocks = _python_blocks(body)
    after = [b for b in blocks if b.start >= cut] or blocks
    plan = body[: labels[0].start] if labels else body
    if not after:
        return CodeAnswer(plan.strip(), None, "the answer has no ```python code block", repairs)
    fixes = list(repairs)
    unique = list({b.code.strip(): b for b in after}.values())
    if len(unique) < len(after):  # the same block written twice (a model that repeated its answer)
        after = unique
        fixes.append("the same block repeated")
    if not labels:
        fixes.append("no Code label")
    elif not labels[0].exact:
        fixes.append("marked-up Code label")
    if len(after) > 1:
        fixes.append(f"code in {len(after)} blocks, joined")
    if any(not b.lang for b in after):
        fixes.append("fence without a language tag")
    if any(not b.closed for b in after):
        fixes.append("unclosed final fence")
    return CodeAnswer(
        plan.strip(), "\n\n".join(b.code.strip() for b in after) + "\n", None, tuple(fixes)
    )


def _from_json(fields: list[JsonField]) -> CodeAnswer:
    readings = []
    for f in fields:
        if f.wrapped:
            inner = _from_text(strip_think(f.value)[0], ())
        else:
            value = "\n\n".join(map(str, f.value)) if isinstance(f.value, list) else str(f.value)
            plan = next(
                (str(f.obj[k]) for k in ("plan", "explain", "explanation") if f.obj.get(k)), ""
            )
            inner = (
                _from_text(value, ())
                if _python_blocks(value)
                else CodeAnswer(
                    plan,
                    value.strip() + "\n" if value.strip() else None,
                    None if value.strip() else f"the JSON field {f.key!r} is empty",
                )
            )
        readings.append(inner)
    codes = distinct([r.code for r in readings])
    if len(codes) > 1:
        read = "; ".join(", ".join(_DEF.findall(c or "")) or "no function" for c in codes)
        problem = (
            f"the answer has {len(codes)} JSON objects with different code (defining "
            f"{read}); nothing ran: answer with one Code block"
        )
        return CodeAnswer(readings[0].plan, None, problem)
    return readings[0]


CODE_READER: AnswerReader[CodeAnswer] = AnswerReader(
    (THINK,), (json_answer(_CODE_KEYS, _from_json, unless=_python_blocks),)
)
"""The answer as JSON (unless a python block stands beside it); else the Code label and blocks."""


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


def write_and_run(
    answer: CodeAnswer,
    env: TextEnv,
    first_text: str,
    start: dict[str, Any],
    *,
    base: Codebook,
    draft: Codebook,
    earlier: Sequence[Edit],
    rules: Rules,
    support: SkillSupport,
    max_actions: int,
    timeout_s: float,
) -> Attempt:
    """``base``: the stored generation; ``earlier``: this batch's accepted edits on top of it
    (giving ``draft``). ``error`` is set when the code cannot run or the skill raised."""
    attempt = Attempt(end=start, end_text=first_text)
    attempt.plan = answer.plan
    if answer.code is None:
        attempt.error = answer.problem or "the answer has no ```python code block"
        return attempt
    attempt.code = answer.code
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


def _run(
    attempt: Attempt,
    env: TextEnv,
    start: dict[str, Any],
    first_text: str,
    support: SkillSupport,
    max_actions: int,
    timeout_s: float,
) -> None:
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
        state.update(
            text=result.observation.text, structured=result.observation.structured, done=result.done
        )
        return dict(state)

    if attempt.codebook is None or attempt.main is None:
        raise RuntimeError("a skill ran before it was validated")  # our bug, not the model's
    runner = support.open_skills(attempt.codebook.to_skills(support.api_module))
    attempt.tier = runner.tier
    try:
        outcome = runner.call(
            SkillCall(attempt.main),
            step=act,
            observation=dict(state),
            max_actions=max_actions,
            timeout_s=timeout_s,
        )
    finally:
        runner.close()
    attempt.tree, attempt.returned, attempt.error = outcome.tree, outcome.returned, outcome.error
    attempt.stopped_by = outcome.stopped_by
    attempt.end, attempt.end_text, attempt.done = state["structured"], state["text"], state["done"]
