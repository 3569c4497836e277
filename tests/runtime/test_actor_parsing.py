"""Lenient about form, strict about meaning: how model answers become actions."""

import pytest

from speedrunner.core.runtime.actor import parse_answer, render_actions

BABYAI = ["turn left", "turn right", "go forward", "pick up", "drop", "toggle"]


@pytest.mark.parametrize(
    "text, expected",
    [
        ("Thought: go.\nAction: go forward", "go forward"),
        ("thought: go\naction: Go Forward.", "go forward"),
        ("Thought: x\nACTION:   `pick up`", "pick up"),
        ('Thought: x\nAction: "toggle"', "toggle"),
        ("Thought: x\n**Action:** turn left", "turn left"),
        ("Thought: x\nNext action - drop", "drop"),
        ("Thought: x\nAction: go", "go forward"),  # unique prefix
        ("pick up", "pick up"),  # bare action, no label
    ],
)
def test_lenient_forms_parse_to_the_canonical_action(text, expected):
    parsed = parse_answer(text, BABYAI)
    assert parsed.error is None
    assert parsed.action == expected


@pytest.mark.parametrize(
    "text, problem",
    [
        ("", "empty"),
        ("I think I should move.", 'no "Action: ..." line'),
        ("Thought: x\nAction: jump", "'jump' is not a valid action"),
        ("Thought: x\nAction: turn", "ambiguous"),
        ("Thought: x\nAction:", "empty"),
        (
            "Thought: x\nAction: None (direct response required)",
            "is not a valid action",
        ),  # crewAI #4186
    ],
)
def test_invalid_answers_say_what_was_wrong(text, problem):
    parsed = parse_answer(text, BABYAI)
    assert parsed.action is None
    assert problem in parsed.error


def test_free_text_benchmarks_pass_unknown_commands_through():
    parsed = parse_answer(
        "Thought: look\nAction: open door to kitchen", ["look around", "inventory"], free_text=True
    )
    assert parsed.action == "open door to kitchen"
    # A partial command is never completed into another one (a wrong "focus on" ends the task).
    assert (
        parse_answer("Action: look", ["look around", "inventory"], free_text=True).action == "look"
    )
    assert (
        parse_answer("Action: Look Around.", ["look around"], free_text=True).action
        == "look around"
    )


def test_thought_is_kept_apart_from_the_action():
    parsed = parse_answer("Thought: the key is ahead.\nAction: pick up", BABYAI)
    assert parsed.thought == "the key is ahead."


def test_long_action_lists_are_capped_in_the_prompt():
    actions = [f"a{i}" for i in range(100)]
    text = render_actions(actions)
    assert text.splitlines()[0].count(",") == 39
    assert "60 more" in text


SKILLS = {
    "go_to": "go_to(target: str) -> bool",
    "pick_then_go": "pick_then_go(a: str, b: str, tries: int = 3) -> bool",
}


@pytest.mark.parametrize(
    "text, name, args, kwargs",
    [
        ('Thought: x\nAction: go_to("red ball")', "go_to", ["red ball"], {}),
        ("Thought: x\nAction: `go_to('red ball')`", "go_to", ["red ball"], {}),
        (
            'Action: pick_then_go("red key", b="blue box", tries=2)',
            "pick_then_go",
            ["red key"],
            {"b": "blue box", "tries": 2},
        ),
        ('go_to("grey door")', "go_to", ["grey door"], {}),  # bare, no label
    ],
)
def test_a_skill_call_with_literal_arguments_is_parsed(text, name, args, kwargs):
    parsed = parse_answer(text, BABYAI, skills=SKILLS)
    assert parsed.error is None and parsed.skill_call is not None
    assert (parsed.skill_call.name, parsed.skill_call.args, parsed.skill_call.kwargs) == (
        name,
        args,
        kwargs,
    )
    assert parsed.action == parsed.skill_call.text  # history shows the canonical call


@pytest.mark.parametrize(
    "text, problem",
    [
        ('Action: fly_to("moon")', "'fly_to' is not a skill (skills: go_to, pick_then_go)"),
        ("Action: go_to(target)", "must be literals"),
        ('Action: go_to("a" + "b")', "must be literals"),
        ('Action: go_to(*["x"])', "must be literals"),
        ('Action: go_to("x"', "not a valid action"),  # not call-shaped: an ordinary bad action
        ("Action: os.system('ls')", "not a valid action"),
        ('Action: go_to(__import__("os"))', "must be literals"),
    ],
)
def test_anything_else_that_looks_like_a_call_is_an_invalid_action(text, problem):
    parsed = parse_answer(text, BABYAI, skills=SKILLS)
    assert parsed.action is None and parsed.skill_call is None
    assert problem in parsed.error


def test_without_skills_a_call_is_an_ordinary_invalid_action():
    parsed = parse_answer('Action: go_to("red ball")', BABYAI)
    assert parsed.action is None and "not a valid action" in parsed.error


