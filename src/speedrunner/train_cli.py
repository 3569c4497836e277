"""The flags of ``speedrunner train`` (the benchmark comes from the config) and of every
``python -m speedrunner.benchmarks.<b>.train`` entry point.

    --config_file PATH      the run config (YAML)
    --set KEY=VALUE         dotted override, repeatable (strongest layer)
    --quick_test            a tiny run: few rollouts, tiny eval set, small budgets
    --run_dir DIR           put the run exactly here (must be new or empty)
    --resume RUN_DIR        continue a killed run where it stopped; with --resume, --set
                            may change only operational keys (endpoints, timeouts,
                            parallelism, the spending cap run.max_cost_usd), never what
                            decides results
    --skip_preflight        do not check the model endpoints and the env server first

"""

from __future__ import annotations

import argparse
import contextlib
import errno
import json
import os
import signal
import sqlite3
import sys
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from speedrunner.core.argparsing import ArgumentParser
from speedrunner.core.interrupt import (
    STOP,
    RunInterrupted,
    handle_stop_signals,
    stop_for_closed_stdout,
)
from speedrunner.core.rundir import ensure_writable, run_lock
from speedrunner.errors import EXIT_CODES, CheckpointError, ConfigError, SpeedRunnerError

if TYPE_CHECKING:
    from speedrunner.core.benchmark import Benchmark
    from speedrunner.core.config.loader import ConfigLoader
    from speedrunner.core.config.schema import RunConfig
    from speedrunner.core.llm.spend_cap import SpendCap, SpendCapReached
    from speedrunner.core.records import RunSummary
    from speedrunner.core.runtime.loop import Runner, RunStatus

GENERIC_COMMAND = "speedrunner train"
"""The command that runs any installed benchmark and method (``speedrunner.cli``)."""
EPISODE_THREAD_PREFIX = "speedrunner-episode"
"""Name prefix of episode threads (``core.runtime.loop``): the ones an interrupt leaves behind."""


def _example_config(benchmark: str | None) -> str:
    """A shipped config of the benchmark to name in ``--help`` (the first listed)."""
    from speedrunner.shipped_configs import list_configs

    names = [n for n in list_configs() if benchmark is None or n.startswith(f"{benchmark}/")]
    return (
        f"configs/{names[0]}.yaml; `speedrunner configs list` lists them"
        if names
        else "my-run.yaml"
    )


def build_parser(prog: str, benchmark: str | None = None) -> argparse.ArgumentParser:
    parser = ArgumentParser(
        prog=prog,
        description=f"{__doc__}\n{EXIT_CODES}",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_train_arguments(parser, benchmark)
    return parser


def add_train_arguments(parser: argparse.ArgumentParser, benchmark: str | None = None) -> None:
    """The train flags, on ``parser`` (``speedrunner train`` shows them under
    ``speedrunner --help`` too)."""
    parser.add_argument("--config_file", help=f"run config YAML, e.g. {_example_config(benchmark)}")
    parser.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="dotted override, e.g. --set run.seed=3 (repeatable)",
    )
    parser.add_argument(
        "--quick_test", action="store_true", help="apply the quick-test preset (a tiny run)"
    )
    parser.add_argument(
        "--run_dir", help="run directory to create (default: under run.output_root)"
    )
    parser.add_argument("--resume", metavar="RUN_DIR", help="continue the run in RUN_DIR")
    parser.add_argument(
        "--skip_preflight",
        action="store_true",
        help="skip the check that model endpoints and the env server answer",
    )


@dataclass
class _Session:
    """What the error messages need to know about the run so far."""

    entry_point: str | None
    """The train module the command is (``None``: the generic command, which runs any config)."""
    command: str
    """How the messages tell the user to continue: ``speedrunner train`` or
    ``python -m <module>``."""
    run_dir: Path | None = None
    spend_cap: SpendCap | None = None
    config: RunConfig | None = None
    runner: Runner | None = None
    """Set once the run's loop exists: it writes summary.json at every stop."""
    summary: RunSummary | None = None
    """The summary.json built at the stop: the run-summary line and the messages show its
    figures."""
    summary_written: bool = False


