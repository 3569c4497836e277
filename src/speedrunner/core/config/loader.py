"""Layered config loading: defaults < file < --quick_test preset < --set overrides.

Mappings deep-merge (changing one sampling key keeps the others); lists replace
wholesale. Every problem is collected and reported at once, each naming the key, the
layer it came from (file line, preset, or --set) and, where possible, the fix.
"""

from __future__ import annotations

import copy
import hashlib
import types
import typing
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from speedrunner.core.config.schema import RunConfig, Section
from speedrunner.core.config.yaml_source import (
    YAML_BOOL_WORDS,
    KeyPath,
    ScalarSource,
    YamlSource,
    read_yaml_source,
)
from speedrunner.core.names import suggest
from speedrunner.core.redact import scrub
from speedrunner.core.registry import Registry, load_entry_point
from speedrunner.core.specs import BenchmarkSpec, MethodSpec
from speedrunner.errors import ConfigError, ImpossibleCombinationError, UnknownNameError

SECTIONS = tuple(RunConfig.model_fields)

# The run-schedule part of --quick_test: a tiny run that still exercises every phase.
QUICK_TEST_RUN = {
    "rollouts": 4,
    "sleep_every": 2,
    "eval_every": 4,
    "eval_episodes": 2,
    "parallel_episodes": 2,
    "episode_wall_clock_s": 300.0,
}


@dataclass
class LoadedConfig:
    """A validated config plus what provenance needs: the exact source and its layers."""

    config: RunConfig
    source: YamlSource
    overrides: list[str] = field(default_factory=list)
    quick_test: bool = False

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.source.raw).hexdigest()

    def resolved_json(self) -> dict[str, Any]:
        return self.config.model_dump(mode="json")


def parse_override(text: str) -> tuple[KeyPath, Any]:
    """Parse ``dotted.key=value``; the value is read as YAML (``3`` -> int, ``[a]`` -> list)."""
    key, sep, value = text.partition("=")
    key = key.strip()
    if not sep or not key or any(not part for part in key.split(".")):
        raise ConfigError(f"--set {text!r}: expected dotted.key=value, e.g. --set run.seed=3")
    try:
        parsed = yaml.safe_load(value) if value.strip() else ""
    except yaml.YAMLError as e:
        raise ConfigError(f"--set {text!r}: the value is not valid YAML ({e})") from e
    return tuple(key.split(".")), parsed


def deep_merge(base: Mapping[str, Any], top: Mapping[str, Any]) -> dict[str, Any]:
    """Merge ``top`` over ``base``: mappings recurse, everything else (lists too) replaces."""
    out = copy.deepcopy(dict(base))
    for key, value in top.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


# Keys that belong to one particular model; an inducer on another provider does not inherit them.
MODEL_SPECIFIC_KEYS = (
    "name",
    "base_url",
    "api_key_env",
    "prices",
    "context_tokens",
    "script",
    "enable_thinking",
    "thinking_level",
)


def inducer_over_model(data: Mapping[str, Any]) -> dict[str, Any]:
    """The inducer section deep-merged over the actor's ``model`` section.

    ``inducer: {sampling: {temperature: 0.2}}`` means "the actor's model, cooler", never a
    silent switch to the built-in default model. An inducer on a different provider is a
    different model: it keeps only the actor's provider-independent keys (sampling, retries).
    """
    model = dict(data.get("model") or {})
    inducer = dict(data["inducer"])
    if inducer.get("provider", model.get("provider", "openai")) != model.get("provider", "openai"):
        model = {k: v for k, v in model.items() if k not in MODEL_SPECIFIC_KEYS and k != "provider"}
    return deep_merge(model, inducer)


def nested(path: KeyPath, value: Any) -> dict[str, Any]:
    out: Any = value
    for part in reversed(path):
        out = {part: out}
    return out


def _flat_paths(data: Mapping[str, Any], prefix: KeyPath = ()) -> Iterable[KeyPath]:
    for key, value in data.items():
        path = (*prefix, str(key))
        yield path
        if isinstance(value, Mapping):
            yield from _flat_paths(value, path)


