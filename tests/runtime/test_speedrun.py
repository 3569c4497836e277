"""The speedrun record: when a run first reaches its target (evaluation or rolling training
success), what it had spent by then, who made it, and that a resumed run writes the same record."""

import json
import subprocess
from pathlib import Path

import pytest
from pydantic import ValidationError

from speedrunner.core.atomic import read_jsonl
from speedrunner.core.config.schema import RunConfig, SpeedrunSection
from speedrunner.core.runtime.speedrun import WALL_CLOCK_FIELDS, default_results_dir

from .fakes import PolicyModel, smart_policy
from .test_loop import Crash, crashing, make_config, make_runner

REPO = Path(__file__).resolve().parents[2]


def guided_policy(messages, purpose, call_id):
    """Idles until a strategy guide is in the prompt, then counts up: success comes with
    learning."""
    if purpose == "actor" and "Strategy guide" not in messages[1].content:
        return "Thought: no idea.\nAction: noop"
    return smart_policy(messages, purpose, call_id)


def config(metric="success", target=0.5, window=4, results_dir=None, **run):
    base = make_config(parallel_episodes=1, rollouts=8, **run)
    return RunConfig(
        run=base.run,
        method=base.method,
        benchmark=base.benchmark,
        speedrun=SpeedrunSection(
            metric=metric, target=target, window=window, results_dir=results_dir
        ),
    )


def run(run_dir: Path, cfg: RunConfig, policy=guided_policy) -> dict:
    run_dir.mkdir(parents=True, exist_ok=True)
    make_runner(run_dir, PolicyModel(policy, cost=0.01), cfg)[0].run()
    return json.loads((run_dir / "speedrun.json").read_text())


def totals_after(run_dir: Path, rollout: int) -> dict:
    """Training spend over the first ``rollout`` episodes, recomputed from metrics.jsonl."""
    rows = read_jsonl(run_dir / "metrics.jsonl")[:rollout]
    return {
        "cost": sum(r["cost_usd"] for r in rows),
        "output": sum(r["tokens"]["output"] + r["sleep_output_tokens_share"] for r in rows),
        "calls": sum(r["llm_calls"] for r in rows),
    }


def test_an_evaluation_target_is_recorded_at_the_first_evaluation_that_reaches_it(tmp_path):
    record = run(tmp_path / "run", config(results_dir=str(tmp_path / "results")))
    evals = read_jsonl(tmp_path / "run" / "eval.jsonl")
    first = next(e for e in evals if e["success_mean"] >= 0.5)
    # reached mid-run, not at the start
    assert first["rollout"] > 0 and evals[0]["success_mean"] < 0.5
    assert record["reached"] is True and record["status"] == "finished"
    assert (record["rollout"], record["value"]) == (first["rollout"], first["success_mean"])
    spent = totals_after(tmp_path / "run", first["rollout"])
    assert record["train_cost_usd"] == pytest.approx(spent["cost"])
    assert record["train_output_tokens"] == pytest.approx(spent["output"])
    batches = first["rollout"] // 2  # one guide call per batch on top of the episodes' calls
    assert record["train_llm_calls"] == spent["calls"] + batches
    assert (record["final_eval_rollout"], record["final_progress"], record["final_success"]) == (
        evals[-1]["rollout"],
        evals[-1]["progress_mean"],
        evals[-1]["success_mean"],
    )
    checkpoint = json.loads((tmp_path / "run" / "checkpoint.json").read_text())
    assert checkpoint["speedrun_reached_at"] == first["rollout"]
    assert record["results_config_sha256"] == checkpoint["results_config_sha256"]
    assert (
        record["benchmark"],
        record["task_set"],
        record["method"],
        record["model"],
        record["seed"],
        record["run_id"],
    ) == ("counter", "count", "opo", "gpt-5.4-mini", 0, "r0001")
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True)
    assert record["git_commit"] == (head.stdout.strip() if head.returncode == 0 else None)
    assert record["metric"] == "success" and record["target"] == 0.5 and record["window"] is None


def test_the_results_copy_has_a_unique_name_and_the_same_content(tmp_path):
    results = tmp_path / "results"
    first = run(tmp_path / "a" / "r0001", config(results_dir=str(results)))
    # same run id, another family
    second = run(tmp_path / "b" / "r0001", config(results_dir=str(results)))
    assert first["run_id"] == second["run_id"] == "r0001"
    assert first["result_id"] != second["result_id"]
    assert first["result_id"].startswith("counter-opo-gpt-5.4-mini-count-seed0-r0001-")
    copies = sorted(p.name for p in results.iterdir())
    assert copies == sorted([f"{first['result_id']}.json", f"{second['result_id']}.json"])
    assert json.loads((results / f"{first['result_id']}.json").read_text()) == first


