"""What a call, a step, a resume and a report cost late in a run at the paper's Crafter scale.

Side by side in one run, this tree ("after") and an older commit ("before", unpacked with
``git archive``; default ``cebb860``, the code issue #33 measured), each in fresh processes,
against an instant fake model (no network, no model latency: what is left is our work):

1. **Per call**: ``--calls`` calls (default 200,000: the paper's 200 rollouts and 4
   evaluations of 30 Crafter episodes can reach that) through ``build_model`` exactly as a run
   builds it — response cache, write-ahead ``pending`` row, the answer's commit, the
   ``llm_calls.jsonl`` line (its one durable record; the old layout also copied it into the
   cache's ``call_log``) — with a provider that builds and JSON-encodes the OpenAI request
   body and answers at once. Printed: ms per call for every block of 10,000, and the process's
   RSS. Target: the last block <= 1.2x the first; RSS flat. The old code's commit scans the
   log (quadratic over a run), so "before" runs ``--before-calls`` (default 20,000) only.
   The run directories are on tmpfs (``--dir``, default ``/dev/shm``): fsync latency is the
   disk's, not our code's, and on a shared machine it swamps everything else.
2. **Per step**: ``--episodes`` episode(s) of ``--steps`` (2,000) Crafter-sized steps through
   the actor's own ``ActorHistory`` (full history, the paper's protocol) and the same model:
   mean ms per step around step 100, 1,000 and 2,000, and the request's size there. Plus the
   OpenAI SDK's real client work per request at those history lengths against the local
   fake server, from ``llm_request_cost.py`` (the part that must grow: the bytes sent).
3. **Resume**: the run directory of (1) after a simulated SIGKILL (a torn line, and the last
   5 calls half-recorded as that tree's write path leaves them: rows missing from the JSONL under
   the old layout, answers missing from the cache under the new): what a resume does with the stored
   calls (``repair_jsonl``, ``reconcile``, ``unaccounted``, opening the cache) in a fresh process:
   seconds and peak RSS. Target <= 30 s.
4. **Report**: ``speedrunner report`` on a run directory at that scale — a real scripted
   BabyAI run whose trajectories are multiplied to 200 training episodes and 4 evaluations
   of 30, each of 2,000 Crafter-sized steps (~1 MB), with the calls of (1): seconds and peak
   RSS. Target <= 30 s.

    python benchmarks/long_run.py [--calls 200000] [--before cebb860] [--before-calls 20000]
        [--dir /dev/shm]
    python benchmarks/long_run.py --report-only   # figure 4 alone, alternating before/after twice
    python benchmarks/long_run.py --smoke     # tiny sizes: checks the script runs
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
BLOCK = 10_000
WINDOW = 20  # steps averaged around each reported step
TORN = 5  # JSONL lines a simulated kill loses
OBSERVATION = (
    "You see: grass 1 step to your west, tree 3 steps north and 2 east, water 5 steps south, "
    "stone 4 steps east.\nYou face grass at your front.\nYour status: health 9/9, food 7/9, "
    "drink 6/9, energy 8/9.\nYour inventory: wood 2, sapling 1.\nStep {i}."
)
THOUGHT = "The tree is close: I should move north and collect wood to build a table. Step {i}."


# -- workers: run in a fresh process with the tree under test first on sys.path -----------------
def _rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _model(run_dir: Path):
    """``build_model`` as a run calls it, with the OpenAI provider's request building kept and
    its network call replaced by an instant answer."""
    os.environ.setdefault("OPENAI_API_KEY", "sk-benchmark")
    from speedrunner.core.config.schema import ModelConfig
    from speedrunner.core.llm import build as build_module
    from speedrunner.core.llm.provider import ProviderResult
    from speedrunner.core.llm.provider_openai import OpenAIChatProvider
    from speedrunner.core.llm.types import Usage

    class Instant(OpenAIChatProvider):
        def call(self, request):  # the body as the SDK would send it, encoded; no socket
            wire = json.dumps(self.request_body(request), ensure_ascii=False)
            return ProviderResult(
                text=f"Thought: move.\nAction: Move North ({len(wire) % 7})",
                reasoning=None,
                usage=Usage(input_uncached=len(wire) // 4, output=12),
                finish_reason="stop",
            )

    build_module.make_provider = lambda config: Instant(config)
    return build_module.build_model(
        ModelConfig(provider="openai", name="gpt-5.4-mini"),
        namespace="long-run",
        cache_path=run_dir / "llm_cache.sqlite",
        calls_log_path=run_dir / "llm_calls.jsonl",
    )


def worker_calls(run_dir: Path, calls: int, block: int) -> None:
    from speedrunner.core.llm.types import Message

    model = _model(run_dir)
    system = Message("system", "You are an agent playing Crafter. " * 20)
    t0 = time.perf_counter()
    for i in range(calls):
        model.complete(
            [system, Message("user", OBSERVATION.format(i=i))],
            purpose="actor",
            call_id=f"ep{i // 2000:05d}/{i % 2000}",
        )
        if (i + 1) % block == 0:
            t1 = time.perf_counter()
            print(
                json.dumps(
                    {"calls": i + 1, "ms_per_call": (t1 - t0) / block * 1e3, "rss_mb": _rss_mb()}
                ),
                flush=True,
            )
            t0 = time.perf_counter()
    model.close()


def worker_steps(run_dir: Path, steps: int, episodes: int) -> None:
    from speedrunner.core.runtime.actor import ActorHistory, ActorStep

    model = _model(run_dir)
    marks = [m for m in (100, 1000, 2000) if m <= steps] or [steps]
    times: dict[int, list[float]] = {m: [] for m in marks}
    size: dict[int, int] = {}
    actions = ["Move North", "Move South", "Do", "Noop"]
    for e in range(episodes):
        history = ActorHistory(OBSERVATION.format(i=-1))
        taken: list[ActorStep] = []
        for i in range(1, steps + 1):
            t = time.perf_counter()
            conv = history.sync(taken, OBSERVATION.format(i=i) if taken else None, actions)
            answer = model.complete(conv, purpose="actor", call_id=f"long-ep{e}/{i}")
            taken.append(
                ActorStep(
                    index=i,
                    call_id=f"long-ep{e}/{i}",
                    observation=OBSERVATION.format(i=i),
                    raw_text=answer.text,
                    reasoning=None,
                    thought=THOUGHT.format(i=i),
                    parsed_action="Move North",
                    executed=["Move North"],
                )
            )
            dt = time.perf_counter() - t
            for m in marks:
                if m - WINDOW < i <= m:
                    times[m].append(dt)
                    size[m] = conv.input_bytes
    model.close()
    print(
        json.dumps(
            {
                "ms_per_step": {m: statistics.fmean(v) * 1e3 for m, v in times.items()},
                "request_kb": {m: b / 1024 for m, b in size.items()},
                "rss_mb": _rss_mb(),
            }
        ),
        flush=True,
    )


def worker_resume(run_dir: Path) -> None:
    t = time.perf_counter()
    from speedrunner.core.atomic import repair_jsonl
    from speedrunner.core.llm.cache import ResponseCache
    from speedrunner.core.llm.journal import reconcile, unaccounted

    calls = run_dir / "llm_calls.jsonl"
    repair_jsonl(calls)
    result = reconcile(run_dir / "llm_cache.sqlite", calls, "long-run")
    unaccounted(run_dir / "llm_cache.sqlite", "long-run")
    cache = ResponseCache(run_dir / "llm_cache.sqlite")
    stored = cache.count("long-run")
    cache.close()
    print(
        json.dumps(
            {
                "s": time.perf_counter() - t,
                "peak_mb": _peak_mb(),
                "stored": stored,
                "restored": sum(
                    v for k, v in dataclasses.asdict(result).items() if k.startswith("restored_")
                ),
                "in_flight": len(result.in_flight),
            }
        ),
        flush=True,
    )


def worker_report(run_dir: Path, out: Path) -> None:
    t = time.perf_counter()
    from speedrunner.cli import main

    code = main(["report", str(run_dir), "--out", str(out)])
    print(
        json.dumps({"s": time.perf_counter() - t, "peak_mb": _peak_mb(), "exit": code}), flush=True
    )


# -- the parent ----------------------------------------------------------------------------------
def run_worker(tree: Path, *args: str, timeout: float = 7200) -> list[dict]:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env["PYTHONPATH"] = str(tree / "src") + os.pathsep + str(HERE)
    proc = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), "--worker", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
        cwd=tree,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"worker {args[0]} on {tree} failed: {proc.stderr.strip()[-2000:]}")
    return [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]


def _has_call_log(conn: Any) -> bool:
    """The old tree's cache layout: every paid row also in a ``call_log`` table."""
    return (
        conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'call_log'").fetchone() is not None
        and conn.execute("SELECT COUNT(*) FROM call_log").fetchone()[0] > 0
    )


