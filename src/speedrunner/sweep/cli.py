"""``speedrunner sweep SWEEP.yaml``: run a grid of runs; rerun it to finish what a crash left.

Exit codes: 0 every run finished; 1 some run failed or did not finish (the table says
which; rerun the sweep to continue them); 2 a problem with the sweep file or the flags;
130 / 143 stopped by Ctrl-C / SIGTERM (rerun to continue).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shlex
import signal
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

from speedrunner.sweep.execute import Outcome, plan
from speedrunner.sweep.spec import Sweep, SweepRun, load_sweep, parse_shard
from speedrunner.sweep.watch import STATUS_EVERY_S, Watch

HELP = "run a sweep file's grid of runs (local pool, Ray, or a SLURM array shard)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("sweep_file", help="sweep YAML, e.g. configs/sweeps/babyai-scripted.yaml")
    parser.add_argument(
        "--estimate",
        action="store_true",
        help="forecast every run's calls, tokens, dollars and wall time, and the sweep's total, "
        "then exit",
    )
    from speedrunner.core.estimate import add_estimate_flags

    add_estimate_flags(parser)
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help="print the expanded runs (what would be started, resumed, skipped) and exit",
    )
    parser.add_argument(
        "--backend",
        choices=("local", "ray", "slurm"),
        default="local",
        help="local: a process pool here (default); ray: one Ray task per run; "
        "slurm: this array task's shard (--shard I/N) on a local pool",
    )
    parser.add_argument(
        "--workers",
        type=int,
        default=None,
        help="runs at once on the local pool (default: this machine's CPU count)",
    )
    parser.add_argument(
        "--address",
        default=None,
        help="Ray cluster address (default: RAY_ADDRESS, else a local Ray)",
    )
    parser.add_argument(
        "--status-every",
        type=float,
        default=STATUS_EVERY_S,
        metavar="SECONDS",
        help="while runs go, print each running run's episodes and spend this often, "
        f"when something changed (default {STATUS_EVERY_S:g}; 0: never)",
    )
    parser.add_argument(
        "--shard",
        default=None,
        metavar="I/N",
        help="only runs I, I+N, I+2N, ... of the expansion (0 <= I < N); slurm requires it",
    )
    parser.add_argument(
        "--submit",
        action="store_true",
        help="with --backend slurm: submit the sweep as an sbatch array (--tasks tasks), "
        "follow it with squeue and report every run; resubmit to resume",
    )
    parser.add_argument(
        "--tasks",
        type=int,
        default=None,
        metavar="N",
        help="array tasks for --submit (default: one per run)",
    )
    parser.add_argument(
        "--print-sbatch",
        type=int,
        nargs="?",
        const=0,
        default=None,
        metavar="N",
        help="print an sbatch script running this sweep as an array of N tasks "
        "(default: one task per run) and exit",
    )


def main(args: argparse.Namespace) -> int:
    """Raises ``SpeedRunnerError`` for user mistakes (the caller prints it and exits 2)."""
    from speedrunner.errors import ConfigError

    if not args.status_every >= 0:
        raise ConfigError(
            f"--status-every {args.status_every:g}: give seconds between status lines, "
            "or 0 for none"
        )
    sweep = load_sweep(args.sweep_file)
    if args.print_sbatch is not None:
        print(sbatch_script(sweep, args.print_sbatch or len(sweep.runs)))
        return 0
    if args.submit:
        if args.backend != "slurm" or args.shard is not None:
            raise ConfigError(
                "--submit submits the whole sweep to SLURM: use it with --backend slurm "
                "and without --shard"
            )
        return submit_and_follow(
            sweep, args.tasks or len(sweep.runs), status_every=args.status_every
        )
    if args.backend == "slurm" and args.shard is None:
        raise ConfigError(
            "--backend slurm needs --shard I/N (e.g. --shard $SLURM_ARRAY_TASK_ID/8), "
            "or --submit to submit the whole sweep; see --print-sbatch"
        )
    runs = sweep.runs
    if args.shard is not None:
        index, count = parse_shard(args.shard)
        runs = sweep.shard(index, count)
    if args.dry_run:
        print_plan(sweep, runs)
        return 0
    if args.estimate:
        return print_sweep_estimate(sweep, runs, args)
    return run_sweep(
        sweep,
        runs,
        backend=args.backend,
        workers=args.workers,
        address=args.address,
        status_every=args.status_every,
    )


def print_sweep_estimate(sweep: Sweep, runs: list[SweepRun], args: argparse.Namespace) -> int:
    """Each run's forecast, then the sweep's total (what is already spent is not subtracted)."""
    from speedrunner.catalog import config_loader
    from speedrunner.core.estimate import PilotMismatchError, print_estimate

    loader = config_loader()
    worst: list[float | None] = []
    typical: list[float | None] = []
    for r in runs:
        config = loader.load(r.config_file, overrides=r.overrides).config
        try:
            e = print_estimate(config, r.label, args)
        except (
            PilotMismatchError
        ) as mismatch:  # the pilot fits other runs of the grid, not this one
            print(f"note: no typical case for {r.label}: {mismatch}", file=sys.stderr)
            e = print_estimate(config, r.label, argparse.Namespace(**{**vars(args), "pilots": []}))
        worst.append(e.usd_max)
        typical.append(e.typical_usd)
        print()
    if args.json:
        return 0
    total = (
        "unknown (a model has no price)"
        if any(w is None for w in worst)
        else f"${sum(w for w in worst if w is not None):,.2f}"
    )
    print(f"sweep {sweep.spec.name}: {len(runs)} runs, worst case {total}", end="")
    known = [t for t in typical if t is not None]
    if args.pilots and known:
        some = (
            ""
            if len(known) == len(runs)
            else f" (the {len(known)} of {len(runs)} runs a pilot fits)"
        )
        print(f", typical ${sum(known):,.2f}{some}", end="")
    cap = sweep.spec.max_cost_usd
    print(f"; sweep cap {'none' if cap is None else f'${cap:,.2f}'} (max_cost_usd in {sweep.path})")
    return 0


def print_plan(sweep: Sweep, runs: list[SweepRun]) -> None:
    print(f"sweep {sweep.spec.name}: {len(runs)} of {len(sweep.runs)} runs ({sweep.path})")
    for r in runs:
        action, why = plan(r)
        print(f"  {r.index:>4}  {action:<7} {r.label}\n        {r.run_dir}  [{why}]")


def run_sweep(
    sweep: Sweep,
    runs: list[SweepRun],
    *,
    backend: str = "local",
    workers: int | None = None,
    address: str | None = None,
    ray_init: dict | None = None,
    status_every: float | None = STATUS_EVERY_S,
) -> int:
    from speedrunner.sweep.backends import LocalPool, SweepInterrupted, run_ray
    from speedrunner.sweep.services import benchmark_services, slots_env

    watch = Watch(runs, every_s=status_every, cap_usd=sweep.spec.max_cost_usd)
    print(f"sweep {sweep.spec.name}: {len(runs)} runs on the {backend} backend", flush=True)

    def report(o: Outcome, n: int, total: int) -> None:
        watch.ended(o.run_id)
        watch.say(f"[{n}/{total}] {_status(o):<11} {o.label}  ({watch.elapsed():.0f} s)")

    code = 0
    try:
        with _sigterm_as_interrupt():
            plans = {r.run_id: plan(r) for r in runs}
            for r in runs:
                if "WARNING" in plans[r.run_id][1]:
                    print(
                        f"{r.label}: {plans[r.run_id][1].split('WARNING: ', 1)[1]}", file=sys.stderr
                    )
            to_run = [r for r in runs if plans[r.run_id][0] in ("start", "resume")]
            # A Ray cluster's nodes cannot reach a server on this one; a local Ray can.
            on_this_machine = backend != "ray" or not (address or os.environ.get("RAY_ADDRESS"))
            env = {**slots_env(), **spend_ledger_env(sweep)}
            with benchmark_services(to_run if on_this_machine else []) as operational, watch:
                if backend == "ray":
                    outcomes = run_ray(
                        runs,
                        address=address,
                        operational=operational,
                        extra_env=env,
                        report=report,
                        init_kwargs=ray_init,
                        queued=watch.queued,
                    )
                else:
                    outcomes = LocalPool(workers or os.cpu_count() or 1).run(
                        runs, operational, env, report, announce=watch.started
                    )
    except SweepInterrupted as e:
        outcomes, code = e.outcomes, 143 if _SIGNAL.get("sig") == signal.SIGTERM else 130
    except KeyboardInterrupt:  # before any run started (e.g. while the BabyAI server started)
        print(
            f"sweep stopped before any run started; rerun `speedrunner sweep {sweep.path}`",
            file=sys.stderr,
        )
        return 143 if _SIGNAL.get("sig") == signal.SIGTERM else 130
    print_outcomes(outcomes, sweep.path)
    if code:
        print(f"sweep stopped; rerun `speedrunner sweep {sweep.path}` to continue", file=sys.stderr)
        return code
    if all(o.ok for o in outcomes):
        return 0
    capped = [o for o in outcomes if o.status == "budget_reached"]
    if capped:
        print(
            f"{len(capped)} run(s) stopped at a spending cap ({spend_line(sweep)}); raise the cap "
            f"(max_cost_usd in {sweep.path}, or run.max_cost_usd) and rerun `speedrunner sweep "
            f"{sweep.path}` to continue them exactly where they stopped",
            file=sys.stderr,
        )
        if all(o.ok or o.status == "budget_reached" for o in outcomes):
            from speedrunner.core.llm.spend_cap import CAP_EXIT_CODE

            return CAP_EXIT_CODE
    return 1


def spend_ledger_env(sweep: Sweep) -> dict[str, str]:
    """With a sweep-level cap: the ledger every run of the sweep checks its calls against.

    Runs that already spent (an earlier attempt of the sweep) are entered from their logs
    unless they are in the ledger already; a run entering itself when it starts wins.
    """
    cap = sweep.spec.max_cost_usd
    if cap is None or not sweep.runs:
        return {}
    from speedrunner.core.llm.spend_cap import (
        SWEEP_CAP_ENV,
        SWEEP_LEDGER_ENV,
        SweepLedger,
        run_spent,
    )

    path = ledger_path(sweep)
    for r in sweep.runs:
        SweepLedger(path, cap, r.run_id).register_if_missing(
            lambda r=r: run_spent(r.run_dir, r.run_id)
        )
    return {SWEEP_LEDGER_ENV: str(path), SWEEP_CAP_ENV: repr(cap)}


def ledger_path(sweep: Sweep) -> Path:
    """``<output_root>/sweeps/<sweep>/spend.json``, beside the runs' logs."""
    return sweep.runs[0].log_file.parent.parent / "spend.json"


