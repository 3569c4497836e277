"""``speedrunner sweep --backend slurm --submit`` on a real one-node SLURM cluster: the array
is submitted with sbatch, followed to its end and reported per run; a task cancelled with
scancel mid-run is resumed by resubmitting the sweep, and finished runs are skipped.

Skips (with the reason) only where the cluster cannot start: no slurm-wlm/munge, or not root.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from speedrunner.sweep.spec import load_sweep

from . import slurm_cluster
from .test_sweep_runs import env, sweep_file

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    why = slurm_cluster.why_unavailable()
    if why:
        pytest.skip(f"SLURM cluster tests did not run: {why}")
    try:
        c = slurm_cluster.start(tmp_path_factory.mktemp("slurm"))
    except slurm_cluster.Unavailable as e:  # this machine's reason, never the project's code
        pytest.skip(f"SLURM cluster tests did not run: {e}")
    yield c
    c.stop()


def submit(cluster, path: Path, *extra: str, timeout: float = 400) -> subprocess.CompletedProcess:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "speedrunner.cli",
            "sweep",
            str(path),
            "--backend",
            "slurm",
            "--submit",
            *extra,
        ],
        env={**env(), "SLURM_CONF": cluster.env["SLURM_CONF"]},
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=path.parent,
    )


def statuses(root: Path) -> dict[str, str]:
    return {
        str(p.parent.relative_to(root)): json.loads(p.read_text())["status"]
        for p in sorted(root.rglob("summary.json"))
    }


def test_a_sweep_submitted_as_an_array_runs_every_run_and_reports_each(cluster, tmp_path):
    path = sweep_file(tmp_path, tmp_path / "runs")
    proc = submit(cluster, path, "--tasks", "2", "--status-every", "0.2")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "submitted as SLURM job" in proc.stdout and "(2 array tasks" in proc.stdout
    for r in load_sweep(path).runs:  # followed from the runs' files: SLURM says nothing per run
        for line in (
            f"[queued] {r.label}: run dir {r.run_dir}; log {r.log_file}",
            f"[start] {r.label} (on a worker): run dir {r.run_dir}",
            f"[finished] {r.label}  (",
        ):
            assert line in proc.stdout, proc.stdout[-3000:]
    job = proc.stdout.split("submitted as SLURM job ", 1)[1].split()[0]
    assert f"slurm: {job}_0 completed" in proc.stdout and f"slurm: {job}_1 completed" in proc.stdout
    assert (
        set(statuses(tmp_path / "runs").values()) == {"finished"}
        and len(statuses(tmp_path / "runs")) == 4
    )
    table = proc.stdout.split("status      episodes", 1)[1]
    assert table.count("finished") >= 4 and "3/3" in table
    assert (tmp_path / "runs" / "sweeps" / "tiny.sbatch").read_text().count("--shard") == 1


def test_a_cancelled_array_task_is_resumed_on_resubmit_and_finished_runs_are_skipped(
    cluster, tmp_path
):
    path = sweep_file(tmp_path, tmp_path / "runs", extra="")
    text = (
        path.read_text()
        .replace("run.rollouts: 3", "run.rollouts: 40")
        .replace("run.eval_every: 3", "run.eval_every: 40")
    )
    path.write_text(text)
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "speedrunner.cli",
            "sweep",
            str(path),
            "--backend",
            "slurm",
            "--submit",
            "--tasks",
            "4",
        ],
        env={**env(), "SLURM_CONF": cluster.env["SLURM_CONF"]},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=tmp_path,
    )
    root = tmp_path / "runs"
    deadline = time.monotonic() + 200
    victim = None
    while (
        time.monotonic() < deadline and victim is None
    ):  # cancel one task once its run has episodes
        for run_dir in sorted(root.glob("babyai/*/seed*/tiny-*")):
            if (
                len(list((run_dir / "episodes" / "train").glob("*.json"))) >= 2
                and json.loads((run_dir / "summary.json").read_text())["status"] == "running"
            ):
                victim = run_dir
                break
        time.sleep(0.3)
    assert victim is not None, "no run got going"
    queue = cluster.run("squeue", "-h", "-r", "-o", "%i %T").stdout.split()
    tasks = queue[0::2]
    assert tasks, queue
    # With one run per task, array task I holds run I of the sweep: cancel the victim's.
    index = next(r.index for r in load_sweep(path).runs if r.run_dir == victim)
    target = next(t for t in tasks if t.endswith(f"_{index}"))
    assert cluster.run("scancel", target).returncode == 0
    out, err = proc.communicate(timeout=400)
    assert proc.returncode == 1, out[-2000:] + err[-2000:]  # one run did not finish
    assert f"slurm: {target} cancelled" in out
    after_cancel = statuses(root)
    assert after_cancel[str(victim.relative_to(root))] in ("interrupted", "running")
    finished_before = {k for k, v in after_cancel.items() if v == "finished"}
    assert len(finished_before) == 3

    again = submit(cluster, path, "--tasks", "4")
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    assert set(statuses(root).values()) == {"finished"}
    provenance = json.loads((victim / "provenance.json").read_text())
    assert provenance.get("resumes"), "the cancelled run was resumed, not restarted"
    for rel in finished_before:  # finished runs: not touched again
        assert not json.loads((root / rel / "provenance.json").read_text()).get("resumes")
    assert again.stdout.count("finished*") >= 3


def test_daemons_that_cannot_start_here_are_a_reason_to_skip_not_an_error(tmp_path, monkeypatch):
    """munged refusing to start (here: a stand-in that fails as munged does without its key)
    is this machine's problem: ``start`` says so as ``Unavailable``, which the fixture turns
    into a skip naming it, and leaves no daemon behind."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "munged"
    fake.write_text(
        "#!/bin/sh\n"
        "echo 'munged: Error: Failed to find keyfile \"/etc/munge/munge.key\"' >&2\nexit 1\n"
    )
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    with pytest.raises(slurm_cluster.Unavailable) as caught:
        slurm_cluster.start(tmp_path / "slurm")
    assert "munge" in str(caught.value)
    assert not (tmp_path / "slurm" / "run" / "slurmctld.pid").exists()  # nothing after munged ran