class ConfigLoader:
    """Loads run configs against the benchmark and method registries it is given."""

    def __init__(self, benchmarks: Registry[BenchmarkSpec], methods: Registry[MethodSpec]) -> None:
        self.benchmarks = benchmarks
        self.methods = methods

    def load(
        self,
        path: str | Path,
        *,
        overrides: Sequence[str] = (),
        quick_test: bool = False,
        expect_benchmark: str | None = None,
        entry_point: str | None = None,
    ) -> LoadedConfig:
        source = read_yaml_source(path)
        if not isinstance(source.data, dict):
            raise ConfigError("the top level must be a mapping of sections", source=str(path))
        set_layer: dict[str, Any] = {}
        set_raw: dict[KeyPath, ScalarSource] = {}
        for text in overrides:
            key, value = parse_override(text)
            set_layer = deep_merge(set_layer, nested(key, value))
            raw = text.partition("=")[2].strip()
            set_raw[key] = ScalarSource(line=0, raw=raw, plain=not raw.startswith(("'", '"')))
        merged = _scripts_next_to(Path(path), deep_merge(source.data, {}))
        origins = _Origins(source, set_layer, quick={}, set_raw=set_raw)
        if quick_test:
            quick = self._quick_layer(deep_merge(merged, set_layer))
            origins.quick = quick
            merged = deep_merge(merged, quick)
        merged = deep_merge(merged, set_layer)
        config = self._validate(merged, origins, expect_benchmark, entry_point)
        return LoadedConfig(config, source, list(overrides), quick_test)

    def from_resolved(self, resolved: Mapping[str, Any], *, source: YamlSource) -> RunConfig:
        """Rebuild the typed config from ``config.resolved.json`` (used on resume)."""
        return self._validate(dict(resolved), _Origins(source, {}, {}), None, None)

    # ------------------------------------------------------------------ layers
    def _quick_layer(self, merged: Mapping[str, Any]) -> dict[str, Any]:
        layer: dict[str, Any] = {"run": dict(QUICK_TEST_RUN)}
        bench = _name_of(merged, "benchmark")
        if bench in self.benchmarks:
            layer["benchmark"] = dict(self.benchmarks.get(bench).quick_test)
        method = _name_of(merged, "method")
        if method in self.methods:
            layer["method"] = dict(self.methods.get(method).quick_test)
        return layer

    # -------------------------------------------------------------- validation
    def _validate(
        self,
        data: dict[str, Any],
        origins: _Origins,
        expect_benchmark: str | None,
        entry_point: str | None,
    ) -> RunConfig:
        problems: list[str] = []
        for key in data:
            if key not in SECTIONS:
                problems.append(
                    f"{origins.where((key,))}unknown section '{key}'{suggest(str(key), SECTIONS)}; "
                    f"valid sections: {', '.join(SECTIONS)}"
                )
        for section in ("method", "benchmark", "run", "model", "inducer", "speedrun", "logging"):
            value = data.get(section)
            if value is not None and not isinstance(value, Mapping):
                problems.append(
                    f"{origins.where((section,))}'{section}' must be a mapping, got "
                    f"{type(value).__name__}"
                )
        if problems:
            raise ConfigError(problems, source=origins.label)

        method = self._section(data, "method", self.methods, problems, origins)
        benchmark = self._section(data, "benchmark", self.benchmarks, problems, origins)
        sections: dict[str, Any] = {"method": method, "benchmark": benchmark}
        for name in ("run", "model", "inducer", "speedrun", "logging"):
            if data.get(name) is None:
                continue
            cls = _section_type(RunConfig.model_fields[name].annotation)
            raw = inducer_over_model(data) if name == "inducer" else dict(data[name])
            try:
                sections[name] = cls.model_validate(raw)
            except ValidationError as e:
                problems.extend(_format_errors(e, cls, (name,), origins))
        if problems or method is None or benchmark is None:
            raise ConfigError(problems, source=origins.label)
        try:
            config = RunConfig(**sections)
        except (
            ValidationError
        ) as e:  # a rule across sections (e.g. speedrun.window vs run.rollouts)
            raise ImpossibleCombinationError(
                [err["msg"].removeprefix("Value error, ") for err in e.errors()],
                source=origins.label,
            ) from None
        self._check_combinations(config, origins, expect_benchmark, entry_point)
        return config

    def _section(
        self,
        data: Mapping[str, Any],
        section: str,
        registry: Registry[Any],
        problems: list[str],
        origins: _Origins,
    ) -> Any:
        raw = data.get(section)
        if raw is None:
            problems.append(
                f"{origins.where((section,))}missing section '{section}' (with at least "
                f"'{section}.name'); valid names: {', '.join(registry.names())}"
            )
            return None
        name = raw.get("name")
        if not isinstance(name, str):
            problems.append(
                f"{origins.where((section,))}'{section}.name' is required; valid: "
                f"{', '.join(registry.names())}"
            )
            return None
        try:
            spec = registry.get(name)
        except UnknownNameError as e:
            problems.append(f"{origins.where((section, 'name'))}{section}.name: {e}")
            return None
        if section == "method":
            for key in raw:
                if key in spec.meaning_keys:
                    problems.append(
                        f"{origins.where((section, key))}method.{key}: no such switch — "
                        f"{spec.meaning_keys[key]}"
                    )
            if problems:
                return None
        cls: type[BaseModel] = load_entry_point(spec.config)
        try:
            return cls.model_validate(dict(raw))
        except ValidationError as e:
            problems.extend(_format_errors(e, cls, (section,), origins))
            return None

    def _check_combinations(
        self,
        config: RunConfig,
        origins: _Origins,
        expect_benchmark: str | None,
        entry_point: str | None,
    ) -> None:
        method, bench = config.method.name, config.benchmark.name
        spec = self.methods.get(method)
        if spec.benchmarks is not None and bench not in spec.benchmarks:
            raise ImpossibleCombinationError(
                f"{origins.where(('method', 'name'))}method '{method}' runs only on "
                f"{', '.join(sorted(spec.benchmarks))}, not on '{bench}'",
                source=origins.label,
            )
        if expect_benchmark is not None and bench != expect_benchmark:
            raise ImpossibleCombinationError(
                f"{origins.where(('benchmark', 'name'))}this config is for benchmark '{bench}', "
                f"but this entry point runs '{expect_benchmark}'; use speedrunner train "
                "--config_file ...",
                source=origins.label,
            )
        if entry_point is not None:
            if spec.entry_point is not None and spec.entry_point != entry_point:
                raise ImpossibleCombinationError(
                    f"{origins.where(('method', 'name'))}method.name '{method}' has its own entry "
                    f"point: python -m {spec.entry_point}",
                    source=origins.label,
                )
            owner = next(
                (m for m in self.methods.names() if self.methods.get(m).entry_point == entry_point),
                None,
            )
            if owner is not None and owner != method:
                raise ImpossibleCombinationError(
                    f"{origins.where(('method', 'name'))}{entry_point} runs only method '{owner}', "
                    f"but the config's method.name is '{method}'; "
                    "use speedrunner train --config_file ...",
                    source=origins.label,
                )


