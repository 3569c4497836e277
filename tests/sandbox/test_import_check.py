"""The smoke test of a candidate codebook (``ImportCheck``): loaded in a fresh skill sandbox as
an episode's sandbox loads it, and the next check's sandbox booted before it is needed."""

from __future__ import annotations

import os
import signal
import threading

import pytest

from speedrunner.core.runtime import skill_support
from speedrunner.core.runtime.skill_support import ImportCheck
from speedrunner.core.sandbox import skills as sandbox_skills
from speedrunner.core.sandbox.tiers import resolve_tier

API = "speedrunner.benchmarks.babyai.skill_api"
GOOD = 'def forward(env):\n    """Go forward.\n\n    Returns:\n        The observation.\n    """\n    return env.act("go forward")\n'


def test_a_candidate_is_loaded_as_an_episode_loads_it_and_its_error_shows_its_own_frames(tier: str) -> None:
    check = ImportCheck(API, tier)
    try:
        assert check(GOOD) is None
        error = check("def _table():\n    return {}['key']\nTABLE = _table()\n")
        assert error is not None and error.startswith("importing the module failed:\n")
        assert 'File "codebook.py", line 3, in <module>' in error and 'File "codebook.py", line 2, in _table' in error
        assert error.rstrip().endswith("KeyError: 'key'")
        assert "speedrunner/" not in error and "Traceback" not in error  # the codebook's frames, not ours
        refused = check("import os\n")
        assert refused is not None and "skill code may not import 'os'" in refused
    finally:
        check.close()


def test_top_level_code_that_never_ends_is_reported_as_a_timeout(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(skill_support, "SMOKE_TIMEOUT_S", 1.0)
    check = ImportCheck(API, resolve_tier("auto"))
    try:
        error = check("def _spin():\n    while True:\n        pass\nX = _spin()\n")
        assert error == "importing the module did not finish within 1 s (top-level code must be cheap)"
        assert check(GOOD) is None  # the next check has a sandbox of its own
    finally:
        check.close()


def test_the_next_checks_sandbox_is_launched_when_a_check_ends_and_is_fresh(monkeypatch: pytest.MonkeyPatch) -> None:
    launched: list[object] = []
    loaded_into: list[tuple[object, int]] = []  # (process, how many were launched when it got its codebook)
    launch, load = skill_support.launch_skill_process, skill_support.load_codebook_in

    def counting_launch(*args, **kwargs):
        launched.append(launch(*args, **kwargs))
        return launched[-1]

    def recording_load(process, *args, **kwargs):
        loaded_into.append((process, len(launched)))
        return load(process, *args, **kwargs)

    monkeypatch.setattr(skill_support, "launch_skill_process", counting_launch)
    monkeypatch.setattr(skill_support, "load_codebook_in", recording_load)
    check = ImportCheck(API, resolve_tier("auto"))
    try:
        assert check(GOOD) is None
        assert len(launched) == 2 and launched[1].alive  # the first check's sandbox, and the next one's
        assert check(GOOD) is None
        # The second check loaded into the sandbox launched when the first ended (nothing was
        # launched for it on its path), and each sandbox got exactly one codebook.
        assert loaded_into == [(launched[0], 1), (launched[1], 2)]
        assert not launched[0].alive and not launched[1].alive and launched[2].alive
    finally:
        check.close()
    assert not launched[2].alive  # close() ends the one kept ready


def test_a_check_off_the_main_thread_keeps_nothing_ready_and_a_killed_ready_one_is_replaced() -> None:
    check = ImportCheck(API, resolve_tier("auto"))
    try:
        results: list[str | None] = []
        worker = threading.Thread(target=lambda: results.append(check(GOOD)))
        worker.start()
        worker.join()
        assert results == [None]
        assert check._ready is None  # a sandbox dies with the thread that launched it: none from a worker
        assert check(GOOD) is None
        ready = check._ready
        assert ready is not None
        os.kill(ready.pid, signal.SIGKILL)  # killed from outside while it waited (an OOM killer, a user)
        assert check(GOOD) is None
    finally:
        check.close()


def test_a_codebook_run_stops_the_sandbox_it_kept_ready() -> None:
    """The run's ``SkillSupport.close()`` (called when the run ends) reaches the check."""
    from speedrunner.core.method import SkillSupport

    check = ImportCheck(API, resolve_tier("auto"))
    support = SkillSupport(api_module=API, api_names=(), primitives=(), open_skills=sandbox_skills.open_skill_runner,
                           smoke_test=check, replay=lambda *a: None, sandbox_tier=check.tier)
    assert support.smoke_test(GOOD) is None
    ready = check._ready
    assert ready is not None and ready.alive
    support.close()
    assert not ready.alive


def test_an_interrupted_check_propagates_and_keeps_no_sandbox_ready(monkeypatch: pytest.MonkeyPatch) -> None:
    launched: list[object] = []
    launch = skill_support.launch_skill_process

    def counting_launch(*args, **kwargs):
        launched.append(launch(*args, **kwargs))
        return launched[-1]

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(skill_support, "launch_skill_process", counting_launch)
    monkeypatch.setattr(skill_support, "load_codebook_in", interrupted)
    check = ImportCheck(API, resolve_tier("auto"))
    with pytest.raises(KeyboardInterrupt):
        check(GOOD)
    assert check._ready is None and len(launched) == 1 and not launched[0].alive  # the run is ending: no new boot
