"""The paper's whole schedule, timed: SpeedRunner's wall time against the critical-path bound.

    python benchmarks/full_schedule.py [--benchmarks babyai crafter scienceworld]
        [--rollouts 200] [--sleep-every 10] [--eval-every 50] [--eval-episodes 30]
        [--latency 0.1] [--calls 10] [--json out.json]

Each benchmark's shipped SpeedRunner config (its parallelism, its caps) runs the schedule
(evaluation at 0 and every ``--eval-every`` rollouts on ``--eval-episodes`` held-out
episodes, a sleep phase every ``--sleep-every``) through the real train entry point, in its
own process, against a fake OpenAI-compatible server (in this process) that answers every
request after ``--latency`` seconds. The fake reads only the prompt: the actor plays the
benchmark's primitive actions in a cycle and, once the codebook offers the skill, calls it
first; the inducer adds the skill through the real sleep protocol at the first sleep (one
``add_function`` turn, one ``submit``) and submits unchanged at every later sleep. It never
wins on purpose, so episodes run to the call cap ``--calls`` (``benchmark.max_llm_calls``).

The lower bound is what the model's latency alone forces, from the calls the run really made
(its ``metrics.jsonl``, ``eval.jsonl`` and sleep records): per wake batch and per evaluation
``max(longest episode's calls, ceil(all calls / P))`` sequential calls, where ``P`` is the
number of episodes played at once (``run.parallel_episodes`` and ``model.max_concurrency``),
plus every inducer turn (sequential), times the latency. The script prints the bound's
parts next to the wall time each phase took (from the run's progress lines), and the ratio
of the whole process's wall time (start-up included) to the bound. Target: <= 1.25x.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from perf_common import ACTIONS, CONFIGS, REPO, clean_env, fake_model_overrides

from speedrunner.testing.fake_llm_server import FakeLLMServer, Reply

TARGET = 1.25
CONFIG = {
    "babyai": "babyai/speedrunner-gpt-seq.yaml",
    "crafter": "crafter/speedrunner-gpt-crafter.yaml",
    "scienceworld": "scienceworld/speedrunner-gpt-t4.yaml",
}
INDUCER = "You maintain a codebook"
SKILL_BODY = {
    "babyai": ['env.act("turn left")', 'env.act("go forward")', 'env.act("turn right")'],
    "crafter": ['env.act("Move West")', 'env.act("Do")', 'env.act("Move East")'],
    "scienceworld": ['env.act("look around")', 'env.act("inventory")'],
}


def skill_source(benchmark: str) -> str:
    body = "".join(f"    {line}\n" for line in SKILL_BODY[benchmark][:-1])
    return (
        f'def scout(env) -> str:\n    """Look about: a few primitive actions in one call.\n\n'
        f'    Returns:\n        The observation text after the last action.\n    """\n'
        f"{body}    return {SKILL_BODY[benchmark][-1]}\n"
    )


class ScheduleFake:
    """Answers from the prompt alone (see the module docstring); counts what it answered."""

    def __init__(self, benchmark: str) -> None:
        self.cycle = ACTIONS[benchmark]
        self.skill = skill_source(benchmark)
        self.counts = {"actor": 0, "inducer": 0}
        self._lock = threading.Lock()

    def __call__(self, body: dict[str, Any]) -> Reply:
        messages = body["messages"]
        turn = sum(m["role"] == "assistant" for m in messages)
        if INDUCER in messages[0]["content"]:
            self._count("inducer")
            installed = "def scout(" in messages[1]["content"]
            turns = (
                ["Tool: submit\nkept the codebook"]
                if installed
                else [
                    f"Adding a skill.\nTool: add_function\n```python\n{self.skill}```",
                    "Tool: submit\nadded scout",
                ]
            )
            return Reply(
                text=turns[min(turn, len(turns) - 1)], prompt_tokens=900, completion_tokens=90
            )
        self._count("actor")
        if turn == 0 and "scout()" in messages[1]["content"]:
            return Reply(
                text="Thought: scout first.\nAction: scout()",
                prompt_tokens=100,
                completion_tokens=10,
            )
        return Reply(
            text=f"Thought: keep looking.\nAction: {self.cycle[turn % len(self.cycle)]}",
            prompt_tokens=100,
            cached_tokens=80,
            completion_tokens=10,
        )

    def _count(self, role: str) -> None:
        with self._lock:
            self.counts[role] += 1


