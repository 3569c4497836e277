"""MkDocs hook: generates the reference pages from the code at build time.

Why generated: a hand-written key table or flag list drifts from the pydantic schema and the
argparse parsers the moment someone adds a field; built from them, the site cannot lie, and
``mkdocs build --strict`` (run by ``tests/docs/test_docs_site.py``) fails if generating breaks.

- ``reference/config-keys.md``: every key of a run config, from ``core/config/schema.py`` and
  the config classes every registered method and benchmark names (``catalog.py``), with type,
  default and the field's docstring.
- ``reference/cli.md``: the ``--help`` of ``speedrunner`` and all its subcommands, and of every
  train entry point, exactly as argparse prints it.
"""

from __future__ import annotations

import argparse
import os
import types
import typing
from typing import Any

from pydantic import BaseModel
from pydantic_core import PydanticUndefined

CONFIG_PAGE = "reference/config-keys.md"
CLI_PAGE = "reference/cli.md"
TRAIN_ENTRY_POINTS = {
    "speedrunner.benchmarks.babyai.train": "babyai",
    "speedrunner.benchmarks.crafter.train": "crafter",
    "speedrunner.benchmarks.crafter.train_voyager": "crafter",
    "speedrunner.benchmarks.scienceworld.train": "scienceworld",
}


# --------------------------------------------------------------------------- config keys
def _type_name(annotation: Any) -> str:
    origin = typing.get_origin(annotation)
    if origin is typing.Literal:
        return " \\| ".join(repr(a).replace("'", "") for a in typing.get_args(annotation))
    if origin in (typing.Union, types.UnionType):
        return " \\| ".join(_type_name(a) for a in typing.get_args(annotation))
    if origin is not None:
        args = ", ".join(_type_name(a) for a in typing.get_args(annotation))
        return f"{getattr(origin, '__name__', str(origin))}[{args}]"
    if annotation is type(None):
        return "null"
    if isinstance(annotation, type):
        return annotation.__name__
    return str(annotation).replace("typing.", "")


