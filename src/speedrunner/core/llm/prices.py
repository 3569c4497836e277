"""Model prices as package data, and the one cost formula.

Prices are data (``speedrunner/data/prices.yaml``), loaded through a typed model so a typo
in the table fails loudly at load time instead of silently costing zero. An unknown price
gives ``None``: a cost we cannot compute must never look like a free call.
"""

from __future__ import annotations

from functools import lru_cache
from importlib import resources

import yaml
from pydantic import BaseModel, ConfigDict, ValidationError

from speedrunner.core.config.schema import ModelConfig, Prices
from speedrunner.core.llm.types import Usage
from speedrunner.errors import ConfigError

__all__ = ["PriceTable", "cost_usd", "load_price_table", "resolve_prices"]


class PriceTable(BaseModel):
    """The built-in price table: model name -> USD per 1M tokens."""

    model_config = ConfigDict(extra="forbid")

    models: dict[str, Prices]
    """Prices by model name exactly as the provider spells it."""


@lru_cache(maxsize=1)
def load_price_table() -> PriceTable:
    """Load and validate ``data/prices.yaml`` once per process."""
    text = resources.files("speedrunner").joinpath("data", "prices.yaml").read_text("utf-8")
    try:
        return PriceTable.model_validate(yaml.safe_load(text))
    except ValidationError as e:
        raise ConfigError(str(e), source="speedrunner/data/prices.yaml") from e


def resolve_prices(config: ModelConfig) -> Prices | None:
    """Prices for a model: ``config.prices`` wins, else the table, else None (unknown)."""
    if config.prices is not None:
        return config.prices
    return load_price_table().models.get(config.name)


def cost_usd(usage: Usage, prices: Prices | None) -> float | None:
    """p_in*uncached + p_cached*cached + p_out*output (output already includes reasoning)."""
    if prices is None:
        return None
    return (
        prices.input * usage.input_uncached
        + prices.cached_input * usage.input_cached
        + prices.output * usage.output
    ) / 1_000_000
