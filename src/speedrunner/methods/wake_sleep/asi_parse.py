"""Reading an ASI induction answer: the new functions and the rewritten episode script.

Lenient about form (tags in any case, a missing closing tag, code fences or not, with or
without a language tag, ``<think>`` blocks ignored, a single fenced block of functions and no
tags at all, the answer written as JSON — ``{"functions": "...", "script": [...]}`` or the
tagged text under ``answer``) and strict about meaning: only top-level ``def``s count as
functions, two ``<functions>`` blocks (or two JSON answers that differ) are not merged, a
block cut off at ``max_tokens`` is not used, and anything that does not parse is reported to
the sleep log instead of being half-used.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field

from speedrunner.core import pyast
from speedrunner.core.answers import (
    THINK,
    AnswerReader,
    JsonField,
    ReadOutcome,
    distinct,
    fenced_blocks,
    json_answer,
    truncated,
    unfinished_json,
)

__all__ = ["INDUCTION_READER", "Induction", "NewFunction", "parse_induction"]

_FUNCTIONS = re.compile(r"<functions>(.*?)(</functions>|(?=<script>)|$)", re.DOTALL | re.IGNORECASE)
_SCRIPT = re.compile(r"<script>(.*?)(?:</script>|(?=<functions>)|$)", re.DOTALL | re.IGNORECASE)
_FUNCTION_KEYS = ("functions", "new_functions", "code", "python", "source")
_SCRIPT_KEYS = ("script", "rewritten_script", "actions", "steps")


@dataclass(frozen=True)
class NewFunction:
    name: str
    source: str


@dataclass
class Induction(ReadOutcome):
    functions: list[NewFunction] = field(default_factory=list)
    imports: list[str] = field(default_factory=list)
    """Top-level import lines of the block (the functions may need them)."""
    script: list[str] = field(default_factory=list)
    problem: str | None = None
    """Why the functions block could not be used (a syntax error, no block at all)."""
    repairs: list[str] = field(default_factory=list)
    """What tolerance reading the answer needed (empty: the exact form)."""


def _code(block: str, repairs: list[str]) -> tuple[str, bool]:
    """The code of a tag's contents (its fenced blocks joined, else the text) and whether a
    fence was left open."""
    fenced = fenced_blocks(block)
    if not fenced:
        return block, False
    if any(not b.closed for b in fenced):
        repairs.append("unclosed fence")
    return "\n\n".join(b.code for b in fenced), not fenced[-1].closed


def parse_induction(text: str, *, finish_reason: str | None = None) -> Induction:
    """The functions (each top-level ``def`` with its own source) and the script lines.

    ``finish_reason`` ``"length"``: the answer hit ``max_tokens``; functions left open by
    the cut (no closing fence or tag) are then not used."""
    reading = INDUCTION_READER.read(text)
    if reading.value is not None:
        reading.value.repairs = [*reading.repairs, *reading.value.repairs]
        return reading.value
    body, result = reading.text, Induction(repairs=list(reading.repairs))
    cut = truncated(finish_reason)
    if unfinished_json(body):
        result.problem = (
            "the answer's JSON object never closed"
            + (" (it was cut off at max_tokens)" if cut else "")
            + "; an incomplete answer is never used"
        )
        return result
    script = _SCRIPT.search(body)
    if script is not None:
        code, _ = _code(script.group(1), result.repairs)
        lines = (line.strip().strip("`").strip() for line in code.splitlines())
        result.script = [line for line in lines if line and not line.startswith("#")]
    blocks = list(_FUNCTIONS.finditer(body))
    if len(blocks) > 1 and len({b.group(1).strip() for b in blocks}) == 1:
        blocks = blocks[:1]  # the same block written twice (with its script) is one answer
        result.repairs.append("the same <functions> block repeated")
    if len(blocks) > 1:
        result.problem = (
            f"the answer has {len(blocks)} <functions> blocks; they were not merged: put every new "
            "function in one <functions> block"
        )
        return result
    if not blocks:
        fenced = [
            b
            for b in fenced_blocks(body)
            if re.search(r"^(?:async\s+)?def\s", b.code, re.MULTILINE)
        ]
        if script is not None or len(fenced) != 1:
            result.problem = "no <functions> block in the answer" + (
                " (it was cut off at max_tokens)" if cut else ""
            )
            return result
        result.repairs.append("functions in a fenced block without <functions> tags")
        source, open_fence = fenced[0].code.strip(), not fenced[0].closed
        tag_open = False
    else:
        block = blocks[0]
        source, open_fence = _code(block.group(1), result.repairs)
        source = source.strip()
        tag_open = not block.group(2)
        if tag_open and script is None:
            result.repairs.append("no closing </functions> tag")
    if cut and (open_fence or (tag_open and script is None)):
        result.problem = (
            "the functions were cut off at max_tokens before their block closed; an incomplete "
            "function is never added"
        )
        return result
    if not source:
        return result
    try:
        tree = pyast.parse(source)
    except SyntaxError as e:
        result.problem = f"the functions do not parse: line {e.lineno}: {e.msg}"
        return result
    lines = source.splitlines()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            start = min([d.lineno for d in node.decorator_list] + [node.lineno])
            segment = "\n".join(lines[start - 1 : node.end_lineno])
            result.functions.append(NewFunction(node.name, segment + "\n"))
        elif isinstance(node, ast.Import | ast.ImportFrom):
            result.imports.append("\n".join(lines[node.lineno - 1 : node.end_lineno]))
    return result


def _from_json(fields: list[JsonField]) -> Induction:
    """An induction written as JSON: the tagged text under an ``answer``-like key, read again;
    or ``functions`` (source, or a list of sources) and ``script`` (lines, or one string)."""
    texts = distinct(
        [
            f.value
            if f.wrapped
            else (
                f"<functions>\n{_join(_first(f.obj, _FUNCTION_KEYS), chr(10) * 2)}\n"
                f"</functions>\n<script>\n{_join(_first(f.obj, _SCRIPT_KEYS), chr(10))}"
                "\n</script>"
            )
            for f in fields
        ]
    )
    readings = [parse_induction(t) for t in texts]  # each JSON string is whole: the object closed
    if len(readings) > 1:
        read = "; ".join(
            ", ".join(f.name for f in r.functions) or (r.problem or "no functions")
            for r in readings
        )
        return Induction(
            problem=(
                f"the answer has {len(readings)} JSON objects that differ "
                f"(functions: {read}); they were not merged: answer with one "
                "<functions> block and one <script> block"
            )
        )
    return readings[0]


INDUCTION_READER: AnswerReader[Induction] = AnswerReader(
    (THINK,),
    (
        json_answer(
            (*_FUNCTION_KEYS, *_SCRIPT_KEYS),
            _from_json,
            unless=lambda around: re.search("<functions>", around, re.I),
        ),
    ),
)
"""The answer as JSON (unless a ``<functions>`` block stands beside it); else the tagged text."""


def _first(obj: dict[str, object], keys: tuple[str, ...]) -> object:
    return next((obj[k] for k in keys if obj.get(k) not in (None, "", [])), "")


def _join(value: object, sep: str) -> str:
    if isinstance(value, list):
        return sep.join(str(v) for v in value)
    return value if isinstance(value, str) else ""