def inflate(run_dir: Path, total: int) -> None:
    """Bring the run directory to ``total`` stored paid calls, as a longer run would have left
    them: copies of its own last row (new ids) added in bulk to the cache, in the layout that
    tree created (the old one also keeps each row in ``call_log``), and to ``llm_calls.jsonl``."""
    import sqlite3

    calls = run_dir / "llm_calls.jsonl"
    with sqlite3.connect(run_dir / "llm_cache.sqlite") as conn:
        legacy = _has_call_log(conn)
        have = conn.execute("SELECT COUNT(*) FROM responses").fetchone()[0]
        if have >= total:
            return
        namespace, call_id, request_hash, completion, created = conn.execute(
            "SELECT * FROM responses ORDER BY created_at DESC LIMIT 1"
        ).fetchone()
        seq = conn.execute("SELECT MAX(seq) FROM call_log").fetchone()[0] or 0 if legacy else 0
        with open(calls, "rb") as f:
            f.seek(max(0, f.seek(0, os.SEEK_END) - 100_000))
            template = json.loads(f.read().splitlines()[-1])
        with open(calls, "a") as f:
            for chunk in range(have, total, 10_000):
                ids = range(chunk, min(total, chunk + 10_000))
                rows = [
                    {**template, "call_id": f"fill/{i}", "log_id": f"fill{i:032d}"} for i in ids
                ]
                conn.executemany(
                    "INSERT INTO responses VALUES (?, ?, ?, ?, ?)",
                    [(namespace, r["call_id"], request_hash, completion, created) for r in rows],
                )
                if legacy:
                    conn.executemany(
                        "INSERT INTO call_log VALUES (?, ?, ?)",
                        [
                            (r["log_id"], seq + 1 + i - have, json.dumps(r))
                            for i, r in zip(ids, rows, strict=True)
                        ],
                    )
                f.writelines(json.dumps(r) + "\n" for r in rows)


