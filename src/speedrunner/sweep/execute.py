"""One sweep run: decide what to do with its directory, run the train entry point, read the result.

Each run is a subprocess of its ordinary train entry point (``python -m
speedrunner.benchmarks.<b>.train``): runs cannot corrupt each other, and a kill and a rerun
take the same ``--resume`` path a user would, so the run's response cache replays every
LLM answer already paid for. What to do is read from the run directory alone:

- no directory (or an empty one): start it with ``--run_dir``;
- ``summary.json`` says ``finished``: skip it;
- a run directory in any other state (killed, interrupted, failed): ``--resume`` it;
- a directory another process holds (its lock): leave it alone and say so.
"""

from __future__ import annotations

import ctypes
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from speedrunner.core.records import RunSummary, SummaryError, stored_summary
from speedrunner.core.redact import scrub
from speedrunner.sweep.spec import SweepRun

Action = Literal["skip", "start", "resume", "busy", "broken"]
LOG_TAIL_LINES = 15


@dataclass
class Outcome:
    """How one run stands after the sweep touched it (plain data: it crosses Ray too)."""

    run_id: str
    label: str
    run_dir: str
    action: Action
    exit_code: int | None = None
    status: str = "missing"
    """summary.json's status (finished, running, interrupted, failed), or ``missing``."""
    episodes: int = 0
    rollouts: int | None = None
    metric: str | None = None
    metric_value: float | None = None
    """The last evaluation's mean of the run's speedrun metric (final eval once finished)."""
    progress: float | None = None
    """The last evaluation's mean progress (the final evaluation once finished)."""
    cost_usd: float | None = None
    """Money actually spent (the sum of llm_calls.jsonl ``spent_usd``; replays cost nothing);
    ``None`` when a call's price is unknown (a sum would silently count it as 0)."""
    scripted: bool = False
    fake: bool = False
    """Its model is the fake LLM server's (a ``fake-`` name): no real model answered."""
    node: str = ""
    """The Ray node that ran it last (empty on the local pool and SLURM)."""
    log_file: str = ""
    log_tail: list[str] = field(default_factory=list)
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def ok(self) -> bool:
        return self.status == "finished"


def plan(run: SweepRun) -> tuple[Action, str]:
    """What to do with ``run``'s directory, and why (one line)."""
    from speedrunner.core.rundir import PROVENANCE_FILE, lock_holder

    d = run.run_dir
    if not d.exists() or (d.is_dir() and not any(d.iterdir())):
        return "start", "new"
    if not (d / PROVENANCE_FILE).is_file():
        return "broken", (
            f"{d} exists but is not a run directory (no {PROVENANCE_FILE}); "
            "move it away and rerun the sweep"
        )
    holder = lock_holder(d)
    if holder is not None:
        return "busy", f"in use by PID {holder} (another sweep or run is working in it)"
    changed = config_changed(run)
    try:
        summary = stored_summary(d)
    except SummaryError as e:  # the resume rewrites it from the checkpoint
        return "resume", f"continuing ({e})" + changed
    if summary is not None and summary.status == "finished":
        return "skip", "finished earlier" + changed
    return (
        "resume",
        f"continuing ({'killed before its first summary' if summary is None else summary.status})"
        + changed,
    )


def config_changed(run: SweepRun) -> str:
    """A warning when the config file differs from the copy the run started with, else ""."""
    from speedrunner.core.rundir import CONFIG_FILE

    try:
        same = (run.run_dir / CONFIG_FILE).read_bytes() == run.config_file.read_bytes()
    except OSError:
        return ""
    return (
        ""
        if same
        else (
            f"; WARNING: {run.config_file.name} changed since this run started; the run "
            "keeps the config it started with (move its directory away to start afresh)"
        )
    )


def command(run: SweepRun, action: Action, operational: Sequence[str] = ()) -> list[str]:
    """The train command for ``run``; ``operational`` are ``--set`` keys a resume may change too."""
    cmd = [sys.executable, "-m", "speedrunner.cli", "train"]  # any benchmark and method, installed
    if action == "resume":
        from speedrunner.sweep.spec import RESUME_KEYS

        cmd += ["--resume", str(run.run_dir)]
        overrides: list[str] = [o for o in run.overrides if o.split("=", 1)[0] in RESUME_KEYS]
        overrides += list(operational)
    else:
        cmd += ["--config_file", str(run.config_file), "--run_dir", str(run.run_dir)]
        overrides = [*run.overrides, *operational]
    for o in overrides:
        cmd += ["--set", o]
    return cmd


