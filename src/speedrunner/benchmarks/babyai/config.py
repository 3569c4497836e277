"""The ``benchmark`` section for BabyAI-Text (BALROG's MixedTrainLocal tasks)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from speedrunner.benchmarks.babyai.kinds import TASK_KINDS, TASK_SETS
from speedrunner.core.config.schema import BenchmarkConfig

__all__ = ["TASK_KINDS", "TASK_SETS", "BabyAIConfig"]


class BabyAIConfig(BenchmarkConfig):
    OPERATIONAL = frozenset(
        {
            "server_url",
            "autostart_server",
            "request_timeout_s",
            "server_start_timeout_s",
            "max_server_restarts",
        }
    )

    name: Literal["babyai"] = "babyai"
    """Benchmark name."""
    task_set: Literal["seq", "mixed", "goto", "pickup", "open", "putnext", "pick_up_seq_go_to"] = (
        "seq"
    )
    """Task kinds: seq = pick_up_seq_go_to (the paper's), mixed = all five, or one kind."""
    max_llm_calls: int | None = Field(30, ge=1)
    """Per-episode budget of LLM calls (the paper: 30)."""
    server_url: str = "http://127.0.0.1:8080"
    """BabyAI-Text server (python BALROG/deploy_env.py). If it is local and nothing answers,
    the run starts a private server on a free port."""
    autostart_server: bool = True
    """Start a server on the local URL when nothing answers there (and stop it on exit)."""
    request_timeout_s: float = Field(30.0, gt=0)
    """HTTP timeout for one server request."""
    server_start_timeout_s: float = Field(60.0, gt=0)
    """How long to wait for an autostarted server to answer /health before giving up."""
    max_server_restarts: int = Field(3, ge=0)
    """Times the run restarts its own (autostarted) server if it dies,
    replaying the affected episodes; a server you started is never restarted."""

    @property
    def task_kinds(self) -> tuple[str, ...]:
        return TASK_SETS[self.task_set]
