"""The inducer's native tool protocol: the same tools as ``speedrunner_tools``, as function calls.

Chosen by ``model.tool_protocol: native`` (``inducer.tool_protocol`` when the inducer has its
own model) on a provider that speaks tool calls (OpenAI, vLLM with a tool-call parser,
Gemini); the scripted provider has none, so the text protocol stays in use there. A native
call becomes the very :class:`ToolCall` the text parser produces, so every tool runs the same
way under both protocols. A turn with no native call is read with the text parser (models
sometimes write the call as text anyway); a turn with several calls runs the first and
answers the others "not run", each with its own tool message, as the APIs require.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable

from speedrunner.core.llm.types import Message, ToolSpec, ToolUse
from speedrunner.methods.wake_sleep.speedrunner_tools import (
    NO_TOOL_LINE,
    TOOLS,
    ToolCall,
    parse_tool_call,
)

__all__ = [
    "NATIVE_NOTE",
    "from_native",
    "native_arguments",
    "native_messages",
    "read_turn",
    "tool_specs",
]

_CODE = {"type": "string", "description": "Python source"}
_NAME = {"type": "string", "description": "a function name in the draft"}
_PARAMS: dict[str, tuple[str, dict[str, dict[str, str]]]] = {
    # name: (description, properties); every property is required
    "run_python": (
        "Run analysis code in the sandbox session (no network); printed output comes back, "
        "errors as tracebacks. Variables persist between calls; `episodes`, `generations` and "
        "`codebook_source` are imported.",
        {"code": _CODE},
    ),
    "test_skill": (
        "Replay training episode `episode` up to its step `step` in a fresh env, then run `code` "
        '(one call of a public draft skill, e.g. name("red ball")).',
        {
            "episode": {"type": "string", "description": "episode index"},
            "step": {"type": "string", "description": "step index"},
            "code": _CODE,
        },
    ),
    "view_codebook": ("The draft's source and every function's call/error counts.", {}),
    "view_function": ("One function of the draft with its counts.", {"name": _NAME}),
    "view_episode": (
        "One training episode of this batch or an earlier one, turn by turn.",
        {"index": {"type": "string", "description": "episode index"}},
    ),
    "add_function": (
        "Add new functions: one block, one or more `def name(env, ...)` "
        "(helpers with their caller, imports first), validated as one edit.",
        {"code": _CODE},
    ),
    "edit_function": (
        "Replace function `name` with the code's `def name`.",
        {"name": _NAME, "code": _CODE},
    ),
    "delete_function": ("Delete a function from the draft.", {"name": _NAME}),
    "rename_function": (
        "Rename a function and every reference to it in the codebook.",
        {"old": _NAME, "new": {"type": "string", "description": "the new name"}},
    ),
    "make_private": ("NAME becomes _NAME, hidden from the agent.", {"name": _NAME}),
    "make_public": (
        "Show a private function (_NAME) to the agent again (needs a docstring).",
        {"name": _NAME},
    ),
    "submit": (
        "The draft becomes the next codebook generation; the sleep ends.",
        {"note": {"type": "string", "description": "one line: what changed and why"}},
    ),
}
_ARGS = {
    "test_skill": ("episode", "step"),
    "view_function": ("name",),
    "view_episode": ("index",),
    "edit_function": ("name",),
    "delete_function": ("name",),
    "rename_function": ("old", "new"),
    "make_private": ("name",),
    "make_public": ("name",),
}
"""Which JSON properties are the text protocol's name arguments, in order."""
_BLOCK = {
    "run_python": "code",
    "test_skill": "code",
    "add_function": "code",
    "edit_function": "code",
    "submit": "note",
}
"""Which JSON property is the text protocol's block."""
assert set(_PARAMS) == set(TOOLS), "every text-protocol tool has a native form"


def tool_specs(offered: Iterable[str]) -> tuple[ToolSpec, ...]:
    """The offered tools as native definitions, in the text protocol's order (stable: they
    are part of every call's cache key)."""
    wanted = set(offered)
    out = []
    for name in TOOLS:
        if name not in wanted:
            continue
        description, props = _PARAMS[name]
        out.append(
            ToolSpec(
                name,
                description,
                {
                    "type": "object",
                    "properties": props,
                    "required": [p for p in props if name != "submit"],
                },
            )
        )
    return tuple(out)


