"""The inducer's text tool protocol: one ``Tool:`` line and at most one fenced block per turn.

A turn is plain text, so it works the same on every provider (OpenAI, Gemini, vLLM/Qwen,
the fake server and the scripted provider) and lands in the response cache as a string::

    (free reasoning)
    Tool: run_python
    ```python
    print(len(episodes(success=True)))
    ```

Arguments that are names go on the ``Tool:`` line (``Tool: rename_function old new``);
code goes in the block; ``submit``'s note is the block, the rest of the line, or the first
paragraph after it.

Tolerant about form, strict about meaning (``core.answers``): the label may carry markdown
(``**Tool:** run_python``, ``### Tool: run_python``) and any case, ``<think>`` blocks are
ignored, a JSON object (``{"tool": "add_function", "code": "..."}``) is one call, the block
may lack a language tag or its closing fence, and a single block written *before* the Tool
line is used when none follows it. What is never guessed: two fenced blocks for one tool
(rejected, with what was read), and a block cut off at ``max_tokens`` for a tool that edits
the codebook or runs a test (not applied: an incomplete function must not become a skill).
Several tool calls in one turn: only the first runs and the result names the ones that did
not — later calls were written before the first one's result existed, so running them
blind could act on a result the model only imagined.
"""

from __future__ import annotations

import dataclasses
import json
import re
from dataclasses import dataclass, field
from typing import Any

from speedrunner.core.answers import (
    THINK,
    AnswerForm,
    AnswerReader,
    ReadOutcome,
    cut_note,
    fenced_blocks,
    json_objects,
    label_lines,
    label_regex,
    truncated,
)

__all__ = ["NO_TOOL_LINE", "TOOLS", "TOOL_CALL_READER", "ToolCall", "parse_tool_call"]

TOOLS: dict[str, tuple[int, bool]] = {
    # name: (name arguments on the Tool line, needs a fenced block)
    "run_python": (0, True),
    "test_skill": (2, True),
    "view_codebook": (0, False),
    "view_function": (1, False),
    "view_episode": (1, False),
    "add_function": (0, True),
    "edit_function": (1, True),
    "delete_function": (1, False),
    "rename_function": (2, False),
    "make_private": (1, False),
    "make_public": (1, False),
    "submit": (0, False),
}
"""Every tool the protocol knows; a method offers a subset (``speedrunner_no_cl``: no ``run_python``
and no ``test_skill``)."""

NO_TOOL_LINE = (
    "no `Tool:` line found: end every turn with one tool call, e.g. `Tool: view_codebook`"
)

CUT_UNSAFE = frozenset({"add_function", "edit_function", "test_skill"})
"""Tools whose block is never used when the answer was cut inside it."""

_TOOL_LINE = label_regex(r"tool(?:[ \t_]?(?:name|call))?")
_NAME = re.compile(r"[`*_'\"]*([A-Za-z_][A-Za-z0-9_]*)[`*_'\"]*(.*)$", re.DOTALL)
_ARG_STRIP = "`(),'\"*.:;[]"
_CODE_KEYS = ("code", "source", "block", "python", "content", "script")
_NOTE_KEYS = ("note", "summary", "message", "reason")


@dataclass(frozen=True)
class ToolCall(ReadOutcome):
    """One parsed turn: the tool, its name arguments, its block; or why it could not be read."""

    tool: str | None
    args: tuple[str, ...] = ()
    block: str | None = None
    problem: str | None = None
    note: str = ""
    """A remark for the result (e.g. the tool calls of the turn that did not run)."""
    repairs: tuple[str, ...] = field(default=(), compare=False)
    """What tolerance reading the turn needed (empty: the exact protocol)."""
    dropped_calls: int = field(default=0, compare=False)
    """Tool calls written after the first one, which did not run (the turn counts as
    ``repaired``, these as ``dropped_calls``)."""


@dataclass
class _Raw:
    """One tool call as written, before it is checked: from a Tool line or a JSON object."""

    name: str
    rest: str
    shown: str
    args: tuple[str, ...] | None = None
    block: str | None = None
    blocks: list[Any] = field(default_factory=list)
    before: list[Any] = field(default_factory=list)
    exact: bool = True
    """Its Tool label written exactly as the prompt shows it."""


