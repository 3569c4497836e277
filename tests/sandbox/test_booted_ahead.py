"""Skill sandboxes booted before they are needed: the smoke test of a candidate codebook
(``ImportCheck``: loaded in a fresh skill sandbox as an episode's sandbox loads it, the next
check's sandbox launched when one ends) and the episodes' sandboxes prepared during a sleep
(``SkillSandboxes``: handed out fresh, launched from a thread that outlives them)."""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import pytest

from speedrunner.catalog import config_loader
from speedrunner.core.runtime import skill_support
from speedrunner.core.runtime.skill_support import ImportCheck, SkillSandboxes, build_skill_support
from speedrunner.core.sandbox.tiers import resolve_tier
from speedrunner.core.skill import SkillCall, Skills

API = "speedrunner.benchmarks.babyai.skill_api"
REPO = Path(__file__).resolve().parents[2]
GOOD = (
    'def forward(env):\n    """Go forward.\n\n    Returns:\n        The observation.\n    """\n'
    '    return env.act("go forward")\n'
)


def test_a_candidate_is_loaded_as_an_episode_loads_it_and_its_error_shows_its_own_frames(
    tier: str,
) -> None:
    check = ImportCheck(API, tier)
    try:
        assert check(GOOD) is None
        error = check("def _table():\n    return {}['key']\nTABLE = _table()\n")
        assert error is not None and error.startswith("importing the module failed:\n")
        assert (
            'File "codebook.py", line 3, in <module>' in error
            and 'File "codebook.py", line 2, in _table' in error
        )
        assert error.rstrip().endswith("KeyError: 'key'")
        # the codebook's frames, not ours
        assert "speedrunner/" not in error and "Traceback" not in error
        refused = check("import os\n")
        assert refused is not None and "skill code may not import 'os'" in refused
    finally:
        check.close()


