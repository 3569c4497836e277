"""``speedrunner estimate --from PILOT``: a pilot is checked against the config it forecasts,
scaled to that config's budgets, refused when it cannot be, and labelled when its model is not
an LLM. Pilots are written by hand here (a run directory's files, a few calls each), so every
expected figure can be worked out on paper."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from speedrunner.catalog import config_loader
from speedrunner.core.config.schema import RunConfig
from speedrunner.core.estimate import estimate, format_estimate
from speedrunner.core.rundir import RUN_FORMAT
from speedrunner.core.runtime.loop import config_fingerprint
from speedrunner.errors import SpeedRunnerError

from ..reporting.synthetic import metrics_row, summary_doc

REPO = Path(__file__).resolve().parents[2]
REACT = REPO / "configs" / "babyai" / "react-gpt-seq.yaml"
GPT = {"input": 0.75, "cached_input": 0.075, "output": 4.50}  # speedrunner/data/prices.yaml
SMALL = ["run.rollouts=4", "run.sleep_every=2", "run.eval_every=2", "run.eval_episodes=0"]


def _config(path: Path = REACT, *overrides: str) -> RunConfig:
    return config_loader().load(path, overrides=[*SMALL, *overrides]).config


@dataclass
class Episode:
    inputs: list[int]
    """Uncached input tokens of each actor call, in turn order."""
    stop: str = "max_llm_calls"
    output: int = 10
    truncated: bool = False


def _pilot(
    tmp: Path, config: RunConfig, episodes: list[Episode], *, scripted: bool = False
) -> Path:
    """A run directory of ``config`` whose training episodes made exactly these calls."""
    tmp.mkdir(parents=True)
    (tmp / "config.resolved.json").write_text(json.dumps(config.model_dump(mode="json")))
    (tmp / "provenance.json").write_text(json.dumps({"run_format": RUN_FORMAT, "run_id": tmp.name}))
    (tmp / "checkpoint.json").write_text(
        json.dumps({"results_config_sha256": config_fingerprint(config)})
    )
    (tmp / "summary.json").write_text(json.dumps(summary_doc(scripted=scripted)))
    calls, metrics = [], []
    for i, ep in enumerate(episodes):
        metrics.append(
            metrics_row(
                index=i,
                batch=i // config.run.sleep_every,
                stop_reason=ep.stop,
                llm_calls=len(ep.inputs),
                env_actions=len(ep.inputs),
            )
        )
        calls += [
            {
                "purpose": "actor",
                "call_id": f"train/{i:04d}/actor/{k:04d}",
                "error": None,
                "usage": {"input_uncached": n, "input_cached": 0, "output": ep.output},
                "finish_reason": "length" if ep.truncated else "stop",
                "truncated": ep.truncated,
            }
            for k, n in enumerate(ep.inputs)
        ]
    (tmp / "llm_calls.jsonl").write_text("".join(json.dumps(c) + "\n" for c in calls))
    (tmp / "metrics.jsonl").write_text("".join(json.dumps(m) + "\n" for m in metrics))
    return tmp


def _usd(inputs: list[int], outputs: list[int]) -> float:
    return (sum(inputs) * GPT["input"] + sum(outputs) * GPT["output"]) / 1e6


def test_a_pilot_of_this_very_config_is_its_own_typical_case(tmp_path: Path) -> None:
    config = _config(REACT, "benchmark.max_llm_calls=3")
    pilot = _pilot(
        tmp_path / "p", config, [Episode([100, 200, 300]), Episode([50], stop="success")] * 2
    )
    e = estimate(config, pilots=[pilot])
    actor = e.roles[0]
    assert actor.typical_calls == pytest.approx(8)
    assert actor.typical_usd == pytest.approx(
        2 * (_usd([100, 200, 300], [10] * 3) + _usd([50], [10]))
    )
    assert e.pilots[0].same_config and e.pilots[0].label is None and not e.pilots[0].scaled
    assert "a run of this very config" in format_estimate(e)


def test_a_pilot_with_a_smaller_call_budget_is_carried_on_to_this_configs(tmp_path: Path) -> None:
    """The quick-test pilot's episodes stopped at 3 calls; here the budget is 5: each goes on to 5
    calls, its input growing by the same 100 tokens a call. An episode that ended by itself keeps
    its calls."""
    pilot = _pilot(
        tmp_path / "p",
        _config(REACT, "benchmark.max_llm_calls=3"),
        [Episode([100, 200, 300]), Episode([50], stop="success")] * 2,
    )
    e = estimate(_config(REACT, "benchmark.max_llm_calls=5"), pilots=[pilot])
    actor = e.roles[0]
    assert actor.typical_calls == pytest.approx(2 * (5 + 1))
    assert actor.typical_usd == pytest.approx(
        2 * (_usd([100, 200, 300, 400, 500], [10] * 5) + _usd([50], [10]))
    )
    text = format_estimate(e)
    assert "2 of 4 pilot episodes stopped at the pilot's budget" in text
    assert "benchmark.max_llm_calls 3 in the pilot, 5 here" in text
    assert not e.pilots[0].same_config


def test_a_pilot_with_a_larger_budget_is_cut_and_short_answers_are_raised(tmp_path: Path) -> None:
    """Here at most 2 calls an episode: the pilot's 3-call episodes are cut; an answer cut at the
    pilot's 256 max_tokens is counted at this config's 1024."""
    pilot = _pilot(
        tmp_path / "p",
        _config(REACT, "benchmark.max_llm_calls=3", "model.sampling.max_tokens=256"),
        [Episode([100, 200, 300], output=256, truncated=True)] * 4,
    )
    e = estimate(
        _config(REACT, "benchmark.max_llm_calls=2", "model.sampling.max_tokens=1024"),
        pilots=[pilot],
    )
    assert e.roles[0].typical_calls == pytest.approx(4 * 2)
    assert e.roles[0].typical_usd == pytest.approx(4 * _usd([100, 200], [1024, 1024]))
    text = format_estimate(e)
    assert "4 of 4 pilot episodes made more calls than this config allows" in text
    assert "answers cut at the pilot's max_tokens (256) are counted at this config's 1024" in text


@pytest.mark.parametrize(
    ("pilot_overrides", "config_path", "named"),
    [
        ((), REPO / "configs" / "babyai" / "opo-gpt-seq.yaml", "method (pilot react, here opo)"),
        (
            ("model.provider=gemini", "model.name=gemini-3-flash-preview"),
            REACT,
            "actor model (pilot gemini-3-flash-preview, here gpt-5.4-mini)",
        ),
        (("model.thinking_level=high",), REACT, "actor thinking level (pilot high, here None)"),
    ],
)
def test_a_pilot_that_cannot_be_scaled_is_refused_naming_the_difference(
    tmp_path: Path, pilot_overrides: tuple[str, ...], config_path: Path, named: str
) -> None:
    pilot = _pilot(tmp_path / "p", _config(REACT, *pilot_overrides), [Episode([100])] * 4)
    with pytest.raises(SpeedRunnerError) as caught:  # exit 2 on the command line
        estimate(_config(config_path), pilots=[pilot])
    assert named in str(caught.value) and str(pilot) in str(caught.value)


def test_the_command_refuses_a_mismatched_pilot_with_exit_2_and_no_traceback(
    tmp_path: Path,
) -> None:
    pilot = _pilot(
        tmp_path / "p",
        _config(REACT, "model.provider=gemini", "model.name=gemini-3-flash-preview"),
        [Episode([100])] * 4,
    )
    proc = subprocess.run(
        [sys.executable, "-m", "speedrunner.cli", "estimate", str(REACT), "--from", str(pilot)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith("error: --from cannot give this config's typical case")
    assert "actor model (pilot gemini-3-flash-preview, here gpt-5.4-mini)" in proc.stderr
    assert "Traceback" not in proc.stderr and proc.stdout == ""


def test_a_fake_models_pilot_is_used_and_labelled_not_an_llm(tmp_path: Path) -> None:
    fake = _config(
        REACT,
        "model.provider=vllm",
        "model.base_url=http://127.0.0.1:9/v1",
        "model.name=fake-realistic",
    )
    pilot = _pilot(tmp_path / "p", fake, [Episode([100, 200, 300])] * 4)
    e = estimate(_config(REACT, "benchmark.max_llm_calls=3"), pilots=[pilot])
    assert e.pilots[0].label == "fake"
    assert e.roles[0].typical_usd == pytest.approx(
        4 * _usd([100, 200, 300], [10] * 3)
    )  # at gpt's prices
    text = format_estimate(e)
    typical = next(line for line in text.splitlines() if line.startswith("typical"))
    assert "[FAKE pilot: not an LLM's tokens]" in typical
    assert "model fake-realistic (this config: gpt-5.4-mini)" in text and "not an LLM" in text


def test_a_stored_scripted_run_is_scaled_and_labelled(tmp_path: Path) -> None:
    """A real run directory (tests/fixtures/run_format_1/speedrunner: SpeedRunner on BabyAI with
    the scripted model, 4 calls an episode, 2 inducer turns, no evaluation, stopped after a
    batch)."""
    pilot = tmp_path / "run"
    shutil.copytree(REPO / "tests" / "fixtures" / "run_format_1" / "speedrunner", pilot)
    config = config_loader().load(REPO / "configs" / "babyai" / "speedrunner-gpt-seq.yaml").config
    e = estimate(config, pilots=[pilot])
    assert e.pilots[0].label == "scripted"
    actor, actor_eval, inducer = e.roles
    assert actor.typical_calls == pytest.approx(
        200 * 30
    )  # both pilot episodes stopped at 4 of 4 calls
    assert actor_eval.typical_calls == pytest.approx(
        150 * 30
    )  # no pilot evaluation: training's figures
    assert inducer.typical_calls is not None and actor.typical_usd and actor.typical_usd > 0
    text = format_estimate(e)
    assert "[SCRIPTED pilot: not an LLM's tokens]" in text
    assert "benchmark.max_llm_calls 4 in the pilot, 30 here" in text
    assert "the pilots played none" in text


def test_a_pilot_without_its_config_cannot_be_checked_and_is_refused(tmp_path: Path) -> None:
    """Calls alone do not say which benchmark, method and model made them."""
    pilot = _pilot(tmp_path / "p", _config(), [Episode([100])] * 4)
    (pilot / "config.resolved.json").unlink()
    proc = subprocess.run(
        [sys.executable, "-m", "speedrunner.cli", "estimate", str(REACT), "--from", str(pilot)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2, proc.stderr
    assert "no config.resolved.json; --from takes run directories of earlier runs" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_a_sweep_estimate_uses_a_pilot_where_it_fits_and_says_where_it_does_not(
    tmp_path: Path,
) -> None:
    """One pilot for a grid of several methods: the runs it fits get a typical case, the others
    a note naming why not, and the estimate goes on (it used to stop at the first misfit)."""
    pilot = _pilot(tmp_path / "p", _config(REACT), [Episode([100])] * 4)
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text(
        f"name: mixed\nconfigs:\n  - {REACT}\n"
        f"  - {REPO / 'configs' / 'babyai' / 'opo-gpt-seq.yaml'}\n"
        f"output_root: {tmp_path / 'runs'}\n"
    )
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "speedrunner.cli",
            "sweep",
            str(sweep),
            "--estimate",
            "--from",
            str(pilot),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    assert (
        "note: no typical case for" in proc.stderr
        and "method (pilot react, here opo)" in proc.stderr
    )
    assert "Traceback" not in proc.stderr
    last = proc.stdout.strip().splitlines()[-1]
    assert "typical $" in last and "(the 1 of 2 runs a pilot fits)" in last
