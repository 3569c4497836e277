"""Every top-level function and class in ``src`` is used somewhere: by the code, a test, a
benchmark, a script or the docs. A definition nothing names is code a reader must understand
for nothing; delete it rather than keep it "just in case"."""

from __future__ import annotations

import ast
import re
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
KNOWN: dict[str, tuple[str, ...]] = {}
"""Unused definitions left to their module's owner to delete (each must still be there and
unused: the list never outlives them)."""


def _corpus() -> list[Path]:
    files = [p for d in ("src", "tests", "benchmarks", "scripts") for p in (REPO / d).rglob("*.py")]
    files += [
        p for p in (REPO / "src").rglob("*") if p.suffix in (".yaml", ".yml", ".txt", ".json")
    ]
    files += list((REPO / "docs").rglob("*.md")) + [
        REPO / "README.md",
        REPO / "SPEEDRUN.md",
        REPO / "mkdocs.yml",
        REPO / "pyproject.toml",
    ]
    return [p for p in files if p.is_file() and p != Path(__file__).resolve()]  # KNOWN names no use


def unreferenced(root: Path, words: Counter[str]) -> list[str]:
    """``path:line name`` of each top-level definition under ``root`` whose name occurs only once
    (its own ``def``/``class`` line) in all the words counted."""
    found = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.parse(path.read_text("utf-8")).body:
            if (
                isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
                and not node.name.startswith("__")
                and words[node.name] <= 1
            ):
                found.append(f"{path.relative_to(root)}:{node.lineno} {node.name}")
    return found


def test_every_top_level_definition_in_src_is_referenced() -> None:
    words: Counter[str] = Counter()
    for path in _corpus():
        words.update(WORD.findall(path.read_text("utf-8", errors="replace")))
    dead = unreferenced(REPO / "src", words)
    known = {f"{path} {name}" for path, names in KNOWN.items() for name in names}
    found = {f"{line.split(':')[0]} {line.split()[-1]}" for line in dead}
    assert found <= known, "defined but never used (delete them, or use them):\n" + "\n".join(
        line for line in dead if f"{line.split(':')[0]} {line.split()[-1]}" not in known
    )
    assert known <= found, f"no longer unused, take them off KNOWN: {sorted(known - found)}"


def test_the_check_finds_a_definition_nothing_names(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text("def used():\n    pass\n\n\ndef forgotten():\n    return used()\n", "utf-8")
    words = Counter(WORD.findall(module.read_text("utf-8")))
    assert unreferenced(tmp_path, words) == ["m.py:5 forgotten"]