def _section_model(annotation: Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in typing.get_args(annotation):
        found = _section_model(arg)
        if found is not None:
            return found
    return None


def _default(field: Any) -> str:
    if field.default is PydanticUndefined and field.default_factory is None:
        return "**required**"
    value = field.default_factory() if field.default_factory is not None else field.default
    if isinstance(value, BaseModel):
        return "(section)"
    if value is None:
        return "null"
    if isinstance(value, bool):
        return str(value).lower()
    return f"`{value!r}`".replace("'", "") if not isinstance(value, str) else f"`{value}`"


def _cell(text: str | None) -> str:
    text = " ".join((text or "").split())
    return text.replace("|", "\\|").replace("``", "`")


def _rows(model: type[BaseModel], prefix: str) -> list[str]:
    rows: list[str] = []
    nested: list[tuple[str, type[BaseModel]]] = []
    for name, field in model.model_fields.items():
        key = f"{prefix}.{name}" if prefix else name
        sub = _section_model(field.annotation)
        if sub is not None and sub.__name__ not in ("MethodConfig", "BenchmarkConfig"):
            nested.append((key, sub))
            rows.append(f"| `{key}` | section | {_default(field)} | {_cell(field.description)} |")
            continue
        rows.append(f"| `{key}` | {_type_name(field.annotation)} | {_default(field)} | {_cell(field.description)} |")
    for key, sub in nested:
        rows += _rows(sub, key)
    return rows


def _table(model: type[BaseModel], prefix: str, skip: frozenset[str] = frozenset()) -> str:
    rows = [r for r in _rows(model, prefix) if r.split("`")[1] not in skip]
    if not rows:
        return "No keys of its own.\n"
    return "| key | type | default | meaning |\n|---|---|---|---|\n" + "\n".join(rows) + "\n"


def _about(cls: type[BaseModel]) -> str:
    """What the class is for: the ``name`` field's docstring where it says it, else the class's."""
    name = cls.model_fields["name"].description or ""
    if len(name.split()) > 2:  # more than "Benchmark name."
        return _cell(name)
    import sys

    own = cls.__dict__.get("__doc__") or sys.modules[cls.__module__].__doc__ or ""
    return _cell(own.split("\n\n")[0]) + f" (`{cls.__module__}.{cls.__name__}`)"


def config_reference() -> str:
    """The config-key page, from the schema and every registered method and benchmark."""
    import speedrunner.catalog  # noqa: F401  (registers every method and benchmark)
    from speedrunner.core.config.schema import (
        BenchmarkConfig,
        LoggingSection,
        MethodConfig,
        ModelConfig,
        RunSection,
        SpeedrunSection,
    )
    from speedrunner.core.registry import load_entry_point
    from speedrunner.core.specs import BENCHMARKS, METHODS

    out = ["# Config keys", "",
           "Generated at build time from `src/speedrunner/core/config/schema.py` and the config "
           "classes of every registered method and benchmark (`src/speedrunner/catalog.py`); the "
           "meanings are the fields' docstrings, which `speedrunner validate-config` and error "
           "messages quote too. How the layers combine (defaults, file, `--quick_test`, `--set`): "
           "[Run configuration](../configuration.md).", ""]
    sections = [("run", RunSection, "The schedule, seed and where runs go."),
                ("model", ModelConfig, "The actor's model."),
                ("speedrun", SpeedrunSection, "When a run counts as having reached its target "
                 "([leaderboard](../leaderboard.md))."),
                ("logging", LoggingSection, "Optional experiment tracking ([W&B](../wandb.md)).")]
    for name, model, what in sections:
        out += [f"## `{name}`", "", what, "", _table(model, name)]
        if name == "model":
            out += ["## `inducer`", "", "The sleep-phase model, with the keys of `model` (`inducer.name`, "
                    "`inducer.sampling.temperature`, ...). Unset, it is the actor's model; set, its keys "
                    "deep-merge over the actor's `model` section, and an inducer on another provider "
                    "inherits only sampling and retry settings.", ""]
    base_method = frozenset(f"method.{k}" for k in MethodConfig.model_fields if k != "name")
    out += ["## `method`", "", "`method.name` picks the method; each method adds its own keys.", "",
            _table(MethodConfig, "method")]
    for name in METHODS.names():
        cls = load_entry_point(METHODS.get(name).config)
        out += [f"### `method.name: {name}`", "", _about(cls), "",
                _table(cls, "method", frozenset({"method.name"}) | base_method)]
    out += ["## `benchmark`", "", "`benchmark.name` picks the benchmark; every benchmark has these keys, with its own defaults below.", "",
            _table(BenchmarkConfig, "benchmark")]
    for name in BENCHMARKS.names():
        cls = load_entry_point(BENCHMARKS.get(name).config)
        out += [f"### `benchmark.name: {name}`", "", _about(cls), "",
                _table(cls, "benchmark", frozenset({"benchmark.name"}))]
    return "\n".join(out) + "\n"


# --------------------------------------------------------------------------------- CLI
def _subparsers(parser: argparse.ArgumentParser) -> list[tuple[str, argparse.ArgumentParser]]:
    found: list[tuple[str, argparse.ArgumentParser]] = []
    for action in parser._actions:  # argparse has no public walk over subcommands
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found.append((name, sub))
                found += [(f"{name} {n}", p) for n, p in _subparsers(sub)]
    return found


def _help_block(title: str, parser: argparse.ArgumentParser) -> list[str]:
    return [f"## `{title}`", "", "```text", parser.format_help().rstrip(), "```", ""]


def cli_commands() -> list[tuple[str, argparse.ArgumentParser]]:
    """Every command a user can type, with its parser: ``speedrunner ...`` and the train modules."""
    from speedrunner.cli import _parser
    from speedrunner.train_cli import build_parser

    root = _parser()
    commands = [("speedrunner", root)] + [(f"speedrunner {n}", p) for n, p in _subparsers(root)]
    commands += [(f"python -m {m}", build_parser(f"python -m {m}", b)) for m, b in TRAIN_ENTRY_POINTS.items()]
    return commands


def cli_reference() -> str:
    """The CLI page: each command's ``--help`` at 100 columns."""
    old = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = "100"
    try:
        out = ["# Command line", "",
               "Generated at build time from the argparse parsers (`src/speedrunner/cli.py`, "
               "`src/speedrunner/train_cli.py`): each block is that command's `--help`.", ""]
        for title, parser in cli_commands():
            out += _help_block(title, parser)
        return "\n".join(out)
    finally:
        if old is None:
            os.environ.pop("COLUMNS", None)
        else:
            os.environ["COLUMNS"] = old


# ------------------------------------------------------------------------------- hook
def on_files(files: Any, config: Any) -> Any:
    from mkdocs.structure.files import File

    for uri, make in ((CONFIG_PAGE, config_reference), (CLI_PAGE, cli_reference)):
        files.append(File.generated(config, uri, content=make()))
    return files
