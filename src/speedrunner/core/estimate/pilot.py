"""The typical case: what earlier runs (pilots) made and paid per episode and per sleep phase,
checked against the config being estimated and scaled to its budgets and schedule.

A pilot of another benchmark, task set, method or model says nothing about this config and is
refused, naming the difference. Budgets are scaled unit by unit: an episode (or sleep phase)
the pilot's budget stopped goes on to this config's budget, its input growing as it did; one
longer than this config allows is cut. Every pilot's tokens are priced at this config's prices.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from speedrunner.core.atomic import iter_jsonl
from speedrunner.core.config.schema import Prices, RunConfig, operational_paths, results_view
from speedrunner.core.estimate.model import Calls, Estimate, PilotUse
from speedrunner.core.llm.prices import resolve_prices
from speedrunner.core.records import (
    EvalEpisode,
    EvalRow,
    MetricsRow,
    RecordError,
    stored_summary,
    validate_rows,
)
from speedrunner.core.rundir import check_run_format
from speedrunner.core.specs import METHODS
from speedrunner.errors import ReportInputError, SpeedRunnerError

__all__ = ["PilotMismatchError", "read_pilot", "role_of", "typical_case"]

FAKE_PREFIX = "fake-"
"""Models of the fake LLM server (``speedrunner fake-llm``) are named so."""

REFUSED = {"benchmark.name": "benchmark", "benchmark.task_set": "task set", "method.name": "method"}
MODEL_REFUSED = {
    "name": "model",
    "enable_thinking": "thinking switch",
    "thinking_level": "thinking level",
}
"""What a model writes depends on these: a real model's pilot with another value is refused."""
SCALED = {
    "run.rollouts",
    "run.sleep_every",
    "run.eval_every",
    "run.eval_episodes",
    "benchmark.max_llm_calls",
    "benchmark.max_env_actions",
    "method.max_inducer_turns",
    "model.sampling.max_tokens",
    "inducer.sampling.max_tokens",
}
IGNORED_LEAVES = {"seed", "eval_seed", "provider", "script", "input", "cached_input", "output"}
"""Seeds (a pilot is another sample), the provider (the name says the model) and prices (every
pilot is priced at this config's)."""
STOPPED_BY_BUDGET = ("max_llm_calls", "max_env_actions")


class PilotMismatchError(SpeedRunnerError):
    """Raised when a ``--from`` run differs from the estimated config in what cannot be scaled."""


@dataclass(frozen=True)
class CallSize:
    """One call's tokens as the typical case prices them."""

    uncached: float
    cached: float
    output: float
    truncated: bool = False

    @property
    def input(self) -> float:
        return self.uncached + self.cached


@dataclass
class PilotRun:
    """An earlier run directory, read once."""

    path: Path
    resolved: dict[str, Any]
    fingerprint: str | None
    scripted: bool
    calls: list[dict[str, Any]]
    metrics: list[MetricsRow]
    evals: list[EvalRow]

    def model(self, role: str) -> dict[str, Any]:
        """The resolved model section of ``role`` (``model`` or ``inducer``, the actor's if
        unset)."""
        section = self.resolved.get(role) if role == "inducer" else None
        return section or self.resolved.get("model") or {}

    @property
    def label(self) -> str | None:
        """``scripted`` or ``fake`` when a model of the pilot is not an LLM."""
        names = [str(self.model(r).get("name", "")) for r in ("model", "inducer")]
        providers = [self.model(r).get("provider") for r in ("model", "inducer")]
        if self.scripted or "scripted" in providers or any(n.startswith("scripted") for n in names):
            return "scripted"
        return "fake" if any(n.startswith(FAKE_PREFIX) for n in names) else None


@dataclass
class _Tally:
    """One role's pilot units, and their calls and dollars after scaling."""

    units: int = 0
    calls: float = 0.0
    usd: float = 0.0
    scaled_up: int = 0
    cut: int = 0
    outputs_raised: int = 0