@dataclass
class Phases:
    """Wall seconds per phase, read from the run's progress lines as they came."""

    startup_s: float = 0.0  # process start to the first phase (interpreter, env server, sandboxes)
    wake_s: float = 0.0
    sleep_s: float = 0.0
    eval_s: float = 0.0
    between_s: float = 0.0  # between phases (checkpoints, metrics rows)
    exit_s: float = 0.0  # the last evaluation's end to the process's exit
    lines: list[tuple[float, str]] = field(default_factory=list)

    def add(self, started: float) -> None:
        """Attribute the time between consecutive lines to the phase the earlier one opened."""
        phase = "startup"
        last = started
        for t, line in self.lines:
            setattr(self, f"{phase}_s", getattr(self, f"{phase}_s") + t - last)
            last = t
            if line.startswith("wake: batch"):
                phase = "wake"
            elif line.startswith("sleep: batch"):
                phase = "sleep"
            elif line.startswith("eval at rollout") and ": " not in line.removeprefix(
                "eval at rollout"
            ):
                phase = "eval"
            elif line.startswith("done"):
                phase = "exit"
            elif line.startswith(("knowledge v", "eval at rollout")):
                phase = "between"

    @property
    def loop_s(self) -> float:
        return self.wake_s + self.sleep_s + self.eval_s + self.between_s


@dataclass
class Bound:
    """The critical-path lower bound's parts, in sequential model calls."""

    wake_calls: int = 0
    sleep_calls: int = 0
    eval_calls: int = 0
    batches: int = 0
    evals: int = 0

    def seconds(self, latency: float) -> float:
        return (self.wake_calls + self.sleep_calls + self.eval_calls) * latency


def group_bound(calls: list[int], workers: int) -> int:
    """Sequential calls a group of episodes needs with ``workers`` played at once."""
    return max(max(calls), math.ceil(sum(calls) / workers)) if calls else 0


