"""The call tree of one skill call, built in the sandbox child as the skill runs.

Every codebook function is wrapped, so a skill calling another (``go_to`` inside
``pick_up``) shows up as a nested node; every primitive action lands in the innermost
running call; prints land in the call that printed them, under one character budget per
top-level call. Everything recorded is JSON-able (values that are not become their
``repr``), because the tree crosses the pipe and is stored in the trajectory.

The tree is bounded here, before it is sent: nodes, depth, each recorded value
(``MAX_VALUE_CHARS`` of JSON) and the whole tree (``MAX_TREE_CHARS`` as measured by
``value_cost``, ``MAX_TREE_VALUES`` as counted by ``channel.separators``; prints have their own
budget). The parent applies the same measures to what it receives (``schema.py``), so an honest
child never trips them and a forged tree does. An
action is recorded as its index among the call's actions and its text only: the parent
fills in what it served.
"""

from __future__ import annotations

import json
import math
import re
import traceback
from collections.abc import Callable
from typing import Any

from speedrunner.core.sandbox.channel import compact, separators
from speedrunner.core.sandbox.restrict import CODEBOOK_FILENAME
from speedrunner.core.skill import (  # what a skill's author can hit, stated where the API is
    MAX_RETURN_BYTES,
    MAX_RETURN_VALUES,
    MAX_SCRATCH_CHARS,
    MAX_SCRATCH_VALUES,
)

MAX_NODES = 64
"""Calls recorded per top-level call; later ones still run, counted in ``calls_dropped``."""
MAX_DEPTH = 40
"""Nesting recorded; deeper calls (recursion) still run, counted in ``calls_dropped``."""
MAX_REPR = 500
MAX_ITEMS = 100
MAX_ERROR_CHARS = 4000
"""Characters of an error's JSON (a traceback keeps its last frames; see ``fit``)."""
MAX_ERROR_VALUES = 200
"""``channel.separators`` of an error (a traceback keeps its last frames; see ``fit``)."""
LOAD_FAILED = "the codebook did not load"
"""How a load error begins (the child writes it, the import check strips it)."""
MAX_VALUE_DEPTH = 100
"""Nesting of a returned value (the parent refuses deeper JSON)."""
MAX_VALUE_CHARS = 2_000
"""JSON characters of one recorded argument or return value; a longer one becomes a short
``repr``."""
MAX_TREE_CHARS = 20_000
"""``value_cost`` of a whole tree (arguments, return values, errors; prints apart); past it,
values are replaced by a marker and further calls are not recorded."""
MAX_TREE_VALUES = 2_000
"""``channel.separators`` of a whole tree's recorded values, names and errors; past it, values are
replaced by a marker as for ``MAX_TREE_CHARS``."""
NODE_COST = 64
"""What one node costs against ``MAX_TREE_CHARS`` besides its values."""
NODE_VALUES = 18
"""Separators of one node's own structure (its keys, empty containers, its place among its
siblings) besides the recorded values counted in ``MAX_TREE_VALUES``."""
MAX_PRINT_VALUES = 1_000
"""``channel.separators`` of what one top-level call prints (with ``max_print_chars``, counted
as characters of JSON); past either, further output is counted, not kept."""
OVER_BUDGET = "(not recorded: the call tree's size budget is used up)"
_SEPARATOR = re.compile(r"[,\[{]")


class Stop(BaseException):  # noqa: N818 - a control-flow signal, not an error
    """Unwinds a skill the parent stopped (``max_actions``, ``episode_done``).

    A ``BaseException`` so a skill's ``except Exception`` does not swallow it.
    """

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def new_node(name: str, args: list[Any], kwargs: dict[str, Any]) -> dict[str, Any]:
    return {
        "name": name,
        "args": args,
        "kwargs": kwargs,
        "calls": [],
        "actions": [],
        "returned": None,
        "error": None,
        "prints": [],
    }


