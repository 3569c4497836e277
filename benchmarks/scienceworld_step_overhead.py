"""Per-step cost of our ScienceWorld text env relative to the raw package env, side by side.

Two JVMs with the same options: one behind the package's ``ScienceWorldEnv`` as it ships
(raw: it fetches the valid commands one py4j call per command), one behind our
``ScienceWorldTextEnv`` (one call for all of them; ``env._simulator_class`` says why). Both
play the gold action sequence of one test variation of every t3/t4 subtask, step by step,
taking turns at going first so machine noise hits both alike. Per step: wall time, this
process's CPU (the calling thread's) and the JVM's CPU (from ``/proc``). Target: wall ratio
under 1.1; CPU is what a machine running many episodes at once pays. Then an episode's start
the same way: the package's ``load`` + ``reset()`` against our ``reset(task, seed)``, which
builds the world once (``ScienceWorldTextEnv._load_and_reset`` says why).

    python benchmarks/scienceworld_step_overhead.py [--repeats 2]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
import types
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from py4j.java_gateway import GatewayClient
from scienceworld import ScienceWorldEnv

from speedrunner.benchmarks.scienceworld import env as env_module
from speedrunner.benchmarks.scienceworld.config import TASK_SETS, ScienceWorldConfig
from speedrunner.benchmarks.scienceworld.env import (
    ScienceWorldTextEnv,
    launch_simulator,
    stop_simulator,
)
from speedrunner.benchmarks.scienceworld.tasks import parse_task


@dataclass
class Cost:
    """What one side's steps took, step by step."""

    jvm_pid: int = 0
    wall: list[float] = field(default_factory=list)
    python_cpu: list[float] = field(default_factory=list)
    jvm_cpu: list[float] = field(default_factory=list)

    def timed(self, fn: Callable[..., Any], *args: Any) -> Any:
        j0, c0, t0 = _process_cpu(self.jvm_pid), time.thread_time(), time.perf_counter()
        result = fn(*args)
        self.wall.append(time.perf_counter() - t0)
        self.python_cpu.append(time.thread_time() - c0)
        self.jvm_cpu.append(_process_cpu(self.jvm_pid) - j0)
        return result

    def line(self, name: str) -> str:
        ms = lambda xs: 1000 * statistics.fmean(xs)  # noqa: E731
        return (
            f"{name:28s} wall {ms(self.wall):6.2f} ms/step (median "
            f"{1000 * statistics.median(self.wall):.2f}), CPU {ms(self.python_cpu):5.2f} ms here + "
            f"{ms(self.jvm_cpu):5.2f} ms in the JVM"
        )


