"""The inducer's text tool protocol: one ``Tool:`` line and at most one fenced block per turn.

A turn is plain text, so it works the same on every provider (OpenAI, Gemini, vLLM/Qwen,
the fake server and the scripted provider) and lands in the response cache as a string::

    (free reasoning)
    Tool: run_python
    ```python
    print(len(episodes(success=True)))
    ```

Arguments that are names go on the ``Tool:`` line (``Tool: rename_function old new``);
code goes in the block; ``submit``'s note is the block, the rest of the line, or the text
after it. The first
``Tool:`` line counts; a second one is ignored and the result says so.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["TOOLS", "ToolCall", "parse_tool_call"]

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

_TOOL_LINE = re.compile(r"^[ \t]*\**Tool\**:[ \t]*`?([A-Za-z_]+)`?(.*)$", re.MULTILINE)
_FENCE = re.compile(r"```[A-Za-z0-9_+-]*[ \t]*\n(.*?)```", re.DOTALL)


@dataclass(frozen=True)
class ToolCall:
    """One parsed turn: the tool, its name arguments, its block; or why it could not be read."""

    tool: str | None
    args: tuple[str, ...] = ()
    block: str | None = None
    problem: str | None = None
    note: str = ""
    """A remark for the result (e.g. an ignored second ``Tool:`` line)."""


def parse_tool_call(text: str, offered: frozenset[str] | set[str]) -> ToolCall:
    """The turn's tool call, checked against the tools ``offered`` and their arity."""
    lines = list(_TOOL_LINE.finditer(text))
    if not lines:
        return ToolCall(None, problem="no `Tool:` line found: end every turn with one tool call, e.g. "
                                      "`Tool: view_codebook`")
    first = lines[0]
    name = first.group(1).strip()
    note = f"only the first `Tool:` line was used ({len(lines) - 1} more ignored)" if len(lines) > 1 else ""
    if name not in offered:
        return ToolCall(name, problem=f"unknown tool {name!r}; tools: {', '.join(sorted(offered))}", note=note)
    rest = first.group(2).strip().strip("`").strip()
    after = text[first.end():]
    fence = _FENCE.search(after)
    block = fence.group(1) if fence else None
    arity, needs_block = TOOLS[name]
    if name == "submit":
        return ToolCall(name, (), (block or rest or after).strip(), note=note)
    args = tuple(a.strip("`(),'\"") for a in re.split(r"[\s,]+", rest) if a.strip("`(),'\""))
    if len(args) != arity:
        want = {0: "no arguments", 1: "one name", 2: "two names"}[arity]
        return ToolCall(name, args, problem=f"`{name}` takes {want} on the Tool line, got {len(args)}: {rest!r}",
                        note=note)
    if needs_block and not (block and block.strip()):
        return ToolCall(name, args, problem=f"`{name}` needs a fenced ```python block after the Tool line",
                        note=note)
    return ToolCall(name, args, block if needs_block else None, note=note)
