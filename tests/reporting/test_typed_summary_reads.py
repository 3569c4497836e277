"""The project's own run records are read through their typed models (``core/records.py``):
no reader of summary.json looks a key up by name, so a renamed or missing field is an error at
the reader, never a silent ``None``."""

from __future__ import annotations

import ast
from pathlib import Path

from ..e2e.harness import REPO

SRC = REPO / "src" / "speedrunner"
READERS = [
    SRC / "sweep",
    SRC / "core" / "reporting",
    SRC / "leaderboard",
    SRC / "core" / "wandb_log.py",
    SRC / "core" / "tracking.py",
    SRC / "core" / "estimate",
    SRC / "core" / "runtime" / "run_summary.py",
    SRC / "train_cli.py",
]


def _name(node: ast.expr) -> str:
    """``summary`` for ``summary``, ``run.summary``, ``self.summary`` (else "")."""
    if isinstance(node, ast.Name):
        return node.id
    return node.attr if isinstance(node, ast.Attribute) else ""


def untyped_reads(path: Path) -> list[str]:
    """``<x>summary<y>.get(...)`` and ``<x>summary<y>[...]`` reads in ``path`` (a W&B run's
    ``run.summary[key] = value`` is a write, not a read of ours)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text("utf-8"))):
        read = None
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "get"
        ):
            read = node.func.value
        elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load):
            read = node.value
        if read is not None and "summary" in _name(read):
            found.append(f"{path}:{node.lineno}: {ast.unparse(node)}")
    return found


def test_no_reader_looks_a_summary_key_up_by_name():
    files = [f for p in READERS for f in ([p] if p.is_file() else sorted(p.rglob("*.py")))]
    assert len(files) > 10
    found = [hit for f in files for hit in untyped_reads(f)]
    assert not found, "read summary.json through RunSummary's attributes:\n" + "\n".join(found)


def test_the_check_finds_a_dict_read_and_passes_a_write_to_wandb(tmp_path):
    source = tmp_path / "reader.py"
    source.write_text(
        "def f(run, summary):\n    run.summary['k'] = 1\n"
        "    return run.summary.get('status'), summary['spent_usd'], summary.status\n"
    )
    assert [hit.split(": ", 1)[1] for hit in untyped_reads(source)] == [
        "run.summary.get('status')",
        "summary['spent_usd']",
    ]
