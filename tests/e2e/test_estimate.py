"""``speedrunner estimate``: every shipped config without a key or network, and a worst case
that bounds what a run really pays.

The bound is checked against the fake LLM server billing the most a provider could for each
request it is really sent: every input byte a token, none cached, all of ``max_tokens`` as
output. Only the schedule and prompt growth are then left to the estimate to get right.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from speedrunner.catalog import config_loader
from speedrunner.core.atomic import read_jsonl
from speedrunner.core.estimate import estimate, format_estimate
from speedrunner.errors import ConfigError
from speedrunner.shipped_configs import list_configs, shipped_config_path
from speedrunner.testing.fake_llm_server import FakeLLMServer, Reply
from speedrunner.testing.realistic import RealisticFake

from .harness import PRICES, REPO, clean_env, run, train_cmd


def _load(path: Path, *overrides: str, quick: bool = False):
    return config_loader().load(path, overrides=list(overrides), quick_test=quick).config


@pytest.mark.parametrize("name", list_configs())
def test_every_shipped_config_gets_a_table(name: str) -> None:
    config = _load(shipped_config_path(name))
    e = estimate(config, source=name)
    text = format_estimate(e)
    assert e.roles and all(0 <= r.calls_min <= r.calls_max for r in e.roles)
    assert any(r.role.startswith("actor") for r in e.roles)
    if config.model.provider == "scripted":
        assert e.usd_max == 0.0
    elif e.unknown_prices:  # e.g. a self-hosted model: said, with how to set a price
        assert e.usd_max is None and "no price for model" in text and "model.prices" in text
    else:
        assert e.usd_max is not None and e.usd_max > 0
    assert "typical: not known without earlier runs" in text and "assumptions:" in text


def test_the_command_needs_no_key_and_no_network(tmp_path: Path) -> None:
    env = {
        k: v
        for k, v in clean_env().items()
        if k not in ("OPENAI_BASE_URL", "GOOGLE_GEMINI_BASE_URL")
    }
    env.update(
        http_proxy="http://127.0.0.1:9", https_proxy="http://127.0.0.1:9"
    )  # any network use fails
    config = REPO / "configs" / "scienceworld" / "speedrunner-gemini-t4.yaml"
    proc = subprocess.run(
        [sys.executable, "-m", "speedrunner.cli", "estimate", str(config), "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    actor = next(r for r in data["roles"] if r["role"] == "actor")
    assert actor["calls_max"] == 100 * 200  # ScienceWorld: 100 calls per episode, 200 rollouts
    inducer = next(r for r in data["roles"] if r["role"] == "inducer")
    assert inducer["calls_max"] == 20 * 20  # max_inducer_turns per sleep phase, 20 sleep phases
    sweep = subprocess.run(
        [
            sys.executable,
            "-m",
            "speedrunner.cli",
            "sweep",
            str(REPO / "configs" / "sweeps" / "paper-babyai.yaml"),
            "--estimate",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        cwd=REPO,
    )
    assert sweep.returncode == 0, sweep.stderr
    assert "worst case $" in sweep.stdout.splitlines()[-1]


class MaxBilling:
    """RealisticFake's answers, billed at the most a provider could charge for the request."""

    def __init__(self) -> None:
        self.fake = RealisticFake(variants=0.0)

    def __call__(self, body: dict) -> Reply:
        reply = self.fake(body)
        sent = sum(len((m.get("content") or "").encode()) for m in body["messages"])
        sent += len(json.dumps(body.get("tools") or [], ensure_ascii=False).encode())
        reply.prompt_tokens, reply.cached_tokens = sent, None
        reply.completion_tokens = int(body.get("max_tokens") or body.get("max_completion_tokens"))
        return reply


CASES = {
    "babyai-opo": ("babyai", "opo-gpt-seq.yaml"),
    "babyai-speedrunner_no_cl": ("babyai", "speedrunner_no_cl-gpt-seq.yaml"),
    "crafter-react": ("crafter", "react-gpt-crafter.yaml", "--set", "benchmark.max_env_actions=6"),
}


@pytest.mark.slow
@pytest.mark.parametrize("case", list(CASES))
def test_the_worst_case_bounds_a_real_run_and_a_pilot_gives_the_typical_case(
    tmp_path: Path, case: str
) -> None:
    benchmark, config_name, *extra = CASES[case]
    extra = [*extra, "--set", "model.sampling.max_tokens=256"]
    server = FakeLLMServer(callback=MaxBilling(), model_name="fake-model").start()
    run_dir = tmp_path / "run"
    url = server.base_url
    try:
        proc = run(train_cmd(benchmark, config_name, run_dir, url, *extra))
    finally:
        server.stop()
    assert proc.returncode == 0, proc.stderr[-2000:]
    spent = sum(r["spent_usd"] for r in read_jsonl(run_dir / "llm_calls.jsonl"))
    overrides = [
        "model.provider=vllm",
        f"model.base_url={url}",
        "model.name=fake-model",
        PRICES,
        *[x for x in extra if x != "--set"],
    ]
    config = _load(REPO / "configs" / benchmark / config_name, *overrides, quick=True)
    e = estimate(config, pilots=[run_dir])
    assert e.usd_max is not None and 0 < spent <= e.usd_max
    calls = read_jsonl(run_dir / "llm_calls.jsonl")
    for role in e.roles:  # every role's real calls fall in its range
        made = sum(1 for r in calls if _role(r) == role.role)
        assert role.calls_min <= made <= role.calls_max, role
    # The pilot is this very run: its typical case is what it cost.
    assert e.typical_usd == pytest.approx(sum(r["cost_usd"] for r in calls), rel=1e-6)


