"""What a per-sandbox cgroup costs: start + first ``run`` of an analysis session, per tier,
with the cgroup and without it (cgroups made unavailable), measured alternately, side by side.

    python benchmarks/sandbox_start_cost.py [--repeat 10]

Needs root and a writable cgroup tree for the "with" column; prints medians and their ratio.
"""

from __future__ import annotations

import argparse
import logging
import statistics
import time

from speedrunner.core.sandbox import available_tiers, cgroups, open_analysis_session


def once(tier: str) -> float:
    started = time.perf_counter()
    with open_analysis_session(tier=tier) as session:
        session.run("pass", 30)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=10)
    args = parser.parse_args()
    logging.disable(logging.WARNING)  # the "no cgroups" warning is the point of the second column
    real = cgroups.discover
    print(f"{'tier':<8} {'with cgroup (ms)':>17} {'without (ms)':>13} {'ratio':>6}")
    for tier in available_tiers():
        with_, without = [], []
        for _ in range(args.repeat):
            cgroups.discover = real
            with_.append(once(tier))
            cgroups.discover = lambda: "disabled for the measurement"
            without.append(once(tier))
        cgroups.discover = real
        a, b = statistics.median(with_) * 1000, statistics.median(without) * 1000
        print(f"{tier:<8} {a:>17.1f} {b:>13.1f} {a / b:>6.2f}")


if __name__ == "__main__":
    main()
