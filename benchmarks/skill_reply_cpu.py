"""The parent's CPU per skill call: an honest call against replies crafted just under every cap.

    python benchmarks/skill_reply_cpu.py [--calls 40] [--tier auto] [--profile SCENARIO]
        [--json PATH]

A sandbox that left the restricted layer (``tests/sandbox/hostile.py``: unrestricted code
speaking the skill protocol) answers every call with the most expensive reply the parent still
accepts; the parent's CPU time (``time.process_time``: its own, not the child's) is taken per
call, next to the same calls answered by the real skill server. Printed per scenario: median CPU
per call, the ratio to the honest call, and whether the reply was accepted (it should be: a
refused reply would not be the costliest one). Target: every ratio <= 10x. ``--profile``
prints where one scenario's CPU goes (cProfile, parent side); ``--json`` also writes the
figures (with the machine and its load) to a file, as under ``benchmarks/results/``.
"""

from __future__ import annotations

import argparse
import cProfile
import datetime
import os
import platform
import pstats
import statistics
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # the hostile child lives with the tests

from tests.sandbox.hostile import HostileRunner  # noqa: E402

from speedrunner.core.atomic import atomic_write_json  # noqa: E402
from speedrunner.core.runtime.skill_call import SkillCall, Skills  # noqa: E402
from speedrunner.core.sandbox import ProcessLimits, open_skill_runner, resolve_tier  # noqa: E402

SCENARIOS = ["honest", "every_key", "max_valid_tree", "dense_return", "dense_tree", "dense_junk"]
"""``honest``: the real skill server; the others: ``hostile.SCENARIOS`` at the caps."""
TARGET = 10.0
SKILL = """
def forward(env, n):
    for _ in range(n):
        env.act("inc")
    return n
"""


def _step(action: str) -> dict[str, Any]:
    return {"text": "The counter shows 1.", "structured": {"value": 1}, "done": False}


def measure(
    scenario: str, calls: int, tier: str, profile: cProfile.Profile | None = None
) -> dict[str, Any]:
    """Parent CPU seconds of each of ``calls`` calls (after two warm-up calls)."""
    skills = Skills(1, SKILL, {}, "speedrunner.benchmarks.babyai.skill_api")
    runner = (
        open_skill_runner(skills, tier=tier, limits=ProcessLimits())
        if scenario == "honest"
        else HostileRunner(skills, tier, ProcessLimits(), scenario, hostile_starts=calls + 10)
    )
    cpu: list[float] = []
    violations = 0
    try:
        for i in range(calls + 2):
            started = time.process_time()
            if profile is not None and i >= 2:
                profile.enable()
            outcome = runner.call(
                SkillCall("forward", [1]),
                step=_step,
                observation=_step(""),
                max_actions=50,
                timeout_s=60,
            )
            if profile is not None:
                profile.disable()
            if i >= 2:
                cpu.append(time.process_time() - started)
                violations += "sandbox_violation" in outcome.tree
    finally:
        runner.close()
    return {
        "median_ms": 1000 * statistics.median(cpu),
        "max_ms": 1000 * max(cpu),
        "violations": violations,
        "calls": len(cpu),
    }


def rows(calls: int, tier: str = "auto") -> list[Any]:
    """One row per hostile scenario for ``run_all.py``: its parent CPU per call over the honest
    one's."""
    from perf_common import Row

    tier = resolve_tier(tier)
    honest = measure("honest", calls, tier)
    out = []
    for scenario in SCENARIOS[1:]:
        r = measure(scenario, calls, tier)
        out.append(
            Row(
                f"6b. parent CPU per skill call answered by {scenario} / an honest one",
                r["median_ms"] / honest["median_ms"],
                "x",
                TARGET,
                "<=",
                f"{r['median_ms']:.2f} ms vs {honest['median_ms']:.2f} ms, "
                f"{r['violations']} refused, tier {tier}",
            )
        )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=40)
    parser.add_argument("--tier", default="auto")
    parser.add_argument("--profile", choices=SCENARIOS)
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    args = parser.parse_args()
    tier = resolve_tier(args.tier)
    if args.profile:
        profile = cProfile.Profile()
        measure(args.profile, args.calls, tier, profile)
        pstats.Stats(profile).sort_stats("tottime").print_stats(15)
        return
    load_before = os.getloadavg()
    honest = measure("honest", args.calls, tier)
    print(f"tier {tier}, {args.calls} calls per scenario, parent CPU per call (median, max)")
    print(f"{'scenario':16} {'median':>9} {'max':>9} {'ratio':>7} {'refused':>8}")
    worst = 0.0
    rows = []
    for scenario in SCENARIOS:
        r = honest if scenario == "honest" else measure(scenario, args.calls, tier)
        ratio = r["median_ms"] / honest["median_ms"]
        worst = max(worst, ratio)
        rows.append({"scenario": scenario, **r, "ratio": ratio})
        print(
            f"{scenario:16} {r['median_ms']:6.2f} ms {r['max_ms']:6.2f} ms {ratio:6.1f}x "
            f"{r['violations']:4d}/{r['calls']}"
        )
    met = worst <= TARGET
    print(f"worst ratio {worst:.1f}x; target <= {TARGET:g}x: {'met' if met else 'NOT met'}")
    if args.json:
        atomic_write_json(
            args.json,
            {
                "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
                "command": (
                    f"python benchmarks/skill_reply_cpu.py --calls {args.calls} --tier {args.tier}"
                ),
                "machine": {
                    "cpus": os.cpu_count(),
                    "python": platform.python_version(),
                    "system": platform.platform(),
                },
                "load_average_before": load_before,
                "load_average_after": os.getloadavg(),
                "tier": tier,
                "target_ratio": TARGET,
                "worst_ratio": worst,
                "met": met,
                "rows": rows,
            },
        )


if __name__ == "__main__":
    main()
