"""A killed run whose call log or response cache was then damaged resumes through the real
entry point: no traceback, a line saying what was repaired, no call paid again and the same
spend as the undamaged copy's resume.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

from tests.llm.test_damaged_records import DAMAGE

from .harness import KillingPolicy, run, start_server, train_cmd

pytestmark = pytest.mark.slow

SMALL = ("--set", "run.parallel_episodes=1")


def _resume(run_dir: Path):
    return run(
        [sys.executable, "-m", "speedrunner.benchmarks.babyai.train", "--resume", str(run_dir)]
    )


@pytest.fixture(scope="module")
def killed(tmp_path_factory):
    """A paid run SIGKILLed part way, what its undamaged copy's resume asked and spent, and the
    server (a resume calls the base_url the run was started with)."""
    from . import prewarmed
    from .harness import REPO, clean_env

    tmp = tmp_path_factory.mktemp("killed")
    policy = KillingPolicy(kill_at=20)
    server = start_server(policy)
    try:
        proc = prewarmed.popen(
            train_cmd("babyai", "react-gpt-seq.yaml", tmp / "run", server.base_url, *SMALL),
            cwd=REPO,
            env=clean_env(),
        )
        policy.pid = proc.pid
        proc.communicate(timeout=300)
        assert proc.returncode == -9 and policy.killed
        shutil.copytree(tmp / "run", tmp / "undamaged")
        before = len(server.chat_requests())
        resumed = _resume(tmp / "undamaged")
        assert resumed.returncode == 0, resumed.stderr[-2000:]
        asked = len(server.chat_requests()) - before
        summary = json.loads((tmp / "undamaged" / "summary.json").read_text())
        yield tmp / "run", asked, summary, server
    finally:
        server.stop()


@pytest.mark.parametrize("damage", list(DAMAGE))
def test_a_damaged_copy_resumes_like_the_undamaged_one(tmp_path: Path, killed, damage: str) -> None:
    original, asked, summary, server = killed
    damage_fn, said = DAMAGE[damage]
    run_dir = tmp_path / "run"
    shutil.copytree(original, run_dir)
    damage_fn(run_dir)
    before = len(server.chat_requests())
    resumed = _resume(run_dir)
    assert resumed.returncode == 0 and "Traceback" not in resumed.stderr, resumed.stderr[-3000:]
    assert said in resumed.stderr  # one line says what was repaired
    assert len(server.chat_requests()) - before == asked  # nothing the log holds was paid again
    assert json.loads((run_dir / "summary.json").read_text())["spent_usd"] == pytest.approx(
        summary["spent_usd"], abs=1e-9
    )


def test_the_summary_shows_what_may_have_been_billed_unseen_apart_from_the_spend(killed) -> None:
    """The call on the wire at the kill: not in spent_usd,
    but in unknown_spend_usd at its worst case."""
    _, _, summary, _ = killed
    assert summary["unaccounted"]["calls_in_flight_at_kills"] == 1
    assert summary["unaccounted"]["max_usd"] > 0
    assert summary["unknown_spend_usd"] == pytest.approx(summary["unaccounted"]["max_usd"])