def kill_tail(run_dir: Path) -> None:
    """What a SIGKILL leaves at the end of the write path of the tree that made the run: a torn
    line, and the last ``TORN`` paid calls half-recorded. The old layout committed the answer
    and its row to the cache before the JSONL append (the rows are missing from the file); the
    new one writes the row first (the answers are missing from the cache, their requests still
    pending)."""
    import sqlite3

    calls = run_dir / "llm_calls.jsonl"
    with sqlite3.connect(run_dir / "llm_cache.sqlite") as conn:
        legacy = _has_call_log(conn)
        with open(calls, "r+b") as f:
            end = f.seek(0, os.SEEK_END)
            f.seek(max(0, end - 200_000))
            lines = f.read().split(b"\n")
            last = [json.loads(x) for x in lines[-TORN - 1 : -1]]
            if legacy:
                cut = end - len(b"\n".join(lines[-TORN - 1 :]))
                f.truncate(cut)
                f.seek(cut)
            f.write(b'{"torn": ')
        if not legacy:
            for row in last:
                conn.execute(
                    "DELETE FROM responses WHERE namespace=? AND call_id=?",
                    (row["namespace"], row["call_id"]),
                )
                conn.execute(
                    "INSERT OR REPLACE INTO pending VALUES (?, ?, ?, ?, ?)",
                    (row["namespace"], row["call_id"], row["purpose"], row["ts"] - 1, 0.01),
                )


