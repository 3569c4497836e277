"""A real one-node SLURM cluster on this machine, for the sweep tests: munged, slurmctld and
slurmd started from a generated ``slurm.conf`` in a temporary folder (Debian's ``slurm-wlm``
and ``munge``, which ``.ci/run`` installs). Needs root (slurmd runs jobs as their user).
Clients find it through ``SLURM_CONF``."""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

BINARIES = ("munged", "slurmctld", "slurmd", "sbatch", "squeue", "scontrol", "scancel", "sinfo")
MUNGE_KEY = Path("/etc/munge/munge.key")


class Unavailable(Exception):
    """The cluster cannot run on this machine (a daemon would not start, no munge user, ...):
    a reason of the machine's, which the tests report as a skip. Anything else that goes wrong
    (the project's sweep code included) stays a failure."""


def why_unavailable() -> str | None:
    missing = [b for b in BINARIES if shutil.which(b) is None]
    if missing:
        return (
            f"SLURM or munge is not installed ({', '.join(missing)} missing): "
            "apt-get install slurm-wlm munge"
        )
    if os.geteuid() != 0:
        return "starting slurmd and munged needs root"
    if not MUNGE_KEY.exists():
        return f"{MUNGE_KEY} is missing (the munge package creates it)"
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Cluster:
    root: Path
    env: dict[str, str]
    pids: list[int]

    def run(self, *args: str, timeout: float = 60) -> subprocess.CompletedProcess:
        return subprocess.run(
            list(args), env=self.env, capture_output=True, text=True, timeout=timeout
        )

    def stop(self) -> None:
        if len(self.pids) == 3:  # slurmctld answers: cancel what is still queued
            with contextlib.suppress(OSError, subprocess.TimeoutExpired):
                self.run("scancel", "--user=root", timeout=30)
        for pid in reversed(self.pids):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, 15)
        time.sleep(0.5)


def start(root: Path) -> Cluster:
    host = socket.gethostname()
    for name in ("state", "spool", "log", "run", "munge"):
        (root / name).mkdir(parents=True, exist_ok=True)
    try:
        shutil.chown(root / "munge", "munge", "munge")
    except (LookupError, PermissionError) as e:
        raise Unavailable(f"munged's folder cannot be given to the munge user: {e}") from e
    munge_socket = root / "munge" / "munge.socket.2"
    conf = root / "slurm.conf"
    conf.write_text(f"""\
ClusterName=speedrunner-test
SlurmctldHost={host}
SlurmctldPort={_free_port()}
SlurmdPort={_free_port()}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket={munge_socket}
CredType=cred/munge
StateSaveLocation={root}/state
SlurmdSpoolDir={root}/spool
SlurmctldPidFile={root}/run/slurmctld.pid
SlurmdPidFile={root}/run/slurmd.pid
SlurmctldLogFile={root}/log/slurmctld.log
SlurmdLogFile={root}/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
ReturnToService=2
SchedulerType=sched/backfill
MinJobAge=600
KillWait=10
NodeName={host} CPUs={os.cpu_count() or 1} State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
""")
    env = {**os.environ, "SLURM_CONF": str(conf)}
    cluster = Cluster(root, env, [])
    try:
        _daemon(
            [
                "munged",
                f"--socket={munge_socket}",
                f"--pid-file={root}/munge/munged.pid",
                f"--log-file={root}/log/munged.log",
                f"--seed-file={root}/munge/seed",
                "-f",
            ],
            env,
            root / "munge" / "munged.pid",
            cluster,
        )
        _daemon(["slurmctld", "-f", str(conf)], env, root / "run" / "slurmctld.pid", cluster)
        _daemon(["slurmd", "-f", str(conf)], env, root / "run" / "slurmd.pid", cluster)
        deadline = time.monotonic() + 30
        state = ""
        while time.monotonic() < deadline:
            state = cluster.run("sinfo", "-h", "-o", "%T").stdout.strip()
            if state in ("idle", "mixed", "allocated"):
                return cluster
            time.sleep(0.5)
        logs = "\n".join(
            (root / "log" / f).read_text()[-1500:]
            for f in ("slurmctld.log", "slurmd.log")
            if (root / "log" / f).exists()
        )
        raise Unavailable(f"the test SLURM cluster did not come up (sinfo: {state!r}):\n{logs}")
    except BaseException:
        cluster.stop()  # never leave a half-started cluster's daemons behind
        raise


def _daemon(cmd: list[str], env: dict[str, str], pid_file: Path, cluster: Cluster) -> None:
    """Start one daemon (it forks into the background and writes ``pid_file``); a daemon
    that does not start is a reason of this machine's, with what it printed."""
    try:
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise Unavailable(f"{cmd[0]} did not start: {e}") from e
    if proc.returncode != 0:
        raise Unavailable(
            f"{cmd[0]} did not start (exit {proc.returncode}): "
            f"{(proc.stderr or proc.stdout).strip()[-1500:]}"
        )
    deadline = time.monotonic() + 10
    while not pid_file.exists() or not pid_file.read_text().strip():
        if time.monotonic() > deadline:
            raise Unavailable(f"{cmd[0]} started but wrote no pid file ({pid_file})")
        time.sleep(0.1)
    cluster.pids.append(int(pid_file.read_text()))
