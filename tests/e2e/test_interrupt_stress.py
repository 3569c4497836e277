"""Ctrl-C in any phase of any benchmark ends the run cleanly, every time, and ``--resume``
then finishes it with exactly the results of a run that was never interrupted.

A terminal's Ctrl-C goes to the whole process group: the train process, its episode threads,
its skill and analysis sandboxes, ScienceWorld's JVMs. So each try starts the real entry point
(SpeedRunner's shipped config, the quick test cut to one batch: ``SCHEDULE``) in its own
session and sends SIGINT to the group, at a random moment inside the chosen phase: after a
random number of model requests of that phase have arrived, plus a random delay (the fake
answers each request after a fixed latency, so the signal lands mid-request or between
requests). The run must exit 130, print one short message naming the resume command and no
traceback, and record ``interrupted`` in summary.json; the resume must then equal the
uninterrupted reference row for row.

Tries per (benchmark, phase) cell: ``SPEEDRUNNER_INTERRUPT_TRIES`` (default 2 on BabyAI, 1 on
Crafter and ScienceWorld, whose runs take tens of seconds each on a busy 2-CPU
machine: world generation, a JVM per env); the random draws are seeded per try, so a failure
names a try that replays the same schedule. ``SPEEDRUNNER_INTERRUPT_TRIES=10`` is the soak.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import random
import signal
import sys
import threading
import time
from pathlib import Path

import pytest

from speedrunner.testing.fake_llm_server import FakeLLMServer, Reply

from . import prewarmed
from .harness import REPO, clean_env, policy_reply, rows, train_cmd
from .speedrunner_fakes import INDUCER, tool

pytestmark = [
    pytest.mark.slow,
    pytest.mark.timeout(1500),
]  # a ScienceWorld cell is minutes on a busy machine

TRIES = os.environ.get("SPEEDRUNNER_INTERRUPT_TRIES")
DEFAULT_TRIES = {"babyai": 2, "crafter": 1, "scienceworld": 1}
LATENCY_S = 0.05
SCHEDULE = ("--set", "run.rollouts=2", "--set", "run.eval_every=2")
"""The quick test cut to one batch: evaluation at 0, a wake batch, a sleep, evaluation at 2 —
every phase once (the quick test's second batch and sleep added time, not phases)."""
MAX_STDERR_LINES = 12  # the interrupt message is 3 lines; room for an unrelated warning or two


def skill(name: str, doc: str, body: str) -> str:
    return f'''def {name}(env) -> str:
    """{doc}

    Returns:
        The observation text after the last action.
    """
{body}'''


SKILLS = {
    "babyai": skill(
        "turn_around",
        "Turn to face the other way.",
        '    env.act("turn left")\n    return env.act("turn left")\n',
    ),
    "crafter": skill(
        "do_twice",
        "Interact with what you face, twice.",
        '    env.act("Do")\n    return env.act("Do")\n',
    ),
    "scienceworld": skill("survey", "Look around the room.", '    return env.act("look around")\n'),
}
CONFIGS = {
    "babyai": "speedrunner-gpt-seq.yaml",
    "crafter": "speedrunner-gpt-crafter.yaml",
    "scienceworld": "speedrunner-gpt-t4.yaml",
}
ANALYSIS = 'print("episodes", [t.index for t in episodes()])\n'


class Fake:
    """Reads only the prompt: the harness's policy actor (which calls the skill first once it is
    offered), and an inducer that runs code, adds the skill and submits. While armed, it sends
    SIGINT to the run's process group once enough requests of the chosen phase arrived."""

    def __init__(self, bench: str) -> None:
        self.source = SKILLS[bench]
        self.name = self.source.split("(", 1)[0].removeprefix("def ")
        self.phase = "start"  # set from the run's progress lines on stdout
        self.target: str | None = None
        self.after = 0  # requests of the target phase before the signal
        self.delay_s = 0.0
        self.pgid: int | None = None
        self.fired = threading.Event()
        self.sent_at: float | None = None  # when SIGINT went out (monotonic)
        self._lock = threading.Lock()
        self._seen = 0

    def arm(self, target: str, rng: random.Random) -> None:
        self.target, self.after = target, rng.randint(1, 2)
        self.delay_s = rng.uniform(0.0, 2 * LATENCY_S)

    def _maybe_fire(self, phase: str) -> None:
        with self._lock:
            if self.fired.is_set() or self.pgid is None or phase != self.target:
                return
            self._seen += 1
            if self._seen < self.after:
                return
            self.fired.set()
        pgid, delay = self.pgid, self.delay_s

        def fire() -> None:
            time.sleep(delay)
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pgid, signal.SIGINT)
                self.sent_at = time.monotonic()

        threading.Thread(target=fire, daemon=True).start()

    def __call__(self, body: dict) -> Reply:
        messages = body["messages"]
        if INDUCER in messages[0]["content"]:
            self._maybe_fire("sleep")
            turns = [
                tool("run_python", ANALYSIS),
                tool("add_function", self.source),
                "Tool: submit\nadded a skill",
            ]
            if f"def {self.name}(" in messages[1]["content"]:
                turns = ["Tool: submit\nkept it"]
            t = sum(m["role"] == "assistant" for m in messages)
            return Reply(
                text=turns[min(t, len(turns) - 1)], prompt_tokens=900, completion_tokens=90
            )
        self._maybe_fire(self.phase)
        if f"{self.name}()" in messages[1]["content"] and not any(
            m["role"] == "assistant" for m in messages
        ):
            return Reply(
                text=f"Thought: use the skill.\nAction: {self.name}()",
                prompt_tokens=100,
                completion_tokens=12,
            )
        return policy_reply(body)


