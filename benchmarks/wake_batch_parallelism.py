"""Wall time of a BabyAI wake batch (10 episodes) and an evaluation (30 episodes) as a
multiple of one episode's, against a fake LLM server that answers after 200 ms.

    python benchmarks/wake_batch_parallelism.py [--calls 10] [--latency 0.2]

Side by side in one process (the fake server runs in its own, as a real endpoint would), each on a
fresh run directory (so no answer comes from the response cache), through the runtime's own
``Runner`` (thread pool, env pool, per-endpoint concurrency limit, trajectories written to disk)
with ReAct and one BabyAI server that is already up: one episode alone, then the batch and the
evaluation with the shipped settings (``run.parallel_episodes: all``, ``model.max_concurrency`` 32).
Every episode plays its whole LLM-call budget (the fake actor never wins), so 1.0x is perfect
overlap. Targets: batch <= 1.3x, evaluation <= 2x.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from fake_llm_process import FakeLLMProcess
from perf_common import CONFIGS, Row, fake_model_overrides, fmt, table

from speedrunner.benchmarks.babyai.benchmark import ServerProcess, free_port
from speedrunner.catalog import config_loader
from speedrunner.core.config.schema import RunConfig
from speedrunner.core.llm.build import build_model
from speedrunner.core.method import MethodContext
from speedrunner.core.registry import load_entry_point
from speedrunner.core.runtime.loop import Runner
from speedrunner.core.specs import BENCHMARKS, METHODS

CONFIG = CONFIGS / "babyai" / "react-gpt-seq.yaml"
TARGETS = {10: 1.3, 30: 2.0}


def load_config(overrides: list[str]) -> RunConfig:
    return config_loader().load(CONFIG, overrides=overrides, expect_benchmark="babyai").config


def timed_play(config: RunConfig, run_dir: Path, episodes: int, evaluation: bool) -> float:
    """Seconds to play ``episodes`` episodes as one wake batch (or evaluation) of a fresh run."""
    actor = build_model(
        config.model,
        namespace="perf",
        cache_path=run_dir / "llm_cache.sqlite",
        calls_log_path=run_dir / "llm_calls.jsonl",
    )
    benchmark = load_entry_point(BENCHMARKS.get("babyai").factory)(
        config.benchmark, rollouts=max(episodes, config.run.sleep_every), eval_episodes=episodes
    )
    try:
        method = load_entry_point(METHODS.get(config.method.name).factory)(
            config.method, MethodContext(run_dir=run_dir, inducer=actor, benchmark="babyai")
        )
        runner = Runner(
            config,
            run_dir,
            benchmark=benchmark,
            method=method,
            actor=actor,
            run_id="perf",
            scripted=False,
        )
        specs = (
            benchmark.eval_episodes(config.run.eval_seed)
            if evaluation
            else [benchmark.train_episode(config.run.seed, i) for i in range(episodes)]
        )
        started = time.perf_counter()
        trajectories = runner._play(specs, method.knowledge(), 0 if evaluation else None, None)
        elapsed = time.perf_counter() - started
        runner.pool.close()
    finally:
        benchmark.close()
    calls = {t.llm_calls for t in trajectories}
    if len(trajectories) != episodes or calls != {config.benchmark.max_llm_calls}:
        raise RuntimeError(
            f"expected {episodes} episodes of {config.benchmark.max_llm_calls} calls, got "
            f"{len(trajectories)} with {sorted(calls)} calls"
        )
    return elapsed


def rows(
    calls: int = 10, latency_s: float = 0.2, batch: int = 10, evaluation: int = 30
) -> list[Row]:
    port = free_port()
    server = ServerProcess("127.0.0.1", port)
    server.start(timeout_s=60)
    try:
        with (
            FakeLLMProcess("babyai", latency_s) as llm,
            tempfile.TemporaryDirectory(prefix="perf-wake-") as tmp,
        ):
            base = [
                *fake_model_overrides(llm.base_url),
                f"benchmark.server_url={server.url}",
                f"benchmark.max_llm_calls={calls}",
                "run.eval_every=10",
                "run.sleep_every=10",
                "run.rollouts=10",
            ]
            runs = iter(range(100))

            def play(n: int, evaluation: bool, extra: list[str]) -> float:
                config = load_config(
                    [*base, f"run.eval_episodes={n if evaluation else 30}", *extra]
                )
                run_dir = Path(tmp) / f"run{next(runs)}"
                run_dir.mkdir()
                return timed_play(config, run_dir, n, evaluation)

            play(1, False, [])  # warm-up: imports, connections, the server's first levels
            one = play(1, False, [])
            shipped = load_config(base)
            out = []
            for n, is_eval, what in (
                (batch, False, "wake batch"),
                (evaluation, True, "evaluation"),
            ):
                target = TARGETS[10 if not is_eval else 30]
                label = (
                    f"shipped parallel_episodes {shipped.run.parallel_episodes}, "
                    f"max_concurrency {shipped.model.max_concurrency}"
                )
                wall = play(n, is_eval, [])
                parallel = shipped.run.workers(n)
                out.append(
                    Row(
                        f"2. {what} of {n} / one episode ({label})",
                        wall / one,
                        "x",
                        target,
                        detail=f"{fmt(wall)} s vs one episode {fmt(one)} s; {calls} calls of "
                        f"{fmt(latency_s * 1e3)} ms per episode; "
                        f"{-(-n // parallel)} round(s) of <= {parallel} episodes",
                    )
                )
            return out
    finally:
        server.stop()


def main() -> None:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.splitlines()[0])
    parser.add_argument(
        "--calls", type=int, default=10, help="LLM calls per episode (BabyAI's budget is 30)"
    )
    parser.add_argument(
        "--latency", type=float, default=0.2, help="fake server latency per call, seconds"
    )
    args = parser.parse_args()
    print(table(rows(args.calls, args.latency)))


if __name__ == "__main__":
    main()