def test_the_history_grown_turn_by_turn_equals_the_history_rendered_from_scratch():
    """The episode appends each turn once; a call must still see exactly the full rendering."""
    from speedrunner.core.runtime.actor import ActorHistory, ActorStep, to_messages

    actions = ["inc", "dec", "noop"]
    steps = [
        ActorStep(i, f"c{i}", f"obs {i}", raw, None, thought, parsed, raw_action=raw, error=error)
        for i, (raw, thought, parsed, error) in enumerate(
            [
                ("Action: inc", "up", "inc", None),
                ("Action: jump", "", None, "'jump' is not a valid action"),
                ("no action line", "hm", None, 'no "Action: ..." line found'),
                ("Action: noop", "wait", "noop", None),
            ]
        )
    ]
    history = ActorHistory("first")
    for k in range(len(steps) + 1):
        # Before each call: the steps so far, and the observation the last one produced.
        after = f"obs {k}" if k else None
        grown = history.sync(steps[:k], after, actions)
        assert list(grown) == to_messages("first", steps[:k], after, actions)
    # An observation not known yet leaves the last turn open; it is completed, not duplicated.
    history = ActorHistory("first")
    history.sync(steps[:2], None, actions)
    assert list(history.sync(steps[:2], "obs 2", actions)) == to_messages(
        "first", steps[:2], "obs 2", actions
    )
    assert [m.role for m in history.conversation] == [
        "system",
        "user",
        "assistant",
        "user",
        "assistant",
        "user",
    ]


# What real models write, one row per variant (issue table, provider docs, public transcripts).
# Each row: the answer, then the action it means and how its form was read.
REAL = [
    # markdown around the label, any case, headings, lists
    ("**Thought:** the ball is ahead.\n**Action:** go forward", "go forward", "repaired"),
    ("**Thought**: x\n**Action**: go forward", "go forward", "repaired"),
    ("### Thought\nthe ball is ahead\n### Action: pick up", "pick up", "repaired"),
    ("- Thought: x\n- Action: toggle", "toggle", "repaired"),
    ("THOUGHT: x\nACTION: drop", "drop", "repaired"),
    ("Thought: x\n**Action:**\n`turn left`", "turn left", "repaired"),  # value on the next line
    ("> Action: turn right", "turn right", "repaired"),
    # Qwen / R1 think blocks: their contents never count
    (
        "<think>\nAction: drop is wrong here.\n</think>\nThought: x\nAction: pick up",
        "pick up",
        "repaired",
    ),
    (
        "<think>\n</think>\n\nThought: x\nAction: pick up",
        "pick up",
        "repaired",
    ),  # /no_think still emits tags
    (
        "I should turn. Action: drop would be wrong.\n</think>\nAction: turn left",
        "turn left",
        "repaired",
    ),  # lone </think>
    # prose before and after, trailing period, quotes, fences
    (
        "Let me think step by step.\nThe key is left.\n\nAction: turn left\n\n"
        "This should face the key.",
        "turn left",
        "ok",
    ),
    ("Thought: x\nAction: turn left.", "turn left", "repaired"),  # a trailing period
    ('Thought: x\nAction: "pick up".', "pick up", "repaired"),
    ("Thought: x\nAction: Pick Up", "pick up", "repaired"),
    ("Thought: x\nAction: go", "go forward", "repaired"),  # a unique prefix
    (
        "```\nThought: x\nAction: go forward\n```",
        "go forward",
        "repaired",
    ),  # whole answer fenced (DB-GPT #3074)
    # JSON answers
    ('{"thought": "the key is ahead", "action": "pick up"}', "pick up", "repaired"),
    ('```json\n{"Thought": "x", "Action": "toggle"}\n```', "toggle", "repaired"),
    # the same action twice is one meaning
    ("Action: drop\nSo, once more:\nAction: drop", "drop", "repaired"),
]


@pytest.mark.parametrize("text, expected, form", REAL)
def test_what_real_models_write_reads_as_one_action(text, expected, form):
    parsed = parse_answer(text, BABYAI)
    assert (parsed.action, parsed.error, parsed.format) == (expected, None, form)


REAL_SKILL_CALLS = [
    ('**Action:** go_to("red ball")', "go_to('red ball')", "repaired"),
    ("**Action:** `go_to('red ball')`", "go_to('red ball')", "repaired"),
    ('Action: go_to("red ball").', "go_to('red ball')", "repaired"),
    ("### Action\n\n### Action: go_to('red ball')", "go_to('red ball')", "repaired"),
    (
        '<think>maybe pick_then_go("a", "b")</think>\nAction: go_to("red ball")',
        "go_to('red ball')",
        "repaired",
    ),
    ('{"action": "go_to(\'red ball\')"}', "go_to('red ball')", "repaired"),
    ('{"action": "go_to", "args": ["red ball"]}', "go_to('red ball')", "repaired"),
    ('Thought: x\nAction: go_to("red ball");', "go_to('red ball')", "repaired"),
]


@pytest.mark.parametrize("text, expected, form", REAL_SKILL_CALLS)
def test_what_real_models_write_reads_as_one_skill_call(text, expected, form):
    parsed = parse_answer(text, BABYAI, skills=SKILLS)
    assert (parsed.action, parsed.error, parsed.format) == (expected, None, form)
    assert parsed.skill_call is not None


