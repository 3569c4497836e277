"""SpeedRunner and speedrunner_no_cl end to end on BabyAI pick_up_seq_go_to, through the
real train entry point and a fake OpenAI-compatible server.

The fake inducer analyses the experience (``run_python`` in the sandbox; no_cl reads an
episode instead), adds ``go_forward_n`` in the first sleep phase, and in the second
refactors it over a new helper that it makes private, and deletes a skill. The actor calls
the new skill in the next batch, and those episodes need fewer LLM calls than the same
episodes played without it. A SIGKILL in an inducer turn or inside a ``run_python`` call,
then ``--resume``, gives the uninterrupted run's results without paying any call twice.
"""

from __future__ import annotations

import collections
import functools
import json
import os
import signal
import sys
import threading
from pathlib import Path

import pytest

from speedrunner.core.seeding import episode_seed
from speedrunner.testing.fake_llm_server import Reply

from . import prewarmed
from .asi_fakes import SKILL, bot_actions
from .harness import (
    BABYAI_TRAIN,
    BABYAI_TWO_BATCHES,
    REPO,
    body_key,
    clean_env,
    fake_model_cmd,
    rows,
    run,
    start_server,
)
from .speedrunner_fakes import INDUCER, SpeedRunnerFakeLLM

pytestmark = pytest.mark.slow
KIND = "pick_up_seq_go_to"
ROLLOUTS = 4
LEVELS = [(KIND, episode_seed(0, "train", i)) for i in range(ROLLOUTS)]
METHODS = ["speedrunner", "speedrunner_no_cl"]


def cmd(method: str, run_dir: Path, url: str, protocol: str = "text") -> list[str]:
    config = REPO / "configs" / "babyai" / f"{method}-gpt-seq.yaml"
    sets = (f"run.rollouts={ROLLOUTS}", *BABYAI_TWO_BATCHES, f"model.tool_protocol={protocol}")
    return fake_model_cmd(BABYAI_TRAIN, config, run_dir, url, *sets)


def play(method: str, run_dir: Path, fake, protocol: str = "text") -> Path:
    server = start_server(fake)
    try:
        proc = run(cmd(method, run_dir, server.base_url, protocol), timeout=600)
    finally:
        server.stop()
    assert proc.returncode == 0, proc.stderr[-3000:]
    return run_dir


def episode(run_dir: Path, index: int) -> dict:
    return json.loads((run_dir / "episodes" / "train" / f"{index:04d}.json").read_text())


def sleep_dir(run_dir: Path, batch: int) -> Path:
    return run_dir / "sleep" / f"batch_{batch:04d}"


def forward_runs(run_dir: Path, indices: tuple[int, ...]) -> list[tuple[int, int]]:
    """What the inducer's analysis code should have found: runs of k forward steps, counted."""
    runs: collections.Counter[int] = collections.Counter()
    for i in indices:
        k = 0
        for a in [*(a for s in episode(run_dir, i)["steps"] for a in s["executed"]), "end"]:
            if a == "go forward":
                k += 1
            elif k:
                runs[k] += 1
                k = 0
    return sorted(runs.items())


def turn(run_dir: Path, batch: int, t: int) -> dict:
    return json.loads((sleep_dir(run_dir, batch) / f"turn_{t:04d}.json").read_text())


