"""A run whose cluster-wide LLM limiter is lost (its node died, the sweep ended it) keeps its
limit in-process instead of failing every call, and says so once."""

from __future__ import annotations

import threading
import time

import pytest

pytest.importorskip("ray", reason='Ray is an optional extra: pip install -e ".[ray]"')

from speedrunner.core.llm import ray_limits  # noqa: E402


def test_a_lost_limiter_leaves_the_limit_held_per_process(monkeypatch, capsys):
    def lost() -> None:
        raise ValueError("Failed to look up actor with name 'speedrunner-llm-limits-1'")

    monkeypatch.setattr(ray_limits, "_limiter", lost)
    limit = ray_limits.RayLimit("vllm http://127.0.0.1:5012/v1", 2, lease_s=60.0)
    lock = threading.Lock()
    state = {"in": 0, "peak": 0, "done": 0}

    def call() -> None:
        for _ in range(3):
            with limit:
                with lock:
                    state["in"] += 1
                    state["peak"] = max(state["peak"], state["in"])
                time.sleep(0.02)
                with lock:
                    state["in"] -= 1
                    state["done"] += 1

    threads = [threading.Thread(target=call) for _ in range(6)]
    [t.start() for t in threads]
    [t.join(timeout=30) for t in threads]
    assert state["done"] == 18  # every call went through
    assert state["peak"] == 2  # and the limit still held, within this process
    warnings = [line for line in capsys.readouterr().err.splitlines() if "unreachable" in line]
    assert len(warnings) == 1 and "2 call(s) in flight by itself" in warnings[0]
