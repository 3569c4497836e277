"""The wake/sleep loop: schedule, ordering, amortised sleep cost, checkpoints and resume."""

import json

import pytest

from speedrunner.core.atomic import read_jsonl
from speedrunner.core.config.schema import BenchmarkConfig, RunConfig, RunSection
from speedrunner.core.method import MethodContext
from speedrunner.core.runtime.loop import Runner
from speedrunner.errors import CheckpointError
from speedrunner.methods.wake_sleep.configs import OPOConfig, ReactConfig
from speedrunner.methods.wake_sleep.opo import OPOMethod
from speedrunner.methods.wake_sleep.react import ReactMethod

from .fakes import CounterBenchmark, PolicyModel, smart_policy

WALL_CLOCK = {"wall_time_s"}


def make_config(method="opo", **run):
    run_section = RunSection(
        **{
            "rollouts": 6,
            "sleep_every": 2,
            "eval_every": 4,
            "eval_episodes": 3,
            "parallel_episodes": 2,
            **run,
        }
    )
    method_config = OPOConfig() if method == "opo" else ReactConfig()
    return RunConfig(
        run=run_section,
        method=method_config,
        benchmark=BenchmarkConfig(name="counter", task_set="count", max_llm_calls=6),
    )


def make_runner(tmp_path, model, config=None, *, run_id="r0001"):
    config = config or make_config()
    benchmark = CounterBenchmark()
    ctx = MethodContext(run_dir=tmp_path, inducer=model, benchmark="counter")
    cls = OPOMethod if config.method.name == "opo" else ReactMethod
    method = cls(config.method, ctx)
    return Runner(
        config,
        tmp_path,
        benchmark=benchmark,
        method=method,
        actor=model,
        run_id=run_id,
        scripted=False,
    ), benchmark


def strip_wall(rows):
    return [{k: v for k, v in r.items() if k not in WALL_CLOCK} for r in rows]


def noisy_policy(messages, purpose, call_id):
    """Deterministic per call id, mixes good, idle and invalid answers."""
    if purpose != "actor":
        return smart_policy(messages, purpose, call_id)
    h = sum(map(ord, call_id)) % 5
    return ["Action: inc", "Action: noop", "Action: jump", "Action: inc", "Action: dec"][h]


def test_schedule_metrics_eval_and_guides(tmp_path):
    model = PolicyModel(smart_policy, cost=0.01)
    runner, benchmark = make_runner(tmp_path, model)
    result = runner.run()
    metrics = read_jsonl(tmp_path / "metrics.jsonl")
    assert [m["rollout"] for m in metrics] == [1, 2, 3, 4, 5, 6]
    assert [m["knowledge_version"] for m in metrics] == [0, 0, 1, 1, 2, 2]
    assert all(m["success"] for m in metrics)
    evals = read_jsonl(tmp_path / "eval.jsonl")
    assert [e["rollout"] for e in evals] == [0, 4, 6]  # at 0, every 4, and always at the end
    assert evals[1]["knowledge_version"] == 2 and evals[1]["episodes"] == 3
    # guide generations are stored; the actor sees the latest in its prompt
    assert (tmp_path / "guide" / "gen_1.md").read_text().startswith("Press inc")
    assert (tmp_path / "guide" / "gen_3.md").exists()
    later_prompts = [c[2][1].content for c in model.calls if c[1].startswith("train/0004/actor")]
    assert "Strategy guide" in later_prompts[0] and "Press inc" in later_prompts[0]
    # sleep cost (one guide call per batch, 0.01) is amortised over the batch's 2 episodes
    m0 = metrics[0]
    assert m0["cost_sleep_share_usd"] == pytest.approx(0.005)
    assert m0["cost_usd"] == pytest.approx(m0["cost_episode_usd"] + 0.005)
    assert result.checkpoint.completed_batches == 3 and result.checkpoint.knowledge_version == 3
    assert all(env.closed for env in benchmark.envs)
    assert len(benchmark.envs) <= 2  # envs are pooled, at most parallel_episodes of them
    assert json.loads((tmp_path / "summary.json").read_text())["training"]["episodes"] == 6


def test_parallel_results_are_ordered_and_identical_to_serial(tmp_path):
    rows = {}
    for parallel in (1, 4):
        run_dir = tmp_path / f"p{parallel}"
        run_dir.mkdir()
        config = make_config(parallel_episodes=parallel, rollouts=8, sleep_every=4)
        runner, _ = make_runner(run_dir, PolicyModel(noisy_policy, jitter_s=0.01), config)
        runner.run()
        rows[parallel] = (
            strip_wall(read_jsonl(run_dir / "metrics.jsonl")),
            strip_wall(read_jsonl(run_dir / "eval.jsonl")),
        )
    assert rows[1] == rows[4]
    assert [m["index"] for m in rows[4][0]] == list(range(8))
    assert {m["success"] for m in rows[4][0]} == {
        True,
        False,
    }  # the policy is noisy enough to matter


