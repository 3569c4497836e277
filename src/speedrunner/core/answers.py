"""Reading what models write: the pieces every answer parser shares.

Prompts ask for one exact format; real models wrap it. Qwen writes ``<think>`` blocks and
bold labels, GPT models write markdown headings and prose, every model gets cut at
``max_tokens``. These helpers find the *one* meaning in such an answer — a labelled line, a
fenced block, a JSON object — and report every repair they made, so each parser can be
tolerant about form and strict about meaning: when two readings remain, the parser says so
instead of choosing.

Every parser is a configuration of one :class:`AnswerReader`: an ordered table of named
text repairs (:class:`Repair`, e.g. :data:`THINK`), then the forms the answer may take
(:class:`AnswerForm`), tried in order, the first that reads a meaning winning. The names of
the repairs made are what a run stores and counts (``repairs``); a parser's result carries
them with a ``problem`` (why no meaning was read), and :func:`format_outcome` turns the two
into the per-turn label (``ok`` / ``repaired`` / ``lost``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, Literal, Protocol, TypeVar

__all__ = [
    "ANSWER_KEYS",
    "THINK",
    "AnswerForm",
    "AnswerReader",
    "Block",
    "Finished",
    "FormatOutcome",
    "FormatTally",
    "JsonField",
    "ReadOutcome",
    "Reading",
    "Repair",
    "with_cut_note",
    "TRUNCATED",
    "cut_note",
    "distinct",
    "fenced_blocks",
    "format_outcome",
    "json_answer",
    "json_fields",
    "json_objects",
    "json_spans",
    "mostly_json",
    "outside_json",
    "Line",
    "label_lines",
    "label_regex",
    "partial_json_string",
    "strip_think",
    "truncated",
    "unfinished_json",
]

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
        rf"(?P<label>{labels}){_MARKUP}(?:[ \t]*[:=]|[ \t]+[-\u2013])[ \t]*"
        rf"{_MARKUP}[ \t]*(?P<value>.*?)[ \t]*$",
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


def label_lines(
    text: str, pattern: re.Pattern[str], exact_label: str, *, in_fences: bool = False
) -> list[Line]:
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
        code = "".join(lines[i + 1 : j])
        if code and not code.endswith("\n"):
            code += "\n"
        closed = j < len(lines)
        end = offsets[j] + len(lines[j]) if closed else len(text)
        blocks.append(Block(code, lang, offsets[i], end, closed))
        i = j + 1
    return blocks


def json_spans(text: str) -> list[tuple[dict[str, Any], int, int]]:
    """The JSON objects written in ``text`` (bare, or in a ```` ```json ```` fence), outermost
    only, in order, each with where it starts and ends. Text that merely contains braces
    (code, prose) yields nothing."""
    found: list[tuple[dict[str, Any], int, int]] = []
    decoder = json.JSONDecoder()
    i = text.find("{")
    while i >= 0:
        try:
            value, end = decoder.raw_decode(text, i)
        except json.JSONDecodeError:
            i = text.find("{", i + 1)
            continue
        if isinstance(value, dict):
            found.append((value, i, end))
        i = text.find("{", end)
    return found


def json_objects(text: str) -> list[dict[str, Any]]:
    """The JSON objects written in ``text`` (:func:`json_spans` without the places)."""
    return [value for value, _, _ in json_spans(text)]


ANSWER_KEYS = ("answer", "response", "output", "content", "text", "result")
"""Keys under which a model that answers in JSON puts the whole answer it was asked to write
as text (``{"answer": "<guide>...</guide>"}``): the string is read again as that text."""


@dataclass(frozen=True)
class JsonField:
    """The field of one JSON object that holds an answer."""

    key: str
    """The key, lower case (one of the parser's keys, or of :data:`ANSWER_KEYS`)."""
    value: Any
    start: int
    end: int
    """Where the object is in the text."""
    obj: dict[str, Any] = field(default_factory=dict, compare=False)
    """The whole object, its keys lower case (a parser may read more than one field)."""

    @property
    def wrapped(self) -> bool:
        """The whole text answer written as a JSON string: read it again as text."""
        return self.key in ANSWER_KEYS


def json_fields(text: str, keys: tuple[str, ...]) -> list[JsonField]:
    """For each JSON object in ``text`` that holds an answer: its first key of ``keys`` (in that
    order of preference, any case), else its first :data:`ANSWER_KEYS` key with a string value.
    Objects with neither (a dict in an example, a tool call) are not answers here."""
    found = []
    for obj, start, end in json_spans(text):
        lowered = {str(k).lower(): v for k, v in obj.items()}
        key = next((k for k in keys if lowered.get(k) not in (None, "", [])), None)
        if key is None:
            key = next(
                (k for k in ANSWER_KEYS if isinstance(lowered.get(k), str) and lowered[k].strip()),
                None,
            )
        if key is not None:
            found.append(JsonField(key, lowered[key], start, end, lowered))
    return found


def mostly_json(text: str, fields: list[JsonField]) -> bool:
    """The answer *is* its JSON objects: they make up at least half of its non-blank text (prose
    or a fence around them is fine; a JSON example inside a prose answer is not the answer)."""
    inside = sum(f.end - f.start for f in fields)
    return bool(fields) and 2 * inside >= len("".join(text.split())) - 8


def outside_json(text: str, fields: list[JsonField]) -> str:
    """``text`` without the JSON objects of ``fields`` (what was written around them)."""
    out, pos = [], 0
    for f in sorted(fields, key=lambda f: f.start):
        out.append(text[pos : f.start])
        pos = max(pos, f.end)
    return "".join(out) + text[pos:]


def distinct(values: list[Any]) -> list[Any]:
    """``values`` without repeats (compared as JSON), in order: the same answer twice is one."""
    seen: dict[str, Any] = {}
    for v in values:
        seen.setdefault(json.dumps(v, sort_keys=True, default=str), v)
    return list(seen.values())


_OPEN_JSON = re.compile(r"\A\s*(?:(?:`{3,}|~{3,})[ \t]*(?:json)?[ \t]*\n\s*)?\{", re.IGNORECASE)


def unfinished_json(text: str) -> bool:
    """``text`` opens a JSON object (bare or in a fence) that never closes: an answer cut at
    ``max_tokens`` inside its JSON."""
    return bool(_OPEN_JSON.match(text)) and not json_spans(text)


def partial_json_string(text: str, keys: tuple[str, ...]) -> tuple[str, str] | None:
    """(key, value so far) of the first string field of ``keys`` (or :data:`ANSWER_KEYS`) in an
    unfinished JSON object, its escapes decoded, up to where the text stops."""
    wanted = "|".join(re.escape(k) for k in (*keys, *ANSWER_KEYS))
    m = re.search(rf'"({wanted})"\s*:\s*"', text, re.IGNORECASE)
    if m is None:
        return None
    raw, i = text[m.end() :], 0
    while i < len(raw) and raw[i] != '"':
        i += 2 if raw[i] == "\\" else 1
    chunk = raw[:i] if i <= len(raw) else raw[:-1]  # past the end: cut inside an escape
    chunk = re.sub(r"\\u[0-9a-fA-F]{0,3}$", "", chunk)
    try:
        value = json.loads(f'"{chunk}"')
    except json.JSONDecodeError:
        return None
    return m.group(1).lower(), value


def truncated(finish_reason: str | None) -> bool:
    return finish_reason == TRUNCATED


def cut_note(max_tokens: Any) -> str:
    """What the model is told when its answer hit the token cap."""
    room = f"max_tokens={max_tokens}" if max_tokens else "the output token limit"
    return (
        f"your answer was cut off at {room} (finish_reason 'length'); "
        "that is all the room an answer has, so answer shorter: less reasoning, smaller code"
    )


def format_outcome(problem: str | None, repairs: Sequence[str]) -> FormatOutcome:
    """``lost`` when no meaning was read, ``repaired`` when it was read thanks to tolerance."""
    if problem is not None:
        return "lost"
    return "repaired" if repairs else "ok"


class ReadOutcome:
    """A parser's result: its ``format`` follows from its ``problem`` and ``repairs``."""

    problem: str | None
    repairs: Sequence[str]

    @property
    def format(self) -> FormatOutcome:
        return format_outcome(self.problem, self.repairs)


@dataclass(frozen=True)
class Repair:
    """One named fix of an answer's text, made before it is read. ``fix`` returns the text
    fixed, or ``None`` when there is nothing to fix; ``name`` is what a run stores and counts."""

    name: str
    fix: Callable[[str], str | None]


def _without_think(text: str) -> str | None:
    out, had = strip_think(text)
    return out if had else None


THINK = Repair("think block", _without_think)
"""``<think>`` blocks taken out (:func:`strip_think`): every reader starts with it."""

T = TypeVar("T")


@dataclass(frozen=True)
class AnswerForm(Generic[T]):
    """One way an answer may be written. ``read`` returns what the answer says in this form,
    or ``None`` when it is not written this way; ``repair`` is the name counted when it is
    read this way (empty for the exact form the prompt asks for)."""

    repair: str
    read: Callable[[str], T | None]


@dataclass(frozen=True)
class Reading(Generic[T]):
    """What an :class:`AnswerReader` read: ``value`` from the first form that fit (``None``:
    none did), the text it was read from, and the repairs made so far, in order."""

    text: str
    repairs: tuple[str, ...]
    value: T | None


@dataclass(frozen=True)
class AnswerReader(Generic[T]):
    """The one tolerant reader every parser configures: its text ``repairs`` are made in
    order, then its ``forms`` are tried in order and the first that reads something wins.
    What counts as success is the parser's: its result's ``problem`` (:class:`ReadOutcome`)."""

    repairs: tuple[Repair, ...]
    forms: tuple[AnswerForm[T], ...]

    @property
    def names(self) -> tuple[str, ...]:
        """Every repair name this reader itself may count, in its order."""
        return (*(r.name for r in self.repairs), *(f.repair for f in self.forms if f.repair))

    def read(self, text: str) -> Reading[T]:
        made: list[str] = []
        for repair in self.repairs:
            fixed = repair.fix(text)
            if fixed is not None:
                text = fixed
                made.append(repair.name)
        for form in self.forms:
            value = form.read(text)
            if value is not None:
                return Reading(text, (*made, *([form.repair] if form.repair else [])), value)
        return Reading(text, tuple(made), None)


def json_answer(
    keys: tuple[str, ...],
    then: Callable[[list[JsonField]], T],
    unless: Callable[[str], object] | None = None,
) -> AnswerForm[T]:
    """The form ``JSON answer``: the objects holding one of ``keys`` (or the whole text answer
    under an :data:`ANSWER_KEYS` key) when they make up most of the answer and what is
    written around them is not the text form itself (``unless`` finds its marker there),
    read by ``then``."""

    def read(text: str) -> T | None:
        fields = json_fields(text, keys)
        if not fields or not mostly_json(text, fields):
            return None
        return None if unless and unless(outside_json(text, fields)) else then(fields)

    return AnswerForm("JSON answer", read)


class Finished(Protocol):
    """What the format counts need of a completion (``core.llm.types.Completion`` has both)."""

    @property
    def finish_reason(self) -> str | None: ...

    @property
    def sampling(self) -> dict[str, Any]: ...


def with_cut_note(result: str, completion: Finished) -> str:
    """``result`` (a tool's result, feedback) followed by the cut note when ``completion``
    stopped at ``max_tokens`` and ``result`` does not say so already."""
    if not truncated(completion.finish_reason) or "cut off at" in result:
        return result
    return f"{result}\n(note: {cut_note(completion.sampling.get('max_tokens'))})"


@dataclass
class FormatTally:
    """The turns of one phase, per role: how many were read thanks to tolerance
    (``repaired``), how many yielded no meaning because of their form (``lost``), how many
    were cut at ``max_tokens`` (``truncated``), and how many tool calls were written after a
    turn's first one and so never ran (``dropped_calls``). A method stores :meth:`record` in
    its sleep record; ``core.answer_counts.FormatCounter`` sums a run's records for
    ``summary.json``."""

    role: str
    """The role a turn counts for unless :meth:`add` names another."""
    by_role: dict[str, dict[str, int]] = field(default_factory=dict)

    def add(
        self,
        outcome: FormatOutcome,
        completion: Finished | None = None,
        *,
        role: str | None = None,
        dropped_calls: int = 0,
    ) -> None:
        counts = self.by_role.setdefault(
            role or self.role,
            {"turns": 0, "repaired": 0, "lost": 0, "truncated": 0, "dropped_calls": 0},
        )
        counts["turns"] += 1
        counts["repaired"] += outcome == "repaired"
        counts["lost"] += outcome == "lost"
        counts["truncated"] += completion is not None and truncated(completion.finish_reason)
        counts["dropped_calls"] += dropped_calls

    def record(self) -> dict[str, Any]:
        """The sleep record's fields: ``format`` per role and ``truncated_turns`` in all."""
        return {
            "format": {role: dict(c) for role, c in sorted(self.by_role.items())},
            "truncated_turns": sum(c["truncated"] for c in self.by_role.values()),
        }