@pytest.mark.parametrize("method", METHODS)
def test_the_inducer_edits_the_codebook_and_the_new_skill_saves_llm_calls_next_batch(
    tmp_path, method
):
    code = method == "speedrunner"
    with_skill = play(method, tmp_path / "learn" / "run", SpeedRunnerFakeLLM(LEVELS, code=code))
    without = play(
        method, tmp_path / "plain" / "run", SpeedRunnerFakeLLM(LEVELS, code=code, learn=False)
    )

    first = json.loads((sleep_dir(with_skill, 0) / "sleep.json").read_text())
    assert first["ended_by"] == "submit" and first["method"] == method
    assert first["edits"] == [f"add_function {SKILL}", "add_function turn_around"]
    if code:
        # The analysis ran in the sandbox over the stored experience of batch 0 only.
        ran = turn(with_skill, 0, 0)
        assert (
            ran["tool"] == "run_python"
            and first["run_python_calls"] == 1
            and first["analysis_tier"]
        )
        assert (
            ran["result"]
            == f"episodes [0, 1] successes 2\nforward runs {forward_runs(with_skill, (0, 1))}"
        )
        second = turn(with_skill, 1, 0)["result"]
        calls = [
            s["skill_call"]
            for i in (2, 3)
            for s in episode(with_skill, i)["steps"]
            if s["skill_call"]
        ]
        assert second.startswith(
            f"go_forward_n calls {len(calls)} errors 0 actions "
            f"{sum(len(c['actions']) for c in calls)}"
        )
        # test_skill replayed episode 2 from its start in a fresh env and ran the rewritten skill
        # there.
        tested = turn(with_skill, 1, 3)
        assert tested["tool"] == "test_skill" and tested["args"] == ["2", "0"]
        assert (
            "success: False; skills that ran: go_forward_n, step_forward; env actions in all: 2"
            in tested["result"]
        )
        assert "observation at the end:\na wall" in tested["result"]
    else:
        assert first["run_python_calls"] == 0 and first["analysis_tier"] is None
        assert turn(with_skill, 0, 0)["tool"] == "view_episode"
        assert "run_python" not in turn(with_skill, 0, 0)["prompt"]
    # The inducer was shown the skill API with a real state: batch 0's stored first observation
    # with the most lines, and its env.state recovered by the run's env (the BabyAI server), same
    # task and seed.
    start = turn(with_skill, 0, 0)["prompt"]
    shown = max(
        (episode(with_skill, i)["steps"][0]["observation"] for i in (0, 1)),
        key=lambda o: len(o.splitlines()),
    )
    assert (
        f"`env.text`:\n```\n{shown}\n```" in start
        and '`env.state`:\n```json\n{"carrying": ' in start
    )
    assert "`find(structured: dict[str, Any], name: str) -> SeenObject | None`" in start

    gen1 = (with_skill / "codebook" / "gen_1.py").read_text()
    assert f"def {SKILL}(env, n: int) -> str:" in gen1 and "def turn_around" in gen1
    later = json.loads((sleep_dir(with_skill, 1) / "sleep.json").read_text())
    assert later["edits"] == [
        "add_function step_forward",
        f"edit_function {SKILL}",
        "make_private step_forward",
        "delete_function turn_around",
    ]
    gen2 = (with_skill / "codebook" / "gen_2.py").read_text()
    assert (
        "def _step_forward(env)" in gen2
        and "text = _step_forward(env)" in gen2
        and "turn_around" not in gen2
    )
    assert later["public"] == [SKILL]
    # The second sleep was shown batch 1's skill statistics (the edit then starts them again at
    # zero).
    n = sum(1 for i in (2, 3) for s in episode(with_skill, i)["steps"] if s["skill_call"])
    assert f"- {SKILL} (public): {n} / {n} / 0" in turn(with_skill, 1, 0)["prompt"]

    for index in (2, 3):  # the second batch plays with generation 1
        skilled, plain = episode(with_skill, index), episode(without, index)
        assert skilled["knowledge_version"] == 1 and skilled["success"] and plain["success"]
        calls = [s for s in skilled["steps"] if s["skill_call"] is not None]
        assert calls and all(c["skill_call"]["name"] == SKILL for c in calls)
        primitives = [a for s in skilled["steps"] for a in s["executed"]]
        assert primitives == list(bot_actions(KIND, LEVELS[index][1]))
        assert skilled["llm_calls"] < plain["llm_calls"] == len(primitives)
    metrics = rows(with_skill / "metrics.jsonl")
    assert metrics, "metrics.jsonl has rows"