def make_report_dir(root: Path, train: int, evals: int, per_eval: int, steps: int) -> Path:
    """A real scripted run, its trajectories and rows multiplied to the paper's scale."""
    run_dir = root / "report-run"
    cmd = [
        sys.executable,
        "-m",
        "speedrunner.benchmarks.babyai.train",
        "--config_file",
        str(REPO / "configs" / "babyai" / "opo-scripted-seq.yaml"),
        "--set",
        "run.rollouts=2",
        "--set",
        "run.sleep_every=2",
        "--set",
        "run.eval_every=2",
        "--set",
        "run.eval_episodes=1",
        "--run_dir",
        str(run_dir),
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=REPO)
    if proc.returncode != 0:
        raise RuntimeError(f"the scripted run failed: {proc.stderr[-2000:]}")
    episodes = run_dir / "episodes"
    template = json.loads((episodes / "train" / "0000.json").read_text())
    step = template["steps"][0]

    def episode(**fields) -> str:
        steps_ = [
            {
                **step,
                "index": i,
                "observation": OBSERVATION.format(i=i),
                "thought": THOUGHT.format(i=i),
                "call_id": f"x/{i}",
            }
            for i in range(steps)
        ]
        return json.dumps({**template, **fields, "steps": steps_})

    metric = json.loads((run_dir / "metrics.jsonl").read_text().splitlines()[0])
    evaluation = json.loads((run_dir / "eval.jsonl").read_text().splitlines()[0])
    shutil.rmtree(episodes)
    (episodes / "train").mkdir(parents=True)
    with open(run_dir / "metrics.jsonl", "w") as f:
        for i in range(train):
            (episodes / "train" / f"{i:04d}.json").write_text(episode(index=i, llm_calls=steps))
            f.write(json.dumps({**metric, "index": i, "rollout": i + 1, "batch": i // 10}) + "\n")
    points = [round(k * train / max(1, evals - 1)) for k in range(evals)]
    with open(run_dir / "eval.jsonl", "w") as f:
        for point in points:
            (episodes / "eval" / f"at{point:04d}").mkdir(parents=True)
            for i in range(per_eval):
                (episodes / "eval" / f"at{point:04d}" / f"{i:04d}.json").write_text(
                    episode(index=i, eval_point=point, split="eval")
                )
            per = [{**evaluation["per_episode"][0], "index": i} for i in range(per_eval)]
            f.write(
                json.dumps(
                    {**evaluation, "rollout": point, "episodes": per_eval, "per_episode": per}
                )
                + "\n"
            )
    return run_dir


def measure(
    trees: dict[str, tuple[Path, int]],
    steps: int,
    episodes: int,
    report_scale: tuple[int, int, int, int],
    tmp: Path,
    stored: int,
) -> dict[str, dict]:
    out: dict[str, dict] = {}
    report_dir = make_report_dir(tmp, *report_scale)
    for side, (tree, calls) in trees.items():
        run_dir = tmp / f"calls-{side}"
        run_dir.mkdir()
        r: dict = {
            "calls": run_worker(
                tree, "calls", str(run_dir), str(calls), str(min(BLOCK, max(1, calls // 3)))
            )
        }
        print(
            f"  [{side}] {calls:,} calls: {r['calls'][0]['ms_per_call']:.3f} -> "
            f"{r['calls'][-1]['ms_per_call']:.3f} ms/call",
            file=sys.stderr,
            flush=True,
        )
        inflate(run_dir, stored)
        kill_tail(run_dir)
        r["resume"] = run_worker(tree, "resume", str(run_dir))[0]
        steps_dir = tmp / f"steps-{side}"
        steps_dir.mkdir()
        r["steps"] = run_worker(tree, "steps", str(steps_dir), str(steps), str(episodes))[0]
        shutil.copy(run_dir / "llm_calls.jsonl", report_dir / "llm_calls.jsonl")
        shutil.copy(run_dir / "llm_cache.sqlite", report_dir / "llm_cache.sqlite")
        r["report"] = run_worker(tree, "report", str(report_dir), str(tmp / f"report-{side}"))[0]
        out[side] = r
        print(f"  [{side}] done", file=sys.stderr, flush=True)
    return out


def sdk_per_step(steps: list[int], reps: int) -> dict[int, float]:
    """The OpenAI SDK's client work per request (ours, ms) with the history of step N."""
    import llm_request_cost

    sizes = llm_request_cost.measure_sizes(
        providers=("openai",),
        sizes=tuple(2 * s + 1 for s in steps),
        reps=reps,
        reps_large=max(2, reps // 3),
    )
    return {s: sizes[("openai", 2 * s + 1)][0] * 1e3 for s in steps}


def rows(results: dict[str, dict], sdk: dict[int, float]):
    from perf_common import Row

    out = []
    for side, r in results.items():
        judged = side == "after"  # the old commit is shown beside, not judged

        def target(value: float, judged: bool = judged) -> float | None:
            return value if judged else None

        blocks = r["calls"]
        ratio = blocks[-1]["ms_per_call"] / blocks[0]["ms_per_call"]
        rss = [b["rss_mb"] for b in blocks]
        size = blocks[0]["calls"]
        out.append(
            Row(
                f"long run [{side}]: per call, last / first block of {size:,} calls",
                ratio,
                "x",
                target(1.2),
                "<=",
                f"{blocks[0]['ms_per_call']:.3f} -> {blocks[-1]['ms_per_call']:.3f} ms over "
                f"{blocks[-1]['calls']:,} calls",
            )
        )
        out.append(
            Row(
                f"long run [{side}]: RSS, last / first block",
                rss[-1] / rss[0],
                "x",
                target(1.2),
                "<=",
                f"{rss[0]:.0f} -> {rss[-1]:.0f} MB",
            )
        )
        st = r["steps"]
        marks = sorted(st["ms_per_step"], key=int)
        out.append(
            Row(
                f"long run [{side}]: per step at step {marks[-1]} / step {marks[0]}",
                st["ms_per_step"][marks[-1]] / st["ms_per_step"][marks[0]],
                "x",
                detail=", ".join(
                    f"step {m}: {st['ms_per_step'][m]:.2f} ms ({st['request_kb'][m]:.0f} KB)"
                    for m in marks
                ),
            )
        )
        out.append(
            Row(
                f"long run [{side}]: resume with {r['resume']['stored']:,} stored calls",
                r["resume"]["s"],
                "s",
                target(30.0),
                "<=",
                f"peak RSS {r['resume']['peak_mb']:.0f} MB, {r['resume']['restored']} calls "
                f"restored, {r['resume'].get('in_flight', 0)} in flight",
            )
        )
        out.append(
            Row(
                f"long run [{side}]: speedrunner report",
                r["report"]["s"],
                "s",
                target(30.0),
                "<=",
                f"peak RSS {r['report']['peak_mb']:.0f} MB, exit {r['report']['exit']}",
            )
        )
    if sdk:
        out.append(
            Row(
                "long run: OpenAI SDK request at the last step (client work)",
                sdk[max(sdk)],
                "ms",
                detail=", ".join(f"step {s}: {v:.2f} ms" for s, v in sorted(sdk.items())),
            )
        )
    return out


def run(
    *,
    calls: int = 200_000,
    before: str = "cebb860",
    before_calls: int = 20_000,
    stored: int = 100_000,
    steps: int = 2000,
    episodes: int = 1,
    where: Path | None = None,
    smoke: bool = False,
) -> tuple[dict[str, dict], dict[int, float]]:
    """Every figure: per side, the workers' results; and the SDK's ms per request by step."""
    from perf_common import unpack_commit

    global BLOCK
    if smoke:
        calls, before_calls, stored, steps, episodes, BLOCK = 400, 200, 1000, 120, 1, 100
    scale = (4, 2, 2, steps) if smoke else (200, 4, 30, steps)
    with tempfile.TemporaryDirectory(prefix="long-run-", dir=where) as tmp_name:
        tmp = Path(tmp_name)
        trees = {"after": (REPO, calls)}
        if before:
            trees = {"before": (unpack_commit(before, tmp), before_calls), **trees}
        results = measure(trees, steps, episodes, scale, tmp, stored)
    sdk = sdk_per_step([s for s in (100, 1000, 2000) if s <= steps] or [steps], 2 if smoke else 9)
    return results, sdk


def report_only(before: str, where: Path | None, repeats: int = 2) -> dict[str, list[dict]]:
    """Figure 4 alone, alternating the trees ``repeats`` times on one run directory."""
    from perf_common import unpack_commit

    out: dict[str, list[dict]] = {"before": [], "after": []}
    with tempfile.TemporaryDirectory(prefix="long-run-", dir=where) as tmp_name:
        tmp = Path(tmp_name)
        run_dir = make_report_dir(tmp, 200, 4, 30, 2000)
        trees = {"before": unpack_commit(before, tmp), "after": REPO}
        for k in range(repeats):
            for side, tree in trees.items():
                out[side] += run_worker(
                    tree, "report", str(run_dir), str(tmp / f"report-{side}-{k}")
                )
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--worker", nargs="+", help=argparse.SUPPRESS)
    parser.add_argument("--calls", type=int, default=200_000)
    parser.add_argument(
        "--before", default="cebb860", help="commit for the 'before' column ('' to skip it)"
    )
    parser.add_argument("--before-calls", type=int, default=20_000)
    parser.add_argument(
        "--stored",
        type=int,
        default=100_000,
        help="stored calls for the resume and the report (filled in bulk after the timed calls)",
    )
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--episodes", type=int, default=1)
    parser.add_argument(
        "--dir",
        type=Path,
        default=Path("/dev/shm") if Path("/dev/shm").is_dir() else None,
        help="where the run directories go (default /dev/shm: tmpfs, so a disk's fsync latency, "
        "0.2 ms idle and >10 ms under load, does not drown the work measured)",
    )
    parser.add_argument(
        "--smoke",
        action="store_true",
        help="tiny sizes: checks the script runs, numbers mean nothing",
    )
    parser.add_argument("--json", type=Path, help="also write the raw figures here")
    parser.add_argument(
        "--report-only", action="store_true", help="only figure 4, before and after alternating"
    )
    args = parser.parse_args(argv)
    if args.worker:
        kind, *rest = args.worker
        {
            "calls": lambda: worker_calls(Path(rest[0]), int(rest[1]), int(rest[2])),
            "steps": lambda: worker_steps(Path(rest[0]), int(rest[1]), int(rest[2])),
            "resume": lambda: worker_resume(Path(rest[0])),
            "report": lambda: worker_report(Path(rest[0]), Path(rest[1])),
        }[kind]()
        return 0
    from perf_common import table

    if args.report_only:
        for side, runs in report_only(args.before or "cebb860", args.dir).items():
            print(
                f"{side}: speedrunner report "
                + ", ".join(f"{r['s']:.1f} s (peak RSS {r['peak_mb']:.0f} MB)" for r in runs)
            )
        return 0
    results, sdk = run(
        calls=args.calls,
        before=args.before,
        before_calls=args.before_calls,
        stored=args.stored,
        steps=args.steps,
        episodes=args.episodes,
        where=args.dir,
        smoke=args.smoke,
    )
    print(table(rows(results, sdk)))
    for side, r in results.items():
        print(f"\n{side}: ms per call by block of {r['calls'][0]['calls']:,} calls (RSS MB)")
        print(
            "  "
            + "  ".join(
                f"{b['calls'] / 1000:g}k {b['ms_per_call']:.3f} ({b['rss_mb']:.0f})"
                for b in r["calls"]
            )
        )
    if args.json:
        args.json.write_text(json.dumps({"results": results, "sdk_ms": sdk}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
