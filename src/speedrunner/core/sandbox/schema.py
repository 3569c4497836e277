"""What the parent accepts from a sandbox child: every message checked before it is believed.

The child runs code that may have left the restricted layer and may write anything on the
protocol pipe. So every message is checked against the shape an honest child sends, with
caps on size, depth and count (the same caps the child applies to itself in
``tracing.py``, so an honest child never trips them), and every reply must echo the id of
the request it answers: a fresh random id, so a reply written before its request (queued
earlier, or left by a thread for later) cannot carry it.

A skill call's record is the parent's: the actions it served, in order, with the
observations it produced, under the call the actor made. The child's call tree only says
which nested call each of those actions happened in; ``reconcile`` accepts it only if it
accounts for exactly the served actions, and then copies the served records into it; a
nested call must name a function of the loaded codebook (``codebook_functions``, parsed by
the parent). The nesting, the nested calls' arguments, return values and errors, and the
prints stay the child's word: code that took over the child can invent them within those
rules. Anything else raises ``SandboxViolation``: the caller ends the call or analysis turn
as an error, restarts the sandbox and counts it.
"""

from __future__ import annotations

from collections.abc import Callable
from itertools import chain
from typing import Any

from speedrunner.core import pyast
from speedrunner.core.sandbox.process import SandboxViolation
from speedrunner.core.sandbox.tracing import (
    LOAD_FAILED,
    MAX_ACTION_CHARS,
    MAX_DEPTH,
    MAX_ERROR_CHARS,
    MAX_NODES,
    MAX_RETURN_BYTES,
    MAX_SCRATCH_CHARS,
    MAX_TREE_CHARS,
    MAX_VALUE_CHARS,
    MAX_VALUE_DEPTH,
    NODE_COST,
    value_cost,
)

__all__ = ["SKILL_MESSAGE_BYTES", "analysis_message_bytes", "call_budget", "check_act", "check_id", "check_load_reply",
           "check_result", "check_run_reply", "codebook_functions", "reconcile", "reply_bytes"]

SKILL_MESSAGE_BYTES = 4 * 1024 * 1024
"""Longest line a skill sandbox may send before its first call (its hello and the load reply);
a call's reply has its own, smaller bound (``reply_bytes``). Longer is refused before it is parsed."""
_STOPPED_BY = ("returned", "error", "max_actions", "episode_done")
_ERROR_SLACK = 200
_VALUE_DEPTH = 12
"""Nesting of one recorded value in a tree (``jsonable`` keeps 7 levels)."""


def analysis_message_bytes(max_print_chars: int) -> int:
    """Longest reply an analysis session may send: its capped output, as ASCII JSON, and an error."""
    return 6 * (max_print_chars + MAX_ERROR_CHARS) + 64 * 1024


def _fail(what: str) -> SandboxViolation:
    return SandboxViolation(f"it broke the protocol ({what})")


def codebook_functions(source: str) -> frozenset[str]:
    """The names of the codebook's top-level functions: the only names the child traces, so the
    only ones a nested call may have (empty if the source does not parse: then it never loads).
    Parsed once per source under the parent's AST lock (``core/pyast.py``)."""
    return pyast.top_level_functions(source)


def check_id(message: dict[str, Any], expected: str) -> None:
    """The reply answers request ``expected``, or the child is out of step (a forged or queued reply)."""
    got = message.get("id")
    if not isinstance(got, str) or got != expected:
        shown = repr(got)[:14]
        raise _fail(f"a message for another request ({shown}) arrived while request {expected[:12]!r} was "
                    "waiting: code in the sandbox wrote to the protocol pipe itself")


_SCALARS = frozenset({str, int, float, bool, type(None)})


def _shape(value: Any, max_depth: int, what: str) -> None:
    """``value`` is JSON nested at most ``max_depth`` levels (checked without recursion).

    Level by level, with the per-item work in C (``map(type)``, ``chain``): a reply may hold
    hundreds of thousands of values, and a Python step per value was most of the parent's CPU."""
    level = [value]
    depth = 1
    while True:
        kinds = set(map(type, level)) - _SCALARS
        if not kinds:
            return
        if not kinds <= {list, dict}:
            raise _fail(f"{what} holds a {next(iter(kinds - {list, dict})).__name__}")
        lists = [item for item in level if type(item) is list] if list in kinds else []
        dicts = [item for item in level if type(item) is dict] if dict in kinds else []
        level = [*chain.from_iterable(lists), *chain.from_iterable(map(dict.values, dicts))]
        if not level:
            return
        depth += 1
        if depth > max_depth:
            raise _fail(f"{what} is nested deeper than {max_depth} levels")


