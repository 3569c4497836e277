"""The tally method's bounds for ``speedrunner estimate``: no LLM call in its sleep, one line
a batch."""

from speedrunner.core.config.schema import RunConfig
from speedrunner.core.estimate.model import MethodBounds

LINE_BYTES = 80
"""One tally line, at most."""


def tally(config: RunConfig, batches: int) -> MethodBounds:
    return MethodBounds(
        batches * LINE_BYTES, notes=[f"tally: at most {LINE_BYTES} bytes of notes a batch"]
    )
