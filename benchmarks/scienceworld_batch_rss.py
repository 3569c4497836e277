"""Peak memory of a 10-episode parallel ScienceWorld wake batch (10 JVMs at once).

    python benchmarks/scienceworld_batch_rss.py [--episodes 10] [--calls 5]

Runs the real entry point (``python -m speedrunner.benchmarks.scienceworld.train``, ReAct,
t4, the shipped capped JVM heaps) as a subprocess with ``run.parallel_episodes`` equal to
the batch size against the fake LLM server (which answers ``look around`` / ``inventory``),
and samples the summed RSS of the run's whole process tree (Python plus every JVM) from
/proc every 0.1 s. Shared pages count once per process, so this is an upper bound.
Target: <= 8 GB.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from perf_common import (
    CONFIGS,
    REPO,
    Row,
    clean_env,
    fake_actor,
    fake_model_overrides,
    fmt,
    table,
    tree_rss,
)

from speedrunner.benchmarks.scienceworld.config import ScienceWorldConfig
from speedrunner.testing.fake_llm_server import FakeLLMServer

TARGET_GB = 8.0


def peak_rss(episodes: int, calls: int, run_dir: Path, base_url: str) -> tuple[int, int, float]:
    """Peak summed RSS (bytes), the most processes seen at once, and the run's wall time."""
    cmd = [
        sys.executable,
        "-m",
        "speedrunner.benchmarks.scienceworld.train",
        "--config_file",
        str(CONFIGS / "scienceworld" / "react-gpt-t4.yaml"),
        "--run_dir",
        str(run_dir),
        *[a for o in fake_model_overrides(base_url) for a in ("--set", o)],
        "--set",
        f"run.rollouts={episodes}",
        "--set",
        f"run.sleep_every={episodes}",
        "--set",
        f"run.eval_every={episodes}",
        "--set",
        "run.eval_episodes=0",
        "--set",
        f"run.parallel_episodes={episodes}",
        "--set",
        f"benchmark.max_llm_calls={calls}",
        "--set",
        f"model.max_concurrency={episodes}",
    ]
    started = time.monotonic()
    peak = most = 0
    with tempfile.TemporaryFile() as log:
        child = subprocess.Popen(
            cmd, stdout=log, stderr=subprocess.STDOUT, cwd=REPO, env=clean_env()
        )
        try:
            while child.poll() is None:
                rss, n = tree_rss(child.pid)
                peak, most = max(peak, rss), max(most, n)
                time.sleep(0.1)
        finally:
            if child.poll() is None:
                child.kill()
                child.wait()
        if child.returncode != 0:
            log.seek(0)
            raise RuntimeError(
                f"the ScienceWorld run failed ({child.returncode}):\n"
                f"{log.read().decode(errors='replace')[-2000:]}"
            )
    return peak, most, time.monotonic() - started


def rows(episodes: int = 10, calls: int = 5) -> list[Row]:
    with (
        FakeLLMServer(callback=fake_actor("scienceworld")) as llm,
        tempfile.TemporaryDirectory(prefix="perf-sw-") as tmp,
    ):
        peak, most, wall = peak_rss(episodes, calls, Path(tmp) / "run", llm.base_url)
    heap = ScienceWorldConfig().jvm_options
    return [
        Row(
            f"4. peak RSS, {episodes}-episode parallel ScienceWorld batch",
            peak / 1e9,
            "GB",
            TARGET_GB,
            detail=f"process tree, up to {most} processes; JVM options {heap!r}; {calls} calls per "
            f"episode; run took {fmt(wall)} s",
        )
    ]


def main() -> None:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=10)
    parser.add_argument("--calls", type=int, default=5, help="LLM calls per episode")
    args = parser.parse_args()
    print(table(rows(args.episodes, args.calls)))


if __name__ == "__main__":
    main()
