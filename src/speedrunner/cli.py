"""The ``speedrunner`` command: train, validate-config, estimate, configs list, configs copy,
report, leaderboard, sweep, fake-llm."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from speedrunner.core.argparsing import ArgumentParser
from speedrunner.errors import EXIT_CODES, SpeedRunnerError

DESCRIPTION = """\
SpeedRunner: online learning of programmatic agent skills.

Runs are started with `speedrunner train` (the benchmark comes from the config), e.g.
  speedrunner train --config_file configs/babyai/opo-scripted-seq.yaml
(`speedrunner train --help` lists its flags; python -m speedrunner.benchmarks.<b>.train does \
the same.)

"""


def _parser() -> argparse.ArgumentParser:
    parser = ArgumentParser(
        prog="speedrunner",
        description=DESCRIPTION + "\n" + EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", required=True)
    from speedrunner import train_cli

    train_cli.add_train_arguments(
        sub.add_parser(
            "train",
            help="run one config: any installed benchmark and method (the benchmark comes from the "
            "config)",
            description=f"{train_cli.__doc__}\n{EXIT_CODES}",
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
    )
    validate = sub.add_parser("validate-config", help="check a run config and print it resolved")
    validate.add_argument("path", help="a run config YAML file")
    validate.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="dotted override, e.g. run.seed=3 (repeatable)",
    )
    validate.add_argument("--quick_test", action="store_true", help="apply the quick-test preset")
    configs = sub.add_parser("configs", help="starter configs shipped with the package")
    configs_sub = configs.add_subparsers(dest="configs_command", required=True)
    configs_sub.add_parser("list", help="list shipped configs")
    copy = configs_sub.add_parser("copy", help="copy a shipped config to edit")
    copy.add_argument("name", help="e.g. scienceworld/speedrunner-gpt-t4")
    copy.add_argument("dest", help="destination file or directory")
    copy.add_argument("--overwrite", action="store_true", help="replace an edited copy")
    from speedrunner.leaderboard import commands as leaderboard
    from speedrunner.sweep import cli as sweep_cli

    leaderboard.add_parser(sub)
    sweep_cli.add_arguments(
        sub.add_parser("sweep", help=sweep_cli.HELP, description=sweep_cli.__doc__)
    )
    fake = sub.add_parser(
        "fake-llm",
        help="serve a fake LLM that answers like a real model (no key, no GPU)",
        description=FAKE_LLM_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    fake.add_argument("--port", type=int, default=8000, help="port on 127.0.0.1 (default 8000)")
    fake.add_argument(
        "--variants",
        type=float,
        default=0.3,
        help="fraction of answers dressed as real models write them (default 0.3)",
    )
    fake.add_argument(
        "--seed", type=int, default=0, help="seed of the answers and their variants (default 0)"
    )
    fake.add_argument(
        "--policy",
        choices=("random", "expert"),
        default="random",
        help="the actor's moves: random (a listed action) or expert (BabyAI's bot, ScienceWorld's "
        "task-4 player; elsewhere random); model name fake-realistic / fake-expert",
    )
    est = sub.add_parser(
        "estimate",
        help="forecast a run's LLM calls, tokens, dollars and wall time (no key, no network)",
        description=ESTIMATE_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    est.add_argument("path", help="a run config YAML file")
    est.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="dotted override, as for the train command (repeatable)",
    )
    est.add_argument("--quick_test", action="store_true", help="apply the quick-test preset")
    from speedrunner.core.estimate import add_estimate_flags

    add_estimate_flags(est)
    report = sub.add_parser("report", help="plots, tables and one HTML file from run directories")
    report.add_argument(
        "run_dirs",
        nargs="+",
        metavar="RUN_DIR",
        help="run directories, folders holding them, or a sweep file (its runs that have started)",
    )
    report.add_argument(
        "--out",
        help="output directory (default: RUN_DIR/report for one run, "
        "<output_root>/sweeps/<name>/report for a sweep file, else ./report)",
    )
    report.add_argument(
        "--baseline",
        metavar="METHOD",
        help="the method the headline compares every other with (default: react)",
    )
    return parser


ESTIMATE_HELP = """\
Forecast a run before anything is spent: LLM calls by role as a range from the budgets,
tokens and dollars as a worst case (from budgets, full-history prompt growth and max_tokens,
priced from the table the run uses) and a typical case (from earlier runs: --from RUN_DIR),
and a wall-time range. Needs no key and no network. See docs/spending.md.
"""


FAKE_LLM_HELP = """\
Serve speedrunner.testing.realistic on 127.0.0.1: an OpenAI-compatible chat-completions API
(tool calls included) and Gemini's generateContent. It reads only the prompt, writes a
well-formed answer for every prompt of the project, and dresses a --variants fraction of them
as real models do (markdown, <think>, prose, truncation at max_tokens, JSON, wrong case, two
calls, a wrong answer). Same seed and prompt: same answer. Run any config against it:

  python -m speedrunner.benchmarks.babyai.train --config_file configs/babyai/react-gpt-seq.yaml \\
      --quick_test --set model.provider=vllm --set model.base_url=http://127.0.0.1:8000/v1 \\
      --set model.name=fake-realistic

