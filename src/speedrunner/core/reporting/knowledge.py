"""The knowledge a run learned, generation by generation: sizes, call graphs and diffs.

Guides are ``guide/gen_<g>.md``; codebooks are ``codebook/gen_<g>.py`` with
``gen_<g>.json`` (a generation exists only when both files do). Any other method's knowledge
is shown from the first folder of the run directory that holds ``gen_<g>.<ext>`` text files,
titled as the method's spec declares (``MethodSpec.knowledge_title``; else the folder's name).
Codebook source is parsed with ``ast`` and never executed: the call graph is static
(``core.codebook.callgraph``, the same module the inducer's analysis helpers use) — an edge
f -> h when f's body calls the codebook function h by name.
"""

from __future__ import annotations

import difflib
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from speedrunner.core.codebook import store
from speedrunner.core.codebook.callgraph import density, max_depth, static_call_graph

_GUIDE_FILE = re.compile(r"^gen_(\d+)\.md$")
_GENERATION_FILE = re.compile(r"^gen_(\d+)(\.\w+)$")
_NOT_KNOWLEDGE = frozenset({"episodes", "sleep", "codebook", "guide", "report", "wandb"})
"""Folders of a run directory that hold no method knowledge (or are read elsewhere)."""


@dataclass(frozen=True)
class Generation:
    """One knowledge version: its text and the numbers the report plots."""

    generation: int
    kind: str
    """``guide``, ``codebook``, or another method's knowledge title."""
    text: str
    guide_chars: int | None = None
    public_functions: int | None = None
    private_functions: int | None = None
    lines: int | None = None
    call_graph_density: float | None = None
    """|E| / (|V| (|V| - 1)) over the generation's functions (0 with fewer than two)."""
    max_call_depth: int | None = None
    """Functions on the longest static call chain (1: no function calls another; 0: none;
    mutually recursive functions count once each)."""
    dynamic_max_call_depth: int | None = None
    """The deepest call nesting recorded in the training episodes that played this generation."""
    skill_api_tokens: int | None = None
    """Estimated tokens of the skill API section in every actor prompt of this generation
    (``skill_api_tokens`` of the run's rows; unknown for runs that predate it)."""
    suffix: str = ""
    """The generation file's suffix (``.md``), for the diff headings; ``""``: the kind's own."""


def generations(run_dir: Path) -> list[Generation]:
    """The run's guide or codebook generations in order (empty for methods without knowledge)."""
    codebook = store.generations(run_dir)
    if codebook:
        return [_codebook_generation(run_dir, g) for g in codebook]
    folder = run_dir / "guide"
    if not folder.is_dir():
        return _other_generations(run_dir)
    found = sorted(
        (int(m.group(1)), p) for p in folder.iterdir() if (m := _GUIDE_FILE.match(p.name))
    )
    out = []
    for g, path in found:
        text = path.read_text("utf-8")
        out.append(Generation(g, "guide", text, guide_chars=len(text)))
    return out


def _other_generations(run_dir: Path) -> list[Generation]:
    """Another method's knowledge: the first folder holding ``gen_<g>.<ext>`` files, in order."""
    folders = (
        sorted(p for p in run_dir.iterdir() if p.is_dir() and p.name not in _NOT_KNOWLEDGE)
        if run_dir.is_dir()
        else []
    )
    for folder in folders:
        found = sorted(
            (int(m.group(1)), m.group(2), p)
            for p in folder.iterdir()
            if p.is_file() and (m := _GENERATION_FILE.match(p.name))
        )
        if found:
            title = _knowledge_title(run_dir) or folder.name
            out = []
            for g, suffix, path in found:
                text = path.read_bytes().decode("utf-8", errors="replace")
                out.append(Generation(g, title, text, guide_chars=len(text), suffix=suffix))
            return out
    return []


def _knowledge_title(run_dir: Path) -> str | None:
    """The title the run's method declares for its knowledge (``None``: unknown or undeclared)."""
    from speedrunner.core.specs import METHODS

    try:
        name = json.loads((run_dir / "config.resolved.json").read_text("utf-8"))["method"]["name"]
    except (OSError, json.JSONDecodeError, KeyError, TypeError):
        return None
    return METHODS.get(name).knowledge_title if isinstance(name, str) and name in METHODS else None


def _codebook_generation(run_dir: Path, g: int) -> Generation:
    source = store.source_path(run_dir, g).read_bytes().decode("utf-8")
    try:
        meta = json.loads(store.meta_path(run_dir, g).read_text("utf-8"))
        public = {f["name"]: bool(f["public"]) for f in meta.get("functions", [])}
    except (OSError, json.JSONDecodeError, KeyError, TypeError):
        public = {}
    graph = static_call_graph(source)
    flags = [public.get(name, not name.startswith("_")) for name in graph]
    return Generation(
        g,
        "codebook",
        source,
        public_functions=sum(flags),
        private_functions=len(flags) - sum(flags),
        lines=len(source.splitlines()),
        call_graph_density=density(graph),
        max_call_depth=max_depth(graph),
    )


def sleep_notes(run_dir: Path) -> dict[int, str]:
    """Generation -> what the sleep phase that wrote it said, for the diff headings: SpeedRunner's
    ``sleep/batch_<b>/sleep.json`` (its edits and its note) and ASI's ``sleep/asi_<b>.json`` (what
    each induction added, skipped or had rejected)."""
    notes = {}
    for path in sorted((run_dir / "sleep").glob("batch_*/sleep.json")):
        record = _read_record(path)
        if record is None:
            continue
        edits = ", ".join(str(e) for e in record.get("edits") or []) or "no edits"
        note = str(record.get("note") or "").strip()
        notes[int(record["generation"])] = f"{edits}{f' — {note}' if note else ''}"
    for path in sorted((run_dir / "sleep").glob("asi_*.json")):
        record = _read_record(path)
        if record is not None:
            notes[int(record["generation"])] = _asi_note(record.get("inductions") or [])
    return notes


def _read_record(path: Path) -> dict[str, Any] | None:
    """A sleep record with an integer ``generation``, or ``None`` (unreadable records are
    skipped)."""
    try:
        record = json.loads(path.read_text("utf-8"))
        int(record["generation"])
    except (OSError, json.JSONDecodeError, KeyError, TypeError, ValueError):
        return None
    return record


def _asi_note(inductions: list[dict[str, Any]]) -> str:
    added = [
        f"{name} (episode {i.get('episode')})" for i in inductions for name in i.get("added") or []
    ]
    skipped = sum(len(i.get("skipped") or []) for i in inductions)
    rejected = sum(1 for i in inductions if i.get("rejected"))
    parts = [
        f"added {', '.join(added)}" if added else "nothing added",
        f"{len(inductions)} induction(s)",
    ]
    if skipped:
        parts.append(f"{skipped} skipped (name exists)")
    if rejected:
        parts.append(f"{rejected} rejected")
    return "; ".join(parts)


def diffs(gens: list[Generation]) -> list[tuple[int, int, str]]:
    """(previous, current, unified diff) for each pair of consecutive generations."""
    out = []
    for before, after in zip(gens, gens[1:], strict=False):
        suffix = after.suffix or (".md" if after.kind == "guide" else ".py")
        text = "".join(
            difflib.unified_diff(
                before.text.splitlines(keepends=True),
                after.text.splitlines(keepends=True),
                f"gen_{before.generation}{suffix}",
                f"gen_{after.generation}{suffix}",
            )
        )
        out.append((before.generation, after.generation, text))
    return out
