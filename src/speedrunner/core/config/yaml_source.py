"""Read a YAML config file and remember where every key came from.

PyYAML gives plain Python data and forgets line numbers; a config error is only
useful if it says "line 12". We compose the node tree once, construct the data from
it, and walk both in step to record each key path's line and raw scalar text.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from speedrunner.errors import ConfigError, MissingFileError

KeyPath = tuple[str, ...]

# Unquoted words YAML 1.1 (PyYAML) turns into booleans behind the user's back.
YAML_BOOL_WORDS = {"yes", "no", "on", "off", "y", "n", "true", "false"}


@dataclass(frozen=True)
class ScalarSource:
    line: int
    raw: str
    plain: bool
    """True when the scalar was unquoted (so YAML may have re-typed it)."""


@dataclass
class YamlSource:
    """A parsed config file: its exact bytes, its data, and where each key sits."""

    path: Path
    raw: bytes
    data: dict[str, Any]
    lines: dict[KeyPath, int] = field(default_factory=dict)
    scalars: dict[KeyPath, ScalarSource] = field(default_factory=dict)


def read_yaml_source(path: str | Path) -> YamlSource:
    path = Path(path)
    if not path.is_file():
        hint = _nearby_hint(path)
        what = "is a directory, not a file" if path.is_dir() else "does not exist"
        raise MissingFileError(f"config file {path} {what}{hint}", source=str(path))
    raw = path.read_bytes()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ConfigError(f"not UTF-8 text: {e}", source=str(path)) from e
    return parse_yaml_text(text, path=path, raw=raw)


def parse_yaml_text(text: str, *, path: Path, raw: bytes | None = None) -> YamlSource:
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError as e:
        raise ConfigError(f"malformed YAML: {_yaml_error_text(e)}", source=str(path)) from e
    if node is None:
        raise ConfigError(
            "the file is empty; a config needs at least 'method' and 'benchmark'", source=str(path)
        )
    if not isinstance(node, yaml.MappingNode):
        raise ConfigError(
            f"line {node.start_mark.line + 1}: the top level must be a mapping of sections "
            "(run, method, model, inducer, benchmark, speedrun)",
            source=str(path),
        )
    try:
        data = yaml.SafeLoader(text).get_single_data()
    except yaml.YAMLError as e:  # pragma: no cover - compose already parsed it
        raise ConfigError(f"malformed YAML: {_yaml_error_text(e)}", source=str(path)) from e
    source = YamlSource(path=path, raw=raw if raw is not None else text.encode(), data=data)
    problems: list[str] = []
    _walk(node, (), source, problems)
    if problems:
        raise ConfigError(problems, source=str(path))
    return source


def _walk(node: yaml.Node, path: KeyPath, source: YamlSource, problems: list[str]) -> None:
    if isinstance(node, yaml.MappingNode):
        seen: dict[str, int] = {}
        for key_node, value_node in node.value:
            key = str(key_node.value)
            line = key_node.start_mark.line + 1
            if key in seen:
                dotted = ".".join((*path, key))
                problems.append(
                    f"line {line}: key '{dotted}' appears twice (first on line {seen[key]}); YAML "
                    "would silently keep the last"
                )
                continue
            seen[key] = line
            source.lines[(*path, key)] = line
            _walk(value_node, (*path, key), source, problems)
    elif isinstance(node, yaml.ScalarNode) and path:
        source.scalars[path] = ScalarSource(
            line=node.start_mark.line + 1, raw=str(node.value), plain=node.style is None
        )


def _yaml_error_text(e: yaml.YAMLError) -> str:
    mark = getattr(e, "problem_mark", None)
    problem = getattr(e, "problem", None) or str(e)
    if mark is not None:
        return f"line {mark.line + 1}, column {mark.column + 1}: {problem}"
    return problem


def _nearby_hint(path: Path) -> str:
    from speedrunner.core.names import suggest

    parent = path.parent if path.parent.is_dir() else None
    if parent is None:
        return ""
    hint = suggest(path.name, [p.name for p in parent.glob("*.yaml")])
    return f" in {parent}{hint}" if hint else ""