def _process_cpu(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _as_shipped(sim: Any) -> Any:
    """``sim`` (our subclass, for its JVM options) back to the package's behaviour: valid
    commands one py4j call each, and py4j's own connections (no ``TCP_QUICKACK``)."""
    sim.get_valid_action_object_combinations = types.MethodType(
        ScienceWorldEnv.get_valid_action_object_combinations, sim
    )
    client = sim._gateway._gateway_client
    client._create_connection = types.MethodType(GatewayClient._create_connection, client)
    for connection in client.deque:
        connection.stream = connection.socket.makefile("rb")  # as py4j opens it
    return sim


def measure(repeats: int = 2, tasks: int | None = None) -> tuple[Cost, Cost, int]:
    """The raw env's and ours' per-step costs on the gold paths of the first ``tasks`` t3/t4
    subtasks (all by default), and the number of subtasks played."""
    config = ScienceWorldConfig()
    task_ids = [*TASK_SETS["t3"], *TASK_SETS["t4"]][:tasks]
    raw = _as_shipped(launch_simulator(config.env_step_limit, config.jvm_options))
    ours = ScienceWorldTextEnv(
        simplification=config.simplification,
        env_step_limit=config.env_step_limit,
        jvm_options=config.jvm_options,
    )
    raw_cost = Cost(raw._gateway.java_process.pid)
    our_cost = Cost()
    try:
        for _ in range(repeats):
            for task_id in task_ids:
                ref = parse_task(f"{task_id}/test", 0)
                raw.load(ref.task_name, ref.variation, config.simplification, generateGoldPath=True)
                gold = raw.get_gold_action_sequence()
                raw.reset()
                ours.reset(str(ref), 0)
                our_cost.jvm_pid = ours._sim._gateway.java_process.pid
                for i, action in enumerate(gold):
                    sides = [(raw_cost, raw.step), (our_cost, ours.step)]
                    done = [
                        cost.timed(step, action) for cost, step in (sides if i % 2 else sides[::-1])
                    ]
                    if any((d[2] if isinstance(d, tuple) else d.done) for d in done):
                        break
    finally:
        ours.close()
        stop_simulator(raw)
    return raw_cost, our_cost, len(task_ids)


def episode_start_cost(repeats: int = 3) -> tuple[Cost, Cost]:
    """The package's episode start (``load`` + ``reset()``) and ours (``reset(task, seed)``)
    on a test variation of every t3/t4 subtask, on two JVMs, taking turns at going first."""
    config = ScienceWorldConfig()
    raw = launch_simulator(config.env_step_limit, config.jvm_options)
    ours = ScienceWorldTextEnv(
        simplification=config.simplification,
        env_step_limit=config.env_step_limit,
        jvm_options=config.jvm_options,
    )
    ours.reset("4-1/test", 0)
    raw_cost, our_cost = (
        Cost(raw._gateway.java_process.pid),
        Cost(ours._sim._gateway.java_process.pid),
    )

    def package_start(task: str, seed: int) -> Any:
        ref = parse_task(task, seed)
        raw.load(ref.task_name, ref.variation, config.simplification)
        return raw.reset()

    try:
        for i in range(repeats):
            for j, task_id in enumerate([*TASK_SETS["t3"], *TASK_SETS["t4"]]):
                task, seed = f"{task_id}/test", i * 11 + j
                sides = [(raw_cost, package_start), (our_cost, ours.reset)]
                for cost, start in sides if (i + j) % 2 else sides[::-1]:
                    cost.timed(start, task, seed)
    finally:
        ours.close()
        stop_simulator(raw)
    return raw_cost, our_cost


def answer_latency(chars: int = 9000, calls: int = 20) -> tuple[float, float]:
    """Median seconds for one py4j answer of ``chars`` characters over a plain py4j
    connection and over ours (``env._AckingReader``), on one JVM, alternating."""
    config = ScienceWorldConfig()
    sim = launch_simulator(config.env_step_limit, config.jvm_options)
    try:
        builder = sim._gateway.jvm.java.lang.StringBuilder("x" * chars)
        client = sim._gateway._gateway_client
        plain: list[float] = []
        acking: list[float] = []
        for _ in range(calls):
            for times, ours in ((plain, False), (acking, True)):
                for connection in client.deque:
                    if ours:
                        env_module._ack_at_once(connection)
                    else:
                        connection.stream = connection.socket.makefile("rb")  # as py4j opens it
                t0 = time.perf_counter()
                builder.toString()
                times.append(time.perf_counter() - t0)
        return statistics.median(plain), statistics.median(acking)
    finally:
        stop_simulator(sim)


def main() -> None:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    raw, ours, tasks = measure(args.repeats)
    print(f"steps: {len(raw.wall)} (gold paths of {tasks} subtasks x {args.repeats})")
    print(raw.line("raw ScienceWorldEnv.step:"))
    print(ours.line("ScienceWorldTextEnv.step:"))
    ratio = statistics.fmean(ours.wall) / statistics.fmean(raw.wall)
    cpu = lambda c: statistics.fmean(c.python_cpu) + statistics.fmean(c.jvm_cpu)  # noqa: E731
    print(f"ratio ours/raw: wall {ratio:.3f} (target < 1.1), CPU {cpu(ours) / cpu(raw):.3f}")
    raw_start, our_start = episode_start_cost()
    print(f"episode starts: {len(raw_start.wall)} each (t3/t4 test variations)")
    print(raw_start.line("raw load() + reset():").replace("/step", "/start"))
    print(our_start.line("ScienceWorldTextEnv.reset:").replace("/step", "/start"))
    print(
        "ratio ours/raw: wall "
        f"{statistics.fmean(our_start.wall) / statistics.fmean(raw_start.wall):.3f}, JVM CPU "
        f"{statistics.fmean(our_start.jvm_cpu) / statistics.fmean(raw_start.jvm_cpu):.3f}"
    )
    plain, acking = answer_latency()
    print(
        f"one py4j answer of 9,000 chars: {1000 * plain:.1f} ms over a plain connection, "
        f"{1000 * acking:.1f} ms over ours"
    )


if __name__ == "__main__":
    main()
