"""The line a run ends with, read from what the run stored, and a cost it cannot know explained."""

from __future__ import annotations

import json
from pathlib import Path

from speedrunner.core.config.schema import RunConfig
from speedrunner.core.records import RunSummary
from speedrunner.core.runtime.run_summary import summary_line

from ..reporting.synthetic import eval_row, summary_doc

REPO = Path(__file__).resolve().parents[2]


def _config(model: str = "qwen-local", inducer: str | None = None) -> RunConfig:
    """A shipped config (as users start from) pointed at models the price table may not know."""
    from speedrunner.catalog import config_loader

    url = "http://127.0.0.1:5012/v1"
    sets = ["model.provider=vllm", f"model.name={model}", f"model.base_url={url}"]
    if inducer is not None:
        sets += ["inducer.provider=vllm", f"inducer.name={inducer}", f"inducer.base_url={url}"]
    return config_loader().load(REPO / "configs/babyai/opo-gpt-seq.yaml", overrides=sets).config


def _call(
    model: str, spent: float | None, *, scripted: bool = False, cache_hit: bool = False
) -> dict:
    return {
        "model": model,
        "usage": {"input_uncached": 900, "input_cached": 100, "output": 50},
        "spent_usd": spent,
        "cost_usd": spent,
        "scripted": scripted,
        "cache_hit": cache_hit,
        "error": None,
    }


def _run_dir(tmp_path: Path, calls: list[dict]) -> Path:
    (tmp_path / "checkpoint.json").write_text(
        json.dumps({"totals": {"episodes": 8, "successes": 6}, "elapsed_s": 61.7})
    )
    final = {k: v for k, v in eval_row(success_mean=0.5).items() if k != "per_episode"}
    spent = (
        None if any(c["spent_usd"] is None for c in calls) else sum(c["spent_usd"] for c in calls)
    )
    (tmp_path / "summary.json").write_text(
        json.dumps(summary_doc(final_eval=final, spent_usd=spent))
    )
    (tmp_path / "llm_calls.jsonl").write_text("".join(json.dumps(c) + "\n" for c in calls))
    return tmp_path


def test_a_priced_run_sums_calls_tokens_and_cost(tmp_path: Path) -> None:
    run_dir = _run_dir(
        tmp_path, [_call("gpt-5.4-mini", 0.001)] * 3 + [_call("gpt-5.4-mini", 0.0, cache_hit=True)]
    )
    line = summary_line(run_dir, _config("gpt-5.4-mini"))
    assert line == (
        "run summary: 8 training episodes, training success 0.750, final eval success 0.500 | "
        "4 LLM calls, 4.2k tokens (4k in, 200 out) | spent $0.0030 (1 replayed from the cache, "
        "not paid again) | wall time 62 s"
    )


def test_an_unknown_price_says_which_model_and_what_to_set(tmp_path: Path) -> None:
    run_dir = _run_dir(tmp_path, [_call("qwen-local", 0.001), _call("my-inducer", None)])
    line = summary_line(run_dir, _config("qwen-local", inducer="my-inducer"), status="interrupted")
    assert line.startswith("run summary [interrupted]: 8 training episodes")
    assert (
        "spent unknown (no price for model 'my-inducer' in speedrunner/data/prices.yaml; "
        "set inducer.prices (USD per 1M tokens)"
    ) in line
    assert "model 'qwen-local'" not in line


def test_a_run_killed_before_its_first_checkpoint_still_gets_a_line(tmp_path: Path) -> None:
    line = summary_line(tmp_path, _config(), status="failed")
    assert line == (
        "run summary [failed]: 0 training episodes, no training episode yet | 0 LLM calls, "
        "0 tokens (0 in, 0 out) | spent $0.0000 | wall time 0 s"
    )


def test_the_line_shows_the_spend_summary_json_holds(tmp_path: Path) -> None:
    """The line, summary.json and a budget message name one figure: the summary's, even when a
    call that was still in flight at the stop was logged after it."""
    run_dir = _run_dir(
        tmp_path, [_call("gpt-5.4-mini", 0.0021)] * 2 + [_call("gpt-5.4-mini", 0.0009)]
    )
    (run_dir / "summary.json").write_text(json.dumps(summary_doc(spent_usd=0.0042)))
    line = summary_line(run_dir, _config("gpt-5.4-mini"), status="budget_reached")
    assert "| spent $0.0042 |" in line
    built = RunSummary.model_validate(
        summary_doc(spent_usd=0.00425)
    )  # just built (its write may have failed)
    assert "| spent $0.0043 |" in summary_line(run_dir, _config("gpt-5.4-mini"), summary=built)