@dataclass
class _Origins:
    """Tells which layer a key path came from, for error messages."""

    source: YamlSource
    set_layer: dict[str, Any]
    quick: dict[str, Any]
    set_raw: dict[KeyPath, ScalarSource] = field(default_factory=dict)

    @property
    def label(self) -> str:
        return str(self.source.path)

    def layer_of(self, path: KeyPath) -> str:
        if _has_path(self.set_layer, path):
            return "--set"
        if _has_path(self.quick, path):
            return "--quick_test preset"
        return "file"

    def where(self, path: KeyPath) -> str:
        layer = self.layer_of(path)
        if layer != "file":
            return f"[{layer}] "
        for n in range(len(path), 0, -1):
            line = self.source.lines.get(path[:n])
            if line is not None:
                return f"line {line}: "
        return ""

    def scalar(self, path: KeyPath) -> ScalarSource | None:
        layer = self.layer_of(path)
        if layer == "--set":
            return self.set_raw.get(path)
        return self.source.scalars.get(path) if layer == "file" else None


def _has_path(data: Mapping[str, Any], path: KeyPath) -> bool:
    node: Any = data
    for part in path:
        if isinstance(node, list):
            return True  # lists replace wholesale: all inside one came from this layer
        if not isinstance(node, Mapping) or part not in node:
            return False
        node = node[part]
    return True


def _name_of(data: Mapping[str, Any], section: str) -> str | None:
    value = data.get(section)
    return value.get("name") if isinstance(value, Mapping) else None