AMBIGUOUS = [
    # two different actions within the model's own turn (no invented turn between them)
    (
        "Thought: a\nAction: drop\nAction: toggle",
        "the answer has 2 different Action lines ('drop'; 'toggle'); only one action runs per "
        "turn: answer with exactly one Action line",
    ),
    (
        "Thought: a\nAction: drop\nor maybe\nAction: toggle",
        "the answer has 2 different Action lines ('drop'; 'toggle'); only one action runs per "
        "turn: answer with exactly one Action line",
    ),
    (
        '{"action": "drop"} or {"action": "toggle"}',
        "the answer has 2 JSON actions ('drop'; 'toggle'); only one action runs per turn: "
        "answer with exactly one Action line",
    ),
    (
        "<think>Action: go forward</think>",
        "the answer held only thinking (<think>...</think>), no action",
    ),
    (
        "<think>cut while still thinking",
        "the answer held only thinking (<think>...</think>), no action",
    ),
]


@pytest.mark.parametrize("text, problem", AMBIGUOUS)
def test_two_readings_are_never_chosen_between(text, problem):
    parsed = parse_answer(text, BABYAI)
    assert (parsed.action, parsed.error, parsed.format) == (None, problem, "lost")


CUT = [
    # cut at max_tokens inside the action: never completed into the action it starts
    (
        "Thought: the key is here.\nAction: pi",
        "pick up",
        "the answer was cut off inside its action ('pi', the start of pick up); a cut action is "
        "never completed",
    ),
    (
        "Thought: x\nAction: tog",
        "toggle",
        "the answer was cut off inside its action ('tog', the start of toggle); a cut action is "
        "never completed",
    ),
    (
        "Thought: x\nAction: go to",
        None,
        "the answer was cut off inside its action ('go to', the start of go to red "
        "ball, go to red ball 2); a cut action is never completed",
    ),
    # a whole action that is also the start of a longer one, as the answer's last words
    (
        "Thought: x\nAction: go to red ball",
        "go to red ball",
        "the answer was cut off right after 'go to red ball', "
        "which may be the start of go to red ball 2: a cut action "
        "is never run",
    ),
]


@pytest.mark.parametrize("text, uncut, problem", CUT)
def test_an_action_cut_at_max_tokens_is_lost_not_completed(text, uncut, problem):
    actions = [*BABYAI, "go to red ball", "go to red ball 2"]
    parsed = parse_answer(text, actions, finish_reason="length")
    assert (parsed.action, parsed.error, parsed.format) == (None, problem, "lost")
    assert (
        parse_answer(text, actions).action == uncut
    )  # the same text, not cut: a prefix is completed


@pytest.mark.parametrize(
    "text, expected",
    [
        (
            "Thought: x\nAction: pick up\nThat is all.",
            "pick up",
        ),  # the cut came after the whole action line
        (
            "Thought: x\nAction: go to red ball 2",
            "go to red ball 2",
        ),  # no longer action starts with it
        ("Thought: x\nAction: pick up", "pick up"),
    ],
)
def test_a_whole_action_in_a_cut_answer_still_runs(text, expected):
    parsed = parse_answer(
        text, [*BABYAI, "go to red ball", "go to red ball 2"], finish_reason="length"
    )
    assert (parsed.action, parsed.error) == (expected, None)


def test_a_free_text_command_cut_at_its_end_is_not_run():
    parsed = parse_answer(
        "Thought: x\nAction: open door to kit",
        ["look around"],
        free_text=True,
        finish_reason="length",
    )
    assert (parsed.action, parsed.format) == (None, "lost")
    assert (
        parsed.error == "the answer was cut off inside its action ('open door to kit'); "
        "a cut action is never run"
    )
    assert (
        parse_answer("Thought: x\nAction: open door to kit", ["look around"], free_text=True).action
        == "open door to kit"
    )


def test_an_empty_answer_cut_at_max_tokens_says_so():
    parsed = parse_answer("", BABYAI, finish_reason="length")
    assert parsed.error == "the answer was empty (it was cut off at max_tokens)"


def test_an_unknown_action_is_a_wrong_meaning_not_a_lost_format():
    parsed = parse_answer("Thought: x\nAction: jump", BABYAI)
    assert parsed.action is None and parsed.format == "ok"


def test_invalid_action_feedback_lists_the_skills_too():
    from speedrunner.core.runtime.actor import ActorStep, user_message

    step = ActorStep(
        0, "c0", "obs", "Action: fly", None, "", None, error="'fly' is not a valid action"
    )
    text = user_message(step, "obs 1", BABYAI, SKILLS).content
    assert "Your last answer was not executed: 'fly' is not a valid action" in text
    assert "turn left, turn right, go forward, pick up, drop, toggle" in text
    assert (
        "or call a skill: go_to(target: str) -> bool, "
        "pick_then_go(a: str, b: str, tries: int = 3) -> bool" in text
    )
    assert "or call a skill" not in user_message(step, "obs 1", BABYAI).content