def parse_tool_call(
    text: str,
    offered: frozenset[str] | set[str],
    *,
    finish_reason: str | None = None,
    max_tokens: Any = None,
) -> ToolCall:
    """The turn's tool call, checked against the tools ``offered`` and their arity.

    ``finish_reason`` ``"length"`` (the answer hit ``max_tokens``) decides what a block left
    open means, and the problem then says how much room an answer has."""
    reading = TOOL_CALL_READER.read(text)
    calls = reading.value or []
    repairs = [*reading.repairs, *("marked-up Tool label" for c in calls if not c.exact)]
    cut = truncated(finish_reason)
    if not calls:
        problem = NO_TOOL_LINE + (f" ({cut_note(max_tokens)})" if cut else "")
        return ToolCall(None, problem=problem, repairs=tuple(repairs))
    first = calls[0]
    note = ""
    if len(calls) > 1:
        rest = ", ".join(f"`{c.shown}`" for c in calls[1:])
        note = (
            f"this turn had {len(calls)} tool calls; only the first (`{first.shown}`) ran, "
            f"not {rest}: send one tool call per turn and read its result before the next"
        )
        repairs.append(f"{len(calls)} tool calls in one turn; only the first ran")
    return dataclasses.replace(
        _check(first, offered, repairs, note, cut, max_tokens), dropped_calls=len(calls) - 1
    )


def _from_lines(body: str) -> list[_Raw] | None:
    lines = label_lines(body, _TOOL_LINE, "Tool")
    blocks = fenced_blocks(body)
    calls = []
    for k, line in enumerate(lines):
        m = _NAME.match(line.value.strip())
        if m is None:
            continue
        end = lines[k + 1].start if k + 1 < len(lines) else len(body)
        begin = lines[k - 1].end if k else 0
        after = [b for b in blocks if line.end <= b.start < end]
        before = [b for b in blocks if begin <= b.start and b.end <= line.start]
        rest = m.group(2)
        calls.append(
            _Raw(
                m.group(1),
                rest,
                f"Tool: {m.group(1)}{rest}".strip(),
                blocks=after,
                before=before,
                block=body[line.end : end],
                exact=line.exact,
            )
        )
    return calls or None


def _from_json(body: str) -> list[_Raw] | None:
    calls = []
    for block in reversed(fenced_blocks(body)):  # a dict literal in Python code is no tool call
        if block.lang not in ("", "json"):
            body = body[: block.start] + body[block.end :]
    for obj in json_objects(body):
        keys = {str(k).lower(): v for k, v in obj.items()}
        name = next(
            (
                keys[k]
                for k in ("tool", "tool_name", "name", "function")
                if isinstance(keys.get(k), str)
            ),
            None,
        )
        if name is None or name.strip().lower() not in TOOLS:
            continue
        arguments = keys.get(
            "arguments", keys.get("args", keys.get("parameters", keys.get("input")))
        )
        if isinstance(arguments, str):
            try:
                arguments = json.loads(arguments)
            except json.JSONDecodeError:
                arguments = [arguments]
        fields = {
            **keys,
            **(
                {str(k).lower(): v for k, v in arguments.items()}
                if isinstance(arguments, dict)
                else {}
            ),
        }
        code = next((fields[k] for k in _CODE_KEYS if isinstance(fields.get(k), str)), None)
        note = next((fields[k] for k in _NOTE_KEYS if isinstance(fields.get(k), str)), None)
        if isinstance(arguments, list):
            names = tuple(str(a) for a in arguments)
        elif isinstance(arguments, dict):
            names = tuple(
                str(v)
                for k, v in arguments.items()
                if str(k).lower() not in (*_CODE_KEYS, *_NOTE_KEYS) and isinstance(v, str | int)
            )
        else:
            names = ()
        tool = name.strip().lower()
        calls.append(
            _Raw(
                tool,
                "",
                f'{{"tool": "{tool}"}}',
                args=names,
                block=code if code is not None else note,
            )
        )
    return calls or None