def from_native(use: ToolUse, offered: frozenset[str] | set[str]) -> ToolCall:
    """One native call as the text protocol's :class:`ToolCall` (or why it cannot run)."""
    if use.name not in offered:
        return ToolCall(
            use.name or None,
            problem=f"unknown tool {use.name!r}; tools: {', '.join(sorted(offered))}",
        )
    try:
        raw = json.loads(use.arguments) if use.arguments.strip() else {}
    except json.JSONDecodeError as e:
        return ToolCall(
            use.name,
            problem=f"the arguments of `{use.name}` are not valid JSON ({e.msg} at "
            f"character {e.pos}); send one JSON object",
        )
    if not isinstance(raw, dict):
        return ToolCall(
            use.name,
            problem=(
                f"the arguments of `{use.name}` must be a JSON object, got {type(raw).__name__}"
            ),
        )
    _, props = _PARAMS[use.name]
    unknown = sorted(set(raw) - set(props))
    if unknown:
        return ToolCall(
            use.name,
            problem=(
                f"`{use.name}` has no argument(s) {unknown}; it takes {sorted(props) or 'none'}"
            ),
        )
    missing = [p for p in props if use.name != "submit" and not str(raw.get(p, "")).strip()]
    if missing:
        return ToolCall(use.name, problem=f"`{use.name}` needs {', '.join(missing)}")
    args = tuple(str(raw[p]).strip() for p in _ARGS.get(use.name, ()))
    block_key = _BLOCK.get(use.name)
    block = str(raw.get(block_key, "")) if block_key else None
    return ToolCall(use.name, args, block)


def native_arguments(call: ToolCall) -> dict[str, str]:
    """The JSON arguments a model would send natively for a text-protocol call (the inverse
    of :func:`from_native`; fakes use it to speak both protocols from one script)."""
    if call.tool is None or call.tool not in _PARAMS:
        raise ValueError(f"not a known tool call: {call.tool!r}")
    out = dict(zip(_ARGS.get(call.tool, ()), call.args, strict=False))
    key = _BLOCK.get(call.tool)
    if key is not None and call.block is not None:
        out[key] = call.block
    return out


NO_NATIVE_CALL = (
    "no tool call found: end every turn with one call through the function-calling "
    "interface, e.g. the `view_codebook` tool (it takes no arguments)"
)


def read_turn(
    text: str,
    uses: tuple[ToolUse, ...],
    offered: frozenset[str] | set[str],
    *,
    finish_reason: str | None = None,
    max_tokens: int | None = None,
    native: bool = False,
) -> ToolCall:
    """The turn's call: the first native one, else the text protocol's reading of the text.
    Under the native protocol (``native``) a turn with no call is told so in its own terms,
    not in the text protocol's (``Tool:`` lines)."""
    if not uses:
        call = parse_tool_call(text, offered, finish_reason=finish_reason, max_tokens=max_tokens)
        if (
            native
            and call.tool is None
            and call.problem is not None
            and call.problem.startswith(NO_TOOL_LINE)
        ):
            call = dataclasses.replace(
                call, problem=NO_NATIVE_CALL + call.problem[len(NO_TOOL_LINE) :]
            )
        return call
    call = from_native(uses[0], offered)
    if len(uses) > 1:
        note = (
            f"one tool per turn: only `{uses[0].name}` ran, "
            f"{len(uses) - 1} more call(s) were not run"
        )
        call = ToolCall(
            call.tool,
            call.args,
            call.block,
            call.problem,
            note,
            (*call.repairs, f"{len(uses)} tool calls in one turn; only the first ran"),
            len(uses) - 1,
        )
    return call


def native_messages(text: str, uses: tuple[ToolUse, ...], result: str) -> list[Message]:
    """What the turn adds to the conversation: the assistant's calls and one tool message per
    call (the first carries ``result``; the others say they were not run)."""
    assistant = Message("assistant", text, tool_calls=uses)
    first, *rest = uses
    out = [assistant, Message("tool", result, tool_call_id=first.id, tool_name=first.name)]
    out += [
        Message(
            "tool",
            f"Not run: one tool per turn; only `{first.name}` ran. Call it again next turn.",
            tool_call_id=u.id,
            tool_name=u.name,
        )
        for u in rest
    ]
    return out


NATIVE_NOTE = (
    "\n\nCall the tools through the function-calling interface: one call per turn, "
    "its arguments as the tool's JSON parameters (code as a string, no fences). "
    "The `Tool:` forms above describe the same tools."
)
"""Appended to the system prompt under the native protocol (the tool list stays the same)."""
