"""Turns lost to the way real models format answers, per method, against the realistic fake.

Each method's quick run (BabyAI ``pick_up_seq_go_to`` by default) plays against
``speedrunner.testing.realistic.RealisticFake`` at ``--variants`` (default 0.3), served in this
process; the run itself is the train entry point of ``--checkout`` (default: this one), so the
same fake measures any checkout — e.g. one from before the tolerant parsers, and one after:

    python benchmarks/format_robustness.py                         # this checkout
    python benchmarks/format_robustness.py --checkout /path/to/other/checkout

A turn is *lost* when the run recorded it as not executed: an actor step with an ``error``, a
SpeedRunner inducer turn whose result starts with ``Not run:``, an ASI induction rejected
because its answer could not be read. It is *lost to format* when every answer with its text
was served as a format variant (not clean, not a plainly wrong answer). "unambiguous" counts
the variants that still carry exactly one answer (markdown, ``<think>``, prose, JSON, wrong
case, a native call written as text); "cut/two" the others (truncation, two calls, arguments
that are not JSON), which can only be answered with feedback. The goal is at most 1 % of
turns lost to unambiguous variants.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from speedrunner.testing.fake_llm_server import FakeLLMServer
from speedrunner.testing.realistic import FORMAT_VARIANTS, RealisticFake, answer_key

HERE = Path(__file__).resolve().parents[1]
UNAMBIGUOUS = frozenset({"markdown", "think", "prose", "json", "wrong_case", "as_text"})
METHODS = ("react", "opo", "asi", "speedrunner", "speedrunner_no_cl")
SUFFIX = {"babyai": "seq", "crafter": "crafter", "scienceworld": "t4"}


def run_method(checkout: Path, bench: str, method: str, fake: RealisticFake, run_dir: Path,
               extra: list[str]) -> subprocess.CompletedProcess[str]:
    server = FakeLLMServer(callback=fake, model_name="fake-realistic").start()
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env["PYTHONPATH"] = str(checkout / "src") + os.pathsep + env.get("PYTHONPATH", "")
    cmd = [sys.executable, "-m", f"speedrunner.benchmarks.{bench}.train", "--config_file",
           str(checkout / "configs" / bench / f"{method}-gpt-{SUFFIX[bench]}.yaml"), "--quick_test",
           "--run_dir", str(run_dir), "--set", "model.provider=vllm", "--set", f"model.base_url={server.base_url}",
           "--set", "model.name=fake-realistic", *extra]
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=900, cwd=checkout, env=env)
    finally:
        server.stop()


def kind(fake: RealisticFake, text: str) -> str:
    """'unambiguous', 'cut/two' or 'other' (clean or wrong) for a recorded answer text."""
    served = fake.served.get(answer_key(text), set())
    if not served or not served <= FORMAT_VARIANTS:
        return "other"
    return "unambiguous" if served <= UNAMBIGUOUS else "cut/two"


def measure(run_dir: Path, fake: RealisticFake) -> dict[str, float | int | str]:
    actor: collections.Counter[str] = collections.Counter()
    episodes = sorted((run_dir / "episodes" / "train").glob("*.json"))
    for path in episodes:
        for step in json.loads(path.read_text())["steps"]:
            actor["turns"] += 1
            if step.get("error") is not None:
                actor[kind(fake, step.get("raw_text") or "")] += 1
    inducer: collections.Counter[str] = collections.Counter()
    phases = sorted((run_dir / "sleep").glob("batch_*"))
    for turn in (t for p in phases for t in sorted(p.glob("turn_*.json"))):
        record = json.loads(turn.read_text())
        inducer["turns"] += 1
        if str(record.get("result", "")).startswith("Not run:"):
            inducer[kind(fake, record.get("answer") or "")] += 1
    asi = sorted((run_dir / "sleep").glob("asi_*.json"))
    for path in asi:
        for note in json.loads(path.read_text()).get("inductions", []):
            inducer["turns"] += 1
            rejected = str(note.get("rejected") or "")
            if "no <functions>" in rejected or "do not parse" in rejected:
                inducer["unambiguous/cut (asi)"] += 1
    n_phases = len(phases) or len(asi)
    return {
        "episodes": len(episodes), "actor_turns": actor["turns"],
        "actor_lost_unamb": actor["unambiguous"], "actor_lost_cut": actor["cut/two"],
        "actor_lost_per_episode": (actor["unambiguous"] + actor["cut/two"]) / max(1, len(episodes)),
        "phases": n_phases, "inducer_turns": inducer["turns"],
        "inducer_lost_unamb": inducer["unambiguous"] + inducer["unambiguous/cut (asi)"],
        "inducer_lost_cut": inducer["cut/two"],
        "inducer_lost_per_phase": ((inducer["unambiguous"] + inducer["cut/two"] + inducer["unambiguous/cut (asi)"])
                                   / n_phases) if n_phases else "n/a",
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--checkout", type=Path, default=HERE, help="the checkout whose train entry points run")
    parser.add_argument("--benchmark", default="babyai", choices=sorted(SUFFIX))
    parser.add_argument("--methods", default=",".join(METHODS))
    parser.add_argument("--variants", type=float, default=0.3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--rollouts", type=int, default=None, help="override the quick test's 4 rollouts")
    parser.add_argument("--native", action="store_true", help="model.tool_protocol=native (checkouts that have it)")
    args = parser.parse_args()
    extra = ["--set", f"run.rollouts={args.rollouts}"] if args.rollouts else []
    if args.native:
        extra += ["--set", "model.tool_protocol=native"]
    rev = subprocess.run(["git", "-C", str(args.checkout), "rev-parse", "--short", "HEAD"],
                         capture_output=True, text=True).stdout.strip() or "?"
    print(f"format robustness: {args.benchmark}, variants {args.variants:g}, seed {args.seed}, "
          f"checkout {args.checkout} ({rev}){', native tool calls' if args.native else ''}")
    header = (f"{'method':<18} {'eps':>4} {'actor turns':>11} {'lost unamb':>10} {'lost cut/two':>12} "
              f"{'lost/episode':>12} | {'phases':>6} {'inducer turns':>13} {'lost unamb':>10} "
              f"{'lost cut/two':>12} {'lost/phase':>10}")
    print(header)
    print("-" * len(header))
    worst = 0.0
    with tempfile.TemporaryDirectory() as tmp:
        for method in args.methods.split(","):
            fake = RealisticFake(variants=args.variants, seed=args.seed)
            proc = run_method(args.checkout, args.benchmark, method, fake, Path(tmp) / method, extra)
            if proc.returncode != 0:
                print(f"{method:<18} run failed (exit {proc.returncode}): {proc.stderr.strip().splitlines()[-1:]}")
                continue
            m = measure(Path(tmp) / method, fake)
            per_phase = m["inducer_lost_per_phase"]
            print(f"{method:<18} {m['episodes']:>4} {m['actor_turns']:>11} {m['actor_lost_unamb']:>10} "
                  f"{m['actor_lost_cut']:>12} {m['actor_lost_per_episode']:>12.2f} | {m['phases']:>6} "
                  f"{m['inducer_turns']:>13} {m['inducer_lost_unamb']:>10} {m['inducer_lost_cut']:>12} "
                  f"{per_phase if isinstance(per_phase, str) else f'{per_phase:.2f}':>10}")
            turns = int(m["actor_turns"]) + int(m["inducer_turns"])
            worst = max(worst, (int(m["actor_lost_unamb"]) + int(m["inducer_lost_unamb"])) / max(1, turns))
    print(f"worst share of turns lost to unambiguous variants: {worst:.1%} (goal: <= 1%)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
