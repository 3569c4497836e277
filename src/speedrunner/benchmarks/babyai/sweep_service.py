"""BabyAI's sweep service: one local BabyAI server for a sweep's runs
that would each start their own.

A run started alone autostarts a private server on a free port. A sweep on one machine
instead starts one server for all its BabyAI runs whose configured (local) URL has nothing
listening, and points them at it (``benchmark.server_url`` is operational, so a resumed run
may be pointed there too). The server is stopped with the sweep; it also watches the
sweep's PID, so a SIGKILLed sweep does not leave it behind. Declared as
``BenchmarkSpec.sweep_service``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from speedrunner.errors import ServerUnavailableError

if TYPE_CHECKING:
    from speedrunner.sweep.spec import SweepRun


@contextlib.contextmanager
def shared_server(
    runs: list[SweepRun], *, timeout_s: float = 60.0
) -> Iterator[Callable[[SweepRun], list[str]]]:
    """Start one server for the runs that would each autostart their own; yields, per run, the
    operational ``--set`` overrides that point it at the shared server."""
    from speedrunner.benchmarks.babyai.benchmark import LOCAL_HOSTS, ServerProcess, free_port, probe

    def wants(run: SweepRun) -> str | None:
        url, autostart = (
            run.benchmark_section.get("server_url"),
            run.benchmark_section.get("autostart_server"),
        )
        return (
            url
            if isinstance(url, str) and autostart and urlsplit(url).hostname in LOCAL_HOSTS
            else None
        )

    wanting = {url for r in runs if (url := wants(r))}
    idle = {url for url in wanting if not _answers(probe, url)}
    server = None
    if idle:
        server = ServerProcess("127.0.0.1", free_port())
        server.start(timeout_s)
        print(f"sweep: one BabyAI server for this machine's runs at {server.url}", flush=True)
    try:

        def operational(run: SweepRun) -> list[str]:
            if server is not None and wants(run) in idle:
                return [f"benchmark.server_url={server.url}"]
            return []

        yield operational
    finally:
        if server is not None:
            server.stop()


def _answers(probe: Callable[..., bool], url: str) -> bool:
    try:
        return probe(url)
    except ServerUnavailableError:  # something else answers there: the run's preflight says what
        return True
