"""Where a sweep's runs execute: a process pool on this machine, or Ray tasks.

SLURM needs no backend of its own: each array task runs its shard (``--shard I/N``) on the
local pool of its node.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor, as_completed
from typing import Any

from speedrunner.core.llm.slots import SLOTS_DIR_ENV
from speedrunner.errors import SpeedRunnerError
from speedrunner.sweep.execute import Action, Outcome, execute, read_outcome
from speedrunner.sweep.spec import SweepRun

Report = Callable[[Outcome, int, int], None]
Announce = Callable[[SweepRun, Action, str], None]
"""Hears (run, start or resume, why) when a run's process starts on this machine."""
Queued = Callable[[SweepRun, Action], None]
"""Hears (run, start or resume) when a run is handed to Ray, which starts it on some node."""
RAY_HINT = 'pip install -e ".[ray]"'


class SweepBackendError(SpeedRunnerError):
    """Raised when a sweep backend cannot be used (Ray missing, no cluster at --address)."""


class LocalPool:
    """Up to ``workers`` runs at once, each a child process of this one.

    On Ctrl-C or SIGTERM no further run starts; running ones get SIGTERM (they stop before
    their next paid call and mark themselves interrupted) and are waited for.
    """

    def __init__(self, workers: int) -> None:
        if workers < 1:
            raise SweepBackendError(f"--workers {workers}: must be at least 1")
        self.workers = workers
        self._stop = threading.Event()
        self._procs: set[subprocess.Popen[bytes]] = set()
        self._lock = threading.Lock()

    def run(
        self,
        runs: list[SweepRun],
        operational: Callable[[SweepRun], list[str]],
        extra_env: dict[str, str],
        report: Report,
        announce: Announce | None = None,
    ) -> list[Outcome]:
        env = {**os.environ, **extra_env}
        results: dict[str, Outcome] = {}
        with ThreadPoolExecutor(self.workers, thread_name_prefix="sweep-run") as pool:
            futures: dict[Future[Outcome], SweepRun] = {
                pool.submit(self._one, r, operational(r), env, announce): r for r in runs
            }
            try:
                for n, future in enumerate(as_completed(futures), 1):
                    outcome = future.result()
                    results[outcome.run_id] = outcome
                    report(outcome, n, len(runs))
            except KeyboardInterrupt:
                self.stop(signal.SIGTERM)
                for future, run in futures.items():
                    results[run.run_id] = future.result()
                raise SweepInterrupted([results[r.run_id] for r in runs]) from None
        return [results[r.run_id] for r in runs]

    def stop(self, signum: int) -> None:
        self._stop.set()
        with self._lock:
            for proc in self._procs:
                if proc.poll() is None:
                    proc.send_signal(signum)

    def _one(
        self, run: SweepRun, operational: list[str], env: dict[str, str], announce: Announce | None
    ) -> Outcome:
        if self._stop.is_set():
            return read_outcome(run, "skip", None, note="not started: the sweep was stopped")
        try:
            return execute(
                run, operational=operational, env=env, on_start=self._track, announce=announce
            )
        except OSError as e:  # e.g. the log directory cannot be written: the other runs go on
            return read_outcome(run, "broken", None, note=f"could not start: {e}")

    def _track(self, proc: subprocess.Popen[bytes]) -> None:
        with self._lock:
            self._procs = {p for p in self._procs if p.poll() is None} | {proc}
            if self._stop.is_set():
                proc.send_signal(signal.SIGTERM)  # started as the sweep stopped


class SweepInterrupted(KeyboardInterrupt):
    """The sweep was stopped; ``outcomes`` says how every run stands."""

    def __init__(self, outcomes: list[Outcome]) -> None:
        super().__init__("sweep interrupted")
        self.outcomes = outcomes


RAY_RETRIES = 3
"""Ray retries a task whose worker or node died (never one that returned): the retry finds the
run half done on the shared file system and resumes it."""


def _ray_execute(
    run: SweepRun, operational: list[str], extra_env: dict[str, str]
) -> dict[str, Any]:
    """The Ray task: the same subprocess a local worker starts, on whichever node Ray picked."""
    import ray

    node = ray.get_runtime_context().get_node_id()[:12]
    run.log_file.parent.mkdir(parents=True, exist_ok=True)
    with open(run.log_file, "ab") as log:  # which node each attempt ran on, for the record
        log.write(f"\n=== Ray node {node}\n".encode())
    out = execute(run, operational=operational, env={**os.environ, **extra_env}).to_dict()
    out["node"] = node
    return out


def import_ray() -> Any:
    try:
        import ray
    except ImportError as e:
        raise SweepBackendError(
            f"--backend ray needs Ray, which is an optional extra: {RAY_HINT} (import failed: {e})"
        ) from None
    return ray


def cluster_llm_limits(ray: Any) -> tuple[Any, dict[str, str]]:
    """Start the sweep's cluster-wide LLM limiter (``core/llm/ray_limits``), and the environment
    that makes each run's calls take their slots from it instead of this machine's slot files,
    which the other nodes cannot see."""
    from speedrunner.core.llm.ray_limits import limiter_env, start_limiter

    name = f"speedrunner-llm-limits-{os.getpid()}-{int(time.time())}"
    return start_limiter(ray, name), limiter_env(ray.get_runtime_context().gcs_address, name)