def _role(row: dict) -> str:
    from speedrunner.core.estimate import role_of

    return role_of(row)


def test_wall_time_follows_latency_and_concurrency() -> None:
    config = _load(REPO / "configs" / "babyai" / "speedrunner-gpt-seq.yaml", "run.rollouts=20")
    one = estimate(config, latency_s=2.0, concurrency=1)
    many = estimate(config, latency_s=2.0, concurrency=10)
    # One call at a time: every call back to back.
    assert one.wall_s_max == pytest.approx(2.0 * sum(r.calls_max for r in one.roles))
    assert one.wall_s_min == pytest.approx(2.0 * sum(r.calls_min for r in one.roles))
    assert (
        many.wall_s_max < one.wall_s_max / 5
    )  # ten episodes side by side; the sleep stays sequential
    assert estimate(config, latency_s=4.0, concurrency=1).wall_s_max == pytest.approx(
        2 * one.wall_s_max
    )


def test_a_model_without_a_price_says_how_to_set_one() -> None:
    config = _load(REPO / "configs" / "babyai" / "opo-gpt-seq.yaml", "model.name=my-own-model")
    text = format_estimate(estimate(config))
    assert "no price for model 'my-own-model'" in text and "speedrunner/data/prices.yaml" in text
    assert "worst case: unknown" in text


def test_the_shipped_t4_worst_case_is_bounded_by_the_context_window_and_says_so() -> None:
    """ScienceWorld's 100-call episodes would resend ~675k tokens a call late in an episode: past
    gpt-5.4-mini's window, so no such call is ever paid. The table bounds it without a flag."""
    config = _load(REPO / "configs" / "scienceworld" / "speedrunner-gpt-t4.yaml")
    e = estimate(config)
    window = 400_000
    assert [(u.model, u.tokens, u.origin) for u in e.context_windows] == [
        ("gpt-5.4-mini", window, "table")
    ]
    for role in e.roles:
        assert role.input_tokens_max <= role.calls_max * window, role
    flagged = estimate(
        config, context_tokens=window
    )  # the same bound as the command-line flag gives
    assert [r.input_tokens_max for r in e.roles] == [r.input_tokens_max for r in flagged.roles]
    text = format_estimate(e)
    assert "bounded by gpt-5.4-mini's context window of 400,000 tokens (built-in table" in text
    assert e.usd_max is not None and e.usd_max < estimate(config, context_tokens=10**9).usd_max


def test_every_shipped_model_has_a_context_window() -> None:
    for name in list_configs():
        for use in estimate(_load(shipped_config_path(name))).context_windows:
            assert use.tokens is not None and use.source, (name, use)


def test_model_context_tokens_bounds_an_unknown_model_and_must_be_a_number() -> None:
    path = REPO / "configs" / "babyai" / "opo-gpt-seq.yaml"
    unbounded = estimate(_load(path, "model.name=my-own-model"))
    assert [(u.model, u.tokens, u.origin) for u in unbounded.context_windows] == [
        ("my-own-model", None, None)
    ]
    text = format_estimate(unbounded)
    assert "UNBOUNDED for my-own-model" in text and "model.context_tokens: N" in text
    bounded = estimate(_load(path, "model.name=my-own-model", "model.context_tokens=8192"))
    assert [(u.tokens, u.origin) for u in bounded.context_windows] == [(8192, "config")]
    assert (
        "bounded by my-own-model's context window of 8,192 tokens (model.context_tokens)"
        in format_estimate(bounded)
    )
    for role in bounded.roles:
        assert role.input_tokens_max <= role.calls_max * 8192
    assert sum(r.input_tokens_max for r in bounded.roles) < sum(
        r.input_tokens_max for r in unbounded.roles
    )
    # The flag still overrides the config.
    assert (
        estimate(_load(path, "model.context_tokens=8192"), context_tokens=4096)
        .context_windows[0]
        .tokens
        == 4096
    )
    with pytest.raises(ConfigError, match="model.context_tokens: Input should be a valid integer"):
        _load(path, "model.context_tokens=lots")
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "speedrunner.cli",
            "estimate",
            str(path),
            "--set",
            "model.context_tokens=0",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert (
        proc.returncode == 2
        and "model.context_tokens" in proc.stderr
        and "Traceback" not in proc.stderr
    )


@pytest.mark.parametrize(
    "command",
    [
        ["estimate", str(REPO / "configs" / "scienceworld" / "speedrunner-gpt-t4.yaml")],
        ["configs", "list"],
    ],
)
def test_a_closed_pipe_ends_the_command_quietly(command: list[str]) -> None:
    """``speedrunner estimate ... | head``: the reader is gone before the output is written."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "speedrunner.cli", *command],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=REPO,
    )
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # before the child has started up: its first write finds no reader
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 0, err
    assert "Traceback" not in err and "BrokenPipeError" not in err, err


def test_an_inducer_on_another_provider_keeps_its_own_context_window() -> None:
    """The actor's ``model.context_tokens`` belongs to the actor's model: a Gemini inducer is
    bounded by Gemini's window, not by the actor's smaller one."""
    config = _load(
        REPO / "configs" / "babyai" / "speedrunner-gpt-seq.yaml",
        "model.context_tokens=1000",
        "inducer.provider=gemini",
        "inducer.name=gemini-3-flash-preview",
    )
    windows = {u.model: (u.tokens, u.origin) for u in estimate(config).context_windows}
    assert windows == {
        "gpt-5.4-mini": (1000, "config"),
        "gemini-3-flash-preview": (1_048_576, "table"),
    }
