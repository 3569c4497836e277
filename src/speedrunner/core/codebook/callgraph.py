"""Call graphs of a codebook: static (from its source) and dynamic (from recorded call trees).

A graph maps each function name to the set of other functions it calls. The *static* graph
comes from parsing the source with ``ast`` (never executing it): an edge f -> h when f's body
calls the top-level function h by name. The *dynamic* graph comes from the call trees that
skill calls recorded (``ActorStep.skill_call``, built by ``core.sandbox.tracing``): an edge
f -> h when a recorded call of f called h.

Call trees come out of the sandbox, so they are hostile input: every walk here is iterative
(no recursion for a deep tree to overflow), stops after ``MAX_NODES`` nodes and ignores
anything that is not a node dict. The graph measures are iterative too, because an uncapped
library can hold call chains longer than Python's recursion limit.

Only the standard library is used: the sleep phase's analysis code imports this module inside
the sandbox (through ``core.experience``), and the report imports it in the main process.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from speedrunner.core import pyast

__all__ = [
    "CAP_STOPS",
    "MAX_NODES",
    "Graph",
    "SkillStats",
    "TreeNode",
    "call_outcome",
    "cyclomatic_complexity",
    "density",
    "dynamic_call_graph",
    "functions",
    "max_depth",
    "skill_stats",
    "static_call_graph",
    "tree_depth",
    "walk_tree",
]

Graph = dict[str, set[str]]

MAX_NODES = 100_000
"""Nodes visited per call tree; a larger tree is read only this far. The sandbox records at
most 1000 nodes per top-level call, so real data never reaches it."""


@dataclass(frozen=True)
class TreeNode:
    """One node met while walking a call tree:
    the node, its depth (the root is 1) and its parent."""

    node: Mapping[str, Any]
    depth: int
    parent: Mapping[str, Any] | None


def functions(source: str) -> dict[str, ast.FunctionDef | ast.AsyncFunctionDef]:
    """The module's top-level functions by name (empty when the source does not parse)."""
    try:
        tree = pyast.parse(source)
    except (SyntaxError, ValueError):
        return {}
    return {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)}


def static_call_graph(source: str) -> Graph:
    """Top-level function -> the other top-level functions its body calls by name.

    Every top-level function is a key (with an empty set when it calls none); self-calls are
    left out, so recursion adds no edge. Empty when the source does not parse.
    """
    defs = functions(source)
    graph: Graph = {}
    for name, node in defs.items():
        called = {
            c.func.id
            for c in ast.walk(node)
            if isinstance(c, ast.Call) and isinstance(c.func, ast.Name)
        }
        graph[name] = {h for h in called if h in defs and h != name}
    return graph


def walk_tree(trees: Iterable[Any], max_nodes: int = MAX_NODES) -> Iterator[TreeNode]:
    """Every node of the given call trees, tree by tree, depth first,
    at most ``max_nodes`` per tree.

    Iterative, so any nesting depth is safe; entries that are not dicts (in ``trees`` or in a
    node's ``calls``) are skipped, as is a ``calls`` that is not a list.
    """
    for tree in trees:
        if not isinstance(tree, Mapping):
            continue
        stack: list[tuple[Mapping[str, Any], int, Mapping[str, Any] | None]] = [(tree, 1, None)]
        seen = 0
        while stack and seen < max_nodes:
            node, depth, parent = stack.pop()
            seen += 1
            yield TreeNode(node, depth, parent)
            calls = node.get("calls")
            if isinstance(calls, list):
                stack.extend(
                    (c, depth + 1, node) for c in reversed(calls) if isinstance(c, Mapping)
                )


def _name(node: Mapping[str, Any] | None) -> str | None:
    name = None if node is None else node.get("name")
    return name if isinstance(name, str) else None


def dynamic_call_graph(trees: Iterable[Any], max_nodes: int = MAX_NODES) -> Graph:
    """Function -> the functions its recorded calls called, over every node of ``trees``.

    Every function that ran is a key; self-calls (recursion) are left out, as in the static graph.
    """
    graph: Graph = {}
    for item in walk_tree(trees, max_nodes):
        name = _name(item.node)
        if name is None:
            continue
        graph.setdefault(name, set())
        parent = _name(item.parent)
        if parent is not None and parent != name:
            graph.setdefault(parent, set()).add(name)
    return graph


def tree_depth(trees: Iterable[Any], max_nodes: int = MAX_NODES) -> int:
    """The deepest nesting over ``trees``: 1 for a call that called no other function, 0 for none.

    A recursive function counts at each level it ran (the recorded depth, unlike ``max_depth``
    of a graph). The sandbox records 40 levels at most; deeper calls ran but are not in the tree.
    """
    return max((item.depth for item in walk_tree(trees, max_nodes)), default=0)


def density(graph: Mapping[str, Iterable[str]]) -> float:
    """|E| / (|V| (|V| - 1)): the share of possible caller -> callee pairs that exist
    (0 below two functions)."""
    v = len(graph)
    return 0.0 if v < 2 else sum(len(set(e)) for e in graph.values()) / (v * (v - 1))


