"""Per-function call counts from the call trees episodes recorded.

A trajectory stores each top-level skill call as a tree (``ActorStep.skill_call``:
``{"name", "args", "kwargs", "calls": [...], "actions": [...], "returned", "error"}``);
a skill's calls of other codebook functions are the nested ``calls``. Every node counts,
so a private helper that only skills call gets counts too.

The top node is the actor's call, observed by the parent; nested nodes are the sandbox's
annotations, checked (``core/sandbox/schema.py``: each names a function of the loaded
codebook, and together they account for exactly the actions served) but not observed. A
skill that escaped its sandbox could skew the nested counts among the codebook's functions.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from speedrunner.core.codebook.callgraph import call_outcome
from speedrunner.core.codebook.model import CallStats

if TYPE_CHECKING:
    from speedrunner.core.trajectory import Trajectory


def count_calls(trees: Iterable[Mapping[str, Any]]) -> dict[str, CallStats]:
    """Name -> counts over every node of ``trees``.

    A node that was cut off — its ``stopped_by`` says ``max_actions``, ``timeout`` or
    ``episode_done``, or its ``error`` is the ``stopped (...)`` mark a stop leaves on the calls
    it unwound — is neither error nor success (``callgraph.call_outcome``); any other node with
    a non-empty ``error`` is an error; every other node is a success.
    """
    calls: Counter[str] = Counter()
    successes: Counter[str] = Counter()
    errors: Counter[str] = Counter()
    stack = list(trees)
    while stack:  # iterative: a recursive skill can nest deeper than Python's recursion limit
        node = stack.pop()
        name = node.get("name")
        if isinstance(name, str):
            calls[name] += 1
            outcome = call_outcome(node)
            if outcome == "error":
                errors[name] += 1
            elif outcome == "success":
                successes[name] += 1
        stack.extend(child for child in node.get("calls") or () if isinstance(child, Mapping))
    return {
        name: CallStats(calls=calls[name], successes=successes[name], errors=errors[name])
        for name in sorted(calls)
    }


def usage_from_trajectories(
    trajectories: Iterable[Trajectory], generation: int
) -> dict[str, CallStats]:
    """Counts over the skill calls of ``trajectories``, which must all have played ``generation``.

    Names mean different functions in different generations (renames), so mixing
    trajectories of several generations is refused rather than miscounted.
    """
    trees = []
    for t in trajectories:
        if t.knowledge_version != generation:
            raise ValueError(
                f"episode {t.split}/{t.index} played knowledge version {t.knowledge_version}, "
                f"not codebook generation {generation}: count each generation's episodes "
                "against that generation"
            )
        trees.extend(c["tree"] for c in t.skill_calls())
    return count_calls(trees)