TOOL_CALL_READER: AnswerReader[list[_Raw]] = AnswerReader(
    (THINK,), (AnswerForm("", _from_lines), AnswerForm("JSON tool call", _from_json))
)
"""A Tool line as asked (any markdown around its label), else a JSON tool call."""


def _check(
    call: _Raw,
    offered: frozenset[str] | set[str],
    repairs: list[str],
    note: str,
    cut: bool,
    max_tokens: Any,
) -> ToolCall:
    name = call.name.lower()
    if name != call.name:
        repairs.append("tool name case")
    fixed = tuple(repairs)
    if name not in offered:
        return ToolCall(
            name,
            problem=f"unknown tool {name!r}; tools: {', '.join(sorted(offered))}",
            note=note,
            repairs=fixed,
        )
    arity, needs_block = TOOLS[name]
    json_call = call.args is not None
    if name == "submit":
        if json_call:
            return ToolCall(name, (), (call.block or "").strip(), note=note, repairs=fixed)
        block = call.blocks[0].code if call.blocks else None
        if block is None and not call.rest.strip().strip("`*").strip() and call.block:
            # The one-line note on the lines after: its first paragraph (prose may follow it).
            first, *after = re.split(r"\n[ \t]*\n", call.block.strip(), maxsplit=1)
            if after and after[0].strip():
                fixed = (*fixed, "prose after the submit note")
            return ToolCall(name, (), first.strip(), note=note, repairs=fixed)
        return ToolCall(
            name,
            (),
            (block or call.rest.strip().strip("`*").strip() or call.block or "").strip(),
            note=note,
            repairs=fixed,
        )
    if json_call:
        args = call.args or ()
    else:
        args = tuple(
            a.strip(_ARG_STRIP) for a in re.split(r"[\s,]+", call.rest) if a.strip(_ARG_STRIP)
        )
    if arity == 0 and args:
        repairs.append("text after a tool that takes no arguments")
        args = ()
    elif not json_call and not args and call.rest.strip():
        repairs.append("punctuation after the tool name")
    if len(args) != arity:
        want = {0: "no arguments", 1: "one name", 2: "two names"}[arity]
        return ToolCall(
            name,
            args,
            problem=f"`{name}` takes {want} on the Tool line, got {len(args)}: "
            f"{call.rest.strip()!r}",
            note=note,
            repairs=tuple(repairs),
        )
    if not needs_block:
        return ToolCall(name, args, None, note=note, repairs=tuple(repairs))
    if json_call:
        block = call.block
    else:
        block, problem = _block(call, name, repairs, cut, max_tokens)
        if problem is not None:
            return ToolCall(name, args, problem=problem, note=note, repairs=tuple(repairs))
    if not (block and block.strip()):
        return ToolCall(
            name,
            args,
            problem=f"`{name}` needs a fenced ```python block after the Tool line",
            note=note,
            repairs=tuple(repairs),
        )
    return ToolCall(name, args, block, note=note, repairs=tuple(repairs))


def _block(
    call: _Raw, name: str, repairs: list[str], cut: bool, max_tokens: Any
) -> tuple[str | None, str | None]:
    """The one block this call means, or the problem that there is not exactly one."""
    blocks = call.blocks
    if not blocks and len(call.before) == 1:
        blocks = call.before
        repairs.append("code block before the Tool line")
    elif not blocks and len(call.before) > 1:
        return None, (
            f"`{name}` needs one fenced block after the Tool line; there is none after it and "
            f"{len(call.before)} before it: write the Tool line, then the one block"
        )
    if len(blocks) > 1:
        langs = ", ".join(f"```{b.lang}" if b.lang else "```" for b in blocks)
        return None, (
            f"`{name}` takes one fenced block and this call has {len(blocks)} ({langs}); "
            "nothing ran: put all the code in one block (one add_function may define several "
            "functions)"
        )
    if not blocks:
        return None, None
    block = blocks[0]
    if not block.closed:
        if cut and name in CUT_UNSAFE:
            return None, (
                f"the ```python block of `{name}` was cut off before its closing fence "
                f"({cut_note(max_tokens)}); the code is incomplete, so it was not applied: "
                "send it again, shorter (e.g. one function per add_function)"
            )
        repairs.append("unclosed final fence")
    return block.code, None
