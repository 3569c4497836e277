"""The actor's stop sequences (issue 29): every actor request carries them where the provider
accepts them, and an episode plays the same whether the server stops there or writes the
model's invented next turns anyway (the reader cuts at the same strings)."""

from __future__ import annotations

import re

import pytest

from speedrunner.core.benchmark import Budget
from speedrunner.core.config.schema import ModelConfig
from speedrunner.core.llm import build_model
from speedrunner.core.method import Knowledge
from speedrunner.core.runtime.actor import ACTOR_STOP, cut_at_stop, parse_answer
from speedrunner.core.runtime.episode import EpisodeContext, run_episode
from speedrunner.testing.fake_llm_server import FakeLLMServer, Reply

from .fakes import CounterEnv
from .test_actor_real_answers import BABYAI, BABYAI_HELP, QUOTED
from .test_episode import SPEC


def _writes_on(body: dict) -> Reply:
    """A small model's habit: its turn, then the env's answer and its next turns, invented."""
    value = int(re.findall(r"counter shows (-?\d+)", body["messages"][-1]["content"])[-1])
    return Reply(
        text=f"Thought: count up.\nAction: inc\nObservation: The counter shows {value + 1}.\n"
        "Thought: too far now.\nAction: dec\nObservation: The counter shows 0.\n"
        "<|im_start|>user\nObservation: x\nAction: noop",
        completion_tokens=60,
    )


@pytest.mark.parametrize("honour_stop", [True, False])
def test_an_episode_plays_the_same_whether_the_server_stops_or_writes_on(tmp_path, honour_stop):
    with FakeLLMServer(callback=_writes_on, honour_stop=honour_stop) as srv:
        config = ModelConfig(
            provider="vllm", name="q", base_url=srv.base_url, max_attempts=1, timeout_s=5
        )
        model = build_model(config, namespace="run", cache_path=tmp_path / "cache.sqlite")
        try:
            traj = run_episode(
                CounterEnv(), SPEC, EpisodeContext(model, Knowledge(0), Budget(10, None, 60))
            )
        finally:
            model.close()
        bodies = srv.chat_requests()
    assert [s.parsed_action for s in traj.steps] == ["inc", "inc", "inc"] and traj.success
    assert all(b["stop"] == list(ACTOR_STOP) for b in bodies) and len(bodies) == 3
    if honour_stop:
        assert all(s.raw_text == "Thought: count up.\nAction: inc" for s in traj.steps)


@pytest.mark.parametrize(
    "text",
    [
        *[row[0] for row in QUOTED],
        "Thought: I look around.\nObservation: a wall ahead\nAction: turn left",
        "Observation: a wall ahead.\nThought: turn.\nAction: turn left",
        "<think>Observation: x</think>\nThought: a\nAction: go forward\nObservation: y",
    ],
)
def test_an_answer_is_read_the_same_cut_at_a_stop_sequence_or_not(text):
    whole = parse_answer(text, BABYAI, descriptions=BABYAI_HELP)
    stopped = parse_answer(cut_at_stop(text)[0], BABYAI, descriptions=BABYAI_HELP)
    assert (whole.action, whole.error, whole.thought) == (
        stopped.action,
        stopped.error,
        stopped.thought,
    )


@pytest.mark.parametrize(
    "text",
    [
        "Thought: the key is left.\nAction: turn left",
        "Sure, here is my move.\nThought: the key is left.\nAction: turn left",
        "<think>\nThe key is left. Thought: turn.\n</think>\n\n"
        "Thought: the key is left.\nAction: turn left",
        "```\nThought: the key is left.\nAction: turn left\n```",
        "**Thought:** the key is left.\n**Action:** turn left",
        "Observation: the key is on my left.\nThought: turn.\nAction: turn left",
    ],
)
def test_no_stop_sequence_cuts_a_single_turn_before_its_action_line(text):
    """A preamble, a thinking block or markup before ``Thought:`` is the model's own turn:
    no stop sequence may fire there (so a new ``Thought:`` is not one of them)."""
    assert cut_at_stop(text) == (text, False)
    assert parse_answer(text, BABYAI, descriptions=BABYAI_HELP).action == "turn left"
