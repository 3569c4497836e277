"""The run's experience as the sleep-phase inducer's analysis code sees it.

SpeedRunner's inducer runs Python in a sandbox session (``core/sandbox/analysis.py``)
whose only readable run files are the training episodes and the codebook generations,
mounted read-only. This module is what that code imports to load them; it needs only
the standard library and ``core.trajectory``, so it imports inside the sandbox.

The session is prepared with ``configure(...)`` before the inducer's first code runs;
the inducer then calls::

    from speedrunner.core.experience import episodes, codebook_source
    eps = episodes(generation=1, success=False)         # list[Trajectory]
    for t in episodes(skill="go_to"):                   # episodes that called go_to
        for call in t.skill_calls():                    # {"step", "call", "tree", "actions"}
            print(t.index, call["call"], call["tree"]["error"])

Only episodes up to the batch being slept on are visible (``upto``), so a sleep phase
re-run after a kill sees exactly what it saw the first time, even if later files exist.

Beyond loading, it offers what a coding agent studies a library with: the static call graph
of any generation and the dynamic one its episodes recorded, call depths, per-skill
outcome counts (calls, successes, errors, cap hits, actions per call), the parsed AST of
any generation and each function's cyclomatic complexity. Call trees are walked with
``core.codebook.callgraph`` (iterative, bounded), the same code the report uses.

In a codebook run every sleep phase writes one generation, so training batch ``b`` is
the batch played with generation ``b``: ``batch=`` and ``generation=`` select the same
episodes. Both are offered because the inducer thinks in both.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

from speedrunner.core import pyast
from speedrunner.core.codebook import callgraph
from speedrunner.core.codebook.callgraph import SkillStats
from speedrunner.core.episode_files import load_trajectory
from speedrunner.core.trajectory import Trajectory

__all__ = [
    "SkillStats",
    "call_graph_density",
    "codebook_ast",
    "codebook_source",
    "complexity",
    "configure",
    "dynamic_call_depth",
    "dynamic_call_graph",
    "episodes",
    "generations",
    "skill_stats",
    "static_call_depth",
    "static_call_graph",
]


@dataclass(frozen=True)
class _Where:
    episodes_dir: Path
    codebook_dir: Path
    upto: int
    """The last episode index the current sleep phase may see."""


_where: _Where | None = None


def configure(episodes_dir: str | Path, codebook_dir: str | Path, upto: int) -> None:
    """Point this module at one run's experience (the method calls this, not the inducer)."""
    global _where
    _where = _Where(Path(episodes_dir), Path(codebook_dir), upto)


def _here() -> _Where:
    if _where is None:
        raise RuntimeError(
            "speedrunner.core.experience is not configured: call configure(episodes_dir, "
            "codebook_dir, upto) first"
        )
    return _where


def episodes(
    *,
    batch: int | None = None,
    generation: int | None = None,
    success: bool | None = None,
    skill: str | None = None,
) -> list[Trajectory]:
    """Training episodes in index order, filtered by batch, codebook generation, outcome,
    and whether any skill call (nested calls included) used the function ``skill``."""
    where = _here()
    found = []
    for path in sorted(where.episodes_dir.glob("*.json")):
        if not path.stem.isdigit() or int(path.stem) > where.upto:
            continue
        t = load_trajectory(path)
        if generation is not None and t.knowledge_version != generation:
            continue
        if batch is not None and t.knowledge_version != batch:
            continue
        if success is not None and t.success != success:
            continue
        if skill is not None and not any(_calls(c["tree"], skill) for c in t.skill_calls()):
            continue
        found.append(t)
    return found


def _calls(tree: dict | None, name: str) -> bool:
    stack = [tree] if tree else []
    while stack:
        node = stack.pop()
        if node.get("name") == name:
            return True
        stack.extend(c for c in node.get("calls") or () if isinstance(c, dict))
    return False


def generations() -> list[int]:
    """The codebook generations stored so far."""
    return sorted(int(p.stem.removeprefix("gen_")) for p in _here().codebook_dir.glob("gen_*.py"))


