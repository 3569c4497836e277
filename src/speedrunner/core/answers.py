"""Reading what models write: the pieces every answer parser shares.

Prompts ask for one exact format; real models wrap it. Qwen writes ``<think>`` blocks and
bold labels, GPT models write markdown headings and prose, every model gets cut at
``max_tokens``. These helpers find the *one* meaning in such an answer — a labelled line, a
fenced block, a JSON object — and report every repair they made, so each parser can be
tolerant about form and strict about meaning: when two readings remain, the parser says so
instead of choosing.

A parser returns ``repairs`` (what tolerance it needed, empty for an answer in the exact
format) and a ``problem`` (why no meaning was read); :func:`format_outcome` turns them into the
per-turn label that runs count (``ok`` / ``repaired`` / ``lost``).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = ["Block", "FormatOutcome", "FormatTally", "with_cut_note", "TRUNCATED", "cut_note", "fenced_blocks", "format_outcome",
           "json_objects", "Line", "label_lines", "label_regex", "strip_think", "truncated"]

FormatOutcome = Literal["ok", "repaired", "lost"]
TRUNCATED = "length"
"""``Completion.finish_reason`` when the provider stopped at ``max_tokens`` (every provider is
normalised to it: OpenAI/vLLM ``length``, Gemini ``MAX_TOKENS``)."""

_THINK = re.compile(r"<(think|thinking|reasoning)>.*?(?:</\1>|\Z)", re.DOTALL | re.IGNORECASE)
_LONE_CLOSE = re.compile(r"\A.*?</(?:think|thinking|reasoning)>", re.DOTALL | re.IGNORECASE)
_MARKUP = r"[*_`~]*"
_OPEN_FENCE = re.compile(r"^[ \t]{0,3}(`{3,}|~{3,})[ \t]*([A-Za-z0-9_+.-]*)[^`\n]*$")


def strip_think(text: str) -> tuple[str, bool]:
    """``text`` without ``<think>…</think>`` blocks (their contents never count), and whether
    there were any. An unclosed ``<think>`` hides the rest of the answer (the model was still
    thinking); a lone ``</think>`` (a reasoning parser that ate the opening tag) hides
    everything before it."""
    out, n = _THINK.subn("", text)
    out, m = _LONE_CLOSE.subn("", out, count=1)
    return out, bool(n or m)


def label_regex(labels: str) -> re.Pattern[str]:
    """A line that starts with one of ``labels`` (a regex alternation) and a colon, however
    marked up: ``Tool: x``, ``**Tool:** x``, ``**Tool**: x``, ``### Tool: x``, ``- tool = x``,
    ``> Action: x``. Group ``value`` is the rest of the line, markup still on it."""
    return re.compile(
        rf"^[ \t]*(?:>[ \t]*)?(?:#{{1,6}}[ \t]*)?(?:[-*+][ \t]+)?(?:\d+[.)][ \t]+)?{_MARKUP}[ \t]*"
        rf"(?P<label>{labels}){_MARKUP}(?:[ \t]*[:=]|[ \t]+[-\u2013])[ \t]*{_MARKUP}[ \t]*(?P<value>.*?)[ \t]*$",
        re.IGNORECASE | re.MULTILINE,
    )


@dataclass(frozen=True)
class Line:
    label: str
    value: str
    start: int
    end: int
    exact: bool
    """Written exactly as the prompt shows it (``Label: value`` at the line start)."""


def label_lines(text: str, pattern: re.Pattern[str], exact_label: str, *, in_fences: bool = False) -> list[Line]:
    """Every labelled line of ``text`` outside fenced blocks (code may contain ``Tool:``), or
    with ``in_fences`` only those inside them (a model that fenced its whole answer)."""
    blocks = fenced_blocks(text)
    found = []
    for m in pattern.finditer(text):
        if any(b.start < m.start() < b.end for b in blocks) != in_fences:
            continue
        exact = m.group(0).lstrip().startswith(f"{exact_label}:")
        found.append(Line(m.group("label"), m.group("value"), m.start(), m.end(), exact))
    return found


@dataclass(frozen=True)
class Block:
    """One fenced block: its code (with a final newline), language tag and where it was."""

    code: str
    lang: str
    start: int
    end: int
    closed: bool
    """False for a final fence that never closed (the answer was cut, or the model stopped)."""


def fenced_blocks(text: str) -> list[Block]:
    """The fenced blocks of ``text``, CommonMark style: a fence opens at a line start
    (```` ``` ```` or ``~~~``, any language tag) and closes only on a line holding the same
    fence alone, so ```` ``` ```` inside a string literal never ends a block. A fence left
    open at the end of the text is a block too (``closed=False``)."""
    blocks: list[Block] = []
    lines = text.splitlines(keepends=True)
    pos, i = 0, 0
    offsets = []
    for line in lines:
        offsets.append(pos)
        pos += len(line)
    while i < len(lines):
        m = _OPEN_FENCE.match(lines[i].rstrip("\r\n"))
        if m is None:
            i += 1
            continue
        fence, lang = m.group(1), m.group(2).lower()
        close = re.compile(rf"^[ \t]{{0,3}}{re.escape(fence[0])}{{{len(fence)},}}[ \t]*$")
        j = i + 1
        while j < len(lines) and not close.match(lines[j].rstrip("\r\n")):
            j += 1
        code = "".join(lines[i + 1:j])
        if code and not code.endswith("\n"):
            code += "\n"
        closed = j < len(lines)
        end = offsets[j] + len(lines[j]) if closed else len(text)
        blocks.append(Block(code, lang, offsets[i], end, closed))
        i = j + 1
    return blocks


def json_objects(text: str) -> list[dict[str, Any]]:
    """The JSON objects written in ``text`` (bare, or in a ```` ```json ```` fence), outermost
    only, in order. Text that merely contains braces (code, prose) yields nothing."""
    found: list[dict[str, Any]] = []
    decoder = json.JSONDecoder()
    i = text.find("{")
    while i >= 0:
        try:
            value, end = decoder.raw_decode(text, i)
        except json.JSONDecodeError:
            i = text.find("{", i + 1)
            continue
        if isinstance(value, dict):
            found.append(value)
        i = text.find("{", end)
    return found


def truncated(finish_reason: str | None) -> bool:
    return finish_reason == TRUNCATED


def cut_note(max_tokens: Any) -> str:
    """What the model is told when its answer hit the token cap."""
    room = f"max_tokens={max_tokens}" if max_tokens else "the output token limit"
    return (f"your answer was cut off at {room} (finish_reason 'length'); "
            "that is all the room an answer has, so answer shorter: less reasoning, smaller code")


def format_outcome(problem: str | None, repairs: tuple[str, ...] | list[str]) -> FormatOutcome:
    """``lost`` when no meaning was read, ``repaired`` when it was read thanks to tolerance."""
    if problem is not None:
        return "lost"
    return "repaired" if repairs else "ok"


def with_cut_note(result: str, completion: Any) -> str:
    """``result`` (a tool's result, feedback) followed by the cut note when ``completion``
    stopped at ``max_tokens`` and ``result`` does not say so already."""
    if not truncated(getattr(completion, "finish_reason", None)) or "cut off at" in result:
        return result
    return f"{result}\n(note: {cut_note(getattr(completion, 'sampling', {}).get('max_tokens'))})"


@dataclass
class FormatTally:
    """The turns of one phase, per role: how many were read thanks to tolerance
    (``repaired``), how many yielded no meaning because of their form (``lost``), how many
    were cut at ``max_tokens`` (``truncated``). A method stores :meth:`record` in its sleep
    record; ``core.reporting.format_counts`` sums a run's records for ``summary.json``."""

    role: str
    """The role a turn counts for unless :meth:`add` names another."""
    by_role: dict[str, dict[str, int]] = field(default_factory=dict)

    def add(self, outcome: FormatOutcome, completion: Any = None, *, role: str | None = None) -> None:
        counts = self.by_role.setdefault(role or self.role, {"turns": 0, "repaired": 0, "lost": 0, "truncated": 0})
        counts["turns"] += 1
        counts["repaired"] += outcome == "repaired"
        counts["lost"] += outcome == "lost"
        counts["truncated"] += truncated(getattr(completion, "finish_reason", None))

    def record(self) -> dict[str, Any]:
        """The sleep record's fields: ``format`` per role and ``truncated_turns`` in all."""
        return {"format": {role: dict(c) for role, c in sorted(self.by_role.items())},
                "truncated_turns": sum(c["truncated"] for c in self.by_role.values())}