def main(benchmark: str | None, entry_point: str | None, argv: Sequence[str] | None = None) -> int:
    """Run a config: ``benchmark``/``entry_point`` ``None`` is the generic ``speedrunner train``,
    which takes the benchmark from the config (and the method's own entry module, if it
    declares one)."""
    command = GENERIC_COMMAND if entry_point is None else f"python -m {entry_point}"
    args = build_parser(command, benchmark).parse_args(argv)
    session = _Session(entry_point, command)
    with handle_stop_signals():
        code = _main_reporting_errors(benchmark, args, session)
        if code in (130, 143):  # stopping: a further Ctrl-C must not turn into a traceback
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
    _leave_stuck_requests_behind(code)
    return code


def _main_reporting_errors(
    benchmark: str | None, args: argparse.Namespace, session: _Session
) -> int:
    from speedrunner.core.llm.spend_cap import SpendCapReached

    try:
        try:
            return _main(benchmark, args, session)
        except BrokenPipeError:  # a print outside the progress lines met a closed stdout
            raise stop_for_closed_stdout() from None
        except RunInterrupted as e:
            reached = session.spend_cap.reached if session.spend_cap is not None else None
            if reached is not None and not isinstance(e, SpendCapReached) and not STOP.is_set():
                raise reached from e  # an episode saw the others stopping for the cap, not a signal
            raise
    except SpendCapReached as e:
        assert session.run_dir is not None  # no call is made before the run directory exists
        _mark_status(session, "budget_reached", str(e), cap_reached=e)
        more = (
            "raise its max_cost_usd in the sweep file, then rerun the sweep"
            if e.scope == "sweep"
            else f"raise the cap:\n  {session.command} --resume {session.run_dir} "
            f"--set run.max_cost_usd={_suggest_cap(e)}"
        )
        _print_summary(session, "budget_reached")
        reason = session.summary.status_reason if session.summary is not None else None
        where = (
            f" ({session.run_dir / 'summary.json'} has it as spent_usd)"
            if session.summary_written
            else ""
        )
        print(
            f"\nstopped: {reason or e}{where}. The run stopped before that call; nothing "
            f"stored is lost. To continue exactly where it stopped, {more}",
            file=sys.stderr,
        )
        return e.exit_code
    except RunInterrupted as e:
        how = {130: "Ctrl-C", 141: "stdout closed"}.get(e.exit_code, e.signal_name)
        if session.run_dir is None:
            print(
                f"\ninterrupted ({how}) before the run started; nothing was written",
                file=sys.stderr,
            )
        else:
            _mark_status(session, "interrupted", f"{how}")
            _print_summary(session, "interrupted")
            print(
                f"\ninterrupted ({how}): running episodes stopped before their next paid call; "
                f"nothing stored is lost. Continue with:\n  {session.command} "
                f"--resume {session.run_dir}",
                file=sys.stderr,
            )
        return e.exit_code
    except SpeedRunnerError as e:  # raised before anything ran (config, keys, endpoints, run dir)
        print(f"error: {e}", file=sys.stderr)
        return 2


def _suggest_cap(e: object) -> str:
    """Twice the cap that stopped the run, as a starting point for --set run.max_cost_usd."""
    return f"{2 * float(getattr(e, 'cap', 0.0)):.2f}"


def _main(benchmark: str | None, args: argparse.Namespace, session: _Session) -> int:
    from speedrunner.catalog import config_loader

    loader = config_loader()
    if args.resume:
        if args.config_file or args.quick_test or args.run_dir:
            raise ConfigError(
                "--resume continues a run as configured; it takes no "
                "--config_file, --quick_test or --run_dir (only --set for operational keys)"
            )
        run_dir, config, run_id = _load_for_resume(Path(args.resume), loader, benchmark)
        if args.overrides:
            config = _resume_overrides(run_dir, config, args.overrides, loader)
        _require_unredacted_urls(config, run_dir)
        check_runnable(config)
        if not args.skip_preflight:
            preflight(config)
        ensure_writable(run_dir)
        with run_lock(run_dir):
            session.run_dir = run_dir
            _record_resume(run_dir, config, args.overrides)
            return _run(config, run_dir, run_id, session)
    if not args.config_file:
        raise ConfigError(
            "--config_file is required (or --resume RUN_DIR); "
            "see `speedrunner configs list` for starter configs"
        )
    loaded = loader.load(
        args.config_file,
        overrides=args.overrides,
        quick_test=args.quick_test,
        expect_benchmark=benchmark,
        entry_point=session.entry_point,
    )
    config = loaded.config
    check_runnable(config)
    if not args.skip_preflight:
        preflight(config)
    from speedrunner.core.rundir import create_run_dir

    run_dir = create_run_dir(loaded, run_dir=args.run_dir)
    with run_lock(run_dir):
        session.run_dir = run_dir
        return _run(config, run_dir, run_dir.name, session)


