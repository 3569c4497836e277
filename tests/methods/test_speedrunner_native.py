"""SpeedRunner's native tool protocol: a native call becomes the text protocol's ToolCall,
bad arguments are answered with feedback naming the problem, extra calls are not run."""

from __future__ import annotations

import json

import pytest

from speedrunner.core.llm.types import ToolUse
from speedrunner.methods.wake_sleep.speedrunner_native import (
    from_native,
    native_arguments,
    native_messages,
    read_turn,
    tool_specs,
)
from speedrunner.methods.wake_sleep.speedrunner_tools import TOOLS, parse_tool_call

ALL = frozenset(TOOLS)
CODE = "def f(env) -> str:\n    return env.act('go forward')\n"


def use(tool: str, **arguments: str) -> ToolUse:
    return ToolUse(f"call_{tool}", tool, json.dumps(arguments))


@pytest.mark.parametrize(
    "text",
    [
        f"Tool: add_function\n```python\n{CODE}```",
        f"Tool: edit_function f\n```python\n{CODE}```",
        "Tool: test_skill 2 0\n```python\nf()\n```",
        "Tool: rename_function f g",
        "Tool: view_episode 3",
        "Tool: view_codebook",
        "Tool: submit\nadded f",
    ],
)
def test_a_native_call_reads_as_the_same_text_protocol_call(text):
    call = parse_tool_call(text, ALL)
    native = from_native(ToolUse("c", call.tool or "", json.dumps(native_arguments(call))), ALL)
    assert (native.tool, native.args, native.block, native.problem) == (
        call.tool,
        call.args,
        call.block,
        None,
    )


@pytest.mark.parametrize(
    "bad, problem",
    [
        (ToolUse("c", "add_function", '{"code": "def f(env):'), "not valid JSON"),
        (ToolUse("c", "add_function", '["def f(env): pass"]'), "must be a JSON object"),
        (use("add_function"), "needs code"),
        (use("add_function", code=CODE, name="f"), "has no argument(s) ['name']"),
        (use("fly_away"), "unknown tool 'fly_away'"),
    ],
)
def test_bad_native_calls_get_feedback_naming_the_problem(bad, problem):
    call = from_native(bad, ALL)
    assert call.problem is not None and problem in call.problem


def test_a_tool_the_method_does_not_offer_is_refused():
    no_cl = ALL - {"run_python", "test_skill"}
    assert "unknown tool 'run_python'" in (
        from_native(use("run_python", code="1"), no_cl).problem or ""
    )
    assert [s.name for s in tool_specs(no_cl)] == [t for t in TOOLS if t in no_cl]


def test_several_calls_run_the_first_and_answer_each_with_its_own_tool_message():
    uses = (use("view_codebook"), use("add_function", code=CODE))
    call = read_turn("", uses, ALL)
    assert call.tool == "view_codebook" and "1 more call(s) were not run" in call.note
    assert (call.format, call.dropped_calls) == (
        "repaired",
        1,
    )  # not an exact turn: one call dropped
    assert (read_turn("", uses[:1], ALL).format, read_turn("", uses[:1], ALL).dropped_calls) == (
        "ok",
        0,
    )
    assistant, first, second = native_messages("", uses, "Result of view_codebook")
    assert assistant.tool_calls == uses
    assert (first.tool_call_id, first.content) == ("call_view_codebook", "Result of view_codebook")
    assert second.tool_call_id == "call_add_function" and second.content.startswith("Not run")


def test_a_turn_without_native_calls_is_read_as_text():
    assert read_turn("Tool: view_codebook", (), ALL).tool == "view_codebook"
    assert read_turn("I will think.", (), ALL).problem is not None