def follow(stream, fake: Fake, sink: list[str]) -> None:
    for line in stream:
        sink.append(line)
        if "wake: batch" in line:
            fake.phase = "train"
        elif "sleep: batch" in line:
            fake.phase = "sleep"
        elif "eval at rollout" in line and ": " not in line.split("eval at rollout", 1)[1]:
            fake.phase = "eval"


def launch(cmd: list[str], fake: Fake, timeout: float = 600) -> tuple[int, str, str, float]:
    """Run ``cmd`` in its own session (so the group can be signalled like a terminal's), from a
    pre-imported interpreter (``prewarmed``; a ``--resume`` from another one than its
    reference's)."""
    fake.phase = "start"
    proc = prewarmed.popen(cmd, cwd=REPO, env=clean_env(), new_session=True)
    fake.pgid = proc.pid
    out: list[str] = []
    err: list[str] = []
    pumps = [
        threading.Thread(target=follow, args=(proc.stdout, fake, out), daemon=True),
        threading.Thread(target=lambda: err.extend(proc.stderr), daemon=True),
    ]
    for t in pumps:
        t.start()
    try:
        code = proc.wait(timeout=timeout)
    finally:
        fake.pgid = None
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    exited = time.monotonic()
    for t in pumps:
        t.join(timeout=10)
    return code, "".join(out), "".join(err), exited


@pytest.fixture(scope="module")
def references(tmp_path_factory):
    """One uninterrupted run per benchmark, made on first use."""

    @functools.cache
    def reference(bench: str) -> Path:
        run_dir = tmp_path_factory.mktemp(f"reference-{bench}") / "run"
        fake = Fake(bench)
        with FakeLLMServer(callback=fake, latency_s=LATENCY_S, model_name="fake-model") as server:
            code, _, err, _ = launch(
                train_cmd(bench, CONFIGS[bench], run_dir, server.base_url, *SCHEDULE), fake
            )
        assert code == 0, err[-3000:]
        return run_dir

    return reference


@pytest.mark.parametrize("phase", ["train", "sleep", "eval"])
@pytest.mark.parametrize(
    "bench",
    [  # one xdist group per benchmark: its cells share its reference run
        pytest.param(b, marks=pytest.mark.xdist_group(f"interrupt-stress-{b}"))
        for b in ("babyai", "crafter", "scienceworld")
    ],
)
def test_ctrl_c_in_any_phase_ends_cleanly_and_resume_equals_an_uninterrupted_run(
    tmp_path, references, bench, phase
):
    ref_dir = references(bench)
    tries = int(TRIES) if TRIES else DEFAULT_TRIES[bench]
    interrupted = 0
    for attempt in range(tries + 2):  # up to two extra tries if none landed inside the run
        if attempt >= tries and interrupted:
            break
        rng = random.Random(f"{bench}/{phase}/{attempt}")
        run_dir = tmp_path / f"try{attempt}"
        fake = Fake(bench)
        with FakeLLMServer(callback=fake, latency_s=LATENCY_S, model_name="fake-model") as server:
            fake.arm(phase, rng)
            code, out, err, exited = launch(
                train_cmd(bench, CONFIGS[bench], run_dir, server.base_url, *SCHEDULE), fake
            )
            where = (
                f"try {attempt} (after {fake.after} {phase} requests + "
                f"{fake.delay_s * 1000:.0f} ms)"
            )
            assert fake.fired.is_set(), f"{where}: the run never reached the phase:\n{err[-2000:]}"
            if (
                code == 0
            ):  # the signal came as the run ended (the phase was its last): nothing to stop
                print(
                    f"--- {bench}/{phase} {where}: finished first; signal sent "
                    f"{None if fake.sent_at is None else round(exited - fake.sent_at, 2)}s before "
                    f"exit\n{out[-1500:]}"
                )
                assert fake.sent_at is None or exited - fake.sent_at < 3.0, (
                    f"{where}: the run ignored SIGINT and ran on for {exited - fake.sent_at:.1f}s"
                )
                continue
            assert code == 130, f"{where}: exit {code}\n{err[-4000:]}"
            interrupted += 1
            print(f"--- {bench}/{phase} {where}: stderr\n{err}")
            assert "Traceback" not in err, f"{where}:\n{err[-4000:]}"
            assert err.count("interrupted (Ctrl-C)") == 1, f"{where}:\n{err[-4000:]}"
            assert f"--resume {run_dir}" in err
            assert len(err.strip().splitlines()) <= MAX_STDERR_LINES, (
                f"{where}: stderr too long:\n{err[-4000:]}"
            )
            summary = json.loads((run_dir / "summary.json").read_text())
            assert summary["status"] == "interrupted" and summary["status_reason"] == "Ctrl-C", (
                where
            )

            fake.target = None  # disarmed: the same endpoint answers the resumed run
            code, _, err, _ = launch(
                [
                    sys.executable,
                    "-m",
                    f"speedrunner.benchmarks.{bench}.train",
                    "--resume",
                    str(run_dir),
                ],
                fake,
            )
        assert code == 0, f"{where}: resume failed\n{err[-3000:]}"
        for name in ("metrics.jsonl", "eval.jsonl"):
            assert rows(run_dir / name) == rows(ref_dir / name), f"{where}: {name} differs"
        assert json.loads((run_dir / "summary.json").read_text())["status"] == "finished"
    assert interrupted, (
        f"no try interrupted the {phase} phase: every run finished before its signal"
    )