def read_pilot(path: Path) -> PilotRun:
    """The run directory at ``path``; a clear error (exit 2) when it is not one."""
    calls_file, resolved_file = path / "llm_calls.jsonl", path / "config.resolved.json"
    if not calls_file.is_file() or not resolved_file.is_file():
        missing = "llm_calls.jsonl" if not calls_file.is_file() else "config.resolved.json"
        raise ReportInputError(
            f"--from {path}: no {missing}; --from takes run directories of earlier runs"
        )
    check_run_format(path, action="used as a pilot (--from)")
    try:
        resolved = json.loads(resolved_file.read_text("utf-8"))
        checkpoint = _json_or_empty(path / "checkpoint.json")
        summary = stored_summary(path)
        calls = [r for r in iter_jsonl(calls_file) if r.get("error") is None]
        metrics = validate_rows(
            MetricsRow, list(iter_jsonl(path / "metrics.jsonl")), path / "metrics.jsonl"
        )
        evals = validate_rows(EvalRow, list(iter_jsonl(path / "eval.jsonl")), path / "eval.jsonl")
    except RecordError as e:
        raise ReportInputError(f"--from {path}: {e}; point --from at another run") from None
    except (OSError, ValueError) as e:
        raise ReportInputError(
            f"--from {path}: a file of the run cannot be read ({e}); point --from at another run"
        ) from None
    if not isinstance(resolved, dict):
        raise ReportInputError(f"--from {path}: config.resolved.json is not a config")
    fingerprint = checkpoint.get("results_config_sha256")
    return PilotRun(
        path=path,
        resolved=resolved,
        scripted=summary is not None and summary.scripted,
        calls=calls,
        fingerprint=fingerprint if isinstance(fingerprint, str) else None,
        metrics=metrics,
        evals=evals,
    )


def _json_or_empty(path: Path) -> dict[str, Any]:
    if not path.is_file():
        return {}
    data = json.loads(path.read_text("utf-8"))
    return data if isinstance(data, dict) else {}


def typical_case(
    out: Estimate, config: RunConfig, calls: Sequence[Calls], pilots: Sequence[Path]
) -> None:
    """Fill each role's typical calls and dollars from ``pilots``, and say how they were used."""
    runs = [read_pilot(Path(p)) for p in pilots]
    compared = [_compare(run, config) for run in runs]
    refused = [f"{use.path}: {'; '.join(why)}" for why, use in compared if why]
    if refused:
        raise PilotMismatchError(
            "--from cannot give this config's typical case: the pilot differs in what no "
            "scaling can fix:\n  "
            + "\n  ".join(refused)
            + "\nPoint --from at a pilot of the same benchmark, task "
            "set, method and model (a fake or scripted model may stand in for the model), or leave "
            "--from out for the worst case alone"
        )
    uses = [use for _, use in compared]
    tallies: dict[str, _Tally] = {}
    for run, use in zip(runs, uses, strict=True):
        use.scaled += _schedule_note(run, config)
        for c in calls:
            one = _tally(run, c, config)
            use.scaled += _budget_notes(one, run, c, config)
            total = tallies.setdefault(c.role, _Tally())
            total.units, total.calls, total.usd = (
                total.units + one.units,
                total.calls + one.calls,
                total.usd + one.usd,
            )
    train = tallies.get("actor")
    for role, c in zip(out.roles, calls, strict=True):
        t = tallies.get(role.role, _Tally())
        if not t.units and role.role == "actor (eval)" and train is not None and train.units:
            t = train
            uses[-1].scaled.append(
                "evaluation episodes: the pilots played none, so they are counted "
                "as the pilots' training episodes"
            )
        if not t.units:
            continue
        role.typical_calls = t.calls / t.units * c.units
        known = c.model.provider == "scripted" or resolve_prices(c.model) is not None
        role.typical_usd = t.usd / t.units * c.units if known else None
    out.typical_from = [str(r.path) for r in runs]
    out.pilots = uses
    out.assumptions.append(
        "typical: calls per episode / sleep phase and tokens per call as in "
        f"{len(runs)} earlier run(s), scaled to this config and priced at its prices"
    )


# ------------------------------------------------------------------ comparison
def _compare(run: PilotRun, config: RunConfig) -> tuple[list[str], PilotUse]:
    """The differences that refuse the pilot (none: it can be used), and the use made of it."""
    label = run.label
    models = list(dict.fromkeys(str(run.model(r).get("name")) for r in ("model", "inducer")))
    here, there = (
        _flat(_comparable(results_view(config), config)),
        _flat(_comparable(run.resolved, config)),
    )
    differs = sorted(k for k in here.keys() & there.keys() if here[k] != there[k])
    refused = [f"{REFUSED[k]} (pilot {there[k]}, here {here[k]})" for k in differs if k in REFUSED]
    for k in differs:
        section, _, leaf = k.partition(".")
        if section in ("model", "inducer") and leaf in MODEL_REFUSED and label is None:
            role = "actor" if section == "model" else "sleep-phase"
            refused.append(
                f"{role} {MODEL_REFUSED[leaf]} (pilot {there[k]}, here {here[k]}): another "
                "model writes other tokens"
            )
    if refused:
        return refused, PilotUse(str(run.path), models, label, False)
    from speedrunner.core.runtime.loop import config_fingerprint

    use = PilotUse(str(run.path), models, label, run.fingerprint == config_fingerprint(config))
    model_keys = {f"{s}.{leaf}" for s in ("model", "inducer") for leaf in MODEL_REFUSED}
    use.not_scaled = [
        f"{k} (pilot {there[k]}, here {here[k]})"
        for k in differs
        if k not in SCALED and k not in model_keys and k.rsplit(".", 1)[-1] not in IGNORED_LEAVES
    ]
    return [], use