def max_depth(graph: Mapping[str, Iterable[str]]) -> int:
    """Functions on the longest call chain of ``graph`` (1: no function calls another; 0: none).

    Mutually recursive functions (a strongly connected component) count once each, as a chain
    that goes once around the cycle. Callees missing from the keys count as leaves.
    """
    edges = {name: sorted(set(callees)) for name, callees in graph.items()}
    for callees in list(edges.values()):
        for h in callees:
            edges.setdefault(h, [])
    components = _components(edges)
    component_of = {name: i for i, comp in enumerate(components) for name in comp}
    depth: dict[int, int] = {}
    # Tarjan emits a component only after every component it reaches: callees come first.
    for i, comp in enumerate(components):
        below = {component_of[h] for name in comp for h in edges[name]} - {i}
        depth[i] = len(comp) + max((depth[j] for j in below), default=0)
    return max(depth.values(), default=0)


def _components(graph: dict[str, list[str]]) -> list[list[str]]:
    """Strongly connected components (Tarjan, iterative), each after every component it reaches."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work: list[tuple[str, int]] = [(start, 0)]
        while work:
            v, i = work.pop()
            if i == 0:
                index[v] = low[v] = len(index)
                stack.append(v)
                on_stack.add(v)
            callees = graph[v]
            if i > 0:  # back from callees[i - 1]
                low[v] = min(low[v], low[callees[i - 1]])
            while i < len(callees):
                w = callees[i]
                if w not in index:
                    break
                if w in on_stack:
                    low[v] = min(low[v], index[w])
                i += 1
            if i < len(callees):
                work.append((v, i + 1))
                work.append((callees[i], 0))
                continue
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                out.append(comp)
    return out


_BRANCHES = (
    ast.If,
    ast.IfExp,
    ast.For,
    ast.AsyncFor,
    ast.While,
    ast.ExceptHandler,
    ast.With,
    ast.AsyncWith,
    ast.Assert,
    ast.comprehension,
    ast.match_case,
)


def cyclomatic_complexity(node: ast.AST) -> int:
    """McCabe's cyclomatic complexity of one function: 1 + its decision points.

    A decision point is an ``if``/``elif``, conditional expression, ``for``/``while`` loop,
    ``except`` clause, ``with`` (it may swallow an exception), ``assert``, comprehension
    ``for`` and each of its ``if`` filters, ``match`` case, and each extra operand of
    ``and``/``or``. Nested functions and lambdas count toward the function that holds them.
    """
    score = 1
    for n in ast.walk(node):
        if isinstance(n, _BRANCHES):
            score += 1
            if isinstance(n, ast.comprehension):
                score += len(n.ifs)
        elif isinstance(n, ast.BoolOp):
            score += len(n.values) - 1
    return score


CAP_STOPS = ("max_actions", "timeout")
"""How a call stops at a cap: the per-call action cap, or the per-call wall-clock limit."""
_STOPPED = re.compile(r"^stopped \((\w+)\)$")  # what tracing writes into a node a stop unwound


@dataclass(frozen=True)
class SkillStats:
    """How one function's recorded calls went (nested calls included).

    Every call is exactly one of: a success (returned), an error (raised), a cap hit (stopped
    by the per-call action cap or time limit: ``stopped_by`` ``max_actions``/``timeout``), or
    interrupted (the episode ended during the call). ``actions`` counts the primitive actions
    taken inside the calls, their nested calls' included.
    """

    calls: int = 0
    successes: int = 0
    errors: int = 0
    cap_hits: int = 0
    interrupted: int = 0
    actions: int = 0

    @property
    def actions_per_call(self) -> float:
        """Mean primitive actions per call (0.0 without calls)."""
        return self.actions / self.calls if self.calls else 0.0


def _stop_reason(node: Mapping[str, Any]) -> str | None:
    stopped_by = node.get("stopped_by")
    if stopped_by in (*CAP_STOPS, "episode_done"):
        return str(stopped_by)
    error = node.get("error")
    m = _STOPPED.match(error) if isinstance(error, str) else None
    return m.group(1) if m else None


def call_outcome(node: Mapping[str, Any]) -> str:
    """``success``, ``error``, ``cap_hit`` or ``interrupted``: how one recorded call ended."""
    reason = _stop_reason(node)
    if reason is not None:
        return "cap_hit" if reason in CAP_STOPS else "interrupted"
    return "error" if node.get("error") else "success"


def skill_stats(trees: Iterable[Any], max_nodes: int = MAX_NODES) -> dict[str, SkillStats]:
    """Function name -> ``SkillStats`` over every node of the call ``trees``, sorted by name."""
    order: list[TreeNode] = list(walk_tree(trees, max_nodes))
    below: dict[int, int] = {}  # id(node) -> actions in its subtree
    for item in reversed(order):  # children before parents
        actions = item.node.get("actions")
        own = len(actions) if isinstance(actions, list) else 0
        total = below.get(id(item.node), 0) + own
        below[id(item.node)] = total
        if item.parent is not None:
            below[id(item.parent)] = below.get(id(item.parent), 0) + total
    counts: dict[str, dict[str, int]] = {}
    for item in order:
        name = _name(item.node)
        if name is None:
            continue
        c = counts.setdefault(
            name,
            {"calls": 0, "success": 0, "error": 0, "cap_hit": 0, "interrupted": 0, "actions": 0},
        )
        c["calls"] += 1
        c[call_outcome(item.node)] += 1
        c["actions"] += below[id(item.node)]
    return {
        name: SkillStats(
            c["calls"], c["success"], c["error"], c["cap_hit"], c["interrupted"], c["actions"]
        )
        for name, c in sorted(counts.items())
    }
