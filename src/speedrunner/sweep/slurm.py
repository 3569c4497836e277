"""SLURM: submit a sweep as a job array with ``sbatch``, follow it, report every run.

Array task ``I`` of ``N`` runs shard ``I/N`` of the sweep on its node's local pool
(``speedrunner sweep --backend slurm --shard I/N``). SLURM schedules; the run directories
decide what is left, as for every backend: resubmitting the same sweep skips finished runs
and resumes the rest, so an array task that was cancelled, preempted or timed out loses
nothing but the episodes it was playing.

Following needs only ``squeue`` and ``scontrol`` (``sacct`` works only where the cluster
keeps accounting; it is used when it answers). What each run reached is read from its run
directory, never from SLURM's exit codes alone.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from speedrunner.core.atomic import atomic_write_text
from speedrunner.errors import SpeedRunnerError
from speedrunner.sweep.spec import Sweep


class SlurmError(SpeedRunnerError):
    """sbatch / squeue missing or refusing: the message is SLURM's."""


@dataclass(frozen=True)
class ArrayTask:
    task_id: str
    state: str
    exit_code: str | None = None


def _slurm(args: list[str]) -> str:
    try:
        proc = subprocess.run(args, capture_output=True, text=True, timeout=60)
    except FileNotFoundError:
        raise SlurmError(
            f"{args[0]} not found: submitting needs a SLURM client on this machine "
            "(or print the script with --print-sbatch and submit it by hand)"
        ) from None
    if proc.returncode != 0:
        raise SlurmError(
            f"{shlex.join(args)} failed ({proc.returncode}): "
            f"{proc.stderr.strip() or proc.stdout.strip()}"
        )
    return proc.stdout


def script_path(sweep: Sweep) -> Path:
    """Where a submitted sweep's script is kept: beside its runs, on the shared file system."""
    root = sweep.runs[0].run_dir.parents[3] if sweep.runs else Path("runs")
    return root / "sweeps" / f"{sweep.spec.name}.sbatch"


def submit(sweep: Sweep, script: str, *, extra_args: list[str] = ()) -> tuple[str, Path]:
    """Write the script and ``sbatch`` it; the array's job id and the script's path."""
    path = script_path(sweep)
    atomic_write_text(path, script)
    out = _slurm(["sbatch", "--parsable", *extra_args, str(path)]).strip()
    job_id = out.split(";", 1)[0]  # "<id>[;<cluster>]"
    if not re.fullmatch(r"\d+", job_id):
        raise SlurmError(f"sbatch answered {out!r}, not a job id")
    return job_id, path


def queued(job_id: str) -> list[ArrayTask]:
    """The array's tasks still pending or running (``squeue``)."""
    out = _slurm(["squeue", "-h", "-j", job_id, "-r", "-o", "%i %T"])
    return [ArrayTask(*line.split()[:2]) for line in out.splitlines() if line.strip()]


def finished(job_id: str) -> list[ArrayTask]:
    """How each array task ended, from ``sacct`` when accounting is on, else ``scontrol``
    (which keeps ended jobs for ``MinJobAge``); empty when SLURM no longer knows."""
    try:
        out = _slurm(["sacct", "-n", "-P", "-X", "-j", job_id, "-o", "JobID,State,ExitCode"])
        tasks = [ArrayTask(*line.split("|")[:3]) for line in out.splitlines() if line.strip()]
        if tasks:
            return tasks
    except SlurmError:
        pass
    try:
        out = _slurm(["scontrol", "-o", "show", "job", job_id])
    except SlurmError:
        return []
    tasks = []
    for line in out.splitlines():
        fields = dict(f.split("=", 1) for f in line.split() if "=" in f)
        if "ArrayTaskId" in fields:
            tasks.append(
                ArrayTask(
                    f"{fields.get('ArrayJobId', job_id)}_{fields['ArrayTaskId']}",
                    fields.get("JobState", "?"),
                    fields.get("ExitCode"),
                )
            )
    return sorted(tasks, key=lambda t: t.task_id)


def follow(
    job_id: str, *, poll_s: float = 2.0, say: Callable[[str], None] = print
) -> list[ArrayTask]:
    """Wait until no task of the array is pending or running, saying each change of state."""
    seen: dict[str, str] = {}
    while True:
        tasks = queued(job_id)
        for t in tasks:
            if seen.get(t.task_id) != t.state:
                say(f"slurm: {t.task_id} {t.state.lower()}")
                seen[t.task_id] = t.state
        if not tasks:
            break
        time.sleep(poll_s)
    ended = finished(job_id)
    for t in ended:
        say(
            f"slurm: {t.task_id} {t.state.lower()}"
            + (f" (exit {t.exit_code})" if t.exit_code else "")
        )
    return ended


def submitted_command(sweep_path: Path, tasks: int, per_task: int) -> str:
    """The array task's command when this process submits it: this very interpreter, so the
    job needs no ``speedrunner`` on its PATH."""
    return (
        f"exec {shlex.quote(sys.executable)} -m speedrunner.cli sweep "
        f"{shlex.quote(str(sweep_path))} "
        f'--backend slurm --shard "${{SLURM_ARRAY_TASK_ID}}/{tasks}" --workers {per_task}'
    )


def slurm_env_note() -> str:
    conf = os.environ.get("SLURM_CONF")
    return f" (SLURM_CONF={conf})" if conf else ""
