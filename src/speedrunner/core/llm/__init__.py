"""One layer for every model call: providers, retries, cache/replay, usage and cost.

The runtime calls ``build_model(config, namespace=run_id, cache_path=..., calls_log_path=...)``
once per model and then ``model.complete(messages, purpose=..., call_id=...)`` from any
thread; ``model.totals()`` gives running tokens and money for progress display.
"""

from speedrunner.core.llm.accounting import CallRecord, LLMTotals
from speedrunner.core.llm.build import PROVIDERS, build_model, make_provider
from speedrunner.core.llm.client import ManagedModel, is_empty, is_truncated
from speedrunner.core.llm.prices import cost_usd, load_price_table, resolve_prices
from speedrunner.core.llm.retry import Backoff
from speedrunner.core.llm.types import Completion, Message, Model, Purpose, Usage

__all__ = [
    "PROVIDERS",
    "Backoff",
    "CallRecord",
    "Completion",
    "LLMTotals",
    "ManagedModel",
    "Message",
    "Model",
    "Purpose",
    "Usage",
    "build_model",
    "cost_usd",
    "is_empty",
    "is_truncated",
    "load_price_table",
    "make_provider",
    "resolve_prices",
]
