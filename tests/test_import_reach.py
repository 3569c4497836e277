"""Static import reach: the speedrunner modules (and their lines) a module pulls in.

Every ``speedrunner`` import counts, those under ``if TYPE_CHECKING:`` and inside functions
included: each is code a reader of the module has to follow. A package counts where something
that is not a submodule is imported from it (``from speedrunner.core import pyast`` reaches
``core.pyast`` only); the ``__init__`` Python runs on the way is not counted.

Measure any module: ``python tests/test_import_reach.py speedrunner.methods.wake_sleep.react``.
"""

from __future__ import annotations

import ast
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"

REACH_LIMITS = {
    "speedrunner.methods.wake_sleep.react": 8,
    "speedrunner.methods.wake_sleep.opo": 12,
    "speedrunner.methods.wake_sleep.speedrunner": 30,
}
"""Most modules each method may reach; lower a limit when a change lowers the reach."""


@dataclass(frozen=True)
class Reach:
    modules: tuple[str, ...]
    """Every module reached, the start included, sorted."""
    lines: int


def module_path(name: str, src: Path = SRC) -> Path | None:
    """The file of module ``name`` under ``src``, or ``None`` if there is none."""
    base = src.joinpath(*name.split("."))
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.is_file():
            return path
    return None


def imports_of(name: str, src: Path = SRC) -> set[str]:
    """The speedrunner modules ``name``'s file imports, wherever the import stands."""
    path = module_path(name, src)
    assert path is not None, f"{name} is not a module under {src}"
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module.split(".")[0] != "speedrunner":
                continue
            subs = {f"{node.module}.{a.name}" for a in node.names}
            subs = {s for s in subs if module_path(s, src) is not None}
            found |= subs
            if len(subs) < len(node.names):
                found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.split(".")[0] == "speedrunner")
    return {m for m in found if module_path(m, src) is not None}


def reach(name: str, src: Path = SRC) -> Reach:
    """Every module ``name`` reaches through imports, and their lines."""
    seen: set[str] = set()
    todo = [name]
    while todo:
        mod = todo.pop()
        if mod not in seen:
            seen.add(mod)
            todo.extend(imports_of(mod, src) - seen)
    lines = sum(
        len(p.read_text(encoding="utf-8").splitlines())
        for p in (module_path(m, src) for m in seen)
        if p is not None
    )
    return Reach(tuple(sorted(seen)), lines)


@pytest.mark.parametrize(("module", "limit"), sorted(REACH_LIMITS.items()))
def test_a_method_reaches_few_modules(module: str, limit: int) -> None:
    """A method's module pulls in the types it works with, not the runtime that plays them."""
    found = reach(module)
    assert len(found.modules) <= limit, (
        f"{module} reaches {len(found.modules)} modules ({found.lines} lines), more than {limit}:\n"
        + "\n".join(found.modules)
    )


def test_react_reaches_no_runtime() -> None:
    """The data a method reads (trajectories) sit below the loop: react reaches no runtime
    module."""
    assert not [
        m
        for m in reach("speedrunner.methods.wake_sleep.react").modules
        if m.startswith("speedrunner.core.runtime")
    ]


def test_the_method_base_reaches_types_not_the_skill_handle_or_benchmarks() -> None:
    """What ``Method``'s signatures name (episode specs, skills, trajectories) are types; the skill
    handle (``SkillEnv``) and the ``Benchmark`` base are not followed from it."""
    found = set(reach("speedrunner.core.method").modules)
    core = "speedrunner.core."
    assert {core + "skill_types", core + "env", core + "trajectory"} <= found
    assert not found & {core + "skill", core + "benchmark", "speedrunner.errors"}


def test_speedrunner_reaches_the_analysis_sandbox_only_through_its_skill_support() -> None:
    """The method runs analysis code through ``SkillSupport.open_analysis``: it reaches no sandbox
    process, tier or analysis-session module, nor the runtime's full caps module."""
    found = reach("speedrunner.methods.wake_sleep.speedrunner").modules
    internals = {
        "analysis",
        "process",
        "tiers",
        "cgroups",
        "seccomp",
        "commands",
        "lifecycle",
        "limits",
        "schema",
    }
    assert not [m for m in found if m.rsplit(".", 1)[-1] in internals and ".sandbox." in m]
    runtime = [m for m in found if m.startswith("speedrunner.core.runtime.")]
    assert runtime == ["speedrunner.core.runtime.sleep_caps"]


def test_reach_follows_deferred_and_type_checking_imports(tmp_path: Path) -> None:
    pkg = tmp_path / "speedrunner"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
        "    from speedrunner.b import B\n\ndef f():\n    import speedrunner.c\n"
    )
    (pkg / "b.py").write_text("from speedrunner import d\nB = 1\n")
    (pkg / "c.py").write_text("x = 1\ny = 2\n")
    (pkg / "d.py").write_text("")
    found = reach("speedrunner.a", tmp_path)
    assert found.modules == ("speedrunner.a", "speedrunner.b", "speedrunner.c", "speedrunner.d")
    assert found.lines == 6 + 2 + 2


if __name__ == "__main__":
    for arg in sys.argv[1:] or sorted(REACH_LIMITS):
        r = reach(arg)
        print(f"{arg}: {len(r.modules)} modules, {r.lines} lines")