def _note_sandbox(run_dir: Path, tier: str) -> None:
    """Record in provenance.json which isolation tier ran the skill code (per session: a
    resume may run on another machine)."""
    from datetime import UTC, datetime

    from speedrunner.core.atomic import atomic_write_json
    from speedrunner.core.rundir import PROVENANCE_FILE

    provenance = json.loads((run_dir / PROVENANCE_FILE).read_text("utf-8"))
    provenance.setdefault("sandbox", []).append(
        {"at": datetime.now(UTC).isoformat(timespec="seconds"), "tier": tier}
    )
    atomic_write_json(run_dir / PROVENANCE_FILE, provenance)
    if tier == "rlimits":
        print(
            "warning: skill code runs with resource limits only (no bubblewrap, no network "
            "namespace): it can reach the network and read what this user can read. "
            "apt-get install bubblewrap",
            file=sys.stderr,
        )


def check_runnable(config: RunConfig, *, keys_required: bool = True) -> list[str]:
    """What must hold before any run directory is made: the method exists, its skill API (if it
    uses skills) imports, the API keys are set.

    ``speedrunner validate-config`` calls this too, so it says what the train command would;
    it passes ``keys_required=False`` because checking a file needs no secret: a missing key
    is then returned as a note (the run will need it) instead of raised.
    """
    from speedrunner.core.llm.build import make_provider
    from speedrunner.core.specs import METHODS
    from speedrunner.errors import MissingAPIKeyError

    if METHODS.get(config.method.name).factory is None:
        implemented = [name for name in METHODS.names() if METHODS.get(name).factory is not None]
        raise ConfigError(
            f"method {config.method.name!r} is not implemented in this version yet "
            f"(implemented: {', '.join(implemented)}); nothing was run and no run "
            "directory was made"
        )
    from speedrunner.core.tracking import check_tracking

    if METHODS.get(config.method.name).uses_skills:
        from speedrunner.core.runtime.skill_support import check_skill_api_in_sandbox

        check_skill_api_in_sandbox(
            config.benchmark.name, config.run.sandbox
        )  # imports it here, then there

    # A missing wandb package stops both commands; a missing W&B login is like a missing key.
    checks = [lambda: check_tracking(config), lambda: make_provider(config.model)]
    if config.inducer is not None:
        checks.append(lambda: make_provider(config.inducer))
    checks.append(config.method.check_runnable)  # e.g. Voyager's embedding key
    from speedrunner.core.llm.spend_cap import require_prices

    require_prices(config)
    notes: list[str] = []
    for check in checks:
        try:
            check()
        except MissingAPIKeyError as e:
            if keys_required:
                raise
            notes.append(str(e))
    return notes


def preflight(config: RunConfig) -> None:
    """Ask every endpoint the run needs once, for free, before anything is written."""
    from speedrunner.core.llm.preflight import check_model_endpoints
    from speedrunner.core.registry import load_entry_point
    from speedrunner.core.specs import BENCHMARKS

    warnings = check_model_endpoints(config.model, role="model")
    if config.inducer is not None:
        warnings += check_model_endpoints(config.inducer, role="inducer")
    for warning in warnings:
        print(f"WARNING (pre-flight): {warning}", file=sys.stderr, flush=True)
    spec = BENCHMARKS.get(config.benchmark.name)
    if spec.preflight is not None:
        load_entry_point(spec.preflight)(config.benchmark)