class Killer:
    """Wraps the fake LLM; SIGKILLs the run once: at the third inducer turn of the second sleep
    (``turn``), or just after answering the first ``run_python`` turn of the second sleep
    (``run_python``: the kill lands while the sandbox runs the code, which sleeps 1.5 s)."""

    def __init__(self, fake: SpeedRunnerFakeLLM, when: str) -> None:
        self.fake, self.when, self.pid, self.killed = fake, when, None, False
        self.answered: list[str] = []
        self.after: list[str] = []
        self._lock = threading.Lock()

    def __call__(self, body: dict) -> Reply:
        with self._lock:
            messages = body["messages"]
            induce = INDUCER in messages[0]["content"]
            second = induce and f"def {SKILL}(" in messages[1]["content"]
            turns = sum(m["role"] == "assistant" for m in messages)
            if (
                not self.killed
                and self.pid is not None
                and self.when == "turn"
                and second
                and turns == 2
            ):
                self.killed = True
                os.kill(self.pid, signal.SIGKILL)
                return Reply.error(500)
            reply = self.fake(body)
            (self.after if self.killed else self.answered).append(body_key(body))
            ran_code = "Tool: run_python" in (reply.text or "") or any(
                c["name"] == "run_python" for c in reply.tool_calls or ()
            )
            if (
                not self.killed
                and self.pid is not None
                and self.when == "run_python"
                and second
                and ran_code
            ):
                self.killed = True
                threading.Timer(0.7, os.kill, (self.pid, signal.SIGKILL)).start()
            return reply


@pytest.fixture(scope="module")
def references(tmp_path_factory):
    """The uninterrupted run per tool protocol, made on first use (two kills compare with each)."""

    @functools.cache
    def reference(protocol: str) -> Path:
        return play(
            "speedrunner",
            tmp_path_factory.mktemp(f"reference-{protocol}") / "run",
            SpeedRunnerFakeLLM(LEVELS, slow=True),
            protocol,
        )

    return reference


@pytest.mark.parametrize(
    "when, protocol",
    [("turn", "text"), ("run_python", "text"), ("turn", "native"), ("run_python", "native")],
)
def test_sigkill_in_an_inducer_turn_or_a_run_python_call_then_resume_equals_an_uninterrupted_run(
    tmp_path, references, when, protocol
):
    reference = references(protocol)
    killer = Killer(SpeedRunnerFakeLLM(LEVELS, slow=True), when)
    server = start_server(killer)
    run_dir = tmp_path / "killed" / "run"
    try:
        proc = prewarmed.popen(
            cmd("speedrunner", run_dir, server.base_url, protocol), cwd=REPO, env=clean_env()
        )
        killer.pid = proc.pid
        proc.communicate(timeout=600)
        assert killer.killed and proc.returncode == -signal.SIGKILL
        assert not (
            run_dir / "codebook" / "gen_2.py"
        ).exists()  # the kill landed inside the second sleep
        done = sorted(p.name for p in sleep_dir(run_dir, 1).glob("turn_*.json"))
        # ... in turn 0's run_python call (its record is written when the code returns), or at
        # turn 2.
        assert done == ([] if when == "run_python" else ["turn_0000.json", "turn_0001.json"])
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
    for g in (1, 2):
        assert (run_dir / "codebook" / f"gen_{g}.py").read_bytes() == (
            reference / "codebook" / f"gen_{g}.py"
        ).read_bytes()
    for batch in (0, 1):
        names = sorted(p.name for p in sleep_dir(reference, batch).iterdir())
        assert sorted(p.name for p in sleep_dir(run_dir, batch).iterdir()) == names
        for name in names:
            mine = json.loads((sleep_dir(run_dir, batch) / name).read_text())
            assert mine == json.loads((sleep_dir(reference, batch) / name).read_text()), name
    # No answered call was asked again, and every call id was paid for once.
    assert not set(killer.after) & set(killer.answered)
    calls = [json.loads(line) for line in (run_dir / "llm_calls.jsonl").read_text().splitlines()]
    paid = collections.Counter(
        c["call_id"] for c in calls if not c["cache_hit"] and c["error"] is None
    )
    assert all(n == 1 for n in paid.values())
    assert any(c["call_id"].startswith("sleep/0001/inducer/") and c["cache_hit"] for c in calls)
    # Answered inducer calls (a call the kill left in flight is logged too, as
    # may-have-been-billed).
    inducer = [c for c in calls if c["purpose"] == "inducer" and c["error"] is None]
    if protocol == "native":  # the calls were native, and replayed as native calls
        assert all(c["tools_offered"] and c["tool_calls"] for c in inducer)
        assert any(c["cache_hit"] for c in inducer)
    else:
        assert not any("tool_calls" in c or "tools_offered" in c for c in inducer)