class Recorder:
    """The tree of the call in progress: a stack of running calls, prints and the stop reason."""

    def __init__(self, max_print_chars: int, env_type: type) -> None:
        self.root: dict[str, Any] | None = None
        self.stack: list[dict[str, Any] | None] = []  # None: a call past MAX_NODES, not recorded
        self.nodes = 0
        self.calls_dropped = 0
        self.print_budget = max_print_chars
        self.print_values = MAX_PRINT_VALUES
        self.prints_dropped = 0
        self.stopped: str | None = None
        self.actions_sent = 0
        self.tree_budget = MAX_TREE_CHARS
        self.values_budget = MAX_TREE_VALUES
        self._env_type = env_type

    def value(self, value: Any) -> Any:
        """``value`` as it is recorded: bounded JSON, charged to the tree's budget."""
        shown = jsonable(value)
        text = compact(shown)
        if len(text) > MAX_VALUE_CHARS:
            shown = _repr(value)[:MAX_REPR]
            text = compact(shown)
        values = separators(text)
        if len(text) > self.tree_budget or values > self.values_budget:
            shown, text, values = OVER_BUDGET, compact(OVER_BUDGET), 0
        self.tree_budget -= len(text)
        self.values_budget -= values
        return shown

    def error_text(self, text: str) -> str:
        """An error line charged to the budget (cut short once it is used up)."""
        if value_cost(text) > self.tree_budget or separators(text) > self.values_budget:
            text = fit(text, max(min(200, self.tree_budget - 2), 0), max(self.values_budget, 0))
        self.tree_budget -= value_cost(text)
        self.values_budget -= separators(text)
        return text

    def enter(
        self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> dict[str, Any] | None:
        if (
            self.nodes >= MAX_NODES
            or len(self.stack) >= MAX_DEPTH
            or self.tree_budget < NODE_COST + 4 * value_cost(OVER_BUDGET)
            or separators(name) > self.values_budget
        ):
            self.calls_dropped += 1
            self.stack.append(None)
            return None
        self.tree_budget -= NODE_COST + value_cost(name)
        self.values_budget -= separators(name)
        shown = self.value([a for a in args if not isinstance(a, self._env_type)])
        node = new_node(
            name,
            shown if isinstance(shown, list) else [shown],
            self.value({k: v for k, v in kwargs.items()}) if kwargs else {},
        )
        if not isinstance(node["kwargs"], dict):
            node["kwargs"] = {"...": node["kwargs"]}
        self.nodes += 1
        parent = self.innermost()
        if parent is None:
            if self.root is None:
                self.root = node
        else:
            parent["calls"].append(node)
        self.stack.append(node)
        return node

    def leave(self) -> None:
        self.stack.pop()

    def innermost(self) -> dict[str, Any] | None:
        for node in reversed(self.stack):
            if node is not None:
                return node
        return self.root

    def action(self, record: dict[str, Any]) -> None:
        node = self.innermost()
        if node is not None:
            node["actions"].append(record)

    def write(self, text: str) -> int:
        """``sys.stdout.write`` during a call: keep what fits the budget, count the rest."""
        if not isinstance(text, str):
            raise TypeError(f"write() argument must be str, not {type(text).__name__}")
        kept = fit(text, max(self.print_budget, 0), max(self.print_values, 0)) if text else text
        self.print_budget -= len(compact(kept)) - 2
        self.print_values -= separators(kept)
        self.prints_dropped += len(text) - len(kept)
        node = self.innermost()
        if kept and node is not None:
            node["prints"].append(kept)
        return len(text)

    def finish(self) -> dict[str, Any]:
        """The tree, with prints joined into strings (and a note of what was not kept)."""
        root = self.root or new_node("?", [], {})
        _join_prints(root)
        if self.prints_dropped:
            root["prints"] += f"\n[... {self.prints_dropped} more printed characters not kept]"
        if self.calls_dropped:
            root["calls_dropped"] = self.calls_dropped
        return root


def _join_prints(root: dict[str, Any]) -> None:
    stack = [root]
    while stack:
        node = stack.pop()
        node["prints"] = "".join(node["prints"])
        stack.extend(node["calls"])


class PrintSink:
    """A text stream that sends every write to the current recorder (stdout and stderr both)."""

    encoding = "utf-8"
    errors = "strict"

    def __init__(self, write: Callable[[str], int]) -> None:
        self.write = write

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return False

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)


def traced(fn: Callable[..., Any], recorder: Callable[[], Recorder | None]) -> Callable[..., Any]:
    """``fn`` recording itself as a node of the current call's tree (if a call is running)."""
    name = fn.__name__

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        rec = recorder()
        if rec is None:  # called while the module loads
            return fn(*args, **kwargs)
        node = rec.enter(name, args, kwargs)
        try:
            value = fn(*args, **kwargs)
        except Stop as e:
            if node is not None:
                node["error"] = rec.error_text(f"stopped ({e.reason})")
            raise
        except BaseException as e:
            if node is not None and node["error"] is None:
                node["error"] = rec.error_text(exception_line(e))
            raise
        else:
            if node is not None:
                node["returned"] = rec.value(value)
            return value
        finally:
            rec.leave()

    # What functools.wraps would copy, by hand: every call wraps every function anew, and
    # wraps costs several times more (it copies attributes skill code cannot read).
    wrapper.__name__, wrapper.__qualname__, wrapper.__doc__ = name, fn.__qualname__, fn.__doc__
    if fn.__dict__:
        wrapper.__dict__.update(fn.__dict__)
    return wrapper


def jsonable(value: Any, depth: int = 0) -> Any:
    """``value`` as JSON: plain data as is (bounded), anything else as its ``repr``."""
    if value is None or isinstance(value, bool | int | str):
        if isinstance(value, str) and len(value) > MAX_REPR * 4:
            return value[: MAX_REPR * 4] + f"... [{len(value)} characters]"
        if isinstance(value, int) and not isinstance(value, bool) and abs(value) > 2**63:
            return _repr(value)
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else repr(value)
    if depth < 6 and isinstance(value, list | tuple):
        items = [jsonable(v, depth + 1) for v in value[:MAX_ITEMS]]
        return items + ([f"... [{len(value)} items]"] if len(value) > MAX_ITEMS else [])
    if depth < 6 and isinstance(value, dict) and all(isinstance(k, str) for k in value):
        return {k: jsonable(v, depth + 1) for k, v in list(value.items())[:MAX_ITEMS]}
    return _repr(value)