(provider vllm needs no key; the name keeps the fake visible in every file of the run.)
--policy expert plays BabyAI with minigrid's bot and ScienceWorld's task 4 with a scripted
player (other benchmarks: random), served as model fake-expert. Under either policy the
actor calls an offered skill that fits the task's next step. It is no LLM: see docs/fake-llm.md.
Stop it with Ctrl-C.
"""


def _fake_llm(args: argparse.Namespace) -> int:
    import signal
    import time

    from speedrunner.testing.realistic import serve

    try:
        server = serve(args.port, variants=args.variants, seed=args.seed, policy=args.policy)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except OSError as e:
        print(
            f"error: cannot listen on 127.0.0.1:{args.port}: {e.strerror}; pick another --port",
            file=sys.stderr,
        )
        return 2
    print(
        f"fake LLM (variants {args.variants:g}, seed {args.seed}, policy {args.policy}) on "
        f"{server.base_url}  (gemini: {server.root_url}); model.name: {server.model_name}",
        flush=True,
    )
    # Ctrl-C must stop it even when the shell started it with SIGINT ignored (a background job
    # of a non-interactive shell), where Python would not install its own handler.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        return 130  # stopped by Ctrl-C, as every command reports it (EXIT_CODES)
    finally:
        server.stop()


def main(argv: Sequence[str] | None = None) -> int:
    """Every command; a reader that closes the pipe early (``| head``) ends it quietly, exit 0."""
    try:
        try:
            return _main(argv)
        finally:
            sys.stdout.flush()  # a closed pipe shows here, not in a traceback at exit
    except BrokenPipeError:
        os.dup2(
            os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno()
        )  # the exit's flush has nowhere to fail
        return 0


def _main(argv: Sequence[str] | None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["train"]:  # its own flags and exit handling: the train entry points'
        from speedrunner.train_cli import main as train_main

        return train_main(None, None, argv[1:])
    args = _parser().parse_args(argv)
    try:
        if args.command == "sweep":
            from speedrunner.sweep.cli import main as sweep_main

            return sweep_main(args)
        if args.command == "fake-llm":
            return _fake_llm(args)
        if args.command == "estimate":
            from speedrunner.catalog import config_loader

            loaded = config_loader().load(
                args.path, overrides=args.overrides, quick_test=args.quick_test
            )
            from speedrunner.core.estimate import print_estimate

            print_estimate(loaded.config, args.path, args)
            return 0
        if args.command == "validate-config":
            from speedrunner.catalog import config_loader
            from speedrunner.train_cli import check_runnable

            loaded = config_loader().load(
                args.path, overrides=args.overrides, quick_test=args.quick_test
            )
            # What the train command would refuse is refused here too, except a missing key:
            # checking a file needs no secret, so that is a note for when the run starts.
            notes = check_runnable(loaded.config, keys_required=False)
            print(json.dumps(loaded.resolved_json(), indent=2))
            print(f"# {args.path}: valid (sha256 {loaded.sha256[:12]})", file=sys.stderr)
            for note in dict.fromkeys(notes):
                print(
                    f"# note: the file is valid, but running it needs this first: {note}",
                    file=sys.stderr,
                )
        elif args.command == "leaderboard":
            from speedrunner.leaderboard import commands as leaderboard

            leaderboard.run(args)
        elif args.command == "report":
            from speedrunner.core.reporting import build_report, report_line
            from speedrunner.sweep.report import report_inputs

            inputs = report_inputs(args.run_dirs)  # a sweep file stands for its run directories
            for note in inputs.notes:
                print(note, file=sys.stderr)
            print(
                report_line(
                    build_report(
                        inputs.paths,
                        Path(args.out) if args.out else inputs.default_out,
                        baseline=args.baseline,
                    )
                )
            )
        elif args.configs_command == "list":
            from speedrunner.shipped_configs import list_configs

            print("\n".join(list_configs()))
        else:
            from speedrunner.shipped_configs import copy_config

            path, what = copy_config(args.name, args.dest, overwrite=args.overwrite)
            print(f"{path}: {what}")
    except SpeedRunnerError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
