"""OPO: each sleep phase an LLM rewrites a prose strategy guide from the batch.

No code, no gate: the new guide replaces the old one. Generation ``g`` is stored as
``guide/gen_<g>.md`` (generation 0 is the empty guide), and the actor sees the latest;
``sleep/opo_<b>.json`` records how the answer was read (``format``, ``truncated_turns``).

To write a new method, copy this file: change ``knowledge`` (what the actor sees) and
``sleep`` (how experience becomes knowledge); the runner needs nothing else.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from speedrunner.core.answers import (
    THINK,
    AnswerForm,
    AnswerReader,
    FormatTally,
    JsonField,
    ReadOutcome,
    Repair,
    distinct,
    json_answer,
    partial_json_string,
    unfinished_json,
)
from speedrunner.core.atomic import atomic_write_json, atomic_write_text
from speedrunner.core.llm.types import Message
from speedrunner.core.method import Knowledge, Method, MethodContext, SleepResult
from speedrunner.core.prompts import load_prompts
from speedrunner.core.trajectory import Trajectory
from speedrunner.errors import CheckpointError
from speedrunner.methods.wake_sleep.configs import OPOConfig

PROMPTS = load_prompts("speedrunner.methods.wake_sleep", "opo_prompts.yaml")
_GUIDE = re.compile(r"<guide>\s*(.*?)\s*(</guide>|$)", re.DOTALL | re.IGNORECASE)


class OPOMethod(Method):
    name = "opo"

    def __init__(self, config: OPOConfig, ctx: MethodContext) -> None:
        self.config = config
        self.model = ctx.inducer
        self.dir = Path(ctx.run_dir) / "guide"
        self.version = 0
        self.guide = ""

    def knowledge(self) -> Knowledge:
        return Knowledge(self.version, "Strategy guide (learned from earlier episodes)", self.guide)

    def sleep(self, batch: list[Trajectory], *, batch_index: int) -> SleepResult:
        per_episode = min(
            self.config.max_trajectory_chars, self.config.max_batch_chars // max(1, len(batch))
        )
        trajectories = "\n\n".join(
            f"--- Episode {t.index} ---\n{t.summary(per_episode)}" for t in batch
        )
        # ALGO LOGIC: the inducer rewrites the whole guide from the batch's trajectories
        prompt = PROMPTS.render(
            "rewrite",
            guide=self.guide or "(empty: this is the first guide)",
            trajectories=trajectories,
            max_chars=self.config.guide_max_chars,
            n=len(batch),
            successes=sum(t.success for t in batch),
        )
        completion = self.model.complete(
            [Message("system", PROMPTS.render("system")), Message("user", prompt)],
            purpose="guide",
            call_id=f"sleep/{batch_index:04d}/guide/0000",
        )
        answer = read_guide(completion.text, echoes=(prompt,), current=self.guide)
        # ALGO LOGIC: the new guide replaces the old one (an empty answer keeps the old)
        new_guide = answer.guide[: self.config.guide_max_chars]
        if new_guide:
            self.guide = new_guide
        reading = FormatTally("guide")
        reading.add(answer.format, completion)
        atomic_write_json(
            self.dir.parent / "sleep" / f"opo_{batch_index:04d}.json",
            {
                "batch": batch_index,
                "generation": self.version + 1,
                "problem": answer.problem,
                "repairs": answer.repairs,
                "finish_reason": completion.finish_reason,
                **reading.record(),
            },
        )
        self.version += 1
        self._store(self.version, self.guide, scripted=completion.scripted)
        return SleepResult(self.knowledge(), [completion])

    # ------------------------------------------------- TRY NOT TO MODIFY
    def restore(self, version: int) -> None:
        if version == 0:
            self.version, self.guide = 0, ""
            if not (self.dir / "gen_0.md").exists():
                self._store(
                    0, "", scripted=False
                )  # the empty first guide, so every generation is on disk
            return
        path = self.dir / f"gen_{version}.md"
        if not path.is_file():
            raise CheckpointError(f"guide generation {version} is missing: {path}")
        # read_bytes: read_text would turn "\r\n" into "\n" and change the restored guide.
        self.version, self.guide = version, _strip_label(path.read_bytes().decode("utf-8"))

    def _store(self, version: int, guide: str, *, scripted: bool) -> None:
        label = _SCRIPTED_LABEL if scripted else ""
        atomic_write_text(self.dir / f"gen_{version}.md", label + guide + "\n")


_SCRIPTED_LABEL = "<!-- written by the SCRIPTED model, not an LLM -->\n"


def _strip_label(text: str) -> str:
    return text.removeprefix(_SCRIPTED_LABEL).removesuffix("\n")


@dataclass(frozen=True)
class GuideAnswer(ReadOutcome):
    guide: str
    """The new guide ("" when none could be read: the old one stays)."""
    problem: str | None = None
    repairs: list[str] = field(default_factory=list)


_GUIDE_KEYS = ("guide", "strategy_guide", "new_guide", "strategy")
"""JSON keys that hold the guide itself (an ``answer``-like key holds the whole text answer)."""


def read_guide(text: str, *, echoes: tuple[str, ...] = (), current: str = "") -> GuideAnswer:
    """The guide between ``<guide>`` tags (any case; a missing closing tag, e.g. an answer
    cut at ``max_tokens``, keeps what was written, as ``guide_max_chars`` would), or the whole
    answer when there are no tags. ``<think>`` blocks never count; two ``<guide>`` blocks are
    not chosen between (the old guide stays); the same block twice is one guide.

    An answer written as JSON (``{"guide": "..."}``, ``{"answer": "<guide>...</guide>"}``, bare
    or in a ```` ```json ```` fence) is read from its decoded string, never word for word (a
    guide full of ``\\n`` escapes is no guide); JSON cut before it closed keeps the string
    written so far; two JSON guides that differ are not chosen between.

    ``echoes`` are the texts the model was shown (the prompt): small models repeat them
    first, so a repeated prompt is taken out before reading, and a guide that is only a
    piece of them (the prompt's placeholder guide) is never the new guide. Keeping the
    ``current`` guide word for word is an answer, not an echo."""
    echo = Repair(ECHOED, lambda body: _without_echoes(body, echoes))
    reading = AnswerReader((THINK, echo) if echoes else (THINK,), GUIDE_FORMS).read(text)
    made = list(reading.repairs)
    if ECHOED in made and not reading.text.strip():
        return GuideAnswer("", "the answer only repeats the prompt; the old guide stays", made)
    answer = reading.value or _read_tagged(reading.text, [])
    answer = GuideAnswer(answer.guide, answer.problem, [*made, *answer.repairs])
    if (
        echoes
        and answer.guide
        and answer.guide != current.strip()
        and echo_share(answer.guide, echoes, current) >= 0.5
    ):
        return GuideAnswer(
            "",
            "the guide read repeats the prompt (e.g. its placeholder guide); the old guide stays",
            [*answer.repairs, "the prompt's guide repeated"],
        )
    return answer


ECHOED = "the prompt repeated"
"""The repair of an answer that first repeats the prompt (taken out before reading)."""


def _flat(text: str) -> str:
    return " ".join(text.split())


def echo_share(guide: str, echoes: tuple[str, ...], current: str = "") -> float:
    """The share of the guide's lines (of 12 characters or more) copied word for word from
    ``echoes`` (the prompt), lines of the ``current`` guide aside: a small model "rewrites"
    the guide by copying the episodes it was shown (``Task: ...``, ``Outcome: ...``)."""
    lines = [_flat(line) for line in guide.splitlines() if len(_flat(line)) >= 12]
    if not lines:
        return 1.0 if any(_flat(guide) and _flat(guide) in _flat(e) for e in echoes) else 0.0
    shown, kept = [_flat(e) for e in echoes], _flat(current)
    copied = [line for line in lines if any(line in e for e in shown) and line not in kept]
    return len(copied) / len(lines)


def _without_echoes(body: str, echoes: tuple[str, ...]) -> str | None:
    """``body`` without any whole copy of an echo (whitespace may differ); ``None`` when it
    holds none.

    The echo is the whole prompt (thousands of words): its pattern is compiled only
    when the answer holds a copy, which the flattened texts tell exactly (``\\s`` and
    ``str.split`` agree on what is whitespace), so an answer that repeats nothing costs a
    substring test, not the compile of a prompt-sized pattern."""
    found = False
    flat_body = _flat(body)
    for echo in echoes:
        words = echo.split()
        if not words or " ".join(words) not in flat_body:
            continue
        pattern = re.compile(r"\s+".join(re.escape(w) for w in words))
        body, n = pattern.subn("", body)
        found, flat_body = found or n > 0, _flat(body)
    return body if found else None


def _from_json(fields: list[JsonField]) -> GuideAnswer:
    guides = distinct([_as_text(f.value) for f in fields])
    if len(guides) > 1:
        read = "; ".join(repr(_short(g)) for g in guides)
        return GuideAnswer(
            "",
            f"the answer has {len(guides)} JSON objects with different guides "
            f"({read}); the old guide stays",
        )
    inner = _read_tagged(guides[0], [])
    kept = [r for r in inner.repairs if fields[0].wrapped or r != "no <guide> tags"]
    return GuideAnswer(inner.guide, inner.problem, kept)


def _from_unfinished_json(body: str) -> GuideAnswer | None:
    """Cut inside the JSON string: what was written, decoded."""
    partial = partial_json_string(body, _GUIDE_KEYS) if unfinished_json(body) else None
    return None if partial is None else _read_tagged(partial[1], [])


GUIDE_FORMS: tuple[AnswerForm[GuideAnswer], ...] = (
    json_answer(_GUIDE_KEYS, _from_json, unless=_GUIDE.search),
    AnswerForm("unfinished JSON answer", _from_unfinished_json),
)
"""The guide as JSON (unless a ``<guide>`` block stands beside it), or JSON cut inside its
string; else the tagged text (:func:`_read_tagged`)."""


def _read_tagged(body: str, repairs: list[str]) -> GuideAnswer:
    found = list(_GUIDE.finditer(body))
    if len({m.group(1).strip() for m in found}) > 1:
        return GuideAnswer(
            "", f"the answer has {len(found)} <guide> blocks; the old guide stays", repairs
        )
    if len(found) > 1:  # the same guide written twice is one guide
        repairs = [*repairs, "the same <guide> block repeated"]
    if not found:
        guide = body.strip()
        return GuideAnswer(
            guide, None if guide else "the answer was empty", [*repairs, "no <guide> tags"]
        )
    if not found[0].group(2):
        repairs = [*repairs, "no closing </guide> tag"]
    guide = found[0].group(1).strip()
    return GuideAnswer(guide, None if guide else "the <guide> block was empty", repairs)


def _as_text(value: object) -> str:
    """A JSON guide value as guide text: a string as it is, a list as one line per item."""
    if isinstance(value, list):
        items = [str(v).strip() for v in value if str(v).strip()]
        return "\n".join(i if i[:1] in "-*0123456789" else f"- {i}" for i in items)
    return value if isinstance(value, str) else json.dumps(value)


def _short(text: str, n: int = 60) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 3] + "..."
