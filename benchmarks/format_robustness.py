r"""Turns lost to the way real models format answers, per method and role, before and after.

Every method's quick run plays against ``speedrunner.testing.realistic.RealisticFake`` at
``--variants`` (default 0.3), served in this process: react, opo, asi, speedrunner and
speedrunner_no_cl on ``--benchmark`` (BabyAI ``pick_up_seq_go_to`` by default) and Voyager on
Crafter. The same fake and seeds drive two checkouts side by side in one run, and one table
shows both: ``--before`` (default ``04ed20f``, the last commit before the tolerant parsers,
unpacked with ``git archive`` into a temporary directory; or any checkout directory) and
``--after`` (default: this checkout)::

    python benchmarks/format_robustness.py                      # 04ed20f vs this checkout
    python benchmarks/format_robustness.py --before /path/to/checkout --out results.json
    python benchmarks/format_robustness.py --no-before --rollouts 16 --seeds 0,1,2 \
        --sleep-variants 1.0

Each run is the train entry point of its checkout (its own parsers, prompts and records);
what a turn cost is judged here, by meaning, from the records every checkout writes
(``speedrunner.testing.format_audit``): a turn is *lost* when the run did not act on the
clean answer's meaning (the actor's action, the inducer's call, OPO's stored guide, ASI's
proposed functions, Voyager's task, code and verdict without a re-ask). Turns are split by
how the fake served them: ``unamb`` — a variant that still carries exactly one answer
(markdown, ``<think>``, prose, JSON, a label's case, a native call written as text, the same
answer twice); ``cut/two`` — cut at ``max_tokens``, two different actions or calls, native
arguments that are not JSON, which can only be answered with feedback. Clean and plainly
wrong answers are not counted as either. Sleep-phase prompts are few per run:
``--sleep-variants 1.0`` dresses every one of them (the actor keeps ``--variants``). ASI
induces only from successful episodes, so its actor is minigrid's BabyAI bot
(``testing.babyai_expert``, dressed in the same variants) with 30 LLM calls per episode.
The goal: at most 1 % of turns lost to unambiguous variants.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from speedrunner.testing.babyai_expert import BabyAIExpert
from speedrunner.testing.fake_llm_server import FakeLLMServer
from speedrunner.testing.format_audit import RoleAudit, audit_run
from speedrunner.testing.realistic import RealisticFake

HERE = Path(__file__).resolve().parents[1]
BEFORE = "04ed20f"
"""The last commit before the tolerant parsers (the issue's "before")."""
METHODS = ("react", "opo", "asi", "speedrunner", "speedrunner_no_cl", "voyager")
SUFFIX = {"babyai": "seq", "crafter": "crafter", "scienceworld": "t4"}
SLEEP_ROLES = ("guide", "asi", "inducer", "curriculum", "voyager_action", "critic", "description")
"""Every prompt but the actor's: a run has few of them, so ``--sleep-variants`` may raise
their rate."""
ASI_CALLS = 30
"""LLM calls per episode for ASI's expert actor (the bot's solutions take 4-16 actions)."""


@dataclass
class Result:
    method: str
    failed: str | None = None
    roles: dict[str, RoleAudit] | None = None


def describe(checkout: Path) -> str:
    """The commit of a git checkout, and whether it has uncommitted changes."""
    rev = subprocess.run(
        ["git", "-C", str(checkout), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    )
    if rev.returncode != 0:
        return "not a git checkout"
    dirty = subprocess.run(
        ["git", "-C", str(checkout), "status", "--porcelain", "--untracked-files=no"],
        capture_output=True,
        text=True,
    ).stdout.strip()
    return f"{rev.stdout.strip()}{' + uncommitted changes' if dirty else ''}"


def run_method(
    checkout: Path, bench: str, method: str, args: argparse.Namespace, seed: int, run_dir: Path
) -> Result:
    """One quick run of ``method`` with ``checkout``'s entry point, the run and the fake seeded
    with ``seed``, and what the fake's variants cost it."""
    expert = (
        BabyAIExpert.for_run(seed, "seq", max(16, args.rollouts or 0))
        if method == "asi" and bench == "babyai"
        else None
    )
    rates = (
        dict.fromkeys(SLEEP_ROLES, args.sleep_variants) if args.sleep_variants is not None else {}
    )
    fake = RealisticFake(variants=args.variants, seed=seed, role_variants=rates, actor=expert)
    server = FakeLLMServer(callback=fake, model_name="fake-realistic").start()
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env["PYTHONPATH"] = str(checkout / "src") + os.pathsep + env.get("PYTHONPATH", "")
    bench = "crafter" if method == "voyager" else bench
    entry = "train_voyager" if method == "voyager" else "train"
    extra = ["--set", f"run.rollouts={args.rollouts}"] if args.rollouts else []
    if args.native:
        extra += ["--set", "model.tool_protocol=native"]
    if expert is not None:
        extra += ["--set", f"benchmark.max_llm_calls={ASI_CALLS}"]
    cmd = [
        sys.executable,
        "-m",
        f"speedrunner.benchmarks.{bench}.{entry}",
        "--config_file",
        str(checkout / "configs" / bench / f"{method}-gpt-{SUFFIX[bench]}.yaml"),
        "--quick_test",
        "--run_dir",
        str(run_dir),
        "--set",
        "model.provider=vllm",
        "--set",
        f"model.base_url={server.base_url}",
        "--set",
        "model.name=fake-realistic",
        "--set",
        f"run.seed={seed}",
        *extra,
    ]
    try:
        proc = subprocess.run(
            cmd, capture_output=True, text=True, timeout=1800, cwd=checkout, env=env
        )
    finally:
        server.stop()
    if proc.returncode != 0:
        return Result(
            method,
            f"exit {proc.returncode}: {(proc.stderr.strip().splitlines() or ['?'])[-1][:120]}",
        )
    return Result(method, roles=audit_run(run_dir, fake))


def merge(results: list[Result]) -> Result:
    """One method's results over several seeds: counts summed, the first failure kept."""
    roles: dict[str, RoleAudit] = {}
    for r in results:
        for role, audit in (r.roles or {}).items():
            into = roles.setdefault(role, RoleAudit())
            for mine, theirs in (
                (into.served, audit.served),
                (into.lost, audit.lost),
                (into.variants, audit.variants),
                (into.lost_variants, audit.lost_variants),
            ):
                mine.update(theirs)
            into.examples += audit.examples
    failed = next((r.failed for r in results if r.failed), None)
    return Result(results[0].method, failed, roles)


def cells(audit: RoleAudit | None) -> str:
    if audit is None:
        return f"{'':>5} {'':>13} {'':>9}"
    unamb = f"{audit.lost['unambiguous']}/{audit.served['unambiguous']}"
    share = audit.lost["unambiguous"] / max(1, audit.turns)
    return (
        f"{audit.turns:>5} {unamb:>6} {share:>5.1%}  "
        f"{audit.lost['cut/two']:>3}/{audit.served['cut/two']:<4}"
    )


def main() -> int:
    parser = argparse.ArgumentParser(
        allow_abbrev=False,
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--before", default=BEFORE, help="a commit of this repository or a checkout directory"
    )
    parser.add_argument("--no-before", action="store_true", help="measure --after only")
    parser.add_argument(
        "--after", type=Path, default=HERE, help="the checkout measured after (default: this one)"
    )
    parser.add_argument("--benchmark", default="babyai", choices=sorted(SUFFIX))
    parser.add_argument("--methods", default=",".join(METHODS))
    parser.add_argument("--variants", type=float, default=0.3)
    parser.add_argument(
        "--sleep-variants",
        type=float,
        default=None,
        help="the variant rate of every prompt but the actor's (default: --variants)",
    )
    parser.add_argument(
        "--seeds", default="0", help="comma-separated run (and fake) seeds; the counts are summed"
    )
    parser.add_argument(
        "--rollouts", type=int, default=None, help="override the quick test's 4 rollouts"
    )
    parser.add_argument(
        "--native", action="store_true", help="model.tool_protocol=native (checkouts that have it)"
    )
    parser.add_argument(
        "--out", type=Path, default=None, help="also write the table and figures as JSON here"
    )
    parser.add_argument(
        "--keep", type=Path, default=None, help="keep the run directories here (<side>/<method>)"
    )
    args = parser.parse_args()
    methods = args.methods.split(",")
    with tempfile.TemporaryDirectory() as tmp:
        sides = {"after": args.after.resolve()}
        if not args.no_before:
            from perf_common import checkout_dir

            sides = {"before": checkout_dir(args.before, Path(tmp)), **sides}
        results: dict[str, dict[str, Result]] = {}
        for side, checkout in sides.items():
            runs = (args.keep.resolve() if args.keep else Path(tmp)) / side
            results[side] = {
                m: merge(
                    [
                        run_method(
                            checkout, args.benchmark, m, args, int(seed), runs / m / f"seed{seed}"
                        )
                        for seed in args.seeds.split(",")
                    ]
                )
                for m in methods
            }
        sleep = "" if args.sleep_variants is None else f" (other prompts {args.sleep_variants:g})"
        lines = [
            f"format robustness: {args.benchmark} (voyager: crafter), quick runs"
            f"{f' with {args.rollouts} rollouts' if args.rollouts else ''}, "
            f"variants {args.variants:g} for the "
            f"actor{sleep}, seeds {args.seeds}{', native tool calls' if args.native else ''}",
            "per role: turns; turns lost to variants that carry one answer / served so "
            "(share of all turns); "
            "lost to cuts and two different calls / served so",
        ]
        for side, checkout in sides.items():
            unpacked = side == "before" and not Path(args.before).is_dir()
            lines.append(
                f"{side}: "
                + (
                    f"commit {args.before} (unpacked with git archive)"
                    if unpacked
                    else f"{checkout} ({describe(checkout)})"
                )
            )
        head = " | ".join(
            f"{side + ': turns':>13} {'unamb lost':>12} {'cut/two lost':>9}" for side in sides
        )
        lines += [f"{'method':<18} {'role':<15}| {head}", "-" * (35 + 44 * len(sides))]
        totals = {side: [0, 0] for side in sides}
        worst = dict.fromkeys(sides, 0.0)
        for method in methods:
            failed = [
                f"{side}: {results[side][method].failed}"
                for side in sides
                if results[side][method].failed
            ]
            roles = sorted({r for side in sides for r in (results[side][method].roles or {})})
            for role in roles:
                row = []
                for side in sides:
                    audit = (results[side][method].roles or {}).get(role)
                    row.append(cells(audit))
                    if audit is not None:
                        totals[side][0] += audit.turns
                        totals[side][1] += audit.lost["unambiguous"]
                        worst[side] = max(
                            worst[side], audit.lost["unambiguous"] / max(1, audit.turns)
                        )
                lines.append(f"{method:<18} {role:<15}| " + " | ".join(row))
            if failed:
                lines.append(f"{method:<18} run failed: {'; '.join(failed)}")
        for side in sides:
            turns, lost = totals[side]
            lines.append(
                f"{side}: {lost} of {turns} turns lost to unambiguous variants "
                f"({lost / max(1, turns):.1%}); "
                f"worst method/role {worst[side]:.1%} (goal: <= 1%)"
            )
        print("\n".join(lines))
        if args.out is not None:
            data = {
                "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
                "table": lines,
                "args": {k: str(v) for k, v in vars(args).items()},
                "results": {
                    side: {
                        m: {
                            "failed": r.failed,
                            "roles": {
                                role: {
                                    "turns": a.turns,
                                    "served": dict(a.served),
                                    "lost": dict(a.lost),
                                    "served_by_variant": dict(a.variants),
                                    "lost_by_variant": dict(a.lost_variants),
                                    "lost_examples": a.examples[:20],
                                }
                                for role, a in (r.roles or {}).items()
                            },
                        }
                        for m, r in by.items()
                    }
                    for side, by in results.items()
                },
            }
            args.out.parent.mkdir(parents=True, exist_ok=True)
            args.out.write_text(json.dumps(data, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
