"""The package's layering, as docs/architecture.md draws it, checked on the imports themselves.

Every ``import speedrunner...`` in ``src/speedrunner`` is read with ``ast``, those under
``if TYPE_CHECKING:`` and inside functions included (a reader follows them all). A module may
import its own unit and any unit on a lower floor, nothing on its floor or above; there are
no exceptions.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "speedrunner"

TOP_FLOORS: list[set[str]] = [
    {"speedrunner", "errors"},
    {"core"},
    {"methods"},
    {"catalog", "shipped_configs"},
    {"train_cli", "sweep"},
    {"benchmarks"},
    {"leaderboard", "testing"},
    {"cli"},
]
"""``speedrunner.<unit>`` floors, lowest first: benchmarks -> methods -> core. The training
command line finds a benchmark by name (registry), so a benchmark's train script sits above it."""

CORE_FLOORS: list[set[str]] = [
    {
        "atomic",
        "names",
        "redact",
        "interrupt",
        "seeding",
        "answers",
        "answer_counts",
        "prompts",
        "argparsing",
        "pyast",
        "tempdirs",
    },
    {"registry", "env", "records", "skill_types"},
    {"specs", "benchmark", "env_checker", "skill"},
    {"config", "sandbox"},
    {"llm", "rundir"},
    {"trajectory"},
    {"episode_files"},
    {"codebook"},
    {"method"},
    {"runtime"},
    {"experience", "reporting", "wandb_log", "estimate"},
    {"tracking"},
]
"""``speedrunner.core.<unit>`` floors, lowest first (a unit is a module or a subpackage)."""


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(tree: ast.AST) -> list[tuple[str, int]]:
    """``(module, line)`` of every ``speedrunner`` import, wherever it stands in the file."""
    found: list[tuple[str, int]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            assert node.level == 0, "relative imports are not used in this package"
            if node.module and node.module.split(".")[0] == "speedrunner":
                found.append((node.module, node.lineno))
        elif isinstance(node, ast.Import):
            found.extend(
                (a.name, node.lineno) for a in node.names if a.name.split(".")[0] == "speedrunner"
            )
    return found


def _floor(module: str) -> tuple[str, int, int]:
    """``(unit, top floor, core floor)``; core floor is -1 outside core."""
    parts = module.split(".")
    top = parts[1] if len(parts) > 1 else "speedrunner"
    top_floor = next((i for i, units in enumerate(TOP_FLOORS) if top in units), None)
    assert top_floor is not None, (
        f"{module}: speedrunner.{top} is on no floor of TOP_FLOORS; add it"
    )
    if top != "core" or len(parts) < 3:
        return top, top_floor, -1
    core_floor = next((i for i, units in enumerate(CORE_FLOORS) if parts[2] in units), None)
    assert core_floor is not None, (
        f"{module}: core.{parts[2]} is on no floor of CORE_FLOORS; add it"
    )
    return f"core.{parts[2]}", top_floor, core_floor


def _allowed(importer: str, imported: str) -> bool:
    unit_a, top_a, core_a = _floor(importer)
    unit_b, top_b, core_b = _floor(imported)
    if unit_a == unit_b or imported == "speedrunner.core":
        return True
    if top_a != top_b:
        return top_b < top_a
    return core_b < core_a


@functools.cache
def _all_edges() -> list[tuple[str, str, str]]:
    """``(importer, imported, file:line)`` of every import in the package."""
    edges = []
    for path in sorted(SRC.rglob("*.py")):
        importer = _module_name(path)
        for imported, line in _imports(ast.parse(path.read_text(encoding="utf-8"))):
            edges.append((importer, imported, f"{path.relative_to(SRC.parent.parent)}:{line}"))
    return edges


def test_every_import_goes_down_a_floor() -> None:
    bad = [f"{where}: {a} imports {b}" for a, b, where in _all_edges() if not _allowed(a, b)]
    assert not bad, (
        "imports against the layering (docs/architecture.md); move the code down:\n"
        + "\n".join(bad)
    )


def test_every_unit_is_on_a_floor() -> None:
    top_units = {
        p.stem if p.is_file() else p.name
        for p in SRC.iterdir()
        if (p.suffix == ".py" or (p / "__init__.py").exists()) and p.name != "__init__.py"
    }
    core_units = {
        p.stem if p.is_file() else p.name
        for p in (SRC / "core").iterdir()
        if (p.suffix == ".py" or (p / "__init__.py").exists()) and p.name != "__init__.py"
    }
    assert top_units - set().union(*TOP_FLOORS) == set()
    assert core_units - set().union(*CORE_FLOORS) == set()


@pytest.mark.parametrize(
    ("importer", "imported"),
    [
        ("speedrunner.core.sandbox.skills", "speedrunner.core.runtime.skill_call"),
        ("speedrunner.core.method", "speedrunner.core.runtime.episode"),
        ("speedrunner.methods.asi.method", "speedrunner.benchmarks.babyai"),
        ("speedrunner.core.runtime.loop", "speedrunner.methods.react"),
    ],
)
def test_the_check_refuses_an_upward_import(importer: str, imported: str) -> None:
    """The imports this layering was fixed for (and two more) would be caught again."""
    assert not _allowed(importer, imported)


def test_no_import_cycle_between_modules() -> None:
    """Modules import each other in no cycle, a deferred import inside a function included
    (a cycle inside one unit is as hard to follow as one between units)."""
    graph: dict[str, set[str]] = {}
    for importer, imported, _ in _all_edges():
        if imported != importer:
            graph.setdefault(importer, set()).add(imported)
    # A package's __init__ importing its own modules is how a package re-exports: not a cycle.
    for mod in graph:
        graph[mod] = {t for t in graph[mod] if not mod.startswith(t + ".")}
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(mod: str) -> list[str] | None:
        state[mod] = 1
        stack.append(mod)
        for nxt in sorted(graph.get(mod, ())):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt) :] + [nxt]
            if nxt in graph and nxt not in state and (cycle := visit(nxt)):
                return cycle
        state[mod] = 2
        stack.pop()
        return None

    for mod in sorted(graph):
        if mod not in state and (cycle := visit(mod)):
            pytest.fail("import cycle: " + " -> ".join(cycle))
