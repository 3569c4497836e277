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


def why_unavailable() -> str | None:
    missing = [b for b in BINARIES if shutil.which(b) is None]
    if missing:
        return f"SLURM or munge is not installed ({', '.join(missing)} missing): apt-get install slurm-wlm munge"
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
        return subprocess.run(list(args), env=self.env, capture_output=True, text=True, timeout=timeout)

    def stop(self) -> None:
        self.run("scancel", "--user=root", timeout=30)
        for pid in reversed(self.pids):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, 15)
        time.sleep(0.5)


def start(root: Path) -> Cluster:
    host = socket.gethostname()
    for name in ("state", "spool", "log", "run", "munge"):
        (root / name).mkdir(parents=True, exist_ok=True)
    shutil.chown(root / "munge", "munge", "munge")
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
    subprocess.run(["munged", f"--socket={munge_socket}", f"--pid-file={root}/munge/munged.pid",
                    f"--log-file={root}/log/munged.log", f"--seed-file={root}/munge/seed", "-f"],
                   check=True, capture_output=True, timeout=30)
    subprocess.run(["slurmctld", "-f", str(conf)], check=True, env=env, capture_output=True, timeout=30)
    subprocess.run(["slurmd", "-f", str(conf)], check=True, env=env, capture_output=True, timeout=30)
    pids = [int((root / p).read_text()) for p in ("munge/munged.pid",)]
    cluster = Cluster(root, env, pids)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        state = cluster.run("sinfo", "-h", "-o", "%T").stdout.strip()
        if state in ("idle", "mixed", "allocated"):
            cluster.pids += [int((root / "run" / f).read_text()) for f in ("slurmctld.pid", "slurmd.pid")]
            return cluster
        time.sleep(0.5)
    logs = "\n".join((root / "log" / f).read_text()[-1500:] for f in ("slurmctld.log", "slurmd.log")
                     if (root / "log" / f).exists())
    raise RuntimeError(f"the test SLURM cluster did not come up (sinfo: {state!r}):\n{logs}")