def value_cost(value: Any) -> int:
    """Characters of ``value`` as compact ASCII JSON: the one measure of a tree's size, in the
    child (to stay inside the budget) and in the parent (to check it)."""
    return len(compact(value))


def _repr(value: Any) -> str:
    try:
        text = repr(value)
    except Exception as e:  # a skill-defined __repr__ may raise
        text = f"<{type(value).__name__} (repr raised {type(e).__name__})>"
    return text if len(text) <= MAX_REPR else text[:MAX_REPR] + "..."


def check_returned(
    value: Any, limit: int | None = MAX_RETURN_BYTES, max_values: int | None = MAX_RETURN_VALUES
) -> tuple[Any, str | None]:
    """``(value, None)`` if ``value`` can be sent back as JSON (of at most ``limit`` characters
    and ``max_values`` separators), else ``(None, error message)``."""
    try:
        encoded = json.dumps(value, allow_nan=False)
        if _depth_over(value, MAX_VALUE_DEPTH):
            raise ValueError(f"nested deeper than {MAX_VALUE_DEPTH} levels")
    except (TypeError, ValueError, RecursionError) as e:
        kind = type(value).__name__
        detail = "" if isinstance(e, TypeError) else f" ({e})"
        return None, (
            f"the skill returned an object of type {kind} that cannot be sent back{detail}; "
            "return str/int/float/bool/None/list/dict"
        )
    if limit is not None and len(encoded) > limit:
        return None, (f"the skill returned {len(encoded)} characters of JSON; the limit is {limit}")
    if max_values is not None and (count := separators(encoded)) > max_values:
        return None, (
            f"the skill returned {count} JSON values "
            "(counted as the commas, [ and { of its JSON); "
            f"the limit is {max_values}"
        )
    return json.loads(encoded), None  # what the parent will see (tuples are lists)


def _depth_over(value: Any, limit: int) -> bool:
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > limit:
            return True
        if isinstance(item, dict):
            stack.extend((v, depth + 1) for v in item.values())
        elif isinstance(item, list | tuple):
            stack.extend((v, depth + 1) for v in item)
    return False


def check_scratch(value: Any) -> tuple[dict[str, Any], str | None]:
    """``(scratch, None)`` if ``value`` may be kept as ``env.scratch``, else ``({}, error
    message)``."""
    if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
        return {}, (
            f"env.scratch must stay a dict with string keys, not {type(value).__name__}; "
            "the scratch of the call before was kept"
        )
    kept, error = check_returned(value, limit=None, max_values=None)  # its own caps, below
    if error is not None:
        return {}, "env.scratch " + error.split("the skill returned ", 1)[
            -1
        ] + "; the scratch of the call before was kept"
    text = compact(kept)
    if len(text) > MAX_SCRATCH_CHARS:
        return {}, (
            f"env.scratch holds {len(text)} characters of JSON, more than {MAX_SCRATCH_CHARS}; "
            "the scratch of the call before was kept"
        )
    if (count := separators(text)) > MAX_SCRATCH_VALUES:
        return {}, (
            f"env.scratch holds {count} JSON values "
            "(counted as the commas, [ and { of its JSON), more "
            f"than {MAX_SCRATCH_VALUES}; the scratch of the call before was kept"
        )
    return kept, None


def fit(text: str, max_chars: int, max_values: int, *, keep_end: bool = False) -> str:
    """The start (or end) of ``text`` whose JSON is at most ``max_chars`` characters (escapes
    counted as sent) holding at most ``max_values`` ``separators``: what bounds a string's cost
    to the parent, whatever its characters."""
    text = text[-max_chars:] if keep_end else text[:max_chars]
    while (
        excess := len(compact(text)) - 2 - max_chars
    ) > 0:  # each character cut removes at least one
        text = text[excess:] if keep_end else text[: len(text) - excess]
    if separators(text) > max_values:
        found = [m.start() for m in _SEPARATOR.finditer(text)]
        text = text[found[-max_values - 1] + 1 :] if keep_end else text[: found[max_values]]
    return text


def exception_line(e: BaseException) -> str:
    return fit(
        "".join(traceback.format_exception_only(type(e), e)).strip(),
        MAX_ERROR_CHARS,
        MAX_ERROR_VALUES,
    )


def own_traceback(
    e: BaseException, keep: Callable[[str], bool] = lambda f: f == CODEBOOK_FILENAME
) -> str:
    """The traceback of ``e`` with only the frames whose file ``keep`` accepts (the author's own
    code)."""
    frames = [f for f in traceback.extract_tb(e.__traceback__) if keep(f.filename)]
    lines = traceback.StackSummary.from_list(frames).format() if frames else []
    text = (
        ("Traceback (most recent call last):\n" if lines else "")
        + "".join(lines)
        + exception_line(e)
    )
    kept = fit(text, MAX_ERROR_CHARS, MAX_ERROR_VALUES, keep_end=True)
    return text if kept == text else "...\n" + kept
