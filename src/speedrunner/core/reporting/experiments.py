"""Which runs are one experiment: the same results-deciding settings, seed aside.

A run records ``results_config_sha256`` over everything that decides its results, the
seed included. The report averages runs over seeds, so it compares the same settings
without the seed (``config.resolved.json`` minus ``run.seed`` and the operational keys that
``--resume`` may change). Runs alike in name (benchmark, task set, method, model) but not in
these settings are kept apart, and each is labelled by what differs, e.g. "quick test" vs
"rollouts 200".
"""

from __future__ import annotations

import hashlib
import json
import types
import typing
from dataclasses import dataclass
from typing import Any

from speedrunner.core.config.schema import BenchmarkConfig, MethodConfig, RunConfig, Section
from speedrunner.core.registry import Registry, load_entry_point
from speedrunner.core.specs import BENCHMARKS, METHODS

SEED = "run.seed"
MAX_LABEL_KEYS = 3
"""A variant label names at most this many differing settings, then "+N more"."""
FIRST_KEYS = ("run.rollouts", "run.sleep_every", "run.eval_every", "run.eval_episodes")
"""Settings named first in a label: the schedule is what a reader recognises."""


@dataclass(frozen=True)
class Settings:
    """One run's results-deciding settings (seed aside), flattened to ``dotted.key -> JSON``."""

    values: dict[str, str]
    quick_test: bool

    @property
    def fingerprint(self) -> str:
        return hashlib.sha256(json.dumps(self.values, sort_keys=True).encode()).hexdigest()


def settings_of(config: dict[str, Any], provenance: dict[str, Any]) -> Settings:
    """The settings of a run from its ``config.resolved.json`` and ``provenance.json``."""
    flat = {k: v for k, v in _flatten(results_view_of(config)).items() if k != SEED}
    return Settings(flat, bool(provenance.get("quick_test")))


def results_view_of(config: dict[str, Any]) -> dict[str, Any]:
    """What the run's ``results_config_sha256`` hashes, rebuilt from ``config.resolved.json``:
    the resolved config without its operational keys (the seed still in)."""
    data = json.loads(json.dumps(config))  # a deep copy of plain JSON
    for path in _operational_paths(data):
        node: Any = data
        for part in path[:-1]:
            node = node.get(part) if isinstance(node, dict) else None
        if isinstance(node, dict):
            node.pop(path[-1], None)
    speedrun = data.get("speedrun")
    if isinstance(speedrun, dict) and speedrun.get("metric") != "train_success_rolling":
        speedrun.pop(
            "window", None
        )  # means nothing to the other metrics (as the run's fingerprint)
    return data


def variant_labels(settings: list[Settings]) -> list[str]:
    """A short label per experiment that shares a name with the others: what sets it apart.

    A ``--quick_test`` run reads "quick test"; the others name their differing settings
    (``rollouts 200, eval_every 50, +3 more``), compared with the experiments of their kind."""
    labels = []
    for s in settings:
        peers = [o for o in settings if o.quick_test == s.quick_test]
        if s.quick_test and len(peers) == 1:
            labels.append("quick test")
            continue
        keys = _differing(peers if len(peers) > 1 else settings)
        parts = [f"{_short(k, keys)} {_show(s.values.get(k))}" for k in keys[:MAX_LABEL_KEYS]]
        if len(keys) > MAX_LABEL_KEYS:
            parts.append(f"+{len(keys) - MAX_LABEL_KEYS} more")
        labels.append(("quick test, " if s.quick_test else "") + ", ".join(parts))
    return labels


def differing_keys(settings: list[Settings]) -> list[str]:
    """The settings that are not the same in every one of ``settings`` (schedule first)."""
    return _differing(settings)


def _differing(settings: list[Settings]) -> list[str]:
    keys = sorted({k for s in settings for k in s.values})
    out = [k for k in keys if len({s.values.get(k) for s in settings}) > 1]
    return sorted(
        out, key=lambda k: (FIRST_KEYS.index(k) if k in FIRST_KEYS else len(FIRST_KEYS), k)
    )


def _short(key: str, among: list[str]) -> str:
    """The last part of a dotted key, unless another differing key ends the same way."""
    last = key.rsplit(".", 1)[-1]
    return last if sum(1 for k in among if k.rsplit(".", 1)[-1] == last) == 1 else key


def _show(value: str | None) -> str:
    if value is None:
        return "unset"
    text = value.strip('"') if value.startswith('"') else value
    return text if len(text) <= 40 else text[:37] + "..."


def _flatten(data: Any, prefix: str = "") -> dict[str, str]:
    if isinstance(data, dict) and data:
        out: dict[str, str] = {}
        for key, value in data.items():
            out.update(_flatten(value, f"{prefix}.{key}" if prefix else str(key)))
        return out
    return {prefix: json.dumps(data, sort_keys=True)}


def _operational_paths(data: dict[str, Any]) -> set[tuple[str, ...]]:
    """Dotted paths of the operational fields, from the config classes: the method's and the
    benchmark's own when registered (``speedrunner report`` registers the shipped ones), else
    their base classes', whose operational keys are fewer."""
    paths = {(name,) for name in RunConfig.OPERATIONAL}
    for name, field in RunConfig.model_fields.items():
        section = data.get(name)
        if not isinstance(section, dict):
            continue
        cls = _section_class(field.annotation)
        if cls is BenchmarkConfig:
            cls = _registered(BENCHMARKS, section.get("name"), BenchmarkConfig)
        elif cls is MethodConfig:
            cls = _registered(METHODS, section.get("name"), MethodConfig)
        if cls is not None:
            paths |= _paths_of(cls, section, (name,))
    return paths


def _paths_of(
    cls: type[Section], data: dict[str, Any], prefix: tuple[str, ...]
) -> set[tuple[str, ...]]:
    paths = {(*prefix, name) for name in cls.OPERATIONAL}
    for name, field in cls.model_fields.items():
        sub = _section_class(field.annotation)
        if sub is not None and isinstance(data.get(name), dict):
            paths |= _paths_of(sub, data[name], (*prefix, name))
    return paths


def _section_class(annotation: Any) -> type[Section] | None:
    """The Section class in an annotation such as ``ModelConfig | None`` or
    ``SerializeAsAny[X]``."""
    if isinstance(annotation, type) and issubclass(annotation, Section):
        return annotation
    if typing.get_origin(annotation) in (typing.Union, types.UnionType, typing.Annotated):
        for arg in typing.get_args(annotation):
            found = _section_class(arg)
            if found is not None:
                return found
    return None


def _registered(registry: Registry, name: Any, base: type[Section]) -> type[Section]:
    """The registered config class of ``name``; the base class when none is registered."""
    if not isinstance(name, str) or name not in registry:
        return base
    try:
        cls = load_entry_point(registry.get(name).config)
    except ImportError:
        return base
    return cls if isinstance(cls, type) and issubclass(cls, base) else base
