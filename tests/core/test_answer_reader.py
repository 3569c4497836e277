"""The one tolerant reader (``core.answers.AnswerReader``) and the parsers configured from it:
each named repair on an answer written the way real models write, the name it counts, and the
per-turn format (``ok`` / ``repaired`` / ``lost``) runs store."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from speedrunner.benchmarks.babyai.text import ACTION_DESCRIPTIONS as BABYAI_HELP
from speedrunner.core.answers import (
    THINK,
    AnswerForm,
    AnswerReader,
    FormatTally,
    Repair,
    with_cut_note,
)
from speedrunner.core.llm.types import Completion
from speedrunner.core.runtime.actor import INVENTED, LOOSE_ACTION, action_reader, parse_answer
from speedrunner.methods.voyager.attempt import CODE_READER, read_code
from speedrunner.methods.voyager.critic import CRITIC_READER, read_critic
from speedrunner.methods.wake_sleep.asi_parse import INDUCTION_READER, parse_induction
from speedrunner.methods.wake_sleep.opo import ECHOED, GUIDE_FORMS, read_guide
from speedrunner.methods.wake_sleep.speedrunner_tools import (
    TOOL_CALL_READER,
    TOOLS,
    parse_tool_call,
)

DOCS = Path(__file__).resolve().parents[2] / "docs" / "answers.md"
BABYAI = ["turn left", "turn right", "go forward", "pick up", "drop", "toggle"]
QWEN_THINK = "<think>\nThe key is ahead of me, so I should move forward.\n</think>\n\n"


def test_the_reader_makes_its_repairs_in_order_then_reads_with_the_first_form_that_fits():
    upper = Repair("upper case", lambda t: t.lower() if t != t.lower() else None)
    reader = AnswerReader(
        (THINK, upper),
        (
            AnswerForm(
                "", lambda t: t.removeprefix("answer: ") if t.startswith("answer: ") else None
            ),
            AnswerForm("bare answer", lambda t: t.strip() or None),
        ),
    )
    exact = reader.read("answer: go")
    assert (exact.value, exact.repairs) == ("go", ())  # the exact form counts nothing
    wrapped = reader.read("<think>hmm</think>ANSWER: Go")
    assert (wrapped.value, wrapped.repairs) == ("go", ("think block", "upper case"))
    bare = reader.read("<think>hmm</think>go")
    assert (bare.value, bare.repairs) == ("go", ("think block", "bare answer"))
    nothing = reader.read("<think>only thinking</think>")
    assert (nothing.value, nothing.text, nothing.repairs) == (None, "", ("think block",))
    assert reader.names == ("think block", "upper case", "bare answer")


ACTOR = [
    # (answer as a model wrote it, finish_reason, action read, repairs counted, format)
    ("Thought: the key is ahead.\nAction: go forward", None, "go forward", (), "ok"),
    (
        QWEN_THINK + "Thought: the key is ahead.\nAction: go forward",
        None,
        "go forward",
        ("think block",),
        "repaired",
    ),
    (
        "Sure! Here is my move.\nThought: the key is ahead.\nAction: go forward\n"
        "I hope this helps.",
        None,
        "go forward",
        (),
        "ok",
    ),
    (
        "Thought: the key is ahead.\nAction: go forward\nObservation: You see a key.\n"
        "Thought: pick it up.\nAction: pick up",
        None,
        "go forward",
        ("invented next turns cut",),
        "repaired",
    ),
    (
        "Thought: left.\nAction: turn left<|im_end|>\n<|im_start|>user\nObservation: a wall",
        None,
        "turn left",
        ("invented next turns cut",),
        "repaired",
    ),
    (
        "```\nThought: the key is ahead.\nAction: go forward\n```",
        None,
        "go forward",
        ("answer inside a code fence",),
        "repaired",
    ),
    (
        '{"thought": "the key is ahead", "action": "go forward"}',
        None,
        "go forward",
        ("JSON answer", "marked-up Action label"),
        "repaired",
    ),
    (
        "**Thought:** the key is ahead.\n**Action:** go forward",
        None,
        "go forward",
        ("marked-up Action label",),
        "repaired",
    ),
    (
        "Thought: the key is ahead.\nAction:\ngo forward",
        None,
        "go forward",
        ("action on the line after its label",),
        "repaired",
    ),
    (
        "Thought: the key is ahead.\nAction: **go forward**",
        None,
        "go forward",
        ("markup or period around the action",),
        "repaired",
    ),
    (
        "Thought: x.\nAction: drop\nAction: drop",
        None,
        "drop",
        ("the same Action line repeated",),
        "repaired",
    ),
    (
        "Thought: the ball is on my left.\nAction: Turn left (rotate 90 degrees in place)",
        None,
        "turn left",
        (LOOSE_ACTION,),
        "repaired",
    ),
    (
        "Thought: x.\nAction: pi",
        "length",
        None,
        (),
        "lost",
    ),  # cut inside its action: never completed
    (
        QWEN_THINK.removesuffix("</think>\n\n"),
        "length",
        None,
        ("think block",),
        "lost",
    ),  # cut while thinking
    (
        "Thought: x.\nAction: drop\nAction: toggle",
        None,
        None,
        (),
        "lost",
    ),  # two actions: never chosen between
]


@pytest.mark.parametrize(("answer", "finish_reason", "action", "repairs", "form"), ACTOR)
def test_each_actor_repair_is_named_on_what_real_models_write(
    answer, finish_reason, action, repairs, form
):
    parsed = parse_answer(answer, BABYAI, finish_reason=finish_reason, descriptions=BABYAI_HELP)
    assert (parsed.action, parsed.repairs, parsed.format) == (action, repairs, form)


CODE = "print(len(episodes(success=True)))"
TOOL = [
    (
        f"I will count the successes.\nTool: run_python\n```python\n{CODE}\n```",
        None,
        "run_python",
        (),
        "ok",
    ),
    (
        f"{QWEN_THINK}Tool: run_python\n```python\n{CODE}\n```",
        None,
        "run_python",
        ("think block",),
        "repaired",
    ),
    (
        f"### **Tool:** run_python\n```python\n{CODE}\n```",
        None,
        "run_python",
        ("marked-up Tool label",),
        "repaired",
    ),
    (
        json.dumps({"tool": "run_python", "code": CODE}),
        None,
        "run_python",
        ("JSON tool call",),
        "repaired",
    ),
    (
        f"Tool: Run_Python\n```python\n{CODE}\n```",
        None,
        "run_python",
        ("tool name case",),
        "repaired",
    ),
    (
        f"Tool: run_python\n```python\n{CODE}\n```\nTool: submit",
        None,
        "run_python",
        ("2 tool calls in one turn; only the first ran",),
        "repaired",
    ),
    (
        f"```python\n{CODE}\n```\nTool: run_python",
        None,
        "run_python",
        ("code block before the Tool line",),
        "repaired",
    ),
    (
        f"Tool: run_python\n```python\n{CODE}\n",
        None,
        "run_python",
        ("unclosed final fence",),
        "repaired",
    ),
    (
        "Tool: add_function\n```python\ndef go(env):\n    env.act('go",
        "length",
        "add_function",
        (),
        "lost",
    ),
    ("I think we should look at the codebook first.", None, None, (), "lost"),
]


@pytest.mark.parametrize(("answer", "finish_reason", "tool", "repairs", "form"), TOOL)
def test_each_inducer_repair_is_named_on_what_real_models_write(
    answer, finish_reason, tool, repairs, form
):
    call = parse_tool_call(answer, frozenset(TOOLS), finish_reason=finish_reason)
    assert (call.tool, tuple(call.repairs), call.format) == (tool, repairs, form)


DEF = "def go(env):\n    return env.act('go forward')\n"
TEXT = [
    # (reader, answer, finish_reason, what it read, repairs counted, format)
    (
        "asi",
        f"<functions>\n```python\n{DEF}```\n</functions>\n<script>\ngo()\n</script>",
        None,
        ["go"],
        (),
        "ok",
    ),
    (
        "asi",
        f"{QWEN_THINK}<functions>\n{DEF}</functions>\n<script>\ngo()\n</script>",
        None,
        ["go"],
        ("think block",),
        "repaired",
    ),
    (
        "asi",
        json.dumps({"functions": DEF, "script": ["go()"]}),
        None,
        ["go"],
        ("JSON answer",),
        "repaired",
    ),
    (
        "asi",
        f"Here are the functions:\n```python\n{DEF}```",
        None,
        ["go"],
        ("functions in a fenced block without <functions> tags",),
        "repaired",
    ),
    (
        "asi",
        f"<functions>\n```python\n{DEF}",
        "length",
        [],
        ("unclosed fence", "no closing </functions> tag"),
        "lost",
    ),
    ("opo", "<guide>\nPick up the key first.\n</guide>", None, "Pick up the key first.", (), "ok"),
    (
        "opo",
        "Pick up the key first.",
        None,
        "Pick up the key first.",
        ("no <guide> tags",),
        "repaired",
    ),
    (
        "opo",
        "<guide>\nPick up the key first.",
        "length",
        "Pick up the key first.",
        ("no closing </guide> tag",),
        "repaired",
    ),
    (
        "opo",
        '{"guide": "Pick up the key first.\\nThen open the door',
        "length",
        "Pick up the key first.\nThen open the door",
        ("unfinished JSON answer", "no <guide> tags"),
        "repaired",
    ),
    ("code", f"Plan: walk.\nCode:\n```python\n{DEF}```", None, DEF, (), "ok"),
    (
        "code",
        f"```\n{DEF}```",
        None,
        DEF,
        ("no Code label", "fence without a language tag"),
        "repaired",
    ),
    ("code", json.dumps({"plan": "walk", "code": DEF}), None, DEF, ("JSON answer",), "repaired"),
    ("critic", '{"reasoning": "r", "success": true, "critique": ""}', None, True, (), "ok"),
    (
        "critic",
        'Here is my verdict:\n```json\n{"reasoning": "r", "success": true, "critique": ""}\n```',
        None,
        True,
        ("prose or a fence around the JSON",),
        "repaired",
    ),
    (
        "critic",
        "{'reasoning': 'r', 'success': True, 'critique': '',}",
        None,
        True,
        ("not strict JSON (a trailing comma or Python literals)",),
        "repaired",
    ),
    (
        "critic",
        '{"reasoning": "r", "success": "false", "critique": "no wood"}',
        None,
        False,
        ("success written as a string",),
        "repaired",
    ),
    (
        "critic",
        json.dumps({"answer": '{"success": true, "critique": ""}'}),
        None,
        True,
        ("JSON answer",),
        "repaired",
    ),
]


def _read(reader: str, answer: str, finish_reason: str | None):
    if reader == "asi":
        got = parse_induction(answer, finish_reason=finish_reason)
        return [f.name for f in got.functions], got
    if reader == "opo":
        got = read_guide(answer)
        return got.guide, got
    if reader == "code":
        got = read_code(answer)
        return got.code, got
    got = read_critic(answer)
    return (got.verdict.success if got.verdict else None), got


@pytest.mark.parametrize(("reader", "answer", "finish_reason", "value", "repairs", "form"), TEXT)
def test_each_sleep_and_voyager_repair_is_named_on_what_real_models_write(
    reader, answer, finish_reason, value, repairs, form
):
    read, got = _read(reader, answer, finish_reason)
    assert (read, tuple(got.repairs), got.format) == (value, repairs, form)


def test_a_guide_that_repeats_the_prompt_first_is_read_after_the_copy():
    prompt = "Rewrite the guide from these episodes.\nEpisode 1: the agent picked up the key."
    answer = read_guide(f"{prompt}\n<guide>Open the door with the key.</guide>", echoes=(prompt,))
    assert (answer.guide, answer.repairs, answer.format) == (
        "Open the door with the key.",
        [ECHOED],
        "repaired",
    )


def test_a_critic_answer_with_doubled_braces_is_a_problem_not_a_crash():
    # ``{{...}}`` (a format template copied) is a Python set of a dict: it used to raise TypeError.
    answer = read_critic("{'success': True, 'critique': '', 'notes': {{\"a\": 1}}}")
    assert answer.verdict is None and answer.format == "lost"
    assert (
        answer.problem
        == "the JSON does not parse (Expecting property name enclosed in double quotes)"
    )


def test_every_repair_name_a_reader_counts_is_in_the_docs():
    """A run stores these names (``repairs``); docs/answers.md says what each means."""
    names = {
        *action_reader(BABYAI, None).names,
        LOOSE_ACTION,
        *TOOL_CALL_READER.names,
        *INDUCTION_READER.names,
        *CODE_READER.names,
        *CRITIC_READER.names,
        ECHOED,
        *AnswerReader((THINK,), GUIDE_FORMS).names,
    }
    assert {THINK.name, INVENTED.name, ECHOED} <= names
    text = DOCS.read_text(encoding="utf-8")
    assert [n for n in sorted(names) if f"`{n}`" not in text] == []


def test_a_cut_completion_is_counted_and_noted_from_its_declared_fields():
    cut = Completion("Tool: submit", finish_reason="length", sampling={"max_tokens": 64})
    tally = FormatTally("inducer")
    tally.add("ok", cut)
    tally.add("ok", Completion("Tool: submit", finish_reason="stop"))
    tally.add("ok")
    assert tally.record() == {
        "format": {
            "inducer": {"turns": 3, "repaired": 0, "lost": 0, "truncated": 1, "dropped_calls": 0}
        },
        "truncated_turns": 1,
    }
    assert with_cut_note("ran", cut).endswith(
        "(note: your answer was cut off at max_tokens=64 (finish_reason "
        "'length'); that is all the room an answer has, so answer shorter: "
        "less reasoning, smaller code)"
    )
    assert with_cut_note("ran", Completion("x", finish_reason="stop")) == "ran"