def test_rolling_training_success_is_checked_after_every_batch(tmp_path):
    record = run(
        tmp_path / "run",
        config(
            metric="train_success_rolling",
            target=0.75,
            window=4,
            results_dir=str(tmp_path / "results"),
        ),
    )
    successes = [m["success"] for m in read_jsonl(tmp_path / "run" / "metrics.jsonl")]
    batch_ends = range(4, len(successes) + 1, 2)  # sleep_every 2; a full window first
    rates = {end: sum(successes[end - 4 : end]) / 4 for end in batch_ends}
    reached = next(end for end, rate in rates.items() if rate >= 0.75)
    assert reached > 4 and rates[4] < 0.75  # the window had to fill with successes
    assert (record["rollout"], record["value"], record["window"]) == (reached, rates[reached], 4)
    assert record["train_cost_usd"] == pytest.approx(
        totals_after(tmp_path / "run", reached)["cost"]
    )


def test_a_target_never_reached_is_recorded_as_such_with_the_final_evaluation(tmp_path):
    record = run(
        tmp_path / "run",
        config(target=1.0, results_dir=str(tmp_path / "results")),
        policy=lambda m, p, c: "Action: noop" if p == "actor" else smart_policy(m, p, c),
    )
    assert record["reached"] is False and record["status"] == "finished"
    assert all(record[k] is None for k in ("rollout", "value", "train_cost_usd", "elapsed_s"))
    assert record["final_success"] == 0.0 and record["final_eval_rollout"] == 8


@pytest.mark.parametrize("metric", ["success", "train_success_rolling"])
# calls 30 and 42: before either target; 49: in the sleep after the evaluation target was reached,
# during the batch that reaches the rolling one; 53: after both were reached
@pytest.mark.parametrize("crash_at", [30, 42, 49, 53])
def test_a_killed_and_resumed_run_writes_the_same_record(tmp_path, metric, crash_at):
    target = 0.5 if metric == "success" else 0.75
    reference = run(
        tmp_path / "reference", config(metric, target, results_dir=str(tmp_path / "ref-results"))
    )
    run_dir = tmp_path / "crashed"
    run_dir.mkdir()
    cfg = config(metric, target, results_dir=str(tmp_path / "results"))
    with pytest.raises(Crash):
        make_runner(run_dir, PolicyModel(crashing(guided_policy, crash_at), cost=0.01), cfg)[
            0
        ].run()
    before = (
        json.loads((run_dir / "speedrun.json").read_text())
        if (run_dir / "speedrun.json").exists()
        else None
    )
    make_runner(run_dir, PolicyModel(guided_policy, cost=0.01), cfg)[0].run()
    resumed = json.loads((run_dir / "speedrun.json").read_text())
    per_run = WALL_CLOCK_FIELDS | {"result_id", "started_at", "git_dirty"}
    assert {k: v for k, v in resumed.items() if k not in per_run} == {
        k: v for k, v in reference.items() if k not in per_run
    }
    assert (before is not None) == (crash_at > (44 if metric == "success" else 49))
    if before is not None:  # reached before the kill: the resumed run kept that moment and its id
        assert before["status"] == "running" and before["result_id"] == resumed["result_id"]
        assert {k: before[k] for k in ("rollout", "value", "train_cost_usd", "elapsed_s")} == {
            k: resumed[k] for k in ("rollout", "value", "train_cost_usd", "elapsed_s")
        }
    assert [p.name for p in (tmp_path / "results").iterdir()] == [f"{resumed['result_id']}.json"]


def test_a_rolling_window_longer_than_the_run_is_a_config_error():
    with pytest.raises(ValidationError, match="speedrun.window"):
        config(metric="train_success_rolling", window=20)
    config(metric="success", window=20)  # ignored by the evaluation metrics


def test_the_default_results_folder_is_under_the_output_root(monkeypatch):
    monkeypatch.delenv("SPEEDRUNNER_RESULTS_DIR", raising=False)
    assert default_results_dir() == Path("runs/speedrun")
    assert default_results_dir(make_config(output_root="/data/runs")) == Path("/data/runs/speedrun")
    monkeypatch.setenv("SPEEDRUNNER_RESULTS_DIR", "/tmp/elsewhere")
    assert default_results_dir() == Path("/tmp/elsewhere")
    cfg = config(results_dir="/x/results")
    assert default_results_dir(cfg) == Path("/x/results")  # the config key wins


def test_a_run_checkpointed_by_an_older_version_keeps_its_reached_rollout(tmp_path):
    """Checkpoints written before the tracker kept only the rollout: the record says reached
    there."""
    run_dir = tmp_path / "run"
    cfg = config(results_dir=str(tmp_path / "results"))
    run(run_dir, cfg)
    checkpoint = json.loads((run_dir / "checkpoint.json").read_text())
    reached_at = checkpoint.pop("speedrun_reached")["rollout"]
    (run_dir / "checkpoint.json").write_text(json.dumps(checkpoint))
    resumed = run(run_dir, cfg)
    assert (resumed["reached"], resumed["rollout"], resumed["train_cost_usd"]) == (
        True,
        reached_at,
        None,
    )


def test_the_window_decides_results_only_for_the_rolling_metric():
    """Runs started before ``speedrun.window`` existed keep their results hash, so they resume."""
    from speedrunner.core.runtime.loop import config_fingerprint

    assert config_fingerprint(config("success", window=3)) == config_fingerprint(
        config("success", window=5)
    )
    assert config_fingerprint(config("train_success_rolling", window=4)) != config_fingerprint(
        config("train_success_rolling", window=5)
    )
