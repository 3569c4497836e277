"""ASI end to end on BabyAI pick_up_seq_go_to, through the real train entry point.

The fake LLM plays the expert's moves and, as the inducer, adds ``go_forward_n``. A skill
added in one sleep phase is called by the actor in the next batch, through the sandbox, and
those episodes need fewer LLM calls than the same episodes played without it.
"""

from __future__ import annotations

import collections
import json
import os
import signal
import sys
import threading
from pathlib import Path

import pytest

from speedrunner.core.seeding import episode_seed

from . import prewarmed
from .asi_fakes import SKILL, ASIFakeLLM, bot_actions
from .harness import (
    BABYAI_TRAIN,
    BABYAI_TWO_BATCHES,
    REPO,
    clean_env,
    fake_model_cmd,
    rows,
    run,
    start_server,
)

pytestmark = pytest.mark.slow
KIND = "pick_up_seq_go_to"
ROLLOUTS = 4
LEVELS = [(KIND, episode_seed(0, "train", i)) for i in range(ROLLOUTS)]


def asi_cmd(run_dir: Path, url: str, *extra: str) -> list[str]:
    config = REPO / "configs" / "babyai" / "asi-gpt-seq.yaml"
    sets = (f"run.rollouts={ROLLOUTS}", *BABYAI_TWO_BATCHES)
    return [*fake_model_cmd(BABYAI_TRAIN, config, run_dir, url, *sets), *extra]


def play(tmp: Path, fake: ASIFakeLLM, *extra: str) -> Path:
    server = start_server(fake)
    try:
        proc = run(asi_cmd(tmp / "run", server.base_url, *extra), timeout=600)
    finally:
        server.stop()
    assert proc.returncode == 0, proc.stderr[-3000:]
    return tmp / "run"


def episode(run_dir: Path, index: int) -> dict:
    return json.loads((run_dir / "episodes" / "train" / f"{index:04d}.json").read_text())


def test_a_skill_induced_in_sleep_is_called_next_batch_and_saves_llm_calls(tmp_path):
    with_skill = play(tmp_path / "asi", ASIFakeLLM(LEVELS))
    without = play(tmp_path / "none", ASIFakeLLM(LEVELS, add_skill=False))

    assert f"def {SKILL}(env, n: int) -> str:" in (with_skill / "codebook" / "gen_1.py").read_text()
    assert SKILL not in (without / "codebook" / "gen_1.py").read_text()
    sleep = json.loads((with_skill / "sleep" / "asi_0000.json").read_text())
    assert [i["added"] for i in sleep["inductions"]] == [
        [SKILL],
        [],
    ]  # append-only: the second is skipped
    assert "exists" in sleep["inductions"][1]["skipped"][0]

    provenance = json.loads((with_skill / "provenance.json").read_text())
    for index in (2, 3):  # the second batch plays with generation 1
        skilled, plain = episode(with_skill, index), episode(without, index)
        assert skilled["knowledge_version"] == 1 and skilled["success"] and plain["success"]
        calls = [s for s in skilled["steps"] if s["skill_call"] is not None]
        assert calls and all(c["skill_call"]["name"] == SKILL for c in calls)
        assert skilled["sandbox_tier"] == provenance["sandbox"][0]["tier"]
        # Every primitive a skill took is recorded, and the episode took the expert's moves.
        primitives = [a for s in skilled["steps"] for a in s["executed"]]
        assert primitives == list(bot_actions(KIND, LEVELS[index][1]))
        assert skilled["llm_calls"] < plain["llm_calls"] == len(primitives)


def test_replay_verification_keeps_a_skill_only_when_the_replay_succeeds_with_it(tmp_path):
    kept = play(tmp_path / "kept", ASIFakeLLM(LEVELS), "--set", "method.replay_verify=true")
    sleep = json.loads((kept / "sleep" / "asi_0000.json").read_text())
    first = sleep["inductions"][0]
    assert (
        first["replay"]["success"]
        and SKILL in first["replay"]["called"]
        and first["added"] == [SKILL]
    )

    broken = ASIFakeLLM(
        LEVELS, script_override=["turn left"]
    )  # a script that does not solve the level
    dropped = play(tmp_path / "dropped", broken, "--set", "method.replay_verify=true")
    sleep = json.loads((dropped / "sleep" / "asi_0000.json").read_text())
    assert all(i["added"] == [] and "replay" in i["rejected"] for i in sleep["inductions"])
    assert SKILL not in (dropped / "codebook" / "gen_1.py").read_text()


class Killer:
    """Wraps the fake LLM; SIGKILLs the run once, at the first induction call or just after
    answering the first skill call (the kill then lands while the skill runs in the sandbox)."""

    def __init__(self, fake: ASIFakeLLM, when: str) -> None:
        self.fake, self.when, self.pid, self.killed = fake, when, None, False
        self.answered: list[str] = []
        self.after: list[str] = []
        self._lock = threading.Lock()

    def __call__(self, body: dict):
        from .harness import body_key

        with self._lock:
            induce = "reusable Python skills" in body["messages"][0]["content"]
            if not self.killed and self.pid is not None and self.when == "sleep" and induce:
                self.killed = True
                os.kill(self.pid, signal.SIGKILL)
                from speedrunner.testing.fake_llm_server import Reply

                return Reply.error(500)
            reply = self.fake(body)
            (self.after if self.killed else self.answered).append(body_key(body))
            if (
                not self.killed
                and self.pid is not None
                and self.when == "skill"
                and f"{SKILL}(" in (reply.text or "")
            ):
                self.killed = True
                threading.Timer(0.05, os.kill, (self.pid, signal.SIGKILL)).start()
            return reply


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> Path:
    """The uninterrupted run both kills are compared with."""
    return play(tmp_path_factory.mktemp("reference"), ASIFakeLLM(LEVELS, slow_skill=True))


@pytest.mark.parametrize("when", ["sleep", "skill"])
def test_sigkill_in_an_asi_sleep_or_a_skill_call_then_resume_equals_an_uninterrupted_run(
    tmp_path, reference, when
):
    killer = Killer(ASIFakeLLM(LEVELS, slow_skill=True), when)
    server = start_server(killer)
    run_dir = tmp_path / "killed" / "run"
    try:
        proc = prewarmed.popen(asi_cmd(run_dir, server.base_url), cwd=REPO, env=clean_env())
        killer.pid = proc.pid
        proc.communicate(timeout=600)
        assert killer.killed and proc.returncode == -signal.SIGKILL
        resumed = run(
            [sys.executable, "-m", "speedrunner.benchmarks.babyai.train", "--resume", str(run_dir)],
            timeout=600,
        )
    finally:
        server.stop()
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert rows(run_dir / "metrics.jsonl") == rows(reference / "metrics.jsonl")
    for index in range(ROLLOUTS):
        mine, theirs = episode(run_dir, index), episode(reference, index)
        assert [s["executed"] for s in mine["steps"]] == [s["executed"] for s in theirs["steps"]]
    assert (run_dir / "codebook" / "gen_2.py").read_bytes() == (
        reference / "codebook" / "gen_2.py"
    ).read_bytes()
    # No answered call was asked again: what the killed run got plus what the resumed run asked
    # is exactly what one uninterrupted run asks.
    assert not set(killer.after) & set(killer.answered)
    calls = [json.loads(line) for line in (run_dir / "llm_calls.jsonl").read_text().splitlines()]
    paid = collections.Counter(
        (c["call_id"]) for c in calls if not c["cache_hit"] and c["error"] is None
    )
    assert all(n == 1 for n in paid.values())
