"""What the runs of one sweep on one machine share: a BabyAI server and the LLM slot directory.

BabyAI: a run started alone autostarts a private server on a free port. A sweep on one
machine instead starts one server for all its BabyAI runs whose configured (local) URL has
nothing listening, and points them at it (``benchmark.server_url`` is operational, so a
resumed run may be pointed there too). The server is stopped with the sweep; it also
watches the sweep's PID, so a SIGKILLed sweep does not leave it behind.

LLM concurrency: ``SPEEDRUNNER_LLM_SLOTS_DIR`` (see ``core.llm.slots``) is set for every run,
so runs on this machine share each endpoint's ``model.max_concurrency``.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
from collections.abc import Callable, Iterator
from urllib.parse import urlsplit

from speedrunner.core.llm.slots import SLOTS_DIR_ENV
from speedrunner.core.tempdirs import process_temp_dir
from speedrunner.errors import ServerUnavailableError
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
def shared_babyai_server(runs: list[SweepRun], *, timeout_s: float = 60.0) -> Iterator[Operational]:
    """Start one BabyAI server for the runs that would each autostart their own.

    Yields, per run, the operational ``--set`` overrides that point it at the shared server.
    """
    from speedrunner.benchmarks.babyai.benchmark import LOCAL_HOSTS, ServerProcess, free_port, probe

    wanting = {r.server_url for r in runs if r.benchmark == "babyai" and r.server_url
               and r.autostart_server and urlsplit(r.server_url).hostname in LOCAL_HOSTS}
    idle = {url for url in wanting if not _answers(probe, url)}
    server = None
    if idle:
        server = ServerProcess("127.0.0.1", free_port())
        server.start(timeout_s)
        print(f"sweep: one BabyAI server for this machine's runs at {server.url}", flush=True)
    try:
        def operational(run: SweepRun) -> list[str]:
            if server is not None and run.benchmark == "babyai" and run.server_url in idle:
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
