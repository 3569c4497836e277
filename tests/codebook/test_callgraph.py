"""Call graphs, depths, per-skill outcomes and complexity on small hand-written codebooks and
trees."""

from __future__ import annotations

import ast
import json
import sys

from speedrunner.core.codebook.callgraph import (
    SkillStats,
    cyclomatic_complexity,
    density,
    dynamic_call_graph,
    functions,
    max_depth,
    skill_stats,
    static_call_graph,
    tree_depth,
    walk_tree,
)


def node(name: str, *calls: dict, actions: int = 0, error: str | None = None, **extra) -> dict:
    """A call-tree node as ``core.sandbox.tracing`` records it."""
    return {
        "name": name,
        "args": [],
        "kwargs": {},
        "calls": list(calls),
        "actions": [{"action": "go forward", "text": "", "done": False}] * actions,
        "returned": None,
        "error": error,
        "prints": "",
        **extra,
    }


def test_static_graph_density_and_depth_count_a_cycle_once():
    source = (
        "def a(env):\n    b(env)\n\ndef b(env):\n    c(env)\n\ndef c(env):\n    a(env)\n    "
        "c(env)\n\ndef d(env):\n    pass\n"
    )
    graph = static_call_graph(source)
    assert graph == {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}  # self-calls are not edges
    assert density(graph) == 3 / (4 * 3) and max_depth(graph) == 3
    assert density({}) == 0.0 and max_depth({}) == 0
    chain = static_call_graph(
        "def a(env):\n    b(env)\n    c(env)\n\ndef b(env):\n    c(env)\n\n"
        "def c(env):\n    len([])\n"
    )
    assert chain == {"a": {"b", "c"}, "b": {"c"}, "c": set()}  # len is not a codebook function
    assert density(chain) == 3 / 6 and max_depth(chain) == 3
    assert static_call_graph("def broken(:\n") == {}


def test_a_cycle_below_a_chain_adds_its_length_once():
    # e -> a -> {b <-> c} -> d: chain e, a, (b, c), d = 5 functions
    graph = {"e": {"a"}, "a": {"b"}, "b": {"c"}, "c": {"b", "d"}, "d": set()}
    assert max_depth(graph) == 5


def test_depth_of_a_long_chain_needs_no_recursion():
    n = sys.getrecursionlimit() * 3
    graph = {f"f{i}": {f"f{i + 1}"} for i in range(n)} | {f"f{n}": set()}
    assert max_depth(graph) == n + 1


def test_dynamic_graph_and_depth_from_recorded_trees():
    trees = [
        node(
            "fetch",
            node("go_to", node("_step", actions=2), node("_step", actions=1)),
            node("pick", actions=1),
        ),
        node("go_to", node("go_to", node("_step", actions=1))),
    ]  # recursion: no self-edge
    assert dynamic_call_graph(trees) == {
        "fetch": {"go_to", "pick"},
        "go_to": {"_step"},
        "_step": set(),
        "pick": set(),
    }
    assert tree_depth(trees) == 3 and tree_depth([node("solo")]) == 1 and tree_depth([]) == 0


def test_a_hostile_deep_tree_is_walked_without_recursion():
    depth = sys.getrecursionlimit() * 5
    root = leaf = node("f0")
    for i in range(1, depth):
        child = node(f"f{i % 7}")
        leaf["calls"].append(child)
        leaf = child
    leaf["calls"] += [
        "junk",
        3,
        None,
        {"calls": "not a list"},
    ]  # not nodes, or a node without a name
    assert tree_depth([root]) == depth + 1  # the nameless dict is a node too
    assert sum(1 for _ in walk_tree([root], max_nodes=100)) == 100  # bounded per tree,
    assert (
        sum(1 for _ in walk_tree([root, node("a", node("b"))], max_nodes=100)) == 102
    )  # not per list
    stats = skill_stats([root])
    assert sum(s.calls for s in stats.values()) == depth
    assert set(dynamic_call_graph([root])["f0"]) == {"f1"}


def test_trees_that_are_not_dicts_are_skipped():
    assert tree_depth([None, "x", 5, {"name": 3, "calls": None}]) == 1
    assert skill_stats([None, {"name": 3}]) == {}


def test_skill_stats_count_outcomes_cap_hits_and_actions_per_call():
    capped = node(
        "explore",
        node("go_to", actions=3, error="stopped (max_actions)"),
        actions=2,
        error="stopped (max_actions)",
        stopped_by="max_actions",
    )
    timed_out = node(
        "explore",
        actions=4,
        error="timed out after 10 s: the sandbox process was killed",
        stopped_by="timeout",
    )
    ok = node("explore", node("go_to", actions=1), stopped_by="returned")
    raised = node("go_to", error="ValueError: no path", stopped_by="error")
    ended = node("go_to", actions=1, error="stopped (episode_done)", stopped_by="episode_done")
    stats = skill_stats([capped, timed_out, ok, raised, ended])
    assert stats["explore"] == SkillStats(
        calls=3, successes=1, errors=0, cap_hits=2, interrupted=0, actions=10
    )
    assert stats["explore"].actions_per_call == 10 / 3
    assert stats["go_to"] == SkillStats(
        calls=4, successes=1, errors=1, cap_hits=1, interrupted=1, actions=5
    )
    assert SkillStats().actions_per_call == 0.0


def test_skill_stats_read_a_stored_tree_as_json():
    tree = json.loads(json.dumps(node("a", node("b", actions=2), actions=1, stopped_by="returned")))
    assert skill_stats([tree]) == {
        "a": SkillStats(1, 1, 0, 0, 0, 3),
        "b": SkillStats(1, 1, 0, 0, 0, 2),
    }


def test_cyclomatic_complexity_counts_decision_points():
    source = """
def straight(env):
    env.act("go forward")

def branchy(env, items):
    if not items:                       # +1
        return None
    for item in items:                  # +1
        if item and item.ok or item.x:  # +1 if, +2 (and, or)
            break
    while env.busy:                     # +1
        pass
    try:
        env.act("x")
    except ValueError:                  # +1
        pass
    return [i for i in items if i]      # +1 comprehension, +1 filter
"""
    found = functions(source)
    assert cyclomatic_complexity(found["straight"]) == 1
    assert cyclomatic_complexity(found["branchy"]) == 1 + 9
    match = ast.parse(
        "def m(x):\n    match x:\n        case 1:\n            pass\n        case _:\n            "
        "pass\n"
    )
    assert cyclomatic_complexity(match.body[0]) == 3