def codebook_source(generation: int) -> str:
    """The Python source of one stored codebook generation."""
    return (_here().codebook_dir / f"gen_{generation}.py").read_text("utf-8")


def codebook_ast(generation: int) -> ast.Module:
    """The parsed module (``ast.parse``) of one stored codebook generation.

    Stored generations passed validation, so they parse; walk it with ``ast.walk`` or an
    ``ast.NodeVisitor``, e.g.
    ``[n.name for n in codebook_ast(3).body if isinstance(n, ast.FunctionDef)]``.
    """
    return pyast.parse(codebook_source(generation), filename=f"gen_{generation}.py")


def static_call_graph(generation: int) -> dict[str, set[str]]:
    """Each top-level function of generation ``generation`` -> the other functions its body \
calls by name.

    Every function is a key (an empty set when it calls none); a function calling itself adds
    no edge. Read from the source, never run: a call in a branch never taken still counts.
    """
    return callgraph.static_call_graph(codebook_source(generation))


def _trees(filters: dict[str, object]) -> list[dict]:
    return [c["tree"] for t in episodes(**filters) for c in t.skill_calls()]  # type: ignore[arg-type]


def dynamic_call_graph(
    *,
    batch: int | None = None,
    generation: int | None = None,
    success: bool | None = None,
    skill: str | None = None,
) -> dict[str, set[str]]:
    """Each function that ran in the selected episodes -> the functions its recorded calls called.

    Filters as in ``episodes``. Pass ``generation=`` for one library's graph: names mean
    different functions across generations (renames, edits).
    """
    return callgraph.dynamic_call_graph(
        _trees({"batch": batch, "generation": generation, "success": success, "skill": skill})
    )


def call_graph_density(graph: dict[str, set[str]]) -> float:
    """|E| / (|V| (|V| - 1)) of a call graph from ``static_call_graph`` or ``dynamic_call_graph``.

    The share of possible caller -> callee pairs that exist; 0.0 with fewer than two functions.
    """
    return callgraph.density(graph)


def static_call_depth(generation: int) -> int:
    """Functions on the longest static call chain of generation ``generation``.

    1 when no function calls another, 0 for an empty codebook; mutually recursive functions
    count once each.
    """
    return callgraph.max_depth(static_call_graph(generation))


def dynamic_call_depth(
    *,
    batch: int | None = None,
    generation: int | None = None,
    success: bool | None = None,
    skill: str | None = None,
) -> int:
    """The deepest recorded nesting of skill calls in the selected episodes (filters as in \
``episodes``).

    1 when no call called another codebook function, 0 when no skill was called. Recursion
    counts every level that ran; the sandbox records at most 40 levels.
    """
    return callgraph.tree_depth(
        _trees({"batch": batch, "generation": generation, "success": success, "skill": skill})
    )


def skill_stats(
    *,
    batch: int | None = None,
    generation: int | None = None,
    success: bool | None = None,
    skill: str | None = None,
) -> dict[str, SkillStats]:
    """Function name -> ``SkillStats`` (calls, successes, errors, cap_hits, interrupted, actions,
    actions_per_call) over every recorded call, nested ones included, of the selected episodes.

    Filters as in ``episodes``. A cap hit is a call stopped by the per-call action cap or
    time limit (``stopped_by`` ``max_actions`` or ``timeout``); ``interrupted`` calls were
    running when the episode ended. Pass ``generation=`` to count one library's functions.
    """
    return callgraph.skill_stats(
        _trees({"batch": batch, "generation": generation, "success": success, "skill": skill})
    )


def complexity(generation: int) -> dict[str, int]:
    """Each top-level function of generation ``generation`` -> its cyclomatic complexity.

    McCabe's number, 1 + decision points (``if``/``elif``, loops, ``except``, ``with``,
    ``assert``, comprehension ``for``/``if``, ``match`` cases, each extra ``and``/``or``
    operand); 1 is straight-line code.
    """
    return {
        name: callgraph.cyclomatic_complexity(node)
        for name, node in callgraph.functions(codebook_source(generation)).items()
    }