def _stop_with_parent() -> None:
    """In the run's process before exec: SIGTERM it when the process that started it dies (a
    Ray worker whose node was killed, a SLURM step), so it stops resumably and frees its run
    lock for the retry instead of running on as an orphan. Linux only; elsewhere a no-op."""
    if _LIBC is not None:
        _LIBC.prctl(1, signal.SIGTERM, 0, 0, 0)  # PR_SET_PDEATHSIG


def _load_libc() -> Any:
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL(None, use_errno=True)
    except OSError:
        return None


_LIBC = _load_libc()  # loaded here, not between fork and exec


def execute(
    run: SweepRun,
    *,
    operational: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
    on_start: Callable[[subprocess.Popen[bytes]], None] | None = None,
    announce: Callable[[SweepRun, Action, str], None] | None = None,
) -> Outcome:
    """Run (or skip) one sweep run to its end and report how it stands; ``announce`` hears
    (run, start or resume, why) once its process is up."""
    action, why = plan(run)
    if action in ("skip", "busy", "broken"):
        return read_outcome(run, action, None, note=why)
    run.log_file.parent.mkdir(parents=True, exist_ok=True)
    cmd = command(run, action, operational)
    with open(run.log_file, "ab") as log:
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S%z")
        log.write(
            f"\n=== sweep {action} at {stamp}: {scrub(' '.join(cmd))}\n".encode()
        )  # no key in a log
        log.flush()
        proc = subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=dict(env) if env is not None else None,
            preexec_fn=_stop_with_parent,
        )
        try:
            if on_start is not None:
                on_start(proc)
            if announce is not None:
                announce(run, action, why)
            code = proc.wait()
        except (
            BaseException
        ):  # e.g. a cancelled Ray task: stop the run the resumable way, not orphan it
            proc.terminate()
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
            raise
    return read_outcome(run, action, code, note=why)


def read_outcome(
    run: SweepRun, action: Action, exit_code: int | None, *, note: str = ""
) -> Outcome:
    """What the run directory (and the log, for a failure) says now."""
    d = run.run_dir
    try:
        summary = stored_summary(d)
    except SummaryError as e:
        summary, note = None, f"{note}; {e}" if note else str(e)
    resolved = _json(d / "config.resolved.json")
    metric = (resolved.get("speedrun") or {}).get("metric")
    means = _last_means(summary)
    outcome = Outcome(
        run_id=run.run_id,
        label=run.label,
        run_dir=str(d),
        action=action,
        exit_code=exit_code,
        status="missing" if summary is None else summary.status,
        episodes=len(
            list((d / "episodes" / "train").glob("*.json"))
        ),  # kept on disk; a resume reuses them
        rollouts=(resolved.get("run") or {}).get("rollouts"),
        metric=metric,
        metric_value=means.get(metric) if metric else None,
        progress=means.get("progress"),
        cost_usd=_spent(d / "llm_calls.jsonl"),
        scripted=summary is not None and summary.scripted,
        fake=summary is not None and summary.model.startswith("fake-"),
        log_file=str(run.log_file),
        note=note,
    )
    if exit_code not in (None, 0) or (action != "skip" and outcome.status != "finished"):
        outcome.log_tail = _tail(run.log_file, LOG_TAIL_LINES)
    return outcome


def _last_means(summary: RunSummary | None) -> dict[str, float]:
    """The means of the run's last evaluation (its final one once finished), by metric."""
    last = (
        None
        if summary is None
        else summary.final_eval or (summary.eval[-1] if summary.eval else None)
    )
    return {} if last is None else {"success": last.success_mean, "progress": last.progress_mean}


def _json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text("utf-8"))
    except (OSError, json.JSONDecodeError, UnicodeDecodeError):
        return {}
    return data if isinstance(data, dict) else {}


def _spent(calls: Path) -> float | None:
    """The run's spend (``core.llm.spent``: what every SpeedRunner line shows); ``None`` if a
    paid call's price is unknown, or nothing was logged."""
    if not calls.is_file():
        return None
    from speedrunner.core.llm.spent import CallLogTotals

    return CallLogTotals(calls).read().spent_usd


def _tail(path: Path, n: int) -> list[str]:
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - 16384))
            lines = f.read().decode("utf-8", "replace").splitlines()
    except OSError:
        return []
    return [line for line in lines if line.strip()][-n:]