def _resume_overrides(
    run_dir: Path, config: RunConfig, overrides: list[str], loader: ConfigLoader
) -> RunConfig:
    """The stored config with operational keys changed (e.g. a vLLM server that moved)."""
    from speedrunner.core.config.loader import deep_merge, nested, parse_override
    from speedrunner.core.config.schema import operational_paths
    from speedrunner.core.config.yaml_source import read_yaml_source
    from speedrunner.core.rundir import CONFIG_FILE

    allowed = operational_paths(config)
    resolved = config.model_dump(mode="json")
    for text in overrides:
        key, value = parse_override(text)
        if key not in allowed:
            raise ConfigError(
                f"--set {'.'.join(key)} cannot change on --resume: it decides the run's results. "
                f"Keys that may change: {', '.join(sorted('.'.join(k) for k in allowed))}"
            )
        resolved = deep_merge(resolved, nested(key, value))
    return loader.from_resolved(resolved, source=read_yaml_source(run_dir / CONFIG_FILE))


def _require_unredacted_urls(config: RunConfig, run_dir: Path) -> None:
    """A base_url whose credentials were kept out of the run directory must be given again."""
    from speedrunner.core.redact import REDACTED

    for role, model in (("model", config.model), ("inducer", config.inducer)):
        urls = (
            []
            if model is None or model.base_url is None
            else ([model.base_url] if isinstance(model.base_url, str) else list(model.base_url))
        )
        if any(REDACTED in u for u in urls):
            raise ConfigError(
                f"{role}.base_url held credentials, which are never stored in the run "
                f"directory; give it again: --resume {run_dir} --set {role}.base_url=URL"
            )


def _record_resume(run_dir: Path, config: RunConfig, overrides: list[str]) -> None:
    """Note the resume in provenance.json (with any --set changes; the changed config too)."""
    from speedrunner.core.atomic import atomic_write_json
    from speedrunner.core.redact import scrub, scrub_json
    from speedrunner.core.rundir import PROVENANCE_FILE, RESOLVED_FILE

    if overrides:
        atomic_write_json(run_dir / RESOLVED_FILE, scrub_json(config.model_dump(mode="json")))
    provenance = json.loads((run_dir / PROVENANCE_FILE).read_text("utf-8"))
    provenance.setdefault("resumes", []).append(
        {"overrides": [scrub(o) for o in overrides], "command": [scrub(a) for a in sys.argv]}
    )
    atomic_write_json(run_dir / PROVENANCE_FILE, provenance)


def _load_for_resume(
    run_dir: Path, loader: ConfigLoader, benchmark: str | None
) -> tuple[Path, RunConfig, str]:
    from speedrunner.core.config.yaml_source import read_yaml_source
    from speedrunner.core.rundir import (
        CONFIG_FILE,
        PROVENANCE_FILE,
        RESOLVED_FILE,
        check_run_format,
    )

    if not run_dir.exists():
        raise CheckpointError(
            f"--resume {run_dir}: the directory does not exist (--resume takes the "
            "directory of an earlier run; check the path)"
        )
    if not run_dir.is_dir():
        raise CheckpointError(f"--resume {run_dir}: not a directory (resume takes a run directory)")
    missing = [
        f for f in (CONFIG_FILE, RESOLVED_FILE, PROVENANCE_FILE) if not (run_dir / f).is_file()
    ]
    if missing:
        raise CheckpointError(
            f"{run_dir} is not a SpeedRunner run directory (missing {', '.join(missing)})"
        )
    try:
        resolved = json.loads((run_dir / RESOLVED_FILE).read_text("utf-8"))
        provenance = json.loads((run_dir / PROVENANCE_FILE).read_text("utf-8"))
        run_id = provenance["run_id"]
        if not isinstance(resolved, dict) or not isinstance(run_id, str):
            raise TypeError("not a JSON object with a run_id")
    except (json.JSONDecodeError, KeyError, TypeError, UnicodeDecodeError, RecursionError) as e:
        raise CheckpointError(
            f"{run_dir}: {RESOLVED_FILE} or {PROVENANCE_FILE} is corrupt "
            f"({type(e).__name__}: {str(e)[:300]}); it cannot be resumed: restore the file "
            "from a backup, or start a new run"
        ) from None
    check_run_format(run_dir)
    config = loader.from_resolved(resolved, source=read_yaml_source(run_dir / CONFIG_FILE))
    if benchmark is not None and config.benchmark.name != benchmark:
        raise CheckpointError(
            f"{run_dir} is a {config.benchmark.name} run; resume it with "
            f"{GENERIC_COMMAND} --resume {run_dir}"
        )
    return run_dir, config, run_id


