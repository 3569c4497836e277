"""The knowledge a run learned, generation by generation: sizes, call graphs and diffs.

Guides are ``guide/gen_<g>.md``; codebooks are ``codebook/gen_<g>.py`` with
``gen_<g>.json`` (a generation exists only when both files do). Codebook source is parsed
with ``ast`` and never executed: the call graph is static — an edge f -> h when f's body
calls the codebook function h by name.
"""

from __future__ import annotations

import ast
import difflib
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from speedrunner.core.codebook import store

_GUIDE_FILE = re.compile(r"^gen_(\d+)\.md$")


@dataclass(frozen=True)
class Generation:
    """One knowledge version: its text and the numbers the report plots."""

    generation: int
    kind: str
    """``guide`` or ``codebook``."""
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


def generations(run_dir: Path) -> list[Generation]:
    """The run's guide or codebook generations in order (empty for methods without knowledge)."""
    codebook = store.generations(run_dir)
    if codebook:
        return [_codebook_generation(run_dir, g) for g in codebook]
    folder = run_dir / "guide"
    if not folder.is_dir():
        return []
    found = sorted((int(m.group(1)), p) for p in folder.iterdir() if (m := _GUIDE_FILE.match(p.name)))
    out = []
    for g, path in found:
        text = path.read_text("utf-8")
        out.append(Generation(g, "guide", text, guide_chars=len(text)))
    return out


def _codebook_generation(run_dir: Path, g: int) -> Generation:
    source = store.source_path(run_dir, g).read_bytes().decode("utf-8")
    try:
        meta = json.loads(store.meta_path(run_dir, g).read_text("utf-8"))
        public = {f["name"]: bool(f["public"]) for f in meta.get("functions", [])}
    except (OSError, json.JSONDecodeError, KeyError, TypeError):
        public = {}
    graph = call_graph(source)
    flags = [public.get(name, not name.startswith("_")) for name in graph]
    return Generation(g, "codebook", source, public_functions=sum(flags),
                      private_functions=len(flags) - sum(flags), lines=len(source.splitlines()),
                      call_graph_density=density(graph), max_call_depth=max_depth(graph))


def call_graph(source: str) -> dict[str, set[str]]:
    """Top-level functions -> the other top-level functions each one calls by name."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return {}
    functions = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)}
    graph: dict[str, set[str]] = {}
    for name, node in functions.items():
        called = {c.func.id for c in ast.walk(node) if isinstance(c, ast.Call) and isinstance(c.func, ast.Name)}
        graph[name] = {h for h in called if h in functions and h != name}
    return graph


def density(graph: dict[str, set[str]]) -> float:
    """|E| / (|V| (|V| - 1)): the share of possible caller -> callee pairs that exist."""
    v = len(graph)
    return 0.0 if v < 2 else sum(len(e) for e in graph.values()) / (v * (v - 1))


def max_depth(graph: dict[str, set[str]]) -> int:
    """Functions on the longest call chain. Mutually recursive functions (a strongly connected
    component) count once each, as a chain that goes once around the cycle."""
    components = _components(graph)
    component_of = {name: i for i, comp in enumerate(components) for name in comp}
    memo: dict[int, int] = {}

    def depth(i: int) -> int:
        if i not in memo:
            below = {component_of[h] for name in components[i] for h in graph[name]} - {i}
            memo[i] = len(components[i]) + max((depth(j) for j in below), default=0)
        return memo[i]

    return max((depth(i) for i in range(len(components))), default=0)


def _components(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components (Tarjan); a codebook is small, so recursion is fine."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            out.append(comp)

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


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
    """A sleep record with an integer ``generation``, or ``None`` (unreadable records are skipped)."""
    try:
        record = json.loads(path.read_text("utf-8"))
        int(record["generation"])
    except (OSError, json.JSONDecodeError, KeyError, TypeError, ValueError):
        return None
    return record


def _asi_note(inductions: list[dict[str, Any]]) -> str:
    added = [f"{name} (episode {i.get('episode')})" for i in inductions for name in i.get("added") or []]
    skipped = sum(len(i.get("skipped") or []) for i in inductions)
    rejected = sum(1 for i in inductions if i.get("rejected"))
    parts = [f"added {', '.join(added)}" if added else "nothing added",
             f"{len(inductions)} induction(s)"]
    if skipped:
        parts.append(f"{skipped} skipped (name exists)")
    if rejected:
        parts.append(f"{rejected} rejected")
    return "; ".join(parts)


def diffs(gens: list[Generation]) -> list[tuple[int, int, str]]:
    """(previous, current, unified diff) for each pair of consecutive generations."""
    out = []
    for before, after in zip(gens, gens[1:], strict=False):
        suffix = ".md" if after.kind == "guide" else ".py"
        text = "".join(difflib.unified_diff(before.text.splitlines(keepends=True), after.text.splitlines(keepends=True),
                                            f"gen_{before.generation}{suffix}", f"gen_{after.generation}{suffix}"))
        out.append((before.generation, after.generation, text))
    return out