def spend_line(sweep: Sweep) -> str:
    """What the sweep spent, against its cap when it has one."""
    from speedrunner.core.llm.spend_cap import read_ledger, run_spent

    if sweep.spec.max_cost_usd is not None and sweep.runs:
        data = read_ledger(ledger_path(sweep))
        total = sum(float(r.get("spent", 0.0)) for r in data["runs"].values())
        return f"the sweep spent ${total:.4f} of its ${sweep.spec.max_cost_usd:.2f}"
    return f"the sweep spent ${sum(run_spent(r.run_dir, r.run_id) for r in sweep.runs):.4f}"


_SIGNAL: dict[str, int] = {}


@contextlib.contextmanager
def _sigterm_as_interrupt() -> Iterator[None]:
    """Ctrl-C and SIGTERM (SLURM's scancel or time limit, ``kill``) stop the sweep; a second
    signal while it stops is ignored, so the runs finish stopping and the table prints."""

    def handler(signum: int, frame: object) -> None:
        if "sig" in _SIGNAL:
            return
        _SIGNAL["sig"] = signum
        raise KeyboardInterrupt

    _SIGNAL.clear()
    if (
        threading.current_thread() is not threading.main_thread()
    ):  # only there can Python handle signals
        yield
        return
    previous = {s: signal.signal(s, handler) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for s, h in previous.items():
            signal.signal(s, h)


def _status(o: Outcome) -> str:
    if o.action == "skip" and o.ok:
        return "finished*"  # finished by an earlier attempt
    if o.action in ("busy", "broken"):
        return o.action
    return "not started" if o.status == "missing" else o.status


def print_outcomes(outcomes: list[Outcome], sweep_path: Path | None = None) -> None:
    """One line per run: status, the evaluation's progress and metric, cost, run dir; then
    failures' log tails and the report command (over ``sweep_path`` when given). Progress and
    metric are the last evaluation's means (the final one once a run finished), never
    training's: a run that succeeded in training can show 0 here."""
    print("\nstatus      episodes  eval progress  eval metric          cost             run")
    for o in outcomes:
        episodes = f"{o.episodes}/{o.rollouts if o.rollouts is not None else '?'}"
        progress = "-" if o.progress is None else f"{o.progress:.3f}"
        metric = (
            f"eval {o.metric} {o.metric_value:.3f}"
            if o.metric and o.metric_value is not None
            else "-"
        )
        cost = ("unknown" if o.episodes else "-") if o.cost_usd is None else f"${o.cost_usd:.4f}"
        cost += " scripted" if o.scripted else " fake" if o.fake else ""
        where = f"  [node {o.node}]" if o.node else ""
        said = f"  ({o.note})" if o.note and "retried" in o.note else ""
        print(
            f"{_status(o):<11} {episodes:>8}  {progress:>13}  {metric:<20} {cost:<16} "
            f"{o.run_dir}{where}{said}"
        )
    print(
        "(eval progress, eval metric: means over the last evaluation's episodes, the final "
        "evaluation once a run finished; training's success is in each run's metrics.jsonl)"
    )
    if any(o.action == "skip" and o.ok for o in outcomes):
        print("(finished*: finished by an earlier attempt of the sweep; skipped)")
    for o in outcomes:
        if o.ok and o.exit_code in (None, 0):
            continue
        why = f"exit code {o.exit_code}" if o.exit_code is not None else o.note
        log = f"; log {o.log_file}" if Path(o.log_file).is_file() else ""
        print(f"\n{o.label}: {_status(o)} ({why}){log}", file=sys.stderr)
        for line in o.log_tail:
            print(f"  | {line}", file=sys.stderr)
    done = [o.run_dir for o in outcomes if Path(o.run_dir).is_dir()]
    if done and sweep_path is not None:
        print(
            f"\nreport over the sweep's runs:\n  speedrunner report {shlex.quote(str(sweep_path))}"
        )
    elif done:
        print(
            "\nreport over these runs:\n  speedrunner report "
            + " ".join(shlex.quote(d) for d in done)
        )


def submit_and_follow(
    sweep: Sweep, tasks: int, *, status_every: float | None = STATUS_EVERY_S
) -> int:
    """``sbatch`` the array, follow it to its end (and each run from its files), then report
    every run from its directory."""
    from speedrunner.sweep.execute import plan, read_outcome
    from speedrunner.sweep.slurm import follow, slurm_env_note, submit, submitted_command

    before = {r.run_id: plan(r)[0] for r in sweep.runs}
    tasks, per_task = _array_shape(sweep, tasks)
    script = sbatch_script(sweep, tasks, command=submitted_command(sweep.path, tasks, per_task))
    watch = Watch(
        sweep.runs, every_s=status_every, cap_usd=sweep.spec.max_cost_usd, ends_from_disk=True
    )
    for r in sweep.runs:  # the logs' sizes before any array task can start
        if before[r.run_id] in ("start", "resume"):
            watch.queued(r, before[r.run_id], quiet=True)
    job_id, path = submit(sweep, script)
    print(
        f"sweep {sweep.spec.name}: submitted as SLURM job {job_id} ({tasks} array tasks, "
        f"script {path}){slurm_env_note()}; following it (Ctrl-C stops following, not the job)",
        flush=True,
    )
    watch.say_queued()
    try:
        with watch:
            follow(job_id, say=watch.say)
    except KeyboardInterrupt:
        print(f"stopped following; the array runs on: squeue -j {job_id}", file=sys.stderr)
        return 130
    outcomes = [read_outcome(r, before[r.run_id], None) for r in sweep.runs]
    print_outcomes(outcomes, sweep.path)
    if not all(o.ok for o in outcomes):
        print(
            "resubmit to continue what did not finish: "
            f"speedrunner sweep {sweep.path} --backend slurm --submit",
            file=sys.stderr,
        )
    return 0 if all(o.ok for o in outcomes) else 1


def _array_shape(sweep: Sweep, tasks: int) -> tuple[int, int]:
    tasks = max(1, min(tasks, len(sweep.runs)))
    return tasks, -(-len(sweep.runs) // tasks)


def sbatch_script(sweep: Sweep, tasks: int, *, command: str | None = None) -> str:
    """An ``sbatch`` script: array task I runs shard I of ``tasks`` (``command`` replaces the
    printed script's ``speedrunner sweep ...`` line when this process submits it)."""
    tasks, per_task = _array_shape(sweep, tasks)
    cpus = max(1, round(sweep.spec.resources.num_cpus * per_task))  # a task's runs run side by side
    path = shlex.quote(str(sweep.path))
    runs_dir = sweep.runs[0].run_dir.parents[3] if sweep.runs else "runs"
    command = command or (
        f"exec speedrunner sweep {path} --backend slurm "
        f'--shard "${{SLURM_ARRAY_TASK_ID}}/{tasks}" --workers {per_task}'
    )
    # A backslash at a line's end continues the script's line (Python drops it and the newline).
    return f"""#!/bin/bash
# {len(sweep.runs)} runs of sweep {sweep.spec.name} as {tasks} array tasks \
(up to {per_task} runs each, side by side).
# Submit: sbatch this_file.sh   Rerun the same script after a crash: finished runs are skipped,
# killed ones resumed. The runs' directory ({runs_dir})
# must be on a filesystem every node sees.
#SBATCH --job-name=sweep-{sweep.spec.name}
#SBATCH --array=0-{tasks - 1}
#SBATCH --cpus-per-task={cpus}
#SBATCH --time=24:00:00
#SBATCH --output=slurm-%A_%a.out
#SBATCH --signal=B:TERM@120

cd {shlex.quote(os.getcwd())}
{command}
"""
