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

from collections import deque
from collections.abc import Callable
from itertools import chain, compress, islice, repeat
from operator import is_, is_not
from typing import Any

from speedrunner.core import pyast
from speedrunner.core.sandbox.channel import compact, separators
from speedrunner.core.sandbox.process import SandboxViolation
from speedrunner.core.sandbox.tracing import (
    LOAD_FAILED,
    MAX_DEPTH,
    MAX_ERROR_CHARS,
    MAX_ERROR_VALUES,
    MAX_NODES,
    MAX_PRINT_VALUES,
    MAX_TREE_CHARS,
    MAX_TREE_VALUES,
    MAX_VALUE_CHARS,
    MAX_VALUE_DEPTH,
    NODE_COST,
    NODE_VALUES,
)
from speedrunner.core.skill import (
    MAX_ACTION_CHARS,
    MAX_RETURN_BYTES,
    MAX_RETURN_VALUES,
    MAX_SCRATCH_CHARS,
    MAX_SCRATCH_VALUES,
)

__all__ = [
    "SKILL_MESSAGE_BYTES",
    "analysis_message_bytes",
    "call_budget",
    "check_act",
    "check_id",
    "check_load_reply",
    "check_result",
    "check_run_reply",
    "codebook_functions",
    "reconcile",
    "reply_bytes",
    "reply_values",
]

SKILL_MESSAGE_BYTES = 4 * 1024 * 1024
"""Longest line a skill sandbox may send before its first call (its hello and the load reply);
a call's reply has its own, smaller bound (``reply_bytes``). Longer is refused before it is
parsed."""
_STOPPED_BY = ("returned", "error", "max_actions", "episode_done")
_ERROR_SLACK = 200
_VALUE_DEPTH = 12
"""Nesting of one recorded value in a tree (``jsonable`` keeps 7 levels)."""


def analysis_message_bytes(max_print_chars: int) -> int:
    """Longest reply an analysis session may send: its capped output, as ASCII JSON, and an
    error."""
    return 6 * (max_print_chars + MAX_ERROR_CHARS) + 64 * 1024


def _fail(what: str) -> SandboxViolation:
    return SandboxViolation(f"it broke the protocol ({what})")


def codebook_functions(source: str) -> frozenset[str]:
    """The names of the codebook's top-level functions: the only names the child traces, so the
    only ones a nested call may have (empty if the source does not parse: then it never loads).
    Parsed once per source under the parent's AST lock (``core/pyast.py``)."""
    return pyast.top_level_functions(source)


def check_id(message: dict[str, Any], expected: str) -> None:
    """The reply answers request ``expected``, or the child is out of step (a forged or queued
    reply)."""
    got = message.get("id")
    if not isinstance(got, str) or got != expected:
        shown = repr(got)[:14]
        raise _fail(
            f"a message for another request ({shown}) arrived while request {expected[:12]!r} was "
            "waiting: code in the sandbox wrote to the protocol pipe itself"
        )


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
        types = list(map(type, level))
        lists = compress(level, map(is_, types, repeat(list))) if list in kinds else ()
        dicts = compress(level, map(is_, types, repeat(dict))) if dict in kinds else ()
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
    return _text(
        message.get("error", LOAD_FAILED), MAX_ERROR_CHARS + _ERROR_SLACK, "the load error"
    )


def check_run_reply(
    message: dict[str, Any], request_id: str, max_print_chars: int
) -> tuple[str, str | None]:
    """``(stdout, error)`` of an analysis ``run`` reply."""
    check_id(message, request_id)
    if not set(message) <= {"id", "stdout", "error", "duration_s"}:
        raise _fail(f"a run reply with keys {sorted(message)[:5]}")
    stdout = _text(message.get("stdout", ""), max_print_chars + _ERROR_SLACK, "the output") or ""
    error = _text(message.get("error"), MAX_ERROR_CHARS + _ERROR_SLACK, "the error", optional=True)
    return stdout, error


_MAX_COUNT = 10**15
"""Largest ``calls_dropped`` believed (an honest child counts calls it ran: far fewer)."""


_RESULT_FIELDS: dict[str, Callable[[Any], Any]] = {
    "error": lambda v: _text(v, MAX_ERROR_CHARS + _ERROR_SLACK, "the call's error", optional=True),
    "stopped_by": lambda v: _choice(v, _STOPPED_BY, "the call's stopped_by"),
}
"""The result's own scalar keys (``tree``, ``returned`` and ``scratch`` are checked apart)."""