def _comparable(data: dict[str, Any], config: RunConfig) -> dict[str, Any]:
    """``data`` (a resolved config) without operational keys, its inducer the effective one."""
    data = json.loads(json.dumps(data))
    data["inducer"] = data.get("inducer") or data.get("model")
    for path in operational_paths(config):
        node: Any = data
        for part in path[:-1]:
            node = node.get(part) if isinstance(node, dict) else None
        if isinstance(node, dict):
            node.pop(path[-1], None)
    return data


def _flat(data: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in data.items():
        if isinstance(value, dict):
            out.update(_flat(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def _schedule_note(run: PilotRun, config: RunConfig) -> list[str]:
    r = config.run
    evals, sleeps = r.evaluations * r.eval_episodes, r.rollouts // r.sleep_every
    pilot_evals = sum(e.episodes for e in run.evals)
    pilot_sleeps = len({m.batch for m in run.metrics})
    if (len(run.metrics), pilot_sleeps, pilot_evals) == (r.rollouts, sleeps, evals):
        return []
    return [
        f"schedule: per episode and per sleep phase as in {run.path} ({len(run.metrics)} training "
        f"episodes, {pilot_sleeps} sleep phases, {pilot_evals} evaluation episodes), times this "
        f"config's {r.rollouts:,}, {sleeps:,} and {evals:,}"
    ]


# ------------------------------------------------------------------ scaling
def role_of(row: dict[str, Any]) -> str:
    """The forecast's role of one ``llm_calls.jsonl`` row."""
    purpose = str(row.get("purpose"))
    call_id = str(row.get("call_id", ""))
    if purpose == "actor":
        return "actor (eval)" if call_id.startswith("eval") else "actor"
    if purpose == "inducer" and "/action/" in call_id:
        return "action agent"
    return purpose


def _unit_of(call_id: str) -> str:
    """``train/0003``, ``eval/at0004/0001``, ``sleep/0000``: the episode, world or sleep phase."""
    parts = call_id.split("/")
    return "/".join(parts[:3] if parts[0] == "eval" else parts[:2])


Ended = MetricsRow | EvalEpisode | None
"""The row of a pilot's episode (what ended it); ``None`` for a sleep phase."""


def _units(run: PilotRun, c: Calls) -> dict[str, Ended]:
    """The pilot's units of ``c``'s kind, keyed as ``_unit_of``, with what ended each."""
    if c.unit in ("training episode", "training world"):
        return {f"train/{m.index:04d}": m for m in run.metrics}
    if c.unit == "eval episode":
        return {
            f"eval/at{e.rollout:04d}/{p.index:04d}": p for e in run.evals for p in e.per_episode
        }
    return {f"sleep/{b:04d}": None for b in {m.batch for m in run.metrics}}


def _tally(run: PilotRun, c: Calls, config: RunConfig) -> _Tally:
    """``run``'s units of ``c``'s role, each scaled to ``config``'s budgets."""
    t = _Tally()
    units = _units(run, c)
    rows: dict[str, list[dict[str, Any]]] = {u: [] for u in units}
    for r in run.calls:  # a unit without its record did not finish (a killed run): left out
        if role_of(r) == c.role and (unit := _unit_of(str(r.get("call_id", "")))) in rows:
            rows[unit].append(r)
    prices = resolve_prices(c.model)
    pilot_max_tokens = _pilot_max_tokens(run, c)
    t.units += len(rows)
    for unit, unit_rows in rows.items():
        unit_rows.sort(key=lambda r: str(r.get("call_id", "")))
        sizes = [_size(r) for r in unit_rows]
        target = _target(len(sizes), units[unit], run, c, config)
        if target > len(sizes):
            t.scaled_up += 1
        elif target < len(sizes):
            t.cut += 1
        sizes = _rescale(sizes, target, c)
        for s in sizes:
            out = min(s.output, c.model.sampling.max_tokens)
            if (
                s.truncated
                and pilot_max_tokens is not None
                and c.model.sampling.max_tokens > pilot_max_tokens
            ):
                out, t.outputs_raised = c.model.sampling.max_tokens, t.outputs_raised + 1
            t.usd += _cost(prices, s, out)
        t.calls += len(sizes)
    return t


def _pilot_max_tokens(run: PilotRun, c: Calls) -> int | None:
    section = run.model("model" if c.role.startswith("actor") else "inducer")
    value = (section.get("sampling") or {}).get("max_tokens")
    return value if isinstance(value, int) else None


def _size(row: dict[str, Any]) -> CallSize:
    u = row.get("usage") or {}
    return CallSize(
        float(u.get("input_uncached", 0)),
        float(u.get("input_cached", 0)),
        float(u.get("output", 0)),
        row.get("truncated") is True or row.get("finish_reason") == "length",
    )


def _target(n: int, ended: Ended, run: PilotRun, c: Calls, config: RunConfig) -> int:
    """How many calls the unit would make under ``config``'s budgets."""
    if c.role in ("actor", "actor (eval)"):
        return _actor_target(n, ended, run, config)
    if c.role == "inducer" and METHODS.get(config.method.name).multi_turn_sleep:
        turns = int(vars(config.method)["max_inducer_turns"])  # a multi-turn sleep's cap
        pilot_turns = (run.resolved.get("method") or {}).get("max_inducer_turns")
        hit = isinstance(pilot_turns, int) and n >= pilot_turns
        return turns if hit else min(n, turns)
    return n


def _actor_target(n: int, ended: Ended, run: PilotRun, config: RunConfig) -> int:
    bench, pilot = config.benchmark, run.resolved.get("benchmark") or {}
    calls_cap, actions_cap = bench.max_llm_calls, bench.max_env_actions
    stop, actions = (None, 0) if ended is None else (ended.stop_reason, ended.env_actions)
    target = n
    if stop == "max_llm_calls":
        if calls_cap is not None:
            target = calls_cap
        elif actions_cap is not None and actions:
            target = math.ceil(n * actions_cap / actions)
    elif stop == "max_env_actions":
        pilot_actions = pilot.get("max_env_actions")
        if actions_cap is not None and isinstance(pilot_actions, int) and pilot_actions:
            target = math.ceil(n * actions_cap / pilot_actions)
        elif actions_cap is None and calls_cap is not None:
            target = calls_cap
    if calls_cap is not None:
        target = min(target, calls_cap)
    if actions_cap is not None and actions > actions_cap:
        target = min(target, math.ceil(n * actions_cap / actions))
    return max(target, 0)


def _rescale(sizes: list[CallSize], target: int, c: Calls) -> list[CallSize]:
    """``sizes`` cut to ``target`` calls, or carried on to it: each further call's input grows
    by the unit's mean growth per call (at most to the context window), its output the mean."""
    if target <= len(sizes):
        return sizes[:target]
    if not sizes:
        return sizes
    first, last = sizes[0], sizes[-1]
    growth = (last.input - first.input) / (len(sizes) - 1) if len(sizes) > 1 else 0.0
    cached_share = last.cached / last.input if last.input else 0.0
    output = sum(s.output for s in sizes) / len(sizes)
    window = None if c.context is None else c.context.tokens
    more = []
    for k in range(1, target - len(sizes) + 1):
        grown = max(last.input + k * growth, 0.0)
        grown = grown if window is None else min(grown, float(window))
        more.append(CallSize(grown * (1 - cached_share), grown * cached_share, output))
    return [*sizes, *more]


def _cost(prices: Prices | None, s: CallSize, output: float) -> float:
    if prices is None:
        return 0.0
    return (
        prices.input * s.uncached + prices.cached_input * s.cached + prices.output * output
    ) / 1e6


def _budget_notes(t: _Tally, run: PilotRun, c: Calls, config: RunConfig) -> list[str]:
    if not t.units:
        return []
    what, budget = (
        (
            "episodes",
            _budget_words(
                run, config, ("benchmark", "max_llm_calls"), ("benchmark", "max_env_actions")
            ),
        )
        if c.role.startswith("actor")
        else (f"{c.unit}s", _budget_words(run, config, ("method", "max_inducer_turns")))
    )
    notes = []
    if t.scaled_up:
        notes.append(
            f"{c.role}: {t.scaled_up} of {t.units} pilot {what} stopped at the pilot's budget "
            f"({budget}) and are carried on to this config's, each further call's input growing "
            "as in that unit"
        )
    if t.cut:
        notes.append(
            f"{c.role}: {t.cut} of {t.units} pilot {what} made more calls than this config allows "
            f"({budget}) and are cut to it"
        )
    if t.outputs_raised:
        pilot = _pilot_max_tokens(run, c)
        notes.append(
            f"{c.role}: {t.outputs_raised} answers cut at the pilot's max_tokens ({pilot}) are "
            f"counted at this config's {c.model.sampling.max_tokens}"
        )
    return notes


def _budget_words(run: PilotRun, config: RunConfig, *keys: tuple[str, str]) -> str:
    """``max_llm_calls 6 in the pilot, 30 here`` for the keys that differ (or are set)."""
    here = config.model_dump(mode="json")
    words = []
    for section, key in keys:
        pilot, mine = (run.resolved.get(section) or {}).get(key), (here.get(section) or {}).get(key)
        if pilot != mine or mine is not None:
            words.append(f"{section}.{key} {pilot} in the pilot, {mine} here")
    return "; ".join(words)
