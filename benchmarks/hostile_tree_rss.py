"""Peak parent RSS while a sandbox floods it with forged or huge call trees.

    python benchmarks/hostile_tree_rss.py [--calls 300] [--tier auto]

Each scenario runs in a fresh Python process (``ru_maxrss`` is a high-water mark): a real
``SandboxSkillRunner`` whose every process is a hostile child (unrestricted code speaking
the skill protocol, ``tests/sandbox/hostile.py``) takes ``--calls`` skill calls, and the
parent keeps every resulting tree as an episode keeps them in its trajectory. Before the
trust layer a forged 31 MB tree added ~370 MB of parent RSS per stored call (3.8 GB peak);
before one schema measured every kept key, a 4 MB nested ``stopped_by`` (``stopped_by_flood``)
took 300 calls to a 3.5 GB peak. ``every_key`` fills every key the parent keeps to its cap
(and adds unknown keys of a megabyte), so a key nobody counts shows up here.
Target: every scenario's peak under 1 GiB. The honest row is the same calls answered by
the real skill server, for scale.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
SCENARIOS = [
    "honest",
    "huge_tree",
    "deep_tree",
    "wide_tree",
    "max_valid_tree",
    "forged_actions",
    "stopped_by_flood",
    "huge_count",
    "every_key",
]
TARGET_MIB = 1024


def measure(scenario: str, calls: int, tier: str) -> dict[str, float]:
    sys.path.insert(0, str(REPO))
    from tests.sandbox.hostile import HostileRunner  # test tooling: the hostile child

    from speedrunner.core.runtime.skill_call import SkillCall, Skills
    from speedrunner.core.sandbox import ProcessLimits, open_skill_runner, resolve_tier

    skills = Skills(
        1, "def forward(env, n):\n    return n\n", {}, "speedrunner.benchmarks.babyai.skill_api"
    )
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    tier = resolve_tier(tier)
    runner = (
        open_skill_runner(skills, tier=tier, limits=ProcessLimits())
        if scenario == "honest"
        else HostileRunner(skills, tier, ProcessLimits(), scenario, hostile_starts=calls + 10)
    )
    kept, violations, started = [], 0, time.monotonic()

    def step(action: str) -> dict:
        return {"text": "The counter shows 1.", "structured": {"value": 1}, "done": False}

    try:
        for _ in range(calls):
            outcome = runner.call(
                SkillCall("forward", [1]),
                step=step,
                observation=step(""),
                max_actions=50,
                timeout_s=30,
            )
            kept.append(outcome.tree)
            violations += "sandbox_violation" in outcome.tree
    finally:
        runner.close()
    stored = len(json.dumps(kept))
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {
        "before_mib": before,
        "peak_mib": peak,
        "violations": violations,
        "stored_mib": stored / 2**20,
        "seconds": time.monotonic() - started,
    }


def measure_in_subprocess(scenario: str, calls: int, tier: str) -> dict[str, float]:
    """``measure`` in a fresh interpreter, so each scenario's peak is its own."""
    out = subprocess.run(
        [sys.executable, __file__, "--scenario", scenario, "--calls", str(calls), "--tier", tier],
        capture_output=True,
        text=True,
        check=True,
        cwd=REPO,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def rows(calls: int, tier: str = "auto") -> list[Any]:
    """One row per scenario for ``run_all.py``: the parent's peak RSS against the 1 GiB target."""
    from perf_common import Row

    out = []
    for scenario in SCENARIOS:
        r = measure_in_subprocess(scenario, calls, tier)
        out.append(
            Row(
                f"6. peak parent RSS, {calls} skill calls answered by: {scenario}",
                r["peak_mib"],
                "MiB",
                TARGET_MIB,
                "<",
                f"{r['violations']:.0f} violations, {r['stored_mib']:.1f} MiB of trees kept, "
                f"RSS before {r['before_mib']:.0f} MiB",
            )
        )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--tier", default="auto")
    parser.add_argument("--scenario", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.scenario:
        print(json.dumps(measure(args.scenario, args.calls, args.tier)))
        return
    print(
        f"{'scenario':16} {'calls':>5} {'violations':>10} {'RSS before':>11} {'peak RSS':>9} "
        f"{'stored':>8}  peak/target"
    )
    worst = 0.0
    for scenario in SCENARIOS:
        r = measure_in_subprocess(scenario, args.calls, args.tier)
        worst = max(worst, r["peak_mib"])
        print(
            f"{scenario:16} {args.calls:5d} {r['violations']:10d} {r['before_mib']:9.0f} MiB "
            f"{r['peak_mib']:5.0f} MiB {r['stored_mib']:5.1f} MiB  {r['peak_mib'] / TARGET_MIB:.2f}"
        )
    print(
        f"worst peak {worst:.0f} MiB; target < {TARGET_MIB} MiB: "
        f"{'met' if worst < TARGET_MIB else 'NOT met'}"
    )


if __name__ == "__main__":
    main()