def _costs(values: list[Any]) -> tuple[int, int]:
    """``sum(map(value_cost, values))`` and the sum of their ``separators`` in one encoding:
    ``[a,b]`` is each one's JSON, two brackets and a comma between each two."""
    if not values:
        return 0, 0
    text = compact(values)
    return len(text) - len(values) - 1, separators(text) - len(values)


def _count(value: Any) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= _MAX_COUNT:
        raise _fail("calls_dropped is not a count")
    return value


def _choice(value: Any, allowed: tuple[Any, ...], what: str) -> Any:
    if not any(value is a or (isinstance(value, str) and value == a) for a in allowed):
        raise _fail(
            f"{what} {str(value)[:40]!r} is not one of {[a for a in allowed if a is not None]}"
        )
    return value


def call_budget(max_print_chars: int, max_actions: int) -> int:
    """Characters (``value_cost``) of one call's kept tree an honest child never passes: its
    values and names within ``MAX_TREE_CHARS``, each node's keys, prints and errors (the child
    bounds both as the JSON they are sent as, ``tracing.fit``), one ``{"i": n}`` per action.
    Past it, the tree is refused."""
    return (
        MAX_TREE_CHARS
        + 4 * MAX_VALUE_CHARS
        + 160 * (MAX_NODES + 1)
        + max_print_chars
        + 2 * (MAX_ERROR_CHARS + _ERROR_SLACK)
        + 24 * max(max_actions, 0)
        + 4096
    )


def reply_bytes(max_print_chars: int, max_actions: int, echoed_chars: int = 0) -> int:
    """Longest message an honest child sends during a call: its result (a tree within
    ``call_budget``, which measures the tree as the JSON it is sent as; a returned value, a
    scratch and an error within their caps as JSON) or an action (any characters, escaped).
    ``echoed_chars``: the JSON of the call's own arguments, which the child may send back as the
    tree's root. A longer line is refused before it is parsed: with ``reply_values``, this
    bounds what decoding a reply costs the parent."""
    result = (
        call_budget(max_print_chars, max_actions)
        + MAX_RETURN_BYTES
        + MAX_SCRATCH_CHARS
        + echoed_chars
        + MAX_ERROR_CHARS
        + _ERROR_SLACK
        + 4096
    )
    return max(result, 12 * MAX_ACTION_CHARS + 4096)


def reply_values(max_actions: int, echoed_values: int = 0) -> int:
    """Most ``separators`` (``,`` ``[`` ``{``, inside strings too) a reply to a call may hold: the
    structure of a tree at ``MAX_NODES`` calls, its recorded values (``MAX_TREE_VALUES``), a
    returned value, a scratch, prints and two copies of an error at their caps, ``{"i": n}`` per
    action, and ``echoed_values`` (the call's own arguments, which the child may send back as the
    root's). The child counts each the same way, so an honest reply never passes it; a line that
    does is refused before it is decoded: its number of values is what decoding it costs."""
    return (
        64
        + NODE_VALUES * (MAX_NODES + 1)
        + MAX_TREE_VALUES
        + MAX_RETURN_VALUES
        + MAX_SCRATCH_VALUES
        + MAX_PRINT_VALUES
        + 4
        + 2 * (MAX_ERROR_VALUES + _ERROR_SLACK)
        + 2 * max(max_actions, 0)
        + echoed_values
    )


def check_result(
    message: dict[str, Any],
    call_id: str,
    max_print_chars: int,
    functions: frozenset[str] | None = None,
    max_actions: int = 0,
) -> tuple[dict[str, Any], int]:
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
    kept["returned"] = _bounded(
        result.get("returned"), MAX_RETURN_BYTES, MAX_RETURN_VALUES, "the returned value"
    )
    scratch = result.get("scratch", {})
    if not isinstance(scratch, dict):
        raise _fail("env.scratch is not a dict")
    kept["scratch"] = _bounded(scratch, MAX_SCRATCH_CHARS, MAX_SCRATCH_VALUES, "env.scratch")
    if not isinstance(result.get("tree"), dict):
        raise _fail("a result without a call tree")
    kept["tree"], size = _check_tree(result["tree"], max_print_chars, functions)
    budget = call_budget(max_print_chars, max_actions)
    if size > budget:
        raise _fail(
            f"a call tree of {size} characters of JSON, more than the {budget} one call may keep"
        )
    return kept, size


