"""The protocol's caps, resolved where they apply, and the count of every time one binds.

A cap is a protocol decision, so every one is configurable, its defaults are chosen not to
bind the paper's protocol (``max_iterations_per_world`` is the exception, stated in its
config and docs/caps.md), and every binding is on record:

- ``max_skill_actions`` (method config; null = the episode's remaining budget of env
  actions) and ``skill_timeout_s`` (null = ``SKILL_TIMEOUT_BASE_S`` +
  ``SKILL_TIMEOUT_PER_ACTION_S`` x the call's action cap) are resolved per skill call by
  ``resolve_call_caps``, for the actor's calls and Voyager's skills alike; a call stopped
  by either is counted in the trajectory's ``cap_hits`` (a call that runs into the
  episode's own budget is not: the episode's ``stop_reason`` says that);
- ``max_iterations_per_world`` (Voyager): a training world it ends (``stop_reason``
  ``iteration_end``) counts one hit in that world's trajectory;
- ``max_functions`` and ``max_codebook_chars`` (null = no cap) reach the validator's
  ``CodebookSizeLimits``; every edit they reject is counted in the sleep record's ``cap_hits``
  (``sleep_caps.py``: what a sleep phase counts, re-exported here);
- ``max_functions_per_episode`` (ASI): an induction answer with more new functions than it
  allows (the rest are ignored) counts one hit in the sleep record;
- ``max_inducer_turns`` (methods whose spec declares a multi-turn sleep): a sleep phase that
  runs out of turns (``ended_by: out_of_turns``) counts one hit in its sleep record.

``metrics.jsonl`` rows (``cap_hits``: the episode's, ``EPISODE_CAPS``; ``sleep_cap_hits``:
its batch's sleep, ``SLEEP_CAPS``), ``eval.jsonl`` rows (``SKILL_CAPS``) and
``summary.json`` (``cap_hits``: every ``CAP_NAMES`` key) carry the counts; the report's
caps table shows them next to ``caps_in_force``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from speedrunner.core.runtime.sleep_caps import (  # noqa: F401  (re-exported: every cap is named here)
    LIBRARY_CAPS,
    SLEEP_CAPS,
    codebook_limits,
    count_caps,
    rejected_caps,
)
from speedrunner.core.skill import SKILL_TIMEOUT_BASE_S, SKILL_TIMEOUT_PER_ACTION_S

if TYPE_CHECKING:
    from speedrunner.core.env import TextEnv

UNKNOWN_LIMIT_ACTIONS = 10_000
"""The action cap of a call when neither the budget nor the env says how many actions the
episode has left (no shipped benchmark lacks a limit; ScienceWorld's default is this)."""

SKILL_CAPS = ("max_skill_actions", "skill_timeout")
"""The caps of one skill call (counted per trajectory, and per evaluation episode)."""
EPISODE_CAPS = (*SKILL_CAPS, "max_iterations_per_world")
"""The caps counted per training trajectory (a ``metrics.jsonl`` row's ``cap_hits``)."""
CAP_NAMES = (*EPISODE_CAPS, *SLEEP_CAPS)
"""Every cap whose hits are counted, as ``cap_hits`` keys."""


def _multi_turn_sleep(name: object) -> bool:
    """The method's sleep is a conversation of at most ``max_inducer_turns`` turns, as its spec
    declares (a config may carry the key from a shared base and make one call per episode)."""
    from speedrunner.core.specs import METHODS

    return isinstance(name, str) and name in METHODS and METHODS.get(name).multi_turn_sleep


@dataclass(frozen=True)
class CallCaps:
    """The limits one skill call runs under, as the sandbox receives them."""

    max_actions: int
    timeout_s: float
    per_call_cap: bool
    """Whether ``max_actions`` is the per-call cap (stopping at it is a cap hit) rather than
    the episode's remaining budget (stopping at it ends the episode, not a cap hit)."""


def episode_actions_left(env: TextEnv, max_env_actions: int | None, taken: int) -> int | None:
    """Env actions the episode may still take: the smaller of the budget's and the env's own
    step limit (``TextEnv.step_limit``: BabyAI ``max_steps``, ScienceWorld ``env_step_limit``);
    ``None`` if neither is known."""
    known = [n for n in (max_env_actions, env.step_limit) if n is not None]
    return None if not known else max(0, min(known) - taken)


def derived_timeout_s(max_actions: int) -> float:
    """The default wall-clock limit of a call that may take ``max_actions`` actions."""
    return SKILL_TIMEOUT_BASE_S + SKILL_TIMEOUT_PER_ACTION_S * max_actions


def resolve_call_caps(
    max_skill_actions: int | None, skill_timeout_s: float | None, actions_left: int | None
) -> CallCaps:
    """The caps of the next skill call from the method's settings and the episode's budget."""
    left = UNKNOWN_LIMIT_ACTIONS if actions_left is None else max(0, actions_left)
    per_call = actions_left is None or (max_skill_actions is not None and max_skill_actions < left)
    cap = left if max_skill_actions is None else min(max_skill_actions, left)
    timeout = derived_timeout_s(cap) if skill_timeout_s is None else skill_timeout_s
    return CallCaps(cap, timeout, per_call)


def skill_cap_hit(stopped_by: str, caps: CallCaps) -> str | None:
    """The cap a skill call's stop counts against, if any."""
    if stopped_by == "max_actions" and caps.per_call_cap:
        return "max_skill_actions"
    if stopped_by == "timeout":
        return "skill_timeout"
    return None


def skill_hits(hits: Mapping[str, int] | None) -> dict[str, int]:
    """One trajectory's skill-call cap hits with every ``SKILL_CAPS`` key (0 when it never
    bound)."""
    return {name: int((hits or {}).get(name, 0)) for name in SKILL_CAPS}


def episode_hits(hits: Mapping[str, int] | None) -> dict[str, int]:
    """One training trajectory's cap hits with every ``EPISODE_CAPS`` key (0 when it never
    bound)."""
    return {name: int((hits or {}).get(name, 0)) for name in EPISODE_CAPS}


def sum_skill_hits(many: Iterable[Mapping[str, int] | None]) -> dict[str, int]:
    total = skill_hits(None)
    for hits in many:
        for name in SKILL_CAPS:
            total[name] += int((hits or {}).get(name, 0))
    return total


def add_hits(total: dict[str, int], hits: Mapping[str, int] | None) -> dict[str, int]:
    """``total`` plus ``hits`` (in place; returned), every ``CAP_NAMES`` key present."""
    for name in CAP_NAMES:
        total[name] = total.get(name, 0) + int((hits or {}).get(name, 0))
    return total


def zero_hits() -> dict[str, int]:
    return dict.fromkeys(CAP_NAMES, 0)


def caps_in_force(method: Mapping[str, Any]) -> dict[str, Any]:
    """``{cap: setting}`` for the caps a run's method section (``config.resolved.json``) has,
    in ``CAP_NAMES`` order; ``None`` is the protocol's default rule (no cap, or derived from
    the episode's budget). A cap absent here cannot bind that run."""
    shown: dict[str, Any] = {}
    if "max_skill_actions" in method:
        shown["max_skill_actions"] = method["max_skill_actions"]
        shown["skill_timeout"] = method.get("skill_timeout_s")
    for cap in ("max_iterations_per_world", *LIBRARY_CAPS, "max_functions_per_episode"):
        if cap in method:  # the setting has the cap's name
            shown[cap] = method[cap]
    if "max_inducer_turns" in method and _multi_turn_sleep(method.get("name")):
        shown["max_inducer_turns"] = method["max_inducer_turns"]
    return {cap: shown[cap] for cap in CAP_NAMES if cap in shown}


def run_cap_hits(metrics_rows: Iterable[Mapping[str, Any]]) -> dict[str, int]:
    """A run's training cap hits from its ``metrics.jsonl`` rows: every episode's, and each
    batch's sleep once (its rows all repeat it). Rows written before caps were counted add 0."""
    total, batches = zero_hits(), set()
    for row in metrics_rows:
        add_hits(total, row.get("cap_hits"))
        if row.get("batch") not in batches:
            batches.add(row.get("batch"))
            add_hits(total, row.get("sleep_cap_hits"))
    return total
