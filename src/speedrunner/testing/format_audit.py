"""Which of a run's turns the realistic fake's variants cost, judged by meaning.

A run played against :class:`~speedrunner.testing.realistic.RealisticFake` logs every answer
in ``llm_calls.jsonl``; the fake knows how it served each one (the role, the variant, the
clean answer it was written from). A turn is *read* when the run's records show the clean
answer's meaning — the actor took the clean action, the inducer's turn ran the clean call,
the stored guide is the clean guide, ASI proposed the clean functions, Voyager kept the clean
task, code and verdict without asking again — and *lost* otherwise, whatever the run itself
counted (so a guide stored full of JSON escapes is lost, even if the run called it "ok").

The records read are those every checkout since the first runs has written (episode steps,
inducer turn files, guide generations, ASI sleep notes, Voyager iteration records), so the
same audit measures a checkout from before the tolerant parsers and one after.
"""

from __future__ import annotations

import collections
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from speedrunner.methods.voyager.attempt import read_code
from speedrunner.methods.voyager.critic import read_critic
from speedrunner.methods.voyager.voyager import read_task
from speedrunner.methods.wake_sleep.asi_parse import parse_induction
from speedrunner.methods.wake_sleep.opo import read_guide
from speedrunner.methods.wake_sleep.speedrunner_tools import TOOLS, parse_tool_call
from speedrunner.testing.realistic import RealisticFake, one_answer

__all__ = ["KINDS", "RoleAudit", "audit_run"]

KINDS = ("unambiguous", "cut/two", "other")
"""``unambiguous``: served as a variant that still carries one answer; ``cut/two``: cut at
``max_tokens``, two different actions or calls, bad arguments; ``other``: clean or plainly
wrong (or served in several ways)."""
_ACTION = re.compile(r"^Action:[ \t]*(.*?)[ \t]*$", re.MULTILINE)


@dataclass
class RoleAudit:
    """One role's turns: how many were served as each kind, and how many of those were lost."""

    served: collections.Counter[str] = field(default_factory=collections.Counter)
    lost: collections.Counter[str] = field(default_factory=collections.Counter)
    variants: collections.Counter[str] = field(default_factory=collections.Counter)
    """Turns per variant as served (``clean``, ``json``, ...; several joined by ``/``)."""
    lost_variants: collections.Counter[str] = field(default_factory=collections.Counter)
    examples: list[tuple[str, str]] = field(default_factory=list)
    """(call id, variant) of lost format-variant turns, for a reader who wants to look."""

    @property
    def turns(self) -> int:
        return sum(self.served.values())


def audit_run(run_dir: Path, fake: RealisticFake) -> dict[str, RoleAudit]:
    """Role -> what the fake's variants cost this run (roles that had no turn are absent)."""
    run = _Run(Path(run_dir))
    audits: dict[str, RoleAudit] = {}
    for call_id, row in run.calls.items():
        served = fake.how_served(row.get("response"), row.get("tool_calls"))
        if not served or "/description/" in call_id:
            continue
        role = served[0].role
        kinds = {one_answer(s.role, s.variant) for s in served}
        kind = (
            "other"
            if len(kinds) > 1 or None in kinds
            else "unambiguous"
            if kinds == {True}
            else "cut/two"
        )
        read = run.read(role, call_id, served[0].clean)
        if read is None:
            continue  # no record of this turn (e.g. a call of a phase the run never finished)
        audit = audits.setdefault(role, RoleAudit())
        variant = "/".join(sorted({s.variant for s in served}))
        audit.served[kind] += 1
        audit.variants[variant] += 1
        if not read:
            audit.lost[kind] += 1
            audit.lost_variants[variant] += 1
            if kind != "other":
                audit.examples.append((call_id, variant))
    return dict(sorted(audits.items()))


