"""The flags every ``python -m speedrunner.benchmarks.<b>.train`` entry point shares.

    --config_file PATH      the run config (YAML)
    --set KEY=VALUE         dotted override, repeatable (strongest layer)
    --quick_test            a tiny run: few rollouts, tiny eval set, small budgets
    --run_dir DIR           put the run exactly here (must be new or empty)
    --resume RUN_DIR        continue a killed run where it stopped; with --resume, --set
                            may change only operational keys (endpoints, timeouts,
                            parallelism), never what decides results

Exit codes: 0 done; 2 a problem the user can fix before anything ran (config, missing
key, bad or busy run dir); 1 a failure during the run (continue it with --resume);
130 interrupted.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from speedrunner.core.rundir import run_lock
from speedrunner.errors import CheckpointError, ConfigError, MissingAPIKeyError, SpeedRunnerError

if TYPE_CHECKING:
    from speedrunner.core.config.loader import ConfigLoader
    from speedrunner.core.config.schema import RunConfig
    from speedrunner.core.specs import MethodSpec


def build_parser(prog: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=prog, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config_file", help="run config YAML, e.g. configs/babyai/react-gpt-seq.yaml")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                        help="dotted override, e.g. --set run.seed=3 (repeatable)")
    parser.add_argument("--quick_test", action="store_true", help="apply the quick-test preset (a tiny run)")
    parser.add_argument("--run_dir", help="run directory to create (default: under run.output_root)")
    parser.add_argument("--resume", metavar="RUN_DIR", help="continue the run in RUN_DIR")
    return parser


def main(benchmark: str, entry_point: str, argv: Sequence[str] | None = None) -> int:
    args = build_parser(f"python -m {entry_point}").parse_args(argv)
    try:
        return _main(benchmark, entry_point, args)
    except KeyboardInterrupt:
        print("\ninterrupted; continue with --resume <run dir>", file=sys.stderr)
        return 130
    except (ConfigError, CheckpointError, MissingAPIKeyError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except SpeedRunnerError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2


def _main(benchmark: str, entry_point: str, args: argparse.Namespace) -> int:
    from speedrunner.catalog import config_loader
    from speedrunner.core.specs import METHODS

    loader = config_loader()
    if args.resume:
        if args.config_file or args.quick_test or args.run_dir:
            raise ConfigError("--resume continues a run as configured; it takes no "
                              "--config_file, --quick_test or --run_dir (only --set for operational keys)")
        run_dir, config, run_id = _load_for_resume(Path(args.resume), loader, benchmark)
        if args.overrides:
            config = _resume_overrides(run_dir, config, args.overrides, loader)
        with run_lock(run_dir):
            if args.overrides:
                _record_resume_overrides(run_dir, config, args.overrides)
            return _run(config, run_dir, run_id)
    else:
        if not args.config_file:
            raise ConfigError("--config_file is required (or --resume RUN_DIR); "
                              "see `speedrunner configs list` for starter configs")
        loaded = loader.load(args.config_file, overrides=args.overrides, quick_test=args.quick_test,
                             expect_benchmark=benchmark, entry_point=entry_point)
        config = loaded.config
        _preflight(config, METHODS.get(config.method.name))
        from speedrunner.core.rundir import create_run_dir

        run_dir = create_run_dir(loaded, run_dir=args.run_dir)
        run_id = run_dir.name
        with run_lock(run_dir):
            return _run(config, run_dir, run_id)


def _resume_overrides(run_dir: Path, config: RunConfig, overrides: list[str],
                      loader: ConfigLoader) -> RunConfig:
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
                f"Keys that may change: {', '.join(sorted('.'.join(k) for k in allowed))}")
        resolved = deep_merge(resolved, nested(key, value))
    return loader.from_resolved(resolved, source=read_yaml_source(run_dir / CONFIG_FILE))


def _record_resume_overrides(run_dir: Path, config: RunConfig, overrides: list[str]) -> None:
    """Store the changed config and note the change in provenance.json."""
    from speedrunner.core.atomic import atomic_write_json
    from speedrunner.core.redact import scrub
    from speedrunner.core.rundir import PROVENANCE_FILE, RESOLVED_FILE

    atomic_write_json(run_dir / RESOLVED_FILE, config.model_dump(mode="json"))
    provenance = json.loads((run_dir / PROVENANCE_FILE).read_text("utf-8"))
    provenance.setdefault("resumes", []).append(
        {"overrides": [scrub(o) for o in overrides], "command": [scrub(a) for a in sys.argv]})
    atomic_write_json(run_dir / PROVENANCE_FILE, provenance)


def _preflight(config: RunConfig, method_spec: MethodSpec) -> None:
    """Fail before creating a run directory: unimplemented method, missing API key."""
    if method_spec.factory is None:
        raise ConfigError(f"method {config.method.name!r} is not implemented in this version yet "
                          f"(implemented: react, opo); nothing was run and no run directory was made")
    from speedrunner.core.llm.build import make_provider

    make_provider(config.model)
    if config.inducer is not None:
        make_provider(config.inducer)


def _load_for_resume(run_dir: Path, loader: ConfigLoader, benchmark: str) -> tuple[Path, RunConfig, str]:
    from speedrunner.core.config.yaml_source import read_yaml_source
    from speedrunner.core.rundir import CONFIG_FILE, PROVENANCE_FILE, RESOLVED_FILE

    missing = [f for f in (CONFIG_FILE, RESOLVED_FILE, PROVENANCE_FILE) if not (run_dir / f).is_file()]
    if not run_dir.is_dir() or missing:
        raise CheckpointError(f"{run_dir} is not a SpeedRunner run directory (missing {', '.join(missing) or 'directory'})")
    try:
        resolved = json.loads((run_dir / RESOLVED_FILE).read_text("utf-8"))
        provenance = json.loads((run_dir / PROVENANCE_FILE).read_text("utf-8"))
        run_id = provenance["run_id"]
        if not isinstance(resolved, dict) or not isinstance(run_id, str):
            raise TypeError("not a JSON object with a run_id")
    except (json.JSONDecodeError, KeyError, TypeError, UnicodeDecodeError) as e:
        raise CheckpointError(f"{run_dir}: {RESOLVED_FILE} or {PROVENANCE_FILE} is corrupt ({e})") from e
    config = loader.from_resolved(resolved, source=read_yaml_source(run_dir / CONFIG_FILE))
    if config.benchmark.name != benchmark:
        raise CheckpointError(f"{run_dir} is a {config.benchmark.name} run; resume it with "
                              f"python -m speedrunner.benchmarks.{config.benchmark.name}.train --resume {run_dir}")
    return run_dir, config, run_id


def _run(config: RunConfig, run_dir: Path, run_id: str) -> int:
    from speedrunner.core.llm.build import build_model
    from speedrunner.core.method import MethodContext
    from speedrunner.core.registry import load_entry_point
    from speedrunner.core.runtime.loop import Runner
    from speedrunner.core.specs import BENCHMARKS, METHODS

    scripted = "scripted" in (config.model.provider, config.inducer_model.provider)
    print(f"run directory: {run_dir}", file=sys.stderr)
    if scripted:
        print("NOTE: this run uses the SCRIPTED model. No LLM is called; its numbers say nothing "
              "about any LLM.", file=sys.stderr)
    cache, calls = run_dir / "llm_cache.sqlite", run_dir / "llm_calls.jsonl"
    actor = build_model(config.model, namespace=run_id, cache_path=cache, calls_log_path=calls)
    inducer = actor if config.inducer is None else build_model(
        config.inducer, namespace=run_id, cache_path=cache, calls_log_path=calls)
    bench_spec, method_spec = BENCHMARKS.get(config.benchmark.name), METHODS.get(config.method.name)
    benchmark = load_entry_point(bench_spec.factory)(
        config.benchmark, rollouts=config.run.rollouts, eval_episodes=config.run.eval_episodes)
    try:
        method = load_entry_point(method_spec.factory)(
            config.method, MethodContext(run_dir=run_dir, inducer=inducer, benchmark=config.benchmark.name))
        result = Runner(config, run_dir, benchmark=benchmark, method=method, actor=actor,
                        run_id=run_id, scripted=scripted).run()
    except (ConfigError, CheckpointError):
        raise
    except SpeedRunnerError as e:  # a model or an env failed mid-run: nothing stored is lost
        print(f"error: {e}\nThe run stopped; continue it with --resume {run_dir}", file=sys.stderr)
        return 1
    finally:
        benchmark.close()
    final = result.summary.get("final_eval") or {}
    tag = " [SCRIPTED MODEL]" if scripted else ""
    print(f"done{tag}: {result.checkpoint.totals.episodes} training episodes, "
          f"final eval success {final.get('success_mean', float('nan')):.3f}, "
          f"progress {final.get('progress_mean', float('nan')):.3f}; summary in {run_dir / 'summary.json'}",
          file=sys.stderr)
    return 0