def _format_errors(
    error: ValidationError, model: type[BaseModel], prefix: KeyPath, origins: _Origins
) -> list[str]:
    lines = []
    # A value that fits no member of a union (``base_url: str | list[str]``) gives one error
    # per member, located under tags like 'str'; report it once, at the key's own path.
    groups: dict[tuple[str, ...], list[Any]] = {}
    for err in error.errors():
        loc = tuple(str(p) for p in _strip_union_tags(model, err["loc"]))
        groups.setdefault(loc, []).append(err)
    for loc, errs in groups.items():
        err = errs[0]
        path = (*prefix, *loc)
        dotted = ".".join(path) or "(top level)"
        where = origins.where(path)
        if err["type"] == "extra_forbidden":
            valid = _fields_at(model, loc[:-1])
            hint = suggest(loc[-1], valid)
            lines.append(
                f"{where}unknown key '{dotted}'{hint}; valid keys here: {', '.join(valid)}"
            )
            continue
        message = err["msg"]
        if message.startswith("Value error, "):
            message = message[len("Value error, ") :]
        if err["type"] == "missing":
            message = "required key is missing"
        for other in errs[1:]:
            message += " or " + other["msg"].removeprefix("Input should be ")
        line = f"{where}{dotted}: {message}"
        if (
            err["type"] not in ("missing",)
            and "input" in err
            and not isinstance(err["input"], Mapping)
        ):
            line += f" (got {scrub(repr(err['input']))})"
        line += next((h for e in errs if (h := _coercion_hint(origins.scalar(path), e))), "")
        description = _description_at(model, loc)
        if description and err["type"] not in ("value_error", "assertion_error"):
            line += f"\n      {dotted}: {description}"
        lines.append(line)
    return lines


def _strip_union_tags(model: type[BaseModel], loc: Sequence[Any]) -> tuple[Any, ...]:
    """Drop pydantic's union-member tags ('str', 'list[str]', ...) from an error location."""
    out: list[Any] = []
    current: type[BaseModel] | None = model
    annotation: Any = None
    for part in loc:
        if isinstance(part, str) and _is_union(annotation):
            annotation = None  # the tag names a member; deeper parts are inside that member
            continue
        out.append(part)
        if current is not None and isinstance(part, str) and part in current.model_fields:
            annotation = current.model_fields[part].annotation
            current = _section_type(annotation)
        else:
            current, annotation = None, None
    return tuple(out)


def _is_union(annotation: Any) -> bool:
    if typing.get_origin(annotation) not in (typing.Union, types.UnionType):
        return False
    return len([a for a in typing.get_args(annotation) if a is not type(None)]) > 1


def _coercion_hint(scalar: ScalarSource | None, err: Mapping[str, Any]) -> str:
    """Explain YAML's silent re-typing of unquoted words like ``no`` and ``3.10``."""
    if scalar is None or not scalar.plain:
        return ""
    value = err.get("input")
    if isinstance(value, bool) and scalar.raw.lower() in YAML_BOOL_WORDS:
        said = f"; YAML reads the unquoted word {scalar.raw!r} as the boolean {str(value).lower()}"
        if "str" in err["type"] or "literal" in err["type"]:
            return said + f' — if you meant the text, quote it: "{scalar.raw}"'
        return said
    if isinstance(value, int | float) and not isinstance(value, bool) and "str" in err["type"]:
        return f'; YAML read {scalar.raw!r} as a number — quote it: "{scalar.raw}"'
    return ""


def _model_at(model: type[BaseModel], loc: Sequence[str]) -> type[BaseModel] | None:
    current: type[BaseModel] | None = model
    for part in loc:
        if current is None or part not in current.model_fields:
            return None
        current = _section_type(current.model_fields[part].annotation)
    return current


def _section_type(annotation: Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in getattr(annotation, "__args__", ()) or ():
        found = _section_type(arg)
        if found is not None:
            return found
    return None


def _fields_at(model: type[BaseModel], loc: Sequence[str]) -> list[str]:
    target = _model_at(model, loc)
    return list(target.model_fields) if target is not None else []


def _scripts_next_to(config_file: Path, data: dict[str, Any]) -> dict[str, Any]:
    """A relative ``model.script`` / ``inducer.script`` written in a config file names a file
    next to that config file (so a shipped demo runs from any directory); ``--set`` values
    stay relative to the working directory, as any command-line path."""
    data = copy.deepcopy(data)
    for role in ("model", "inducer"):
        section = data.get(role)
        script = section.get("script") if isinstance(section, dict) else None
        if isinstance(script, str) and script and not Path(script).is_absolute():
            beside = config_file.resolve().parent / script
            if beside.is_file():
                section["script"] = str(beside)
    return data


def _description_at(model: type[BaseModel], loc: Sequence[str]) -> str | None:
    """The field's docstring as one line: the error message indents it under its key."""
    if not loc:
        return None
    parent = _model_at(model, loc[:-1])
    if parent is None or not issubclass(parent, Section) or loc[-1] not in parent.model_fields:
        return None
    description = parent.model_fields[loc[-1]].description
    return " ".join(description.split()) if description else None
