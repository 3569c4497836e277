"""A capped run against providers that bill what the run cannot see: attempts answered after
the client's timeout, and output past ``max_tokens``. The provider's own bill stays within
the cap (plus, for the over-biller, at most one call's overrun, as docs/spending.md states),
and summary.json says what may have been billed unseen or was billed past the limit.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from speedrunner.core.llm.spend_cap import CAP_EXIT_CODE
from speedrunner.testing.fake_llm_server import FakeLLMServer, Reply

from .harness import policy_reply, run, train_cmd

pytestmark = pytest.mark.slow

PRICE_IN, PRICE_OUT = 1.0, 2.0  # harness.PRICES (cached input is billed as input here: the most)
SMALL = (
    "--set",
    "run.parallel_episodes=1",
    "--set",
    "model.sampling.max_tokens=512",
    "--set",
    "model.max_attempts=3",
    "--set",
    "model.timeout_s=0.5",
)
CAP = 0.02


class Provider:
    """The harness's deterministic 'LLM', billing every request it takes: ``late`` answers
    every other request after the client's timeout (a long generation: all of max_tokens);
    ``over`` reports and bills three times max_tokens of output."""

    def __init__(self, mode: str) -> None:
        self.mode, self.billed, self.requests, self.charges = mode, 0.0, 0, []
        self._lock = threading.Lock()

    def __call__(self, body: dict) -> Reply:
        reply = policy_reply(body)
        limit = int(body.get("max_tokens") or body.get("max_completion_tokens"))
        prompt = len(json.dumps(body["messages"]).encode()) // 4
        with self._lock:
            self.requests += 1
            late = self.mode == "late" and self.requests % 2 == 1
        out = limit if late else 3 * limit if self.mode == "over" else reply.completion_tokens
        reply.prompt_tokens, reply.cached_tokens, reply.completion_tokens = prompt, None, out
        reply.delay_s = 1.5 if late else 0.0
        charge = (prompt * PRICE_IN + out * PRICE_OUT) / 1e6
        with self._lock:
            self.billed += charge
            self.charges.append(charge)
        return reply


def _capped_run(tmp_path: Path, mode: str):
    provider = Provider(mode)
    with FakeLLMServer(callback=provider, model_name="fake-model") as server:
        proc = run(
            train_cmd(
                "babyai",
                "react-gpt-seq.yaml",
                tmp_path / "run",
                server.base_url,
                *SMALL,
                "--set",
                f"run.max_cost_usd={CAP}",
            )
        )
        billed = provider.billed
    return proc, provider, billed, json.loads((tmp_path / "run" / "summary.json").read_text())


def test_attempts_answered_too_late_count_and_the_bill_stays_under_the_cap(tmp_path: Path) -> None:
    proc, provider, billed, summary = _capped_run(tmp_path, "late")
    assert proc.returncode == CAP_EXIT_CODE, proc.stderr[-3000:]
    assert provider.requests >= 4 and billed <= CAP + 1e-9
    assert summary["unknown_spend_usd"] > 0  # the late attempts: may have been billed, not "spent"
    assert billed <= summary["spent_usd"] + summary["unknown_spend_usd"] + 1e-9


def test_a_provider_billing_past_max_tokens_is_stopped_at_the_cap_and_flagged(
    tmp_path: Path,
) -> None:
    proc, provider, billed, summary = _capped_run(tmp_path, "over")
    assert proc.returncode == CAP_EXIT_CODE, proc.stderr[-3000:]
    assert (
        "more than its worst case" in proc.stderr
        and "more than was reserved" in summary["status_reason"]
    )
    assert summary["spending"]["over_reservation_usd"] > 0
    overrun = max(provider.charges) * 2 / 3  # one call's output beyond max_tokens, at most
    assert billed <= CAP + overrun + 1e-9
