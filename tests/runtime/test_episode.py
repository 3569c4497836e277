"""One wake episode: budgets, invalid actions, history and prompt-prefix stability."""

import dataclasses

from speedrunner.core.benchmark import Budget, EpisodeSpec
from speedrunner.core.env import Observation, StepResult
from speedrunner.core.method import Knowledge
from speedrunner.core.runtime.episode import EpisodeContext, run_episode
from speedrunner.errors import InvalidActionError

from .fakes import CounterEnv, PolicyModel, smart_policy

SPEC = EpisodeSpec("train", 0, "count", 2)  # target = 3


def ctx(model, *, calls=30, actions=None, wall=60.0, knowledge=None):
    return EpisodeContext(model, knowledge or Knowledge(0), Budget(calls, actions, wall))


def test_a_competent_policy_succeeds_and_stops_at_success():
    traj = run_episode(CounterEnv(), SPEC, ctx(PolicyModel(smart_policy)))
    assert traj.success and traj.stop_reason == "success"
    assert [s.parsed_action for s in traj.steps] == ["inc", "inc", "inc"]
    assert traj.llm_calls == 3 and traj.env_actions == 3
    assert traj.progress == 1.0
    assert abs(traj.cost_usd - 0.003) < 1e-12


def test_llm_call_budget_ends_the_episode():
    model = PolicyModel(lambda m, p, c: "Thought: wait\nAction: noop")
    traj = run_episode(CounterEnv(), SPEC, ctx(model, calls=5))
    assert traj.stop_reason == "max_llm_calls"
    assert traj.llm_calls == 5 and len(model.calls) == 5
    assert not traj.success


def test_env_action_budget_ends_the_episode():
    model = PolicyModel(lambda m, p, c: "Action: noop")
    traj = run_episode(CounterEnv(), SPEC, ctx(model, calls=None, actions=7))
    assert traj.stop_reason == "max_env_actions" and traj.env_actions == 7


def test_wall_clock_cap_ends_the_episode():
    import time

    def slow(m, p, c):
        time.sleep(0.05)
        return "Action: noop"

    traj = run_episode(CounterEnv(), SPEC, ctx(PolicyModel(slow), calls=1000, wall=0.2))
    assert traj.stop_reason == "wall_clock"
    assert 2 <= traj.llm_calls <= 6


def test_invalid_actions_spend_budget_and_are_answered_with_feedback():
    answers = iter(
        ["Thought: hmm\nAction: jump", "I will count", "Thought: ok\nAction: inc"]
        + ["Action: inc"] * 10
    )
    model = PolicyModel(lambda m, p, c: next(answers))
    traj = run_episode(CounterEnv(), SPEC, ctx(model))
    assert traj.llm_calls == 5 and traj.env_actions == 3 and traj.success
    first, second = traj.steps[0], traj.steps[1]
    assert first.parsed_action is None and "'jump' is not a valid action" in first.error
    assert first.executed == [] and second.error.startswith('no "Action')
    # The next prompt tells the model what was wrong and what is valid.
    feedback = model.calls[1][2][-1].content
    assert (
        "not executed" in feedback
        and "'jump' is not a valid action" in feedback
        and "inc, dec, noop" in feedback
    )


def test_history_records_the_executed_action_not_the_raw_text():
    model = PolicyModel(lambda m, p, c: "Thought: up\nLots of rambling here.\nAction: INC.")
    run_episode(CounterEnv(), SPEC, ctx(model))
    assistant = [m.content for m in model.calls[-1][2] if m.role == "assistant"]
    assert assistant[0] == "Thought: up Lots of rambling here.\nAction: inc"


def test_the_prompt_only_grows_by_appending():
    model = PolicyModel(smart_policy)
    knowledge = Knowledge(3, "Strategy guide", "Count carefully.")
    run_episode(CounterEnv(), SPEC, ctx(model, knowledge=knowledge))
    conversations = [c[2] for c in model.calls]
    for earlier, later in zip(conversations, conversations[1:], strict=False):
        assert later[: len(earlier)] == earlier
    assert "Strategy guide:\nCount carefully." in conversations[0][1].content
    assert "Available actions: inc, dec, noop" in conversations[0][1].content


def test_unknown_cost_makes_the_episode_cost_unknown_not_zero():
    traj = run_episode(CounterEnv(), SPEC, ctx(PolicyModel(smart_policy, cost=None)))
    assert traj.cost_usd is None


def test_a_prompt_that_outgrows_the_context_ends_the_episode_not_the_run():
    from speedrunner.errors import ContextLengthError

    def policy(messages, purpose, call_id):
        if call_id.endswith("/0002"):
            raise ContextLengthError("HTTP 400: maximum context length is 32768 tokens")
        return "Action: noop"

    traj = run_episode(CounterEnv(), SPEC, ctx(PolicyModel(policy)))
    assert traj.stop_reason == "context_length" and traj.llm_calls == 2
    assert "maximum context length" in traj.context_error


def test_an_interrupted_run_makes_no_further_calls():
    import threading

    import pytest

    from speedrunner.core.runtime.episode import RunInterrupted

    stop = threading.Event()
    model = PolicyModel(lambda m, p, c: (stop.set(), "Action: noop")[1])
    context = EpisodeContext(model, Knowledge(0), Budget(30, None, 60), stop=stop)
    with pytest.raises(RunInterrupted):
        run_episode(CounterEnv(), SPEC, context)
    assert len(model.calls) == 1


