"""Voyager's critic: did the skill complete its task?

The state change decides when it can: the task names an achievement (unlocked or not), or
asks for an item whose inventory count rose enough or did not rise at all. The world
continues from task to task, so an achievement unlocked by an earlier task in the same
world cannot decide a later one: then the inventory (``collect``/``make`` tasks) or the LLM
critic does. Only what the
state cannot settle goes to the LLM critic, whose answer is JSON (``reasoning``,
``success``, ``critique``) with bounded re-asks. A skill that raised, or code that did not
validate, is a failure without any call.

The states are the env's ``structured`` dicts (``inventory``: item -> count,
``achievements``: names unlocked this episode) — what the observation text shows.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from speedrunner.core import pyast
from speedrunner.core.answers import (
    THINK,
    AnswerForm,
    AnswerReader,
    ReadOutcome,
    json_fields,
    json_spans,
    mostly_json,
)

__all__ = [
    "CRITIC_READER",
    "CriticAnswer",
    "Verdict",
    "read_critic",
    "achievement_for",
    "decide_from_state",
    "inventory_delta",
    "normalise_task",
    "parse_critic_answer",
    "state_summary",
    "clean_task",
]

DecidedBy = Literal["execution_error", "achievement", "inventory", "llm", "llm_unparseable"]
_COUNT_TASK = re.compile(
    r"^(?:collect|get|gather|obtain|mine|make|craft|place)\s+(?:(\d+)\s+)?([a-z ]+?)s?$"
)
_ARTICLES = {"a", "an", "the", "some"}


@dataclass(frozen=True)
class Verdict:
    success: bool
    critique: str
    decided_by: DecidedBy
    reasoning: str = ""


def normalise_task(text: str) -> str:
    """``"Collect Wood."`` -> ``"collect wood"``: lower case, words only, no articles."""
    words = re.sub(r"[^a-z0-9 ]+", " ", text.lower().replace("_", " ")).split()
    return " ".join(w for w in words if w not in _ARTICLES)


def clean_task(text: str) -> str:
    """How a proposed task is kept: ``"Collect Wood."`` -> ``"collect wood"`` (words only)."""
    return " ".join(re.sub(r"[^a-z0-9 ]+", " ", text.lower().replace("_", " ")).split())


def achievement_for(task: str, achievements: Sequence[str]) -> str | None:
    """The achievement a task names (``"make wood pickaxe"`` -> ``make_wood_pickaxe``), if any."""
    key = normalise_task(task).replace(" ", "_")
    return key if key in achievements else None


def inventory_delta(before: dict[str, Any], after: dict[str, Any]) -> dict[str, int]:
    """Item -> change in count (only items that changed)."""
    b, a = before.get("inventory", {}), after.get("inventory", {})
    delta = {k: int(a.get(k, 0)) - int(b.get(k, 0)) for k in sorted(set(a) | set(b))}
    return {k: v for k, v in delta.items() if v}


def state_summary(state: dict[str, Any]) -> str:
    inventory = (
        ", ".join(f"{k}: {v}" for k, v in sorted(state.get("inventory", {}).items())) or "nothing"
    )
    unlocked = ", ".join(state.get("achievements", [])) or "none"
    return f"inventory {{{inventory}}}; achievements unlocked: {unlocked}"


def decide_from_state(
    task: str, before: dict[str, Any], after: dict[str, Any], achievements: Sequence[str]
) -> Verdict | None:
    """The verdict when the state change settles it, else ``None`` (ask the LLM critic)."""
    delta = inventory_delta(before, after)
    changed = ", ".join(f"{k} {v:+d}" for k, v in delta.items()) or "no change"
    unlocked = sorted(set(after.get("achievements", [])) - set(before.get("achievements", [])))
    target = achievement_for(task, achievements)
    if target is not None and target in before.get("achievements", []):
        # Unlocked earlier in this world (tasks follow each other in one world): only an
        # inventory count can still show the task done again; otherwise the LLM judges.
        if not target.startswith(("collect_", "make_")):
            return None
    elif target is not None:
        if target in unlocked:
            return Verdict(True, "", "achievement", f"the achievement {target} was unlocked")
        return Verdict(
            False,
            f"The achievement {target} was not unlocked (inventory: {changed}; newly "
            f"unlocked: {', '.join(unlocked) or 'nothing'}). Check what it needs and "
            "that the skill reaches it before its action cap.",
            "achievement",
            f"the achievement {target} was not unlocked",
        )
    match = _COUNT_TASK.match(normalise_task(task))
    if match is None:
        return None
    wanted = int(match.group(1) or 1)
    item = match.group(2).strip().replace(" ", "_")
    known = set(before.get("inventory", {})) | set(after.get("inventory", {})) | set(delta)
    if item not in known and item.rstrip("s") in known:
        item = item.rstrip("s")
    gained = delta.get(item, 0)
    if gained >= wanted:
        return Verdict(True, "", "inventory", f"{item} rose by {gained} (asked {wanted})")
    if gained <= 0:
        return Verdict(
            False,
            f"No {item} was gained (inventory: {changed}).",
            "inventory",
            f"{item} did not rise",
        )
    return None  # some but not enough: let the critic weigh it


@dataclass(frozen=True)
class CriticAnswer(ReadOutcome):
    """The critic's verdict, or why none was read, and what tolerance reading it needed."""

    verdict: Verdict | None
    problem: str | None = None
    repairs: tuple[str, ...] = ()