def test_parallel_all_plays_every_episode_of_a_batch_and_of_an_evaluation_at_once(tmp_path):
    """The default: a batch (and an evaluation) takes one episode's wall time, not several."""
    import threading
    import time

    in_flight, peak, lock = [0], [0], threading.Lock()

    def counting(messages, purpose, call_id):
        with lock:
            in_flight[0] += 1
            peak[0] = max(peak[0], in_flight[0])
        try:
            time.sleep(0.05)  # a model's latency: episodes that run together overlap here
            return noisy_policy(messages, purpose, call_id)
        finally:
            with lock:
                in_flight[0] -= 1

    config = make_config(
        parallel_episodes="all", rollouts=6, sleep_every=6, eval_every=6, eval_episodes=3
    )
    runner, benchmark = make_runner(tmp_path, PolicyModel(counting), config)
    runner.run()
    assert peak[0] == 6  # the batch's 6 episodes were all in flight together
    assert len(benchmark.envs) == 6  # and no more envs than that were ever made
    assert config.run.peak_parallel_episodes == 6 and config.run.workers(3) == 3


@pytest.mark.parametrize("value", [0, -1, "some"])
def test_parallel_episodes_is_a_positive_number_or_all(value):
    with pytest.raises(ValueError, match="parallel_episodes"):
        RunSection(parallel_episodes=value)


class Crash(Exception):
    pass


def crashing(policy, at_call):
    seen = {"n": 0}

    def wrapped(messages, purpose, call_id):
        seen["n"] += 1
        if seen["n"] == at_call:
            raise Crash(call_id)
        return policy(messages, purpose, call_id)

    return wrapped


@pytest.mark.parametrize(
    "crash_at", [3, 17, 26, 40]
)  # mid-batch, later batch, around sleep, mid-eval
def test_resume_after_a_crash_matches_an_uninterrupted_run(tmp_path, crash_at):
    reference = tmp_path / "reference"
    reference.mkdir()
    make_runner(reference, PolicyModel(noisy_policy), make_config(parallel_episodes=1))[0].run()

    run_dir = tmp_path / "crashed"
    run_dir.mkdir()
    with pytest.raises(Crash):
        make_runner(
            run_dir, PolicyModel(crashing(noisy_policy, crash_at)), make_config(parallel_episodes=1)
        )[0].run()
    finished = {
        f"{p.parent.name}/{p.stem}" if p.parent.name.startswith("at") else f"train/{p.stem}"
        for p in (run_dir / "episodes").rglob("*.json")
    }
    resumed_model = PolicyModel(noisy_policy)
    make_runner(run_dir, resumed_model, make_config(parallel_episodes=1))[0].run()
    for name in ("metrics.jsonl", "eval.jsonl"):
        assert strip_wall(read_jsonl(run_dir / name)) == strip_wall(read_jsonl(reference / name))
    # Finished episodes were loaded from disk, not played again.
    replayed = {
        call_id.rsplit("/actor/", 1)[0].removeprefix("eval/")
        for _, call_id, _ in resumed_model.calls
    }
    assert not finished & replayed


def test_rows_written_after_the_last_checkpoint_are_dropped_on_resume(tmp_path):
    runner, _ = make_runner(tmp_path, PolicyModel(smart_policy))
    runner.run()
    good = (tmp_path / "metrics.jsonl").read_text()
    with open(tmp_path / "metrics.jsonl", "a") as f:
        f.write('{"rollout": 99}\n{"torn')  # a duplicate row and a torn line after the checkpoint
    make_runner(tmp_path, PolicyModel(smart_policy))[0].run()
    assert (tmp_path / "metrics.jsonl").read_text() == good


def test_corrupt_checkpoint_is_a_clear_error(tmp_path):
    make_runner(tmp_path, PolicyModel(smart_policy))[0].run()
    (tmp_path / "checkpoint.json").write_text('{"format": "speedrunner-checkpoint/1", "run_id": ')
    with pytest.raises(CheckpointError, match="corrupt"):
        make_runner(tmp_path, PolicyModel(smart_policy))[0].run()


def test_foreign_checkpoint_is_a_clear_error(tmp_path):
    make_runner(tmp_path, PolicyModel(smart_policy))[0].run()
    with pytest.raises(CheckpointError, match="another run"):
        make_runner(tmp_path, PolicyModel(smart_policy), run_id="r0002")[0].run()
    with pytest.raises(CheckpointError, match="another run"):
        make_runner(tmp_path, PolicyModel(smart_policy), make_config(rollouts=8))[0].run()


