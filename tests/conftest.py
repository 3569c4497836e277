"""Suite-wide: speedrun result copies and BabyAI server token files go to temporary folders,
never into the checkout's runs/ or the user's home."""

import os
from collections.abc import Iterator

import pytest


def _env_pointing_at(name: str, path: str) -> Iterator[None]:
    old = os.environ.get(name)
    os.environ[name] = path
    yield
    if old is None:
        os.environ.pop(name, None)
    else:
        os.environ[name] = old


@pytest.fixture(autouse=True, scope="session")
def _speedrun_results_outside_the_repo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    from speedrunner.core.runtime.speedrun import RESULTS_DIR_ENV

    yield from _env_pointing_at(RESULTS_DIR_ENV, str(tmp_path_factory.mktemp("speedrun-results")))


@pytest.fixture(autouse=True, scope="session")
def _server_tokens_outside_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    from speedrunner.benchmarks.babyai.auth import RUNTIME_DIR_ENV

    runtime = tmp_path_factory.mktemp("runtime")
    runtime.chmod(0o700)
    yield from _env_pointing_at(RUNTIME_DIR_ENV, str(runtime))


_SCOPE_WIDTH = {"session": 0, "package": 1, "module": 2}
_SUITE_WIDE = {"_speedrun_results_outside_the_repo", "_server_tokens_outside_home"}
"""Autouse fixtures every test has: they group nothing."""


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook reads the marks (--dist loadgroup)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests that share an expensive module- or session-scoped fixture of this suite (a run
    the report tests read, a BabyAI bot, a SLURM cluster, a reference run) go to one xdist
    worker, so it is built once, not once per worker. The widest such fixture names the group."""
    for item in items:
        if item.get_closest_marker("xdist_group") is not None:
            continue
        info = getattr(item, "_fixtureinfo", None)
        shared = sorted(
            (_SCOPE_WIDTH[d.scope], f"{d.baseid}::{name}")
            for name, defs in (info.name2fixturedefs.items() if info else ())
            for d in defs[-1:]
            if d.scope in _SCOPE_WIDTH and d.baseid.startswith("tests") and name not in _SUITE_WIDE
        )
        if shared:
            item.add_marker(pytest.mark.xdist_group(shared[0][1]))
    _slow_modules_first(items)


def _slow_modules_first(items: list[pytest.Item]) -> None:
    """Modules with ``slow`` tests (end-to-end runs of tens of seconds) run first, each module
    still in one piece and in its own order: xdist hands tests out in this order, so the last
    minutes are many short tests spread over every worker, not one long run keeping one CPU
    busy while the others idle (the suite's tail was 25-40 s of a single worker)."""
    slow = {item.path for item in items if item.get_closest_marker("slow") is not None}
    items.sort(key=lambda item: item.path not in slow)


SYSTEM_PACKAGES = (
    # (command, Debian package, what runs only when it is present)
    ("java", "openjdk-17-jre-headless", "ScienceWorld tests (the JVM)"),
    (
        "bwrap",
        "bubblewrap",
        "tests of the bubblewrap sandbox tier (the tier that contains everything)",
    ),
    ("chromium", "chromium", "the report's browser test"),
    ("chromedriver", "chromium-driver", "the report's browser test"),
    (
        "slurmctld",
        "slurm-wlm",
        "the sweep tests on a real one-node SLURM cluster (they also need root)",
    ),
    ("munged", "munge", "the sweep tests on a real one-node SLURM cluster (they also need root)"),
)


def installed(command: str) -> str | None:
    """Where a system package's command is: the one rule for "is it installed", used by this
    summary and by the tests that need the command (e.g. the report's browser test)."""
    import shutil

    return shutil.which(command)


def _missing_system_packages() -> list[tuple[str, str, str]]:
    return [p for p in SYSTEM_PACKAGES if installed(p[0]) is None]


def pytest_report_header(config: pytest.Config) -> list[str]:
    missing = _missing_system_packages()
    if not missing:
        commands = ", ".join(cmd for cmd, _, _ in SYSTEM_PACKAGES)
        return [f"system packages: {commands} all present (every tier is tested)"]
    return [
        f"system package missing: {pkg} ({cmd}) -> not tested: {what}" for cmd, pkg, what in missing
    ]


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    """Say at the end, not only in the header, what a missing system package left untested."""
    missing = _missing_system_packages()
    if missing:
        packages = " ".join(dict.fromkeys(pkg for _, pkg, _ in missing))
        terminalreporter.write_line(
            "NOT TESTED here for lack of system packages: "
            f"{'; '.join(dict.fromkeys(w for *_, w in missing))} (apt-get install {packages}; see "
            "the README's Set-up)",
            yellow=True,
        )


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """``-n auto`` (pyproject's addopts): one worker more than there are CPUs. A quarter of the
    suite's time is waiting, not computing (fake-model latency, server and JVM start-ups,
    subprocess runs): with one worker per CPU, 2 CPUs were busy 73 % of the time; the extra
    worker fills some of that. ``PYTEST_XDIST_AUTO_NUM_WORKERS`` or ``-n N`` chooses another."""
    import os

    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS"):
        return int(os.environ["PYTEST_XDIST_AUTO_NUM_WORKERS"])
    return len(os.sched_getaffinity(0)) + 1


@pytest.hookimpl(tryfirst=True)  # before xdist starts its workers
def pytest_sessionstart(session: pytest.Session) -> None:
    """Before any worker or subprocess starts: byte-compile the checkout's Python once, and
    start making the ScienceWorld JVMs' shared class-data archive (``tests/jvm_class_archive.py``).

    With ``PYTHONDONTWRITEBYTECODE`` set (as on CI machines) no process writes ``.pyc``
    files, so each of the suite's hundreds of processes (runs, servers, sandbox children)
    compiled every project module it imported from source again: ~0.3-0.6 CPU-seconds per
    run. ``compileall`` writes them regardless; Python checks each against its source's size
    and mtime, so a stale one is never used."""
    import compileall
    from pathlib import Path

    if hasattr(session.config, "workerinput"):
        return
    root = Path(__file__).resolve().parents[1]
    for folder in ("src", "benchmarks", "BALROG", "tests"):
        if (root / folder).is_dir():
            compileall.compile_dir(root / folder, quiet=1)
    global _CLASS_ARCHIVE
    from tests import jvm_class_archive

    _CLASS_ARCHIVE = jvm_class_archive.start()


_CLASS_ARCHIVE = None
"""The ScienceWorld JVMs' shared class-data archive (``tests/jvm_class_archive.py``), if made."""


def pytest_sessionfinish(session: pytest.Session) -> None:
    if _CLASS_ARCHIVE is not None and not hasattr(session.config, "workerinput"):
        _CLASS_ARCHIVE.stop()
