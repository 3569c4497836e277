"""One layer for every model call: providers, retries, cache/replay, usage and cost."""
