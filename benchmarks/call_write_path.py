"""What our layer costs per paid call, before and after the single write path (issue #33).

Before: the answer, a copy of its log row (``call_log``) and the end of its ``pending`` row in
one SQLite transaction, then the row appended to ``llm_calls.jsonl`` (fsynced). After: the
row appended and fsynced first, then the answer and the end of ``pending`` in one
transaction; no copy of the row in SQLite.

Each tree runs ``--calls`` paid calls through ``build_model`` in a fresh process, with a
provider that answers at once without building a request body, so what is timed is our layer
alone (request hash, cache lookup, write-ahead row, log line, commit). The trees alternate
``--repeats`` times; printed: the median ms per call of each and their ratio. ``--dir``
chooses where the run directories go: tmpfs (default) leaves out the disk's fsync latency,
which both trees pay once per paid call; a directory on disk puts it back.

    python benchmarks/call_write_path.py [--before 53b5e96] [--calls 5000] [--repeats 5]
        [--dir /dev/shm]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent


def worker(run_dir: Path, calls: int) -> None:
    os.environ.setdefault("OPENAI_API_KEY", "sk-benchmark")
    from speedrunner.core.config.schema import ModelConfig
    from speedrunner.core.llm import build as build_module
    from speedrunner.core.llm.provider import ProviderResult
    from speedrunner.core.llm.provider_openai import OpenAIChatProvider
    from speedrunner.core.llm.types import Message, Usage

    class Instant(OpenAIChatProvider):
        def call(self, request):  # no body, no socket: an answer at once
            return ProviderResult(
                text="Thought: move.\nAction: Move North",
                reasoning=None,
                usage=Usage(input_uncached=300, output=12),
                finish_reason="stop",
            )

    build_module.make_provider = lambda config: Instant(config)
    model = build_module.build_model(
        ModelConfig(provider="openai", name="gpt-5.4-mini"),
        namespace="write-path",
        cache_path=run_dir / "llm_cache.sqlite",
        calls_log_path=run_dir / "llm_calls.jsonl",
    )
    system = Message("system", "You are an agent playing Crafter. " * 20)
    for i in range(200):  # warm-up: imports, the SQLite file's first pages
        model.complete([system, Message("user", f"warm {i}")], purpose="actor", call_id=f"warm/{i}")
    t = time.perf_counter()
    for i in range(calls):
        model.complete(
            [system, Message("user", f"You see grass. Step {i}.")],
            purpose="actor",
            call_id=f"ep/{i}",
        )
    print(json.dumps({"ms_per_call": (time.perf_counter() - t) / calls * 1e3}), flush=True)
    model.close()


def run_tree(tree: Path, run_dir: Path, calls: int) -> float:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env["PYTHONPATH"] = str(tree / "src") + os.pathsep + str(HERE)
    proc = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), "--worker", str(run_dir), str(calls)],
        capture_output=True,
        text=True,
        env=env,
        timeout=1800,
        cwd=tree,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"worker on {tree} failed: {proc.stderr.strip()[-2000:]}")
    return float(json.loads(proc.stdout.splitlines()[-1])["ms_per_call"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--worker", nargs=2, help=argparse.SUPPRESS)
    parser.add_argument(
        "--before", default="53b5e96", help="the commit before the single write path"
    )
    parser.add_argument("--calls", type=int, default=5000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument(
        "--dir", type=Path, default=Path("/dev/shm") if Path("/dev/shm").is_dir() else None
    )
    args = parser.parse_args(argv)
    if args.worker:
        worker(Path(args.worker[0]), int(args.worker[1]))
        return 0
    from perf_common import unpack_commit

    times: dict[str, list[float]] = {"before": [], "after": []}
    with tempfile.TemporaryDirectory(prefix="write-path-", dir=args.dir) as tmp_name:
        tmp = Path(tmp_name)
        trees = {"before": unpack_commit(args.before, tmp), "after": REPO}
        for k in range(args.repeats):
            for side, tree in trees.items():
                run_dir = tmp / f"{side}-{k}"
                run_dir.mkdir()
                times[side].append(run_tree(tree, run_dir, args.calls))
    before, after = statistics.median(times["before"]), statistics.median(times["after"])
    for side, values in times.items():
        print(
            f"{side:6}: median {statistics.median(values):.3f} ms per call  "
            f"({', '.join(f'{v:.3f}' for v in values)})"
        )
    print(
        f"after / before: {after / before:.2f}x; saved {before - after:.3f} ms per paid call "
        f"({args.calls:,} calls per process, {args.repeats} alternations, run directories in "
        f"{args.dir})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