def _bounded(value: Any, max_chars: int, max_values: int, what: str) -> Any:
    """``value`` if it is JSON within ``MAX_VALUE_DEPTH`` levels, ``max_chars`` characters and
    ``max_values`` separators (the child's own measures, ``tracing.check_returned``)."""
    _shape(value, MAX_VALUE_DEPTH + 1, what)
    text = compact(value)
    if len(text) > max_chars:
        raise _fail(f"{what} is more than {max_chars} characters of JSON")
    if separators(text) > max_values:
        raise _fail(f"{what} holds more than {max_values} JSON values")
    return value


def _column(nodes: list[dict[str, Any]], key: str, default: Any = None) -> list[Any]:
    """``[node.get(key, default) for node in nodes]``, in C."""
    return list(map(dict.get, nodes, repeat(key), repeat(default)))


def _types(values: list[Any]) -> set[type]:
    return set(map(type, values))


def _check_tree(
    root: dict[str, Any], max_print_chars: int, functions: frozenset[str] | None
) -> tuple[dict[str, Any], int]:
    """The child's tree rebuilt from the keys the parent keeps, and its ``value_cost``.

    The one schema of a kept node: ``name`` (a string of at most 200 characters), ``args``,
    ``kwargs``, ``returned`` (JSON nested at most ``_VALUE_DEPTH`` levels; absent ones get a
    default), ``error`` and ``prints`` (bounded strings), ``calls_dropped`` (a count),
    ``stopped_by`` (one of ``_STOPPED_BY``), ``actions`` (``{"i": index}`` records, filled by
    ``reconcile``) and ``calls``, the root's ``args`` and ``kwargs`` left empty for the caller to
    fill; any other key is dropped, a value that fails its check is a
    violation. Level by level, each key of all the level's nodes checked at once with the
    per-node work in C (``map``, ``set``): a Python step per node was most of what a reply
    at the caps cost the parent."""
    error_limit, print_limit = MAX_ERROR_CHARS + _ERROR_SLACK, max_print_chars + _ERROR_SLACK
    nodes, prints, depth, filled = 0, 0, 1, 0
    present: list[Any] = []
    strings: list[
        Any
    ] = []  # every node's name, error and prints, and its actions: measured at the end
    recorded: list[Any] = []
    extras: list[int] = []
    names: list[str] = []
    errors: list[str] = []
    invented: set[str] = set()
    level: list[Any] = [root]
    parents: list[dict[str, Any]] = []
    counts: list[int] = []
    out_root: dict[str, Any] = {}
    while level:
        if depth > MAX_DEPTH + 1:
            raise _fail(f"a call tree nested deeper than {MAX_DEPTH} calls")
        nodes += len(level)
        if _types(level) != {dict}:
            raise _fail("a call tree node that is not a node")
        name = _column(level, "name")
        if _types(name) != {str}:
            raise _fail("a call without a name")
        if max(map(len, name)) > 200:
            _text(max(name, key=len), 200, "a call's name")
        args, kwargs, returned = (
            _column(level, "args", []),
            _column(level, "kwargs", {}),
            _column(level, "returned"),
        )
        # the root's arguments are the parent's own (the actor's call), set by the caller
        if depth == 1:
            args, kwargs = [[]], [{}]
        for key, column, kind in (("args", args, list), ("kwargs", kwargs, dict)):
            if _types(column) != {kind}:
                wrong = next(v for v in column if type(v) is not kind)
                raise _fail(
                    f"a recorded value ({key}) is a {type(wrong).__name__}, not a {kind.__name__}"
                )
        present += args
        present += kwargs
        present += returned
        error = _column(level, "error")
        texts = [e for e in error if e is not None]
        if not _types(texts) <= {str} or (texts and max(map(len, texts)) > error_limit):
            _text(
                next(e for e in texts if not isinstance(e, str) or len(e) > error_limit),
                error_limit,
                "a call's error",
            )
        printed = _column(level, "prints", "")
        if _types(printed) != {str} or max(map(len, printed)) > print_limit:
            _text(
                next(p for p in printed if not isinstance(p, str) or len(p) > print_limit),
                print_limit,
                "printed output",
            )
        prints += sum(map(len, printed))
        if depth > 1:
            names += name
            errors += texts
            if functions is not None:
                invented.update(set(name) - functions)
        actions, calls = _column(level, "actions", []), _column(level, "calls", [])
        if not _types(actions) | _types(calls) <= {list}:
            raise _fail("a call's actions or nested calls are not lists")
        records = list(chain.from_iterable(actions))
        if records and (
            _types(records) != {dict}
            or set(map(len, records)) != {1}
            or _types(_column(records, "i")) != {int}
        ):
            raise _fail('an action record that is not {"i": index}')
        copied = map(list, map(map, repeat(dict), actions))
        outs = list(
            map(
                dict,
                map(
                    zip,
                    repeat(_OUT_KEYS),
                    zip(name, args, kwargs, returned, error, printed, copied, strict=True),
                ),
            )
        )
        for extra, valid in (("calls_dropped", _counts), ("stopped_by", _stops)):
            column = _column(level, extra, _ABSENT)
            if _types(column) != {object}:  # some node has it (honest ones: the root only)
                given = list(map(is_not, column, repeat(_ABSENT)))
                found = list(compress(column, given))
                valid(found)
                deque(map(dict.__setitem__, compress(outs, given), repeat(extra), found), maxlen=0)
                extras.append((len(extra) + 4) * len(found) + _costs(found)[0])
        strings += name
        strings += error
        strings += printed
        recorded += actions
        kids = it = iter(outs)
        if parents:
            for parent, count in zip(parents, counts, strict=True):
                parent["calls"] = list(islice(it, count))
        else:
            out_root = next(kids)
        counts = list(map(len, calls))
        filled += len(counts) - counts.count(0)
        if nodes + sum(counts) > MAX_NODES + 1:  # each will be a node: fail before copying
            raise _fail(f"a call tree of more than {MAX_NODES} calls")
        for out in outs:
            out["calls"] = []
        parents, level = outs, list(chain.from_iterable(calls))
        depth += 1
    _shape(
        present,
        _VALUE_DEPTH + 1,
        "a recorded value (a call's arguments, keyword arguments or returned value)",
    )
    values, counted = _costs(present)
    labels, labels_counted = _costs(names + errors)  # the nested calls' names and errors
    cost = NODE_COST * nodes + values + labels
    if cost > MAX_TREE_CHARS + MAX_VALUE_CHARS * 4:
        raise _fail(f"a call tree of {cost} characters, more than {MAX_TREE_CHARS}")
    counted += labels_counted
    # the child does not count a node's empty kwargs, nor a wrapped args
    if counted > MAX_TREE_VALUES + 2 * nodes:
        raise _fail(f"a call tree of {counted} recorded JSON values, more than {MAX_TREE_VALUES}")
    if prints > print_limit:
        raise _fail(f"{prints} printed characters, more than {max_print_chars}")
    if invented:  # (the root's name is the parent's own, from the actor's call)
        raise _fail(
            f"the call tree names a nested call {min(invented)[:60]!r}, which is not a function of "
            "the loaded codebook"
        )
    # value_cost(out_root), from what was measured: each node's keys, its values, a comma before
    # each node but the first of its list, and the optional keys.
    size = (
        _NODE_SKELETON * nodes
        + values
        + _costs(strings + recorded)[0]
        + nodes
        - 1
        - filled
        + sum(extras)
    )
    return out_root, size


