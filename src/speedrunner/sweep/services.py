"""What the runs of one sweep on one machine share: their benchmarks' services and the LLM slot
directory.

Services: a benchmark may declare one (``BenchmarkSpec.sweep_service``), e.g. BabyAI's one
env server for all the machine's runs that would each start their own.

LLM concurrency: ``SPEEDRUNNER_LLM_SLOTS_DIR`` (see ``core.llm.slots``) is set for every run,
so runs on this machine share each endpoint's ``model.max_concurrency``.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
from collections.abc import Callable, Iterator

from speedrunner.core.llm.slots import SLOTS_DIR_ENV
from speedrunner.core.tempdirs import process_temp_dir
from speedrunner.sweep.spec import SweepRun

Operational = Callable[[SweepRun], list[str]]


def slots_env() -> dict[str, str]:
    """The environment variable that makes runs on this machine share LLM endpoint limits.

    Unless the user set it, a fresh private directory (``mkdtemp``: mode 0700, a name nobody
    can predict and pre-create as a symlink), removed when the sweep exits (and, if the sweep
    was killed, by a later sweep: ``core/tempdirs.py``).
    """
    given = os.environ.get(SLOTS_DIR_ENV)
    if given:
        return {SLOTS_DIR_ENV: given}
    made = str(process_temp_dir("speedrunner-llm-slots-"))
    atexit.register(shutil.rmtree, made, ignore_errors=True)
    return {SLOTS_DIR_ENV: made}


@contextlib.contextmanager
def benchmark_services(runs: list[SweepRun]) -> Iterator[Operational]:
    """Enter the sweep service each benchmark of ``runs`` declares (``BenchmarkSpec.sweep_service``,
    e.g. one env server for the machine's runs) around the sweep.

    Yields, per run, the operational ``--set`` overrides its benchmark's service gives it.
    """
    from speedrunner.core.registry import load_entry_point
    from speedrunner.core.specs import BENCHMARKS

    by_benchmark: dict[str, list[SweepRun]] = {}
    for r in runs:
        by_benchmark.setdefault(r.benchmark, []).append(r)
    with contextlib.ExitStack() as stack:
        services: dict[str, Operational] = {}
        for name, group in by_benchmark.items():
            service = BENCHMARKS.get(name).sweep_service
            if service is not None:
                services[name] = stack.enter_context(load_entry_point(service)(group))

        def operational(run: SweepRun) -> list[str]:
            service = services.get(run.benchmark)
            return service(run) if service is not None else []

        yield operational