def test_knowledge_and_actions_come_before_the_episode_so_episodes_share_a_prefix():
    model = PolicyModel(smart_policy)
    knowledge = Knowledge(1, "Strategy guide", "Count carefully.")
    for seed in (2, 3):
        run_episode(
            CounterEnv(), EpisodeSpec("train", seed, "count", seed), ctx(model, knowledge=knowledge)
        )
    firsts = [c[2][1].content for c in model.calls if c[1].endswith("/actor/0000")]
    assert firsts[0] != firsts[1]
    shared = "Strategy guide:\nCount carefully.\n\nAvailable actions: inc, dec, noop\n\n"
    assert firsts[0].startswith(shared) and firsts[1].startswith(shared)


def test_env_action_descriptions_reach_the_prompt():
    class Described(CounterEnv):
        action_descriptions = {"inc": "adds one to the counter"}

    model = PolicyModel(smart_policy)
    run_episode(Described(), SPEC, ctx(model))
    assert "- inc: adds one to the counter" in model.calls[0][2][1].content


class _CutModel(PolicyModel):
    """A provider that stops at max_tokens on the first call: the answer is cut mid-thought."""

    def complete(self, messages, *, purpose, call_id, **sampling):
        c = super().complete(messages, purpose=purpose, call_id=call_id)
        if call_id.endswith("/0000"):
            return dataclasses.replace(
                c,
                text="Thought: I will count up until the counter eq",
                finish_reason="length",
                sampling={"max_tokens": 12},
            )
        return c


def test_a_cut_answer_is_recorded_and_the_actor_is_told_its_room():
    model = _CutModel(lambda m, p, c: "Thought: up\nAction: inc")
    traj = run_episode(CounterEnv(), SPEC, ctx(model))
    first = traj.steps[0]
    assert (first.finish_reason, first.answer_format, first.parsed_action) == (
        "length",
        "lost",
        None,
    )
    feedback = [m.content for m in model.calls[1][2] if m.role == "user"][-1]
    assert (
        "your answer was cut off at max_tokens=12 (finish_reason 'length'); that is all the room "
        "an answer has, so answer shorter"
    ) in feedback
    assert traj.steps[1].finish_reason is None and traj.steps[1].answer_format == "ok"


class RoomsEnv(CounterEnv):
    """Two rooms; what may be done depends on the room (as ScienceWorld's valid actions do)."""

    def reset(self, task, seed):
        self.room, self.done, self.stepped = "hall", False, []
        return self._obs()

    def _obs(self):
        return Observation(f"You are in the {self.room}.", {"room": self.room})

    @property
    def actions(self):
        return (
            ["go to kitchen", "look"]
            if self.room == "hall"
            else ["go to hall", "focus on crocodile", "look"]
        )

    @property
    def success(self):
        return "focus on crocodile" in self.stepped

    def step(self, action):
        if action not in self.actions:
            raise InvalidActionError(f"{action!r} is not possible in the {self.room}")
        self.stepped.append(action)
        self.room = action.removeprefix("go to ") if action.startswith("go to ") else self.room
        return StepResult(self._obs(), float(self.success), self.success)


class FreeTextRooms(RoomsEnv):
    accepts_free_text = True

    def step(self, action):
        if action in self.actions:
            return super().step(action)
        self.stepped.append(action)
        return StepResult(Observation("No known action matches that input."), 0.0, False)


def test_the_answer_is_read_against_the_actions_valid_now():
    """After the actor moves, an action of the new room is taken, not refused with the start room's
    list; an invalid answer's feedback lists the actions valid where the actor is."""
    answers = iter(["Action: go to kitchen", "Action: dance", "Action: focus on crocodile"])
    model = PolicyModel(lambda m, p, c: next(answers))
    traj = run_episode(RoomsEnv(), SPEC, ctx(model))
    assert [s.parsed_action for s in traj.steps] == ["go to kitchen", None, "focus on crocodile"]
    assert traj.success and traj.steps[2].error is None
    feedback = model.calls[2][2][-1].content
    assert "using one of: go to hall, focus on crocodile, look" in feedback, feedback


def test_free_text_reaches_a_free_text_env_as_typed():
    answers = iter(
        [
            "Action: go to kitchen",
            "Action: dance with the moon.",
            "Action: focus on croc",
            "Action: focus on crocodile",
        ]
    )
    env = FreeTextRooms()
    traj = run_episode(env, SPEC, ctx(PolicyModel(lambda m, p, c: next(answers))))
    assert env.stepped == [
        "go to kitchen",
        "dance with the moon",
        "focus on croc",
        "focus on crocodile",
    ]
    assert all(s.error is None for s in traj.steps) and traj.success
    assert traj.steps[2].observation == "No known action matches that input."


def test_every_benchmark_env_declares_what_it_accepts():
    from speedrunner.benchmarks.babyai.env import BabyAITextEnv
    from speedrunner.benchmarks.crafter.env import CrafterTextEnv
    from speedrunner.benchmarks.scienceworld.env import ScienceWorldTextEnv

    assert (
        BabyAITextEnv.accepts_free_text,
        CrafterTextEnv.accepts_free_text,
        ScienceWorldTextEnv.accepts_free_text,
    ) == (False, False, True)