def _text(value: Any, limit: int, what: str, *, optional: bool = False) -> str | None:
    if value is None and optional:
        return None
    if not isinstance(value, str):
        raise _fail(f"{what} is a {type(value).__name__}, not a string")
    if len(value) > limit:
        raise _fail(f"{what} has {len(value)} characters, more than {limit}")
    return value


def check_act(message: dict[str, Any], call_id: str) -> str:
    """The action of an ``{"act", "id"}`` message."""
    check_id(message, call_id)
    if set(message) != {"act", "id"}:
        raise _fail(f"an act message with keys {sorted(message)[:5]}")
    return _text(message["act"], MAX_ACTION_CHARS, "an action") or ""


def check_load_reply(message: dict[str, Any], request_id: str) -> str | None:
    """``None`` if the codebook loaded, else the load error to show the author."""
    check_id(message, request_id)
    if message.get("loaded") is True:
        return None
    return _text(message.get("error", LOAD_FAILED), MAX_ERROR_CHARS + _ERROR_SLACK,
                 "the load error")


def check_run_reply(message: dict[str, Any], request_id: str, max_print_chars: int) -> tuple[str, str | None]:
    """``(stdout, error)`` of an analysis ``run`` reply."""
    check_id(message, request_id)
    if not set(message) <= {"id", "stdout", "error", "duration_s"}:
        raise _fail(f"a run reply with keys {sorted(message)[:5]}")
    stdout = _text(message.get("stdout", ""), max_print_chars + _ERROR_SLACK, "the output") or ""
    error = _text(message.get("error"), MAX_ERROR_CHARS + _ERROR_SLACK, "the error", optional=True)
    return stdout, error


_MAX_COUNT = 10**15
"""Largest ``calls_dropped`` believed (an honest child counts calls it ran: far fewer)."""


_NODE_VALUES: tuple[tuple[str, type, Any], ...] = (("args", list, list), ("kwargs", dict, dict),
                                                  ("returned", object, type(None)))
"""The recorded values of a tree node: key, type, and what an absent one becomes."""


_RESULT_FIELDS: dict[str, Callable[[Any], Any]] = {
    "error": lambda v: _text(v, MAX_ERROR_CHARS + _ERROR_SLACK, "the call's error", optional=True),
    "stopped_by": lambda v: _choice(v, _STOPPED_BY, "the call's stopped_by"),
}
"""The result's own scalar keys (``tree``, ``returned`` and ``scratch`` are checked apart)."""


def _costs(values: list[Any]) -> int:
    """``sum(map(value_cost, values))`` in one encoding: ``[a,b]`` is each one's JSON, two
    brackets and a comma between each two."""
    return value_cost(values) - len(values) - 1 if values else 0


def _count(value: Any) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= _MAX_COUNT:
        raise _fail("calls_dropped is not a count")
    return value


def _choice(value: Any, allowed: tuple[Any, ...], what: str) -> Any:
    if not any(value is a or (isinstance(value, str) and value == a) for a in allowed):
        raise _fail(f"{what} {str(value)[:40]!r} is not one of {[a for a in allowed if a is not None]}")
    return value


def call_budget(max_print_chars: int, max_actions: int) -> int:
    """Characters (``value_cost``) of one call's kept tree an honest child never passes: its
    values and names within ``MAX_TREE_CHARS``, each node's keys, prints and errors even if every
    character is escaped, one ``{"i": n}`` per action. Past it, the tree is refused."""
    return (MAX_TREE_CHARS + 4 * MAX_VALUE_CHARS + 160 * (MAX_NODES + 1)
            + 12 * (max_print_chars + 2 * (MAX_ERROR_CHARS + _ERROR_SLACK)) + 24 * max(max_actions, 0) + 4096)