def test_react_sleep_makes_no_llm_call(tmp_path):
    model = PolicyModel(smart_policy)
    make_runner(tmp_path, model, make_config(method="react"))[0].run()
    assert {purpose for purpose, _, _ in model.calls} == {"actor"}
    assert not (tmp_path / "guide").exists()


def test_eval_over_several_task_kinds_reports_each_kinds_success_and_their_mean():
    """BALROG's BabyAI headline averages the kinds' success rates, not the episodes."""
    from speedrunner.core.runtime.loop import _success_by_task
    from speedrunner.core.trajectory import Trajectory

    def played(task: str, success: bool) -> Trajectory:
        t = Trajectory(
            split="eval",
            index=0,
            task=task,
            seed=0,
            knowledge_version=0,
            instruction="",
            eval_point=0,
        )
        t.success = success
        return t

    trajectories = [
        played("goto", True),
        played("goto", True),
        played("goto", False),
        played("open", False),
    ]
    summary = _success_by_task(trajectories)
    assert summary["rates"] == {"goto": 2 / 3, "open": 0.0}
    assert summary["episodes"] == {"goto": 3, "open": 1}
    assert summary["mean_over_tasks"] == pytest.approx(1 / 3)  # the episode mean would be 0.5


class LoggingModel(PolicyModel):
    """A ``PolicyModel`` that logs every call's cost in the run's llm_calls.jsonl, as a run's
    models do."""

    def __init__(self, policy, log, **kwargs) -> None:
        super().__init__(policy, **kwargs)
        self.log = log

    def complete(self, messages, *, purpose, call_id, **sampling):
        completion = super().complete(messages, purpose=purpose, call_id=call_id, **sampling)
        with self._lock, open(self.log, "a") as f:
            f.write(
                json.dumps(
                    {
                        "call_id": call_id,
                        "model": "fake",
                        "spent_usd": self.cost,
                        "error": None,
                        "usage": {"input_uncached": 100, "output": 10},
                    }
                )
                + "\n"
            )
        return completion


def test_after_a_crash_summary_json_holds_the_last_checkpoint_and_the_spend(tmp_path):
    """summary.json is rewritten after every checkpoint: a process that dies without a word
    (SIGKILL) leaves the totals, evaluations and elapsed time of its last checkpoint."""
    from speedrunner.core.llm.spent import usd

    model = LoggingModel(crashing(noisy_policy, 26), tmp_path / "llm_calls.jsonl", cost=0.001)
    runner, _ = make_runner(tmp_path, model, make_config(parallel_episodes=1))
    with pytest.raises(Crash):
        runner.run()
    summary = json.loads((tmp_path / "summary.json").read_text())
    checkpoint = json.loads((tmp_path / "checkpoint.json").read_text())
    assert checkpoint["totals"]["episodes"] >= 2  # the crash came after a checkpoint
    assert summary["status"] == "running" and summary["training"] == checkpoint["totals"]
    assert summary["elapsed_s"] == checkpoint["elapsed_s"] > 0
    assert [e["rollout"] for e in summary["eval"]] == checkpoint["eval_points_done"]
    # Its spend is the log's as of that checkpoint; at a stop, the entry point's summary is the
    # log's now.
    stopped = runner.write_summary("interrupted", "Ctrl-C")
    assert (
        stopped.training.model_dump() == checkpoint["totals"] and stopped.status_reason == "Ctrl-C"
    )
    logged = sum(r["spent_usd"] for r in read_jsonl(tmp_path / "llm_calls.jsonl"))
    assert stopped.spent_usd == pytest.approx(logged) and logged > summary["spent_usd"] > 0
    assert runner.spend_text() == f"spent {usd(stopped.spent_usd)}"


def test_a_stop_before_the_loop_started_keeps_the_stored_totals_and_updates_the_spend(tmp_path):
    """A resume that fails before its loop exists (a benchmark that does not start): summary.json
    keeps what the earlier process wrote, with the new status and the log's spend."""
    from speedrunner.core.runtime.loop import mark_run_status

    from ..reporting.synthetic import summary_doc

    earlier = summary_doc(
        status="running",
        spent_usd=0.25,
        spending={
            "spent_usd": 0.25,
            "max_cost_usd": 1.0,
            "reached": False,
            "in_flight_usd": 0.0,
            "over_reservation_usd": 0.0,
        },
    )
    (tmp_path / "summary.json").write_text(json.dumps(earlier))
    (tmp_path / "llm_calls.jsonl").write_text(
        "".join(
            json.dumps({"model": "m", "spent_usd": s, "error": None}) + "\n" for s in (0.25, 0.125)
        )
    )
    mark_run_status(tmp_path, "failed", "the env server did not start")
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert (
        summary["status"] == "failed" and summary["status_reason"] == "the env server did not start"
    )
    assert summary["training"] == earlier["training"] and summary["ended_at"]
    assert summary["spent_usd"] == summary["spending"]["spent_usd"] == 0.375