def _run(config: RunConfig, run_dir: Path, run_id: str, session: _Session) -> int:
    from speedrunner.core.llm.build import build_model
    from speedrunner.core.llm.journal import reconcile
    from speedrunner.core.llm.spend_cap import spend_cap
    from speedrunner.core.method import MethodContext
    from speedrunner.core.registry import load_entry_point
    from speedrunner.core.runtime.loop import EnvPool, Runner
    from speedrunner.core.specs import METHODS
    from speedrunner.core.tracking import open_tracker

    scripted = "scripted" in (config.model.provider, config.inducer_model.provider)
    session.config = config
    print(f"run directory: {run_dir}", flush=True)
    if scripted:
        print(
            "NOTE: this run uses the SCRIPTED model. No LLM is called; its numbers say nothing "
            "about any LLM.",
            flush=True,
        )
    resume = f"continue it with:\n  {session.command} --resume {run_dir}"
    try:
        cache, calls = run_dir / "llm_cache.sqlite", run_dir / "llm_calls.jsonl"
        reconciled = reconcile(cache, calls, run_id)  # what an earlier kill left half-recorded
        if reconciled.message():
            print(f"warning: {reconciled.message()}", file=sys.stderr)
        cap = session.spend_cap = spend_cap(
            config, run_id, cache, calls
        )  # one cap for actor and inducer
        actor = build_model(
            config.model, namespace=run_id, cache_path=cache, calls_log_path=calls, spend_cap=cap
        )
        inducer = (
            actor
            if config.inducer is None
            else build_model(
                config.inducer,
                namespace=run_id,
                cache_path=cache,
                calls_log_path=calls,
                spend_cap=cap,
            )
        )
        method_spec = METHODS.get(config.method.name)
        benchmark = build_benchmark(config)
        try:
            skills = None
            envs = EnvPool(benchmark.make_env)  # the episodes' envs, lent to the sleep phase too
            if method_spec.uses_skills:
                from speedrunner.core.runtime.skill_support import build_skill_support

                skills = build_skill_support(config, envs.env)
                _note_sandbox(run_dir, skills.sandbox_tier)
            method = load_entry_point(method_spec.factory)(
                config.method,
                MethodContext(
                    run_dir=run_dir,
                    inducer=inducer,
                    benchmark=config.benchmark.name,
                    skills=skills,
                    knowledge_title=method_spec.knowledge_title,
                ),
            )
            runner = session.runner = Runner(
                config,
                run_dir,
                benchmark=benchmark,
                method=method,
                actor=actor,
                run_id=run_id,
                scripted=scripted,
                skill_support=skills,
                spend_cap=cap,
                env_pool=envs,
            )
            tracker = open_tracker(config, run_dir, run_id=run_id, scripted=scripted)
            runner.after_save = tracker.after_checkpoint
            exit_code = 1
            try:
                result = runner.run()
                tracker.after_checkpoint(
                    result.checkpoint
                )  # rows a resumed, finished run still owes
                exit_code = 0
            except RunInterrupted as e:
                exit_code = e.exit_code
                raise
            finally:
                tracker.finish(result.summary if exit_code == 0 else None, exit_code=exit_code)
        finally:
            if skills is not None:
                skills.close()
            benchmark.close()
    except (RunInterrupted, ConfigError, CheckpointError):
        raise  # interrupted, or found wrong before anything ran (exit 2)
    except (OSError, sqlite3.OperationalError) as e:
        if not _is_storage_error(e):
            raise
        where = getattr(e, "filename", None) or run_dir
        reason = f"cannot write {where}: {getattr(e, 'strerror', None) or e}"
        _mark_status(session, "failed", reason)
        _print_summary(session, "failed")
        print(
            f"error: {reason}. Everything written before it is kept. Free some space (or make "
            f"the directory writable), then {resume}",
            file=sys.stderr,
        )
        return 1
    except SpeedRunnerError as e:  # a model or an env failed mid-run: nothing stored is lost
        _mark_status(session, "failed", str(e))
        _print_summary(session, "failed")
        print(
            f"error: {e}\nThe run stopped; nothing stored is lost. Once the cause is fixed, "
            f"{resume}",
            file=sys.stderr,
        )
        return 1
    except Exception as e:
        _mark_status(session, "failed", f"{type(e).__name__}: {e}")
        raise
    final = result.summary.final_eval
    tag = " [SCRIPTED MODEL]" if scripted else ""
    shown = dict.fromkeys([config.speedrun.episode_metric, "success"])  # the run's metric first
    if final is None:
        evaluated = "no evaluation (run.eval_episodes is 0)"
    else:
        means = {"success": final.success_mean, "progress": final.progress_mean}
        evaluated = "final eval " + ", ".join(f"{m} {means[m]:.3f}" for m in shown)
    from speedrunner.core.runtime.speedrun import describe

    try:
        print(
            f"done{tag}: {result.checkpoint.totals.episodes} training episodes, {evaluated}; "
            f"summary in {run_dir / 'summary.json'}"
        )
        print(describe(run_dir, config) + tag)
        _print_summary(session, "finished")
    except BrokenPipeError:  # the run is finished: a reader that left early changes nothing
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return 0