def test_top_level_code_that_never_ends_is_reported_as_a_timeout(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(skill_support, "SMOKE_TIMEOUT_S", 1.0)
    check = ImportCheck(API, resolve_tier("auto"))
    try:
        error = check("def _spin():\n    while True:\n        pass\nX = _spin()\n")
        assert (
            error == "importing the module did not finish within 1 s (top-level code must be cheap)"
        )
        assert check(GOOD) is None  # the next check has a sandbox of its own
    finally:
        check.close()


def test_the_next_checks_sandbox_is_launched_when_a_check_ends_and_is_fresh(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    launched: list[object] = []
    loaded_into: list[
        tuple[object, int]
    ] = []  # (process, how many were launched when it got its codebook)
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
        # the first check's sandbox, and the next one's
        assert len(launched) == 2 and launched[1].alive
        assert check(GOOD) is None
        # The second check loaded into the sandbox launched when the first ended (nothing was
        # launched for it on its path), and each sandbox got exactly one codebook.
        assert loaded_into == [(launched[0], 1), (launched[1], 2)]
        assert not launched[0].alive and not launched[1].alive and launched[2].alive
    finally:
        check.close()
    assert not launched[2].alive  # close() ends the one kept ready


def test_a_check_off_the_main_thread_keeps_nothing_ready_and_a_killed_ready_one_is_replaced() -> (
    None
):
    check = ImportCheck(API, resolve_tier("auto"))
    try:
        results: list[str | None] = []
        worker = threading.Thread(target=lambda: results.append(check(GOOD)))
        worker.start()
        worker.join()
        assert results == [None]
        # a sandbox dies with the thread that launched it: none from a worker
        assert check._ready is None
        assert check(GOOD) is None
        ready = check._ready
        assert ready is not None
        # killed from outside while it waited (an OOM killer, a user)
        os.kill(ready.pid, signal.SIGKILL)
        assert check(GOOD) is None
    finally:
        check.close()


def test_the_runs_skill_support_stops_what_it_booted_ahead_when_it_is_closed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``build_skill_support``'s ``close()`` (train_cli calls it when the run ends) ends the check's
    ready sandbox and the prepared episode sandboxes."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-used")
    config = config_loader().load(REPO / "configs" / "babyai" / "asi-gpt-seq.yaml").config
    support = build_skill_support(config, lambda: None)  # type: ignore[arg-type, return-value]
    assert support.smoke_test(GOOD) is None
    support.prepare(2)
    sandboxes = support.open_skills.__self__
    _wait_ready(sandboxes, 2)
    kept = [support.smoke_test._ready, *sandboxes._ready]
    assert len(kept) == 3 and all(p.alive for p in kept)
    support.close()
    assert not any(p.alive for p in kept)


def test_an_interrupted_check_propagates_and_keeps_no_sandbox_ready(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
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
    # the run is ending: no new boot
    assert check._ready is None and len(launched) == 1 and not launched[0].alive


CODEBOOK = Skills(1, GOOD, {"forward": "forward() -> str"}, API)


def _call_forward(runner) -> str:
    """One skill call through ``runner``; the parent's env answers every action."""
    outcome = runner.call(
        SkillCall("forward", (), {}),
        step=lambda action: {"text": f"did {action}", "structured": {}, "done": False},
        observation={"text": "start", "structured": {}, "done": False},
        max_actions=5,
        timeout_s=20,
    )
    assert outcome.error is None, outcome.error
    return outcome.returned


def _wait_ready(sandboxes: SkillSandboxes, n: int) -> None:
    deadline = time.monotonic() + 20
    while sandboxes.ready < n:
        assert time.monotonic() < deadline, f"{sandboxes.ready} of {n} sandboxes launched"
        time.sleep(0.01)


def test_prepared_sandboxes_are_handed_to_episodes_and_outlive_the_thread_that_asked(
    tier: str,
) -> None:
    sandboxes = SkillSandboxes(tier, API)
    try:
        asker = threading.Thread(target=sandboxes.prepare, args=(2,))  # a short-lived thread asks
        asker.start()
        asker.join()
        _wait_ready(sandboxes, 2)
        time.sleep(0.2)  # a sandbox tied to the asking thread would be dead by now
        prepared = [p.pid for p in sandboxes._ready]
        runners = [sandboxes.open(CODEBOOK) for _ in range(3)]
        try:
            assert sandboxes.ready == 0
            assert [r.pid for r in runners[:2]] == prepared and runners[2].pid not in prepared
            for runner in runners:  # two booted ahead, the third launched by open: all play
                assert _call_forward(runner) == "did go forward"
        finally:
            for runner in runners:
                runner.close()
    finally:
        sandboxes.close()


def test_a_prepared_sandbox_that_died_while_it_waited_is_not_handed_out() -> None:
    sandboxes = SkillSandboxes(resolve_tier("auto"), API)
    try:
        sandboxes.prepare(1)
        _wait_ready(sandboxes, 1)
        victim = sandboxes._ready[0]
        victim.wait_ready()
        os.kill(victim.pid, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while victim.alive and time.monotonic() < deadline:
            time.sleep(0.01)
        runner = sandboxes.open(CODEBOOK)
        try:
            assert runner.pid != victim.pid and _call_forward(runner) == "did go forward"
        finally:
            runner.close()
    finally:
        sandboxes.close()


def test_close_kills_the_prepared_sandboxes_and_later_prepares_launch_nothing() -> None:
    sandboxes = SkillSandboxes(resolve_tier("auto"), API)
    sandboxes.prepare(2)
    _wait_ready(sandboxes, 2)
    prepared = list(sandboxes._ready)
    sandboxes.close()
    assert not any(p.alive for p in prepared) and sandboxes.ready == 0
    sandboxes.prepare(3)
    time.sleep(0.2)
    assert sandboxes.ready == 0
    runner = sandboxes.open(CODEBOOK)  # an episode can still open its own
    try:
        assert _call_forward(runner) == "did go forward"
    finally:
        runner.close()


def test_episodes_that_open_before_their_sandboxes_are_ready_launch_their_own_and_fewer_are_booted(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    launched: list[object] = []
    launch = skill_support.launch_skill_process

    # the pool's first boot is still under way when the phase begins
    def slow_launch(*args, **kwargs):
        time.sleep(0.3)
        launched.append(launch(*args, **kwargs))
        return launched[-1]

    monkeypatch.setattr(skill_support, "launch_skill_process", slow_launch)
    sandboxes = SkillSandboxes(resolve_tier("auto"), API)
    try:
        sandboxes.prepare(3)
        time.sleep(0.05)
        runners = [sandboxes.open(CODEBOOK) for _ in range(3)]  # none ready: each launches its own
        try:
            time.sleep(1.0)
            assert len(launched) == 1  # the boot under way finished; the two not begun were dropped
            assert all(r.pid not in [p.pid for p in launched] for r in runners)
        finally:
            for runner in runners:
                runner.close()
    finally:
        sandboxes.close()