class _Run:
    """A run's records, indexed by the call that produced them."""

    def __init__(self, run_dir: Path) -> None:
        self.dir = run_dir
        self.calls: dict[str, dict[str, Any]] = {}
        for line in (run_dir / "llm_calls.jsonl").read_text("utf-8").splitlines():
            row = json.loads(line)
            if row.get("error") is None and (
                row.get("response") is not None or row.get("tool_calls")
            ):
                self.calls.setdefault(row["call_id"], row)
        self.steps = {
            s["call_id"]: s
            for p in sorted((run_dir / "episodes").rglob("*.json"))
            for s in json.loads(p.read_text("utf-8")).get("steps", [])
        }

    def read(self, role: str, call_id: str, clean: str) -> bool | None:
        """Whether the records show ``clean``'s meaning for this call (None: no record)."""
        return getattr(self, f"_{role}", lambda *_: None)(call_id, clean)

    def _json(self, path: Path) -> dict[str, Any] | None:
        return json.loads(path.read_text("utf-8")) if path.is_file() else None

    def _actor(self, call_id: str, clean: str) -> bool | None:
        step = self.steps.get(call_id)
        if step is None:
            return None
        wanted = _ACTION.search(clean)
        # Read: the action the answer was read as is the clean one, whether or not the env then
        # accepted it (a listed template such as ScienceWorld's "put down OBJ" is a wrong meaning
        # either way), and the run did not find its form unusable (e.g. cut right after it).
        return (
            wanted is not None
            and step.get("answer_format") != "lost"
            and _norm(step.get("raw_action") or step.get("parsed_action") or "")
            == _norm(wanted.group(1))
        )

    def _inducer(self, call_id: str, clean: str) -> bool | None:
        _, batch, _, turn = call_id.split("/")
        record = self._json(self.dir / "sleep" / f"batch_{batch}" / f"turn_{turn}.json")
        if record is None:
            return None
        call = parse_tool_call(clean, set(TOOLS))
        return (
            not str(record.get("result", "")).startswith("Not run:")
            and record.get("tool") == call.tool
            and list(record.get("args") or []) == list(call.args)
            and (record.get("block") or "").strip() == (call.block or "").strip()
        )

    def _guide(self, call_id: str, clean: str) -> bool | None:
        batch = int(call_id.split("/")[1])
        record = self._json(self.dir / "sleep" / f"opo_{batch:04d}.json") or {}
        path = self.dir / "guide" / f"gen_{record.get('generation', batch + 1)}.md"
        if not path.is_file():
            return None
        stored = re.sub(r"\A<!--.*?-->\n", "", path.read_text("utf-8"))
        return _norm(stored) == _norm(read_guide(clean).guide)

    def _asi(self, call_id: str, clean: str) -> bool | None:
        _, batch, _, episode = call_id.split("/")
        record = self._json(self.dir / "sleep" / f"asi_{batch}.json")
        note = next(
            (n for n in (record or {}).get("inductions", []) if n.get("episode") == int(episode)),
            None,
        )
        if note is None:
            return None
        return note.get("proposed") == [f.name for f in parse_induction(clean).functions]

    def _iteration(self, call_id: str) -> tuple[dict[str, Any] | None, str]:
        """The Voyager iteration record of a call (``train/<w>/<k>/...``, or ``train/<w>/...``
        from before worlds continued), and the call's prefix."""
        parts = call_id.split("/")
        prefix = parts[:-2]
        return self._json(
            self.dir / "voyager" / "iterations" / Path(*prefix[1:]).with_suffix(".json")
        ), "/".join(prefix)

    def _asks(self, prefix: str, agent: str) -> int:
        return sum(c.startswith(f"{prefix}/{agent}/") for c in self.calls)

    def _curriculum(self, call_id: str, clean: str) -> bool | None:
        record, prefix = self._iteration(call_id)
        if record is None:
            return None
        last = int(call_id.rsplit("/", 1)[1]) == self._asks(prefix, "curriculum") - 1
        return (
            last
            and not (record.get("curriculum") or {}).get("fallback")
            and record.get("task") == read_task(clean)
        )

    def _voyager_action(self, call_id: str, clean: str) -> bool | None:
        record, _ = self._iteration(call_id)
        if record is None:
            return None
        code = read_code(clean).code or ""
        return (record.get("code") or "").strip() == code.strip() and "cut off" not in str(
            record.get("error") or ""
        )

    def _critic(self, call_id: str, clean: str) -> bool | None:
        record, prefix = self._iteration(call_id)
        if record is None:
            return None
        verdict = record.get("verdict") or {}
        wanted = read_critic(clean).verdict
        last = int(call_id.rsplit("/", 1)[1]) == self._asks(prefix, "critic") - 1
        return (
            last
            and verdict.get("decided_by") == "llm"
            and wanted is not None
            and verdict.get("success") == wanted.success
        )


def _norm(text: str) -> str:
    return " ".join(text.split()).lower().rstrip(".")