def reply_bytes(max_print_chars: int, max_actions: int) -> int:
    """Longest message an honest child sends during a call: its result (a tree within
    ``call_budget``, which measures the tree as the JSON it is sent as; a returned value, a
    scratch and an error within their caps, escaped) or an action. A longer line is refused
    before it is parsed: decoding is most of what a reply at the caps costs the parent."""
    return (call_budget(max_print_chars, max_actions) + MAX_RETURN_BYTES + MAX_SCRATCH_CHARS
            + 6 * (MAX_ERROR_CHARS + _ERROR_SLACK + MAX_ACTION_CHARS) + 4096)


def check_result(message: dict[str, Any], call_id: str, max_print_chars: int,
                 functions: frozenset[str] | None = None, max_actions: int = 0) -> tuple[dict[str, Any], int]:
    """The ``result`` of a call reply, rebuilt from the keys the schema knows (unknown ones
    dropped), every kept value checked (the tree's actions by ``reconcile`` after), and the
    characters kept of it: ``value_cost`` of the rebuilt tree, the one measure of what the call
    keeps, so a key added to the schema later is counted without anyone remembering to.
    ``functions``: the names a nested call may have (``codebook_functions``; ``None`` = any)."""
    check_id(message, call_id)
    result = message.get("result")
    if set(message) != {"id", "result"} or not isinstance(result, dict):
        raise _fail(f"a call reply with keys {sorted(message)[:5]}")
    kept: dict[str, Any] = {key: check(result.get(key)) for key, check in _RESULT_FIELDS.items()}
    _shape(result.get("returned"), MAX_VALUE_DEPTH + 1, "the returned value")
    if value_cost(result.get("returned")) > MAX_RETURN_BYTES:
        raise _fail(f"the returned value is more than {MAX_RETURN_BYTES} characters of JSON")
    kept["returned"] = result.get("returned")
    scratch = result.get("scratch", {})
    if not isinstance(scratch, dict):
        raise _fail("env.scratch is not a dict")
    _shape(scratch, MAX_VALUE_DEPTH + 1, "env.scratch")
    if value_cost(scratch) > MAX_SCRATCH_CHARS:
        raise _fail(f"env.scratch is more than {MAX_SCRATCH_CHARS} characters of JSON")
    kept["scratch"] = scratch
    if not isinstance(result.get("tree"), dict):
        raise _fail("a result without a call tree")
    kept["tree"], size = _check_tree(result["tree"], max_print_chars, functions)
    budget = call_budget(max_print_chars, max_actions)
    if size > budget:
        raise _fail(f"a call tree of {size} characters of JSON, more than the {budget} one call may keep")
    return kept, size


