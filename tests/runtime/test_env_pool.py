"""The env pool never closes an env under the thread using it: on shutdown it closes the free
envs, waits a moment for held ones, and a held env is closed by its thread when handed back.
(Closing a BabyAI connection or a ScienceWorld JVM under a running request turned Ctrl-C into
tracebacks and a ``failed`` run.)"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from speedrunner.core.interrupt import RunInterrupted
from speedrunner.core.runtime.loop import EnvPool

REPO = Path(__file__).resolve().parents[2]


class Env:
    def __init__(self) -> None:
        self.in_use = threading.Lock()
        self.closed_while_used = False
        self.closed = 0

    def close(self) -> None:
        if self.in_use.locked():
            self.closed_while_used = True
        self.closed += 1


def hold_an_env(pool: EnvPool) -> tuple[threading.Thread, threading.Event]:
    """An episode thread that takes an env and uses it until the returned event is set."""
    holding, release = threading.Event(), threading.Event()

    def episode() -> None:
        with pool.env() as env, env.in_use:
            holding.set()
            release.wait(5)

    worker = threading.Thread(target=episode)
    worker.start()
    holding.wait(5)
    return worker, release


def test_close_waits_for_a_held_env_and_never_closes_it_under_its_thread() -> None:
    envs: list[Env] = []
    pool = EnvPool(lambda: envs.append(Env()) or envs[-1])
    with pool.env():
        pass  # one free env
    worker, release = hold_an_env(pool)
    threading.Timer(0.3, release.set).start()
    started = time.monotonic()
    pool.close(wait_s=5)
    waited = time.monotonic() - started
    worker.join(5)
    assert 0.2 < waited < 4, "close waited for the episode thread to hand its env back"
    assert len(envs) == 1 and envs[0].closed == 1 and not envs[0].closed_while_used


def test_an_env_still_held_after_the_wait_is_closed_by_its_thread_on_return() -> None:
    envs: list[Env] = []
    pool = EnvPool(lambda: envs.append(Env()) or envs[-1])
    worker, release = hold_an_env(pool)
    pool.close(wait_s=0.05)  # gives up waiting (a request still on the wire)
    assert envs[0].closed == 0  # not closed under the request
    release.set()
    worker.join(5)
    assert envs[0].closed == 1 and not envs[0].closed_while_used


def test_a_closed_pool_hands_out_no_env() -> None:
    pool = EnvPool(Env)
    pool.close()
    with pytest.raises(RunInterrupted), pool.env():
        pass


def test_envs_are_reused_last_in_first_out_and_made_only_when_none_is_free() -> None:
    made: list[Env] = []
    pool = EnvPool(lambda: made.append(Env()) or made[-1])
    with pool.env() as a, pool.env() as b:
        assert a is not b
    with pool.env() as c:
        assert c is a
    assert len(made) == 2
    pool.close()
    assert [e.closed for e in made] == [1, 1]


@pytest.mark.slow
def test_a_codebook_runs_sleep_phase_borrows_the_episodes_envs(tmp_path, monkeypatch) -> None:
    """The sleep phase's first observation (the inducer's example state) and replays use an env
    of the run's pool, not a new one each time (on ScienceWorld a new env is a new JVM: ~2 s and
    ~6 CPU-seconds a sleep). The offline SpeedRunner demo, two batches of 10 episodes at once:
    10 envs in all, and the sleeps' look at a first observation found one free."""
    from speedrunner import train_cli
    from speedrunner.benchmarks.babyai.benchmark import BabyAIBenchmark
    from speedrunner.core.runtime import skill_support

    made: list[object] = []
    make_env = BabyAIBenchmark.make_env
    monkeypatch.setattr(
        BabyAIBenchmark, "make_env", lambda self: made.append(make_env(self)) or made[-1]
    )
    observed: list[str] = []
    first_observation = skill_support.first_observation
    monkeypatch.setattr(
        skill_support,
        "first_observation",
        lambda envs, task, seed: observed.append(task) or first_observation(envs, task, seed),
    )
    config = REPO / "configs" / "babyai" / "speedrunner-scripted-seq.yaml"
    assert (
        train_cli.main(
            "babyai",
            "speedrunner.benchmarks.babyai.train",
            [
                "--config_file",
                str(config),
                "--run_dir",
                str(tmp_path / "run"),
                "--set",
                "run.rollouts=20",
                "--set",
                "run.eval_every=20",
                "--set",
                "run.eval_episodes=0",
            ],
        )
        == 0
    )
    assert observed and len(made) == 10
