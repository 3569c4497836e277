"""Core, the sweep, the CLI and the train command name no shipped benchmark or method: what
differs between them is declared in their specs (``speedrunner.catalog``) and packages, so a
researcher's own package gets the same treatment."""

from __future__ import annotations

import ast
from pathlib import Path

import speedrunner

SRC = Path(speedrunner.__file__).parent
BENCHMARK_NAMES = {"babyai", "crafter", "scienceworld"}
METHOD_NAMES = {"react", "opo", "speedrunner", "speedrunner_no_cl", "asi", "voyager"}
NAMES = BENCHMARK_NAMES | METHOD_NAMES
PACKAGE = "speedrunner"
"""Also the package's own name: as a string it counts only where a method name would be
compared or listed."""

BUILT_PATH = "f-string building a module path"
KNOWN = {
    ("core/rundir.py", "speedrunner"): "a PyPI distribution whose version provenance.json records",
    ("core/rundir.py", "crafter"): "a PyPI distribution whose version provenance.json records",
    ("core/rundir.py", "scienceworld"): "a PyPI distribution whose version provenance.json records",
    (
        "core/answer_counts.py",
        "voyager",
    ): "Voyager's iteration records (core/answer_counts.py: not this task's file)",
    (
        "core/reporting/headline.py",
        "react",
    ): "the report's default baseline (core/reporting: not this task's file)",
}
"""Names still written in core, each with why; anything else found is a failure."""


def scanned() -> list[Path]:
    return [
        *sorted((SRC / "core").rglob("*.py")),
        *sorted((SRC / "sweep").rglob("*.py")),
        SRC / "cli.py",
        SRC / "train_cli.py",
    ]


def names_in(source: str) -> list[tuple[int, str]]:
    """Shipped names as string literals, identifiers, or module paths built by convention."""
    tree = ast.parse(source)
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in NAMES:
            listed = isinstance(
                parents.get(node), (ast.Compare, ast.Tuple, ast.List, ast.Set, ast.Dict)
            )
            if node.value != PACKAGE or listed:
                found.append((node.lineno, node.value))
        elif isinstance(node, ast.JoinedStr):
            text = "".join(
                v.value
                for v in node.values
                if isinstance(v, ast.Constant) and isinstance(v.value, str)
            )
            if "speedrunner.benchmarks." in text or "speedrunner.methods." in text:
                found.append((node.lineno, BUILT_PATH))
        elif isinstance(node, ast.Name | ast.Attribute):
            ident = node.id if isinstance(node, ast.Name) else node.attr
            if ident.lower() in NAMES - {PACKAGE}:
                found.append((node.lineno, ident))
    return found


def test_core_sweep_cli_and_train_name_no_shipped_benchmark_or_method() -> None:
    problems = []
    for path in scanned():
        rel = path.relative_to(SRC).as_posix()
        for line, name in names_in(path.read_text("utf-8")):
            if (rel, name) not in KNOWN:
                problems.append(f"{rel}:{line}: {name}")
    assert problems == [], "declare it in the spec (speedrunner.catalog) instead:\n" + "\n".join(
        problems
    )


def test_the_scan_sees_what_it_is_meant_to_see() -> None:
    """The forms a shipped name took in core before: a tuple of names, a comparison, a dict
    of per-benchmark sizes, a module path built by convention, an attribute read."""
    code = """
CODEBOOK = ("asi", "speedrunner")
if method.name == "voyager": pass
SIZES = {"babyai": 6000}
module = f"speedrunner.benchmarks.{name}.skill_api"
bench.scienceworld
prog = "speedrunner"
"""
    assert sorted(n for _, n in names_in(code)) == sorted(
        ["asi", "speedrunner", "voyager", "babyai", BUILT_PATH, "scienceworld"]
    )
