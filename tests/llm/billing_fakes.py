"""Providers that bill in ways a spending cap must survive, as fake-server callbacks.

Each keeps the provider's own bill (what it would charge), counted when it takes a request:
what a cap promises is checked against that, not against the run's own figures.
"""

from __future__ import annotations

import json
import threading
from typing import Any

from speedrunner.core.config.schema import Prices
from speedrunner.testing.fake_llm_server import Reply

PRICES = Prices(input=1.0, cached_input=0.1, output=2.0)
"""USD per 1M tokens, as the runs under test are configured."""


class Biller:
    """Bills each request: its prompt at 4 bytes a token, and the output it reports."""

    def __init__(self) -> None:
        self.billed = 0.0
        self.requests = 0
        self.charges: list[float] = []
        self._lock = threading.Lock()

    def bill(self, body: dict[str, Any], completion_tokens: int) -> int:
        prompt = len(json.dumps(body["messages"]).encode()) // 4
        charge = (prompt * PRICES.input + completion_tokens * PRICES.output) / 1e6
        with self._lock:
            self.billed += charge
            self.requests += 1
            self.charges.append(charge)
        return prompt


class BilledTimeouts(Biller):
    """A long generation: every other request is run and billed (all of ``max_tokens``), but
    answered after the client's timeout; the others are answered in time."""

    def __init__(self, late_s: float) -> None:
        super().__init__()
        self.late_s = late_s

    def __call__(self, body: dict[str, Any]) -> Reply:
        out = int(body.get("max_tokens") or body.get("max_completion_tokens") or 16)
        prompt = self.bill(body, out)
        late = self.requests % 2 == 1
        return Reply(
            text="a long answer",
            prompt_tokens=prompt,
            completion_tokens=out,
            finish_reason="length",
            delay_s=self.late_s if late else 0.0,
        )


class OverBilling(Biller):
    """Reports (and bills) three times ``max_tokens`` of output: thinking tokens billed
    outside the visible limit."""

    def __call__(self, body: dict[str, Any]) -> Reply:
        out = 3 * int(body.get("max_tokens") or body.get("max_completion_tokens") or 16)
        prompt = self.bill(body, out)
        return Reply(text="ok", prompt_tokens=prompt, completion_tokens=out)