def _report_limits(ray: Any, limiter: Any) -> None:
    """Say what the cluster-wide limit held (peak calls in flight per endpoint), then stop it."""
    from speedrunner.core.redact import scrub

    try:
        peaks = ray.get(limiter.peaks.remote())
    except (
        ray.exceptions.RayError
    ) as e:  # the runs are done; losing the figure must not fail the sweep
        print(
            f"LLM limit across the cluster: its actor was lost ({type(e).__name__}); runs that "
            "called after that held their limit per process and said so in their logs",
            flush=True,
        )
        return
    try:
        for key, peak in sorted(peaks.items()):
            print(
                f"LLM limit across the cluster: {scrub(key)}: at most {peak} call(s) in flight",
                flush=True,
            )
    finally:
        ray.kill(limiter)


def run_ray(
    runs: list[SweepRun],
    *,
    address: str | None,
    extra_env: dict[str, str],
    report: Report,
    operational: Callable[[SweepRun], list[str]] = lambda r: [],
    init_kwargs: dict[str, Any] | None = None,
    queued: Queued | None = None,
) -> list[Outcome]:
    """Each run one Ray task with its CPUs (and memory, e.g. ScienceWorld's JVMs).

    Connects to the cluster at ``address`` (or ``RAY_ADDRESS``), else starts a local one,
    unless Ray is already initialised in this process. ``operational`` adds resume-safe
    ``--set`` overrides per run (a local Ray's runs share this machine's BabyAI server; on a
    cluster each BabyAI run autostarts one on its node). ``queued`` hears each run that will
    start or resume as its task is submitted.
    """
    ray = import_ray()
    if not ray.is_initialized():
        kwargs = dict(init_kwargs or {})
        try:
            ray.init(address=address, include_dashboard=False, log_to_driver=False, **kwargs)
        except (ConnectionError, RuntimeError, ValueError, ray.exceptions.RayError) as e:
            # Ray 2.60 says "Failed to connect" for a missing or wrong token unless
            # RAY_AUTH_MODE=token is set here, so the hint is given for every cluster address.
            auth = (
                " If the cluster uses token authentication, this machine needs RAY_AUTH_MODE=token "
                "and the head's token (made there by `ray get-auth-token --generate`): copied to "
                "~/.ray/auth_token, or named by RAY_AUTH_TOKEN_PATH, or in RAY_AUTH_TOKEN."
                if address or os.environ.get("RAY_ADDRESS")
                else ""
            )
            raise SweepBackendError(
                f"cannot connect to Ray at {address or 'a new local cluster'}: {e}; "
                f"start one with `ray start --head` or drop --address.{auth}"
            ) from None
    from speedrunner.sweep.execute import plan

    limiter = None
    if address or os.environ.get("RAY_ADDRESS"):  # a cluster: one LLM limit for all its nodes
        limiter, limits_env = cluster_llm_limits(ray)
        extra_env = {**limits_env, **{k: v for k, v in extra_env.items() if k != SLOTS_DIR_ENV}}
    planned = {r.run_id: plan(r)[0] for r in runs}
    if queued is not None:
        for r in runs:
            if planned[r.run_id] in ("start", "resume"):
                queued(r, planned[r.run_id])
    task = ray.remote(max_retries=RAY_RETRIES, retry_exceptions=False)(_ray_execute)
    refs = {}
    for r in runs:
        options: dict[str, Any] = {"num_cpus": r.num_cpus, "name": f"sweep:{r.run_id}"}
        if r.memory_bytes is not None:
            options["memory"] = r.memory_bytes
        refs[task.options(**options).remote(r, operational(r), extra_env)] = r
    results: dict[str, Outcome] = {}
    pending = list(refs)
    try:
        while pending:
            done, pending = ray.wait(pending, num_returns=1)
            run = refs[done[0]]
            try:
                outcome = Outcome(**ray.get(done[0]))
            except (
                ray.exceptions.RayError
            ) as e:  # failed even after Ray's retries: the others go on
                outcome = read_outcome(
                    run,
                    "broken",
                    None,
                    note=f"the Ray task failed: {type(e).__name__}: "
                    f"{str(e).splitlines()[0][:200]}; rerun the sweep to resume it",
                )
            if planned[run.run_id] == "start" and outcome.action == "resume":
                outcome.note = (
                    f"{outcome.note}; " if outcome.note else ""
                ) + "its first node failed: Ray retried the task, which resumed the run"
            results[outcome.run_id] = outcome
            report(outcome, len(results), len(runs))
    except KeyboardInterrupt:
        for ref in pending:
            ray.cancel(ref, force=False)  # KeyboardInterrupt in the task: its run gets SIGINT too
        print("sweep: stopping the Ray tasks; rerun the sweep to continue", file=sys.stderr)
        raise SweepInterrupted(
            [results.get(r.run_id) or read_outcome(r, "skip", None, note="stopped") for r in runs]
        ) from None
    if limiter is not None:
        _report_limits(ray, limiter)
    return [results[r.run_id] for r in runs]
