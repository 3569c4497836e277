"""Run real train entry points in subprocesses against the fake OpenAI-compatible server."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

from speedrunner.core.llm.provider_scripted import choose_action
from speedrunner.testing.fake_llm_server import FakeLLMServer, Reply

from . import prewarmed

REPO = Path(__file__).resolve().parents[2]
PRICES = "model.prices={input: 1.0, cached_input: 0.1, output: 2.0}"
GUIDE = "<guide>Fake guide: explore, then act on what you see.</guide>"
WALL_CLOCK = {"wall_time_s", "run_spent_usd", "max_cost_usd"}
"""Row fields that describe the process, not the result: time, and money spent so far (after a
kill it includes the worst case of the calls that were in flight) against a cap that may change
on ``--resume``."""


def body_key(body: dict) -> str:
    return hashlib.sha256(json.dumps(body.get("messages"), sort_keys=True).encode()).hexdigest()


def policy_reply(body: dict) -> Reply:
    """A deterministic 'LLM': the scripted provider's choice, sometimes an invalid answer."""
    turns = [(m["role"], m["content"]) for m in body["messages"]]
    if "strategy guide" in turns[0][1]:
        return Reply(text=GUIDE, prompt_tokens=500, completion_tokens=40)
    action = choose_action(turns, "fake")
    turn = sum(role == "assistant" for role, _ in turns)
    if action is None or turn % 4 == 1:  # every episode's second turn is an invalid answer
        return Reply(
            text="Thought: I am not sure.\nAction: fly away",
            prompt_tokens=100,
            cached_tokens=60,
            completion_tokens=12,
        )
    return Reply(
        text=f"Thought: try it.\nAction: {action}",
        prompt_tokens=100,
        cached_tokens=60,
        completion_tokens=12,
    )


class KillingPolicy:
    """Answers like ``policy_reply`` and SIGKILLs the client at the chosen request."""

    def __init__(self, kill_at: int | None = None, kill_on_guide: bool = False) -> None:
        self.kill_at, self.kill_on_guide = kill_at, kill_on_guide
        self.pid: int | None = None
        self.answered: list[str] = []
        self.after_kill: list[str] = []
        self.killed = False
        self.seen = 0
        self._lock = threading.Lock()

    def __call__(self, body: dict) -> Reply:
        with self._lock:
            self.seen += 1
            is_guide = "strategy guide" in body["messages"][0]["content"]
            if (
                not self.killed
                and self.pid is not None
                and (self.seen == self.kill_at or (self.kill_on_guide and is_guide))
            ):
                self.killed = True
                os.kill(self.pid, signal.SIGKILL)
                return Reply.error(500)
            reply = policy_reply(body)
            (self.after_kill if self.killed else self.answered).append(body_key(body))
            return reply


def fake_model_cmd(
    module: str, config: Path, run_dir: Path, url: str, *overrides: str, quick_test: bool = False
) -> list[str]:
    """``python -m module`` on ``config`` against the fake LLM server at ``url``; ``overrides``
    are ``key=value`` settings, each passed with ``--set``."""
    sets = ("model.provider=vllm", f"model.base_url={url}", "model.name=fake-model", *overrides)
    return [
        sys.executable,
        "-m",
        module,
        "--config_file",
        str(config),
        *(["--quick_test"] if quick_test else []),
        "--run_dir",
        str(run_dir),
        *[arg for setting in sets for arg in ("--set", setting)],
    ]


BABYAI_TRAIN = "speedrunner.benchmarks.babyai.train"
BABYAI_TWO_BATCHES = (
    "run.sleep_every=2",
    "run.eval_every=2",
    "run.eval_episodes=0",
    "run.parallel_episodes=2",
    "benchmark.max_llm_calls=60",
)
"""The BabyAI method tests' schedule besides ``run.rollouts``: a sleep every two rollouts, two
episodes at once, no evaluation."""


def train_cmd(benchmark: str, config: str, run_dir: Path, url: str, *extra: str) -> list[str]:
    module = f"speedrunner.benchmarks.{benchmark}.train"
    path = REPO / "configs" / benchmark / config
    return [*fake_model_cmd(module, path, run_dir, url, PRICES, quick_test=True), *extra]


def run(
    cmd: list[str], timeout: float = 400, *, env: dict[str, str] | None = None, cwd: Path = REPO
) -> subprocess.CompletedProcess:
    """``cmd`` to its end, output captured; a train entry point runs in a pre-imported interpreter
    (``prewarmed``: the same entry point in a process of its own, without the start-up)."""
    return prewarmed.run(cmd, cwd=cwd, env=clean_env() if env is None else env, timeout=timeout)


def clean_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env["PYTHONUNBUFFERED"] = "1"
    return env


def rows(path: Path) -> list[dict]:
    out = []
    for line in path.read_text().splitlines():
        row = json.loads(line)
        out.append({k: v for k, v in row.items() if k not in WALL_CLOCK})
    return out


def start_server(callback) -> FakeLLMServer:
    return FakeLLMServer(callback=callback, model_name="fake-model").start()