_OUT_KEYS = ("name", "args", "kwargs", "returned", "error", "prints", "actions")
_NODE_SKELETON = len(compact(dict.fromkeys((*_OUT_KEYS, "calls"), 0))) - len(_OUT_KEYS) - 1 + 2
"""Characters of a node's JSON besides its values (the keys, punctuation and its calls' ``[]``)."""


_ABSENT = object()
_STOPS = frozenset(_STOPPED_BY)


def _counts(values: list[Any]) -> None:
    """Each of ``values`` a ``calls_dropped`` count (``_count``), checked at once."""
    if _types(values) != {int} or min(values) < 0 or max(values) > _MAX_COUNT:
        for value in values:
            _count(value)


def _stops(values: list[Any]) -> None:
    """Each of ``values`` a nested call's ``stopped_by`` (one of ``_STOPPED_BY`` or null)."""
    if not _types(values) <= {str, type(None)} or not set(values) <= {*_STOPS, None}:
        for value in values:
            _choice(value, (*_STOPPED_BY, None), "a call's stopped_by")


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
                raise _fail(
                    f"the call tree claims an action (#{i}) the parent did not serve "
                    f"(it served {len(served)})"
                )
            seen.add(i)
            records.append(dict(served[i]))
        node["actions"] = records
        stack.extend(node["calls"])
    if len(seen) != len(served):
        raise _fail(
            f"the call tree accounts for {len(seen)} of the {len(served)} actions the parent served"
        )
    return tree