def build_benchmark(config: RunConfig) -> Benchmark:
    """The run's benchmark, its section's schedule-dependent choices settled for the run
    (``BenchmarkConfig.for_run``: e.g. ScienceWorld's JVM compiler)."""
    from speedrunner.core.registry import load_entry_point
    from speedrunner.core.specs import BENCHMARKS

    factory = load_entry_point(BENCHMARKS.get(config.benchmark.name).factory)
    return factory(
        config.benchmark.for_run(config.run),
        rollouts=config.run.rollouts,
        eval_episodes=config.run.eval_episodes,
    )


def _print_summary(session: _Session, status: str) -> None:
    """The run's last line on stdout, however it ended (best effort: the disk may be why it
    ended)."""
    from speedrunner.core.runtime.run_summary import summary_line

    if session.run_dir is None or session.config is None:
        return
    try:
        line = summary_line(session.run_dir, session.config, status=status, summary=session.summary)
    except (OSError, ValueError) as e:  # unreadable files must not hide why the run ended
        line = f"run summary: not available ({e})"
    print(line, flush=True)


_STORAGE_ERRNOS = frozenset(
    {errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM, errno.EIO}
)


def _is_storage_error(e: BaseException) -> bool:
    """A full disk or a directory that stopped being writable (not our bug, not the model's)."""
    if isinstance(e, sqlite3.OperationalError):
        text = str(e).lower()
        return "disk is full" in text or "readonly" in text or "disk i/o" in text
    return isinstance(e, OSError) and e.errno in _STORAGE_ERRNOS


def _mark_status(
    session: _Session,
    status: RunStatus,
    reason: str | None = None,
    *,
    cap_reached: SpendCapReached | None = None,
) -> None:
    """Record how the run ended in summary.json, best effort (the disk may be why it ended).

    Once the loop exists it rebuilds the whole summary (totals of the last checkpoint, the
    spend as the log has it now) and keeps it in ``session`` for the lines printed after;
    before that, only the status of the stored summary changes.
    """
    from speedrunner.core.redact import scrub
    from speedrunner.core.runtime.loop import mark_run_status
    from speedrunner.core.runtime.run_summary import write_summary

    assert session.run_dir is not None
    reason = None if reason is None else scrub(reason)
    if session.runner is None or not session.runner.started:
        with contextlib.suppress(OSError, ValueError):  # a damaged summary.json stays as it is
            mark_run_status(session.run_dir, status, reason)
        return
    try:
        summary = session.runner.summary(status, reason, cap_reached=cap_reached)
    except Exception as e:  # the disk may be why the run stopped: never hide why it did
        print(f"warning: summary.json not updated ({type(e).__name__}: {e})", file=sys.stderr)
        return
    if summary.status_reason is not None:
        summary = summary.model_copy(update={"status_reason": scrub(summary.status_reason)})
    session.summary = summary
    with contextlib.suppress(OSError):
        write_summary(session.run_dir, summary)
        session.summary_written = True


def _leave_stuck_requests_behind(code: int) -> None:
    """Exit now if episode threads still wait on requests after a stop.

    Their answers can no longer be used, and waiting would keep Ctrl-C from stopping within
    a second; the requests were logged before they were sent, so a resume reports them.
    """
    if code == 0:
        return
    lingering = [t for t in threading.enumerate() if t.name.startswith(EPISODE_THREAD_PREFIX)]
    for t in lingering:
        t.join(timeout=0.5 / max(1, len(lingering)))
    if any(t.is_alive() for t in lingering):
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