def parse_critic_answer(text: str) -> Verdict | str:
    """The LLM critic's JSON as a verdict, or what is wrong with it (for the re-ask)."""
    answer = read_critic(text)
    return answer.verdict if answer.verdict is not None else answer.problem or "no verdict"


def read_critic(text: str) -> CriticAnswer:
    """The LLM critic's JSON as a verdict, or what is wrong with it (for the re-ask).

    Tolerant about form: ``<think>`` blocks are ignored, prose and a ```` ```json ```` fence
    may surround the object, a trailing comma or Python literals (``True``, single quotes)
    are read, ``"success": "true"`` counts as ``true``, the object written as a JSON string
    under ``answer`` is read again. Strict about meaning: two verdicts that disagree are not
    chosen between."""
    reading = CRITIC_READER.read(text)
    if (answer := reading.value) is not None:
        return dataclasses.replace(answer, repairs=(*reading.repairs, *answer.repairs))
    body, repairs = reading.text, reading.repairs
    start, end = body.find("{"), body.rfind("}")
    if start < 0 or end <= start:
        return CriticAnswer(None, "no JSON object in the answer", repairs)
    try:
        json.loads(body[start : end + 1])
    except json.JSONDecodeError as e:
        return CriticAnswer(None, f"the JSON does not parse ({e.msg})", repairs)
    return CriticAnswer(None, '"success" must be true or false', repairs)


def _strict(body: str) -> CriticAnswer | None:
    """The JSON objects that hold ``success``, as asked (prose or a fence around them is a
    repair)."""
    spans = [(o, a, b) for o, a, b in json_spans(body) if "success" in o]
    if not spans:
        return None
    around = body[: spans[0][1]].strip() or body[spans[-1][2] :].strip()
    return _judge([o for o, _, _ in spans], ["prose or a fence around the JSON"] if around else [])


def _wrapped(body: str) -> CriticAnswer | None:
    """The verdict written as a JSON string under an ``answer``-like key, read again (unless
    the strings disagree)."""
    wrapped = [f for f in json_fields(body, ()) if f.wrapped and "success" in f.value]
    if not wrapped or not mostly_json(body, wrapped):
        return None
    inner = [read_critic(f.value) for f in wrapped]
    return inner[0] if len({str(a.verdict and a.verdict.success) for a in inner}) == 1 else None


def _judge(objects: list[dict[str, Any]], repairs: list[str]) -> CriticAnswer:
    """One verdict from the objects read, or why there is none."""
    verdicts = {str(o.get("success")).lower() for o in objects}
    if len(verdicts) > 1:
        return CriticAnswer(
            None,
            f'the answer has {len(objects)} JSON objects that disagree on "success"; '
            "give exactly one",
            tuple(repairs),
        )
    if len(objects) > 1:
        repairs.append("the same verdict repeated")
    data = objects[0]
    success = data.get("success")
    if isinstance(success, str) and success.strip().lower() in ("true", "false"):
        success = success.strip().lower() == "true"
        repairs.append("success written as a string")
    if not isinstance(success, bool):
        return CriticAnswer(None, '"success" must be true or false', tuple(repairs))
    reasoning, critique = data.get("reasoning", ""), data.get("critique", "")
    if not isinstance(reasoning, str) or not isinstance(critique, str):
        return CriticAnswer(None, '"reasoning" and "critique" must be strings', tuple(repairs))
    return CriticAnswer(Verdict(success, critique, "llm", reasoning), None, tuple(repairs))


_TRAILING_COMMA = re.compile(r",\s*([}\]])")


def _lenient(body: str) -> CriticAnswer | None:
    """The outermost ``{...}`` read with a trailing comma dropped, or as a Python literal."""
    start, end = body.find("{"), body.rfind("}")
    if start < 0 or end <= start:
        return None
    raw = body[start : end + 1]
    try:
        value = json.loads(_TRAILING_COMMA.sub(r"\1", raw))
    except json.JSONDecodeError:
        try:
            value = pyast.literal_eval(raw)
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            return None  # TypeError: ``{{...}}`` is a set of a dict, which Python cannot build
    return _judge([value], []) if isinstance(value, dict) and "success" in value else None


CRITIC_READER: AnswerReader[CriticAnswer] = AnswerReader(
    (THINK,),
    (
        AnswerForm("", _strict),
        AnswerForm("JSON answer", _wrapped),
        AnswerForm("not strict JSON (a trailing comma or Python literals)", _lenient),
    ),
)
"""Strict JSON, else the verdict as a JSON string, else JSON with a trailing comma or Python
literals."""
