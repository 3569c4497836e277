"""What a real small model (Qwen2.5-Coder-0.5B-Instruct, temperature 0) wrote as the actor,
quoted from issue 29: every answer that names a listed action acts."""

import pytest

from speedrunner.benchmarks.babyai.text import ACTION_DESCRIPTIONS as BABYAI_HELP
from speedrunner.benchmarks.crafter.text import ACTION_DESCRIPTIONS as CRAFTER_HELP
from speedrunner.benchmarks.crafter.text import ACTIONS as _CRAFTER_ACTIONS
from speedrunner.core.runtime.actor import (
    ActorStep,
    assistant_message,
    parse_answer,
    render_actions,
    user_message,
)

BABYAI = ["turn left", "turn right", "go forward", "pick up", "drop", "toggle"]
CRAFTER = list(_CRAFTER_ACTIONS)

QUOTED = [
    # the listed action followed by its listed description (or part of it), as the model copied it
    (
        "Thought: the ball is on my left.\nAction: Turn left (rotate 90 degrees in place)",
        BABYAI,
        BABYAI_HELP,
        "turn left",
    ),
    (
        "Thought: move on.\nAction: go forward (blocked by walls, closed doors and objects)",
        BABYAI,
        BABYAI_HELP,
        "go forward",
    ),
    (
        "Thought: east is grass.\n"
        "Action: Move East: walk one cell east over flat ground (grass, sand or path)",
        CRAFTER,
        CRAFTER_HELP,
        "Move East",
    ),
    # the description alone, case and punctuation changed
    (
        "Action: Take one step forward (blocked by walls, closed doors and objects).",
        BABYAI,
        BABYAI_HELP,
        "go forward",
    ),
    ("Action: turn_left", BABYAI, BABYAI_HELP, "turn left"),
    ("Action: MOVE-EAST!", CRAFTER, CRAFTER_HELP, "Move East"),
    # the model went on to write the env's answer and its next turns itself (up to four actions)
    (
        "Thought: go.\nAction: go forward\nObservation: You see a wall.\n"
        "Thought: turn.\nAction: turn left\n"
        "Observation: ...\nThought: again\nAction: pick up\nThought: x\nAction: toggle",
        BABYAI,
        BABYAI_HELP,
        "go forward",
    ),
    (
        "Thought: a\nAction: turn right\n\nThought: b\nAction: go forward",
        BABYAI,
        BABYAI_HELP,
        "turn right",
    ),
    # the action with its target, as the 0.5B model wrote it on BabyAI (first line only)
    (
        "Thought: The purple box is in the grey key.\n"
        "Action: Pick up the purple box\nTurn left\nGo forward",
        BABYAI,
        BABYAI_HELP,
        "pick up",
    ),
    ("Action: go forward to the red ball", BABYAI, BABYAI_HELP, "go forward"),
    (
        "Action: toggle<|im_end|>\n<|im_start|>user\n"
        "Observation: the door opens\nAction: go forward",
        BABYAI,
        BABYAI_HELP,
        "toggle",
    ),
]


@pytest.mark.parametrize("text, actions, help_, expected", QUOTED)
def test_an_answer_naming_a_listed_action_acts(text, actions, help_, expected):
    parsed = parse_answer(text, actions, descriptions=help_)
    assert (parsed.action, parsed.error) == (expected, None)
    assert parsed.format == "repaired"


@pytest.mark.parametrize("actions, help_", [(BABYAI, BABYAI_HELP), (CRAFTER, CRAFTER_HELP)])
def test_copying_any_line_of_the_listed_actions_gives_that_action(actions, help_):
    listed = render_actions(actions, help_)
    lines = [line for line in listed.splitlines() if line.startswith("- ")]
    assert len(lines) == len(actions)  # one line per action to copy
    for action, line in zip(actions, lines, strict=True):
        assert parse_answer(f"Action: {line}", actions, descriptions=help_).action == action
        assert (
            parse_answer(
                f"Thought: x\nAction: {line.lstrip('- ')}", actions, descriptions=help_
            ).action
            == action
        )


@pytest.mark.parametrize(
    "text",
    [
        "Action: turn left then go forward",  # two actions on one line
        "Action: pick up, go forward",
        "Action: jump to the ball",
    ],
)
def test_an_action_line_naming_two_actions_or_none_is_still_refused(text):
    parsed = parse_answer(text, BABYAI, descriptions=BABYAI_HELP)
    assert parsed.action is None and "not a valid action" in parsed.error


def test_words_after_an_action_cut_at_max_tokens_are_not_read_as_its_target():
    parsed = parse_answer(
        "Action: go to red ball", ["go to red ball", "go to red ball 2"], finish_reason="length"
    )
    assert parsed.action is None


def test_a_refused_turn_goes_back_as_written_with_one_line_of_feedback():
    raw = "I will explore the room first.\nThere is a wall.\nNext: go"
    step = ActorStep(0, "c0", "obs", raw, None, "", None, error='no "Action: ..." line found')
    shown = assistant_message(step).content
    assert shown == raw  # what it wrote, no made-up "Thought: -"
    feedback = user_message(step, "obs 1", BABYAI).content.split("\nObservation:")[0]
    assert len(feedback.splitlines()) == 1
    assert (
        'not executed: no "Action: ..." line found' in feedback
        and "turn left, turn right" in feedback
    )


def test_a_turn_without_a_thought_is_not_given_a_made_up_one():
    parsed = parse_answer("go forward", BABYAI)
    step = ActorStep(0, "c0", "obs", "go forward", None, parsed.thought, parsed.action)
    assert assistant_message(step).content == "Action: go forward"


def test_a_refused_turn_is_shown_without_the_turns_it_invented():
    raw = "Thought: a\nAction: jump\nObservation: you jump\nThought: b\nAction: jump again"
    step = ActorStep(0, "c0", "obs", raw, None, "a", None, error="'jump' is not a valid action")
    assert assistant_message(step).content == "Thought: a\nAction: jump"