def read_bound(run_dir: Path) -> tuple[Bound, dict[str, Any]]:
    config = json.loads((run_dir / "config.resolved.json").read_text())
    run, cap = config["run"], config["model"].get("max_concurrency") or 10**9

    def workers(n: int) -> int:
        limit = n if run["parallel_episodes"] == "all" else int(run["parallel_episodes"])
        return max(1, min(limit, n, cap))

    bound = Bound()
    metrics = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    by_batch: dict[int, list[int]] = {}
    for row in metrics:
        by_batch.setdefault(row["batch"], []).append(row["llm_calls"])
    for calls in by_batch.values():
        bound.wake_calls += group_bound(calls, workers(len(calls)))
    bound.batches = len(by_batch)
    for row in (json.loads(line) for line in (run_dir / "eval.jsonl").read_text().splitlines()):
        calls = [e["llm_calls"] for e in row["per_episode"]]
        bound.eval_calls += group_bound(calls, workers(len(calls)))
        bound.evals += 1
    for sleep in sorted((run_dir / "sleep").glob("batch_*/sleep.json")):
        bound.sleep_calls += int(json.loads(sleep.read_text())["turns"])
    per_call = sorted(
        r["wall_time_s"] / r["llm_calls"] for r in metrics if r["llm_calls"] and "wall_time_s" in r
    )
    facts = {
        "parallel_episodes": run["parallel_episodes"],
        "max_concurrency": config["model"].get("max_concurrency"),
        "episodes": len(metrics),
        "actor_calls_per_train_episode": sum(r["llm_calls"] for r in metrics) / len(metrics),
        "median_episode_s_per_call": round(per_call[len(per_call) // 2], 3) if per_call else None,
    }
    return bound, facts


@dataclass
class Result:
    benchmark: str
    rollouts: int
    latency_s: float
    wall_s: float
    loop_s: float
    bound_s: float
    ratio: float
    loop_ratio: float
    bound: dict[str, Any]
    phases: dict[str, float]
    facts: dict[str, Any]
    requests: dict[str, int]


def run_one(benchmark: str, args: argparse.Namespace, root: Path) -> Result:
    fake = ScheduleFake(benchmark)
    run_dir = root / benchmark
    with FakeLLMServer(callback=fake, latency_s=args.latency) as server:
        cmd = [
            sys.executable,
            "-m",
            f"speedrunner.benchmarks.{benchmark}.train",
            "--config_file",
            str(CONFIGS / CONFIG[benchmark]),
            "--run_dir",
            str(run_dir),
            "--skip_preflight",
            *(x for o in fake_model_overrides(server.base_url) for x in ("--set", o)),
            "--set",
            f"run.rollouts={args.rollouts}",
            "--set",
            f"run.sleep_every={args.sleep_every}",
            "--set",
            f"run.eval_every={args.eval_every}",
            "--set",
            f"run.eval_episodes={args.eval_episodes}",
            "--set",
            f"benchmark.max_llm_calls={args.calls}",
        ]
        phases = Phases()
        started = time.monotonic()
        proc = subprocess.Popen(
            cmd,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=REPO,
            env=clean_env(),
        )
        errors: list[str] = []
        pump = threading.Thread(target=lambda: errors.extend(proc.stderr), daemon=True)
        pump.start()
        assert proc.stdout is not None
        for line in proc.stdout:
            phases.lines.append((time.monotonic(), line.strip()))
        code = proc.wait()
        wall = time.monotonic() - started
        pump.join(timeout=10)
    if code != 0:
        raise SystemExit(f"{benchmark}: the run failed (exit {code}):\n{''.join(errors)[-3000:]}")
    phases.lines.append((started + wall, "done"))
    phases.add(started)
    bound, facts = read_bound(run_dir)
    bound_s = bound.seconds(args.latency)
    return Result(
        benchmark,
        args.rollouts,
        args.latency,
        round(wall, 2),
        round(phases.loop_s, 2),
        round(bound_s, 2),
        round(wall / bound_s, 3),
        round(phases.loop_s / bound_s, 3),
        asdict(bound),
        {
            k: round(getattr(phases, f"{k}_s"), 2)
            for k in ("startup", "wake", "sleep", "eval", "between", "exit")
        },
        facts,
        dict(fake.counts),
    )


def table(results: list[Result]) -> str:
    head = (
        "benchmark",
        "rollouts",
        "wall s",
        "bound s",
        "ratio",
        "target",
        "loop s",
        "loop ratio",
        "wake s (bound)",
        "sleep s (bound)",
        "eval s (bound)",
        "between s",
        "start-up s",
        "exit s",
    )
    rows = [head]
    for r in results:
        lat, p = r.latency_s, r.phases
        rows.append(
            (
                r.benchmark,
                str(r.rollouts),
                f"{r.wall_s:.1f}",
                f"{r.bound_s:.1f}",
                f"{r.ratio:.2f}x",
                f"<= {TARGET}x {'met' if r.ratio <= TARGET else 'MISSED'}",
                f"{r.loop_s:.1f}",
                f"{r.loop_ratio:.2f}x",
                f"{p['wake']:.1f} ({r.bound['wake_calls'] * lat:.1f})",
                f"{p['sleep']:.1f} ({r.bound['sleep_calls'] * lat:.1f})",
                f"{p['eval']:.1f} ({r.bound['eval_calls'] * lat:.1f})",
                f"{p['between']:.1f}",
                f"{p['startup']:.1f}",
                f"{p['exit']:.1f}",
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(head))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) for row in rows]
    lines.insert(1, "-" * len(lines[0]))
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--benchmarks", nargs="+", choices=list(CONFIG), default=list(CONFIG))
    parser.add_argument("--rollouts", type=int, default=200)
    parser.add_argument("--sleep-every", type=int, default=10)
    parser.add_argument("--eval-every", type=int, default=50)
    parser.add_argument("--eval-episodes", type=int, default=30)
    parser.add_argument("--latency", type=float, default=0.1, help="seconds before each answer")
    parser.add_argument(
        "--calls", type=int, default=10, help="benchmark.max_llm_calls: every episode's length"
    )
    parser.add_argument("--json", type=Path, help="also write the results here")
    parser.add_argument(
        "--keep", type=Path, help="put the run directories here and keep them (default: a temp dir)"
    )
    args = parser.parse_args()
    load_before = os.getloadavg()[0]
    results = []
    with tempfile.TemporaryDirectory(prefix="full-schedule-") as tmp:
        root = args.keep or Path(tmp)
        for benchmark in args.benchmarks:
            results.append(run_one(benchmark, args, root))
            print(
                f"{benchmark}: wall {results[-1].wall_s:.1f}s, bound {results[-1].bound_s:.1f}s",
                flush=True,
            )
    print(
        f"\nSpeedRunner, {args.rollouts} rollouts, sleep every {args.sleep_every}, eval at 0 and "
        f"every {args.eval_every} on {args.eval_episodes}; {args.latency * 1000:.0f} ms per model "
        f"call, <= {args.calls} calls per episode; load average {load_before:.1f} before, "
        f"{os.getloadavg()[0]:.1f} after, on {os.cpu_count()} CPUs\n"
    )
    print(table(results))
    print(
        "\nratio: the whole process (start-up included) over the bound; loop: first phase to last "
        "(start-up and exit left out).\nstart-up: interpreter, env server, sandboxes, before the "
        "first evaluation; between: checkpoints and rows between phases."
    )
    for r in results:
        print(
            f"{r.benchmark}: bound parts in calls {r.bound}; {r.facts}; requests answered "
            f"{r.requests}"
        )
    if args.json:
        args.json.write_text(json.dumps([asdict(r) for r in results], indent=2))


if __name__ == "__main__":
    main()