def _check_tree(root: dict[str, Any], max_print_chars: int,
                functions: frozenset[str] | None) -> tuple[dict[str, Any], int]:
    """The child's tree rebuilt from the keys the parent keeps, and its ``value_cost``.

    The one schema of a kept node: ``name`` (a string of at most 200 characters), ``args``,
    ``kwargs``, ``returned`` (``_NODE_VALUES``: JSON nested at most ``_VALUE_DEPTH`` levels;
    absent ones get a default), ``error`` and ``prints`` (bounded strings), ``calls_dropped`` (a
    count), ``stopped_by`` (one of ``_STOPPED_BY``), ``actions`` (``{"i": index}`` records, filled
    by ``reconcile``) and ``calls``; any other key is dropped, a value that fails its check is a
    violation. Iterative; nodes, depth, values and prints counted, nested names checked. The
    values, names and errors of all nodes are shaped and measured together, and the values
    encoded once: a reply at the caps holds a thousand nodes, and a few C-speed passes over all
    of them cost the parent a fraction of a few Python calls per node."""
    error_limit, print_limit = MAX_ERROR_CHARS + _ERROR_SLACK, max_print_chars + _ERROR_SLACK
    nodes, prints, absent = 0, 0, 0
    present: list[Any] = []
    placed: list[tuple[dict[str, Any], str]] = []
    names: list[str] = []
    errors: list[str] = []
    invented: str | None = None
    out_root: dict[str, Any] = {}
    stack: list[tuple[Any, int, dict[str, Any]]] = [(root, 1, out_root)]
    while stack:
        node, depth, out = stack.pop()
        nodes += 1
        if nodes > MAX_NODES + 1:
            raise _fail(f"a call tree of more than {MAX_NODES} calls")
        if depth > MAX_DEPTH + 1:
            raise _fail(f"a call tree nested deeper than {MAX_DEPTH} calls")
        if not isinstance(node, dict):
            raise _fail("a call tree node that is not a node")
        name = node.get("name")
        if not isinstance(name, str):
            raise _fail("a call without a name")
        if len(name) > 200:
            _text(name, 200, "a call's name")
        out["name"] = name
        names.append(name)
        for key, kind, default in _NODE_VALUES:
            if key in node:
                value = node[key]
                if kind is not object and not isinstance(value, kind):
                    raise _fail(f"a recorded value ({key}) is a {type(value).__name__}, not a {kind.__name__}")
                present.append(value)
                placed.append((out, key))
                out[key] = None  # measured apart (``present``); set after the tree is measured
            else:
                absent += 1
                out[key] = default()
        error = node.get("error")
        if error is not None and (not isinstance(error, str) or len(error) > error_limit):
            _text(error, error_limit, "a call's error")
        out["error"] = error
        text = node.get("prints", "")
        if not isinstance(text, str) or len(text) > print_limit:
            _text(text, print_limit, "printed output")
        out["prints"] = text
        prints += len(text)
        if "calls_dropped" in node:
            out["calls_dropped"] = _count(node["calls_dropped"])
        if "stopped_by" in node:
            out["stopped_by"] = _choice(node["stopped_by"], (*_STOPPED_BY, None), "a call's stopped_by")
        if node is not root:
            if functions is not None and name not in functions and invented is None:
                invented = name  # the child traces only the codebook's functions: this name was made up
            if error is not None:
                errors.append(error)
        actions, calls = node.get("actions", []), node.get("calls", [])
        if not isinstance(actions, list) or not isinstance(calls, list):
            raise _fail("a call's actions or nested calls are not lists")
        for record in actions:
            if not isinstance(record, dict) or len(record) != 1 or type(record.get("i")) is not int:
                raise _fail("an action record that is not {\"i\": index}")
        out["actions"] = [{"i": record["i"]} for record in actions]
        if nodes + len(stack) + len(calls) > MAX_NODES + 1:  # each will be a node: fail before copying
            raise _fail(f"a call tree of more than {MAX_NODES} calls")
        out["calls"] = kids = [{} for _ in calls]
        stack.extend((child, depth + 1, copy) for child, copy in zip(calls, kids, strict=True))
    _shape(present, _VALUE_DEPTH + 1, "a recorded value (a call's arguments, keyword arguments or returned value)")
    values = _costs(present)
    cost = NODE_COST * nodes + values + 4 * absent + _costs(names) + _costs(errors)  # an absent value: null
    if cost > MAX_TREE_CHARS + MAX_VALUE_CHARS * 4:
        raise _fail(f"a call tree of {cost} characters, more than {MAX_TREE_CHARS}")
    if prints > print_limit:
        raise _fail(f"{prints} printed characters, more than {max_print_chars}")
    if invented is not None:  # (the root's name is the parent's own, from the actor's call)
        raise _fail(f"the call tree names a nested call {invented[:60]!r}, which is not a function of the "
                    "loaded codebook")
    size = value_cost(out_root) - 4 * len(present) + values  # each placeholder null is 4 characters
    for (out, key), value in zip(placed, present, strict=True):
        out[key] = value
    return out_root, size


def reconcile(tree: dict[str, Any], served: list[dict[str, Any]]) -> dict[str, Any]:
    """The parent's record of the call: the checked tree (``check_result``'s, the parent's own
    copy, completed in place) with each action replaced by the record of what the parent served,
    or ``SandboxViolation`` if the tree claims actions the parent did not serve, or leaves out
    some it did."""
    seen: set[int] = set()
    stack = [tree]
    while stack:
        node = stack.pop()
        records = []
        for record in node.get("actions", []):
            i = record["i"]
            if not 0 <= i < len(served) or i in seen:
                raise _fail(f"the call tree claims an action (#{i}) the parent did not serve "
                            f"(it served {len(served)})")
            seen.add(i)
            records.append(dict(served[i]))
        node["actions"] = records
        stack.extend(node["calls"])
    if len(seen) != len(served):
        raise _fail(f"the call tree accounts for {len(seen)} of the {len(served)} actions the parent served")
    return tree
