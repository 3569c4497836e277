"""Models' context windows as package data, for the forecast's worst case.

A call whose input outgrows its model's window is refused by the provider, so no paid call
holds more; the table (``speedrunner/data/context_windows.yaml``) is loaded through a typed
model so a typo fails at load time, and ``model.context_tokens`` covers models it lacks.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from speedrunner.core.config.schema import ModelConfig
from speedrunner.errors import ConfigError

__all__ = [
    "ContextBound",
    "ContextWindow",
    "ContextWindowTable",
    "context_bound",
    "load_context_windows",
]

TABLE_FILE = "speedrunner/data/context_windows.yaml"


class ContextWindow(BaseModel):
    """One model's window and where the figure comes from."""

    model_config = ConfigDict(extra="forbid", strict=True)

    tokens: int = Field(gt=0)
    """The most tokens one request may hold (input and output together)."""
    source: str = Field(min_length=1)
    """Where the figure comes from (the provider's model page or model card)."""


class ContextWindowTable(BaseModel):
    """The built-in table: model name (as the provider spells it) -> context window."""

    model_config = ConfigDict(extra="forbid", strict=True)

    models: dict[str, ContextWindow]


@dataclass(frozen=True)
class ContextBound:
    """The window that bounds a model's calls, and who said so."""

    model: str
    tokens: int
    origin: Literal["flag", "config", "table"]
    """``--context-tokens``, ``model.context_tokens``, or the built-in table."""
    source: str = ""
    """The table's source for its figure (empty for the other origins)."""


@lru_cache(maxsize=1)
def load_context_windows() -> ContextWindowTable:
    """Load and validate the table once per process."""
    text = (
        resources.files("speedrunner").joinpath("data", "context_windows.yaml").read_text("utf-8")
    )
    try:
        return ContextWindowTable.model_validate(yaml.safe_load(text))
    except ValidationError as e:
        raise ConfigError(str(e), source=TABLE_FILE) from e


def context_bound(model: ModelConfig, override: int | None = None) -> ContextBound | None:
    """The bound on one call's input: ``override`` (the command line) wins, then the config's
    ``context_tokens``, then the table; None when nothing knows the model's window."""
    if override is not None:
        return ContextBound(model.name, override, "flag")
    if model.context_tokens is not None:
        return ContextBound(model.name, model.context_tokens, "config")
    known = load_context_windows().models.get(model.name)
    return None if known is None else ContextBound(model.name, known.tokens, "table", known.source)
