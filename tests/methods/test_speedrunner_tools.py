"""The inducer's tool protocol read the way real models write it: one row per variant.

Each row is a whole answer and what it means (tool, name arguments, block, how its form
was read) or the exact problem the inducer is told. Variants: the issue's table, the forms
Qwen3 / GPT models are seen writing in public agent transcripts (bold and heading labels,
``<think>`` blocks, a lone ``</think>``, JSON tool calls, prose around the call).
"""

import json

import pytest

from speedrunner.methods.wake_sleep.speedrunner_tools import TOOLS, parse_tool_call

OFFERED = frozenset(TOOLS)
CODE = "print(len(episodes()))\n"
FN = 'def go(env):\n    """Go."""\n    return env.act("go forward")\n'

READ = [
    # label forms: the exact protocol, then markdown, headings, case
    (f"Let me look.\nTool: run_python\n```python\n{CODE}```", ("run_python", (), CODE, "ok")),
    (f"**Tool:** run_python\n```python\n{CODE}```", ("run_python", (), CODE, "repaired")),
    (f"**Tool**: `run_python`\n```python\n{CODE}```", ("run_python", (), CODE, "repaired")),
    (f"### Tool: run_python\n```python\n{CODE}```", ("run_python", (), CODE, "repaired")),
    (f"tool: run_python\n```python\n{CODE}```", ("run_python", (), CODE, "repaired")),
    (f"TOOL: Run_Python\n```python\n{CODE}```", ("run_python", (), CODE, "repaired")),
    ("Tool: view_codebook.", ("view_codebook", (), None, "repaired")),  # trailing period
    ("**Tool:** view_function `go_to`", ("view_function", ("go_to",), None, "repaired")),
    (
        "Tool: rename_function(go_to, walk_to)",
        ("rename_function", ("go_to", "walk_to"), None, "ok"),
    ),
    ("Tool: view_codebook — let me see the draft first", ("view_codebook", (), None, "repaired")),
    # fences: no language tag, ~~~, ``` inside a string, unclosed at the end (not cut)
    (f"Tool: run_python\n```\n{CODE}```", ("run_python", (), CODE, "ok")),
    (f"Tool: run_python\n~~~py\n{CODE}~~~", ("run_python", (), CODE, "ok")),
    (
        'Tool: run_python\n```python\nprint("```")\nprint(1)\n```',
        ("run_python", (), 'print("```")\nprint(1)\n', "ok"),
    ),
    (f"Tool: add_function\n```python\n{FN}", ("add_function", (), FN, "repaired")),
    # prose before and after; <think> blocks (their Tool lines never count)
    (
        f"I will count the successes.\n\nTool: run_python\n```python\n{CODE}```\n"
        "This prints the number.",
        ("run_python", (), CODE, "ok"),
    ),
    (
        f"<think>\nTool: submit would be early.\n</think>\nTool: run_python\n```python\n{CODE}```",
        ("run_python", (), CODE, "repaired"),
    ),
    (
        f"Maybe submit now? No.\n</think>\n\nTool: run_python\n```python\n{CODE}```",
        ("run_python", (), CODE, "repaired"),
    ),
    # code written before the Tool line
    (
        f"Here is the skill:\n```python\n{FN}```\nTool: add_function",
        ("add_function", (), FN, "repaired"),
    ),
    # JSON tool calls
    (json.dumps({"tool": "add_function", "code": FN}), ("add_function", (), FN, "repaired")),
    (
        '```json\n{"name": "rename_function", '
        '"arguments": {"old": "go_to", "new": "walk_to"}}\n```',
        ("rename_function", ("go_to", "walk_to"), None, "repaired"),
    ),
    (
        '{"name": "run_python", "arguments": "{\\"code\\": \\"print(1)\\"}"}',
        ("run_python", (), "print(1)", "repaired"),
    ),
    ('{"tool": "view_episode", "args": [3]}', ("view_episode", ("3",), None, "repaired")),
    # submit's note
    ("Tool: submit\nadded a skill", ("submit", (), "added a skill", "ok")),
    (
        "Sure!\nTool: submit\nadded a skill\n\nLet me know if you need more.",
        ("submit", (), "added a skill", "repaired"),
    ),
    ("**Tool:** submit — added go_to", ("submit", (), "— added go_to", "repaired")),
    ('{"tool": "submit", "note": "done"}', ("submit", (), "done", "repaired")),
]


@pytest.mark.parametrize("answer, meaning", READ)
def test_each_form_reads_as_its_one_tool_call(answer, meaning):
    call = parse_tool_call(answer, OFFERED)
    assert call.problem is None, call.problem
    assert (call.tool, call.args, call.block, call.format) == meaning


LOST = [
    (
        "I think the codebook is fine.",
        "no `Tool:` line found: end every turn with one tool call, e.g. `Tool: view_codebook`",
    ),
    (
        "<think>Tool: submit</think>",
        "no `Tool:` line found: end every turn with one tool call, e.g. `Tool: view_codebook`",
    ),
    (
        f"Tool: run_python\n```python\n{CODE}```\nand to check:\n```python\nprint(2)\n```",
        "`run_python` takes one fenced block and this call has 2 (```python, ```python); "
        "nothing ran: put all the code in one block (one add_function may define several "
        "functions)",
    ),
    (
        f"```python\n{FN}```\n```python\n{CODE}```\nTool: add_function",
        "`add_function` needs one fenced block after the Tool line; there is none after it and "
        "2 before it: write the Tool line, then the one block",
    ),
    ("Tool: add_function", "`add_function` needs a fenced ```python block after the Tool line"),
    (
        "Tool: rename_function go_to",
        "`rename_function` takes two names on the Tool line, got 1: 'go_to'",
    ),
    (
        "Tool: python\n```python\nprint(1)\n```",
        "unknown tool 'python'; tools: " + ", ".join(sorted(OFFERED)),
    ),
    (
        '```python\ncall = {"tool": "submit"}\n```',  # a dict in code is not a JSON tool call
        "no `Tool:` line found: end every turn with one tool call, e.g. `Tool: view_codebook`",
    ),
]


@pytest.mark.parametrize("answer, problem", LOST)
def test_what_cannot_be_read_as_one_call_says_exactly_why(answer, problem):
    call = parse_tool_call(answer, OFFERED)
    assert (call.problem, call.format) == (problem, "lost")


def test_a_second_tool_call_does_not_run_and_the_result_says_so():
    answer = (
        f"Tool: run_python\n```python\n{CODE}```\n"
        f"Tool: add_function\n```python\n{FN}```\nTool: submit"
    )
    call = parse_tool_call(answer, OFFERED)
    assert (call.tool, call.block) == ("run_python", CODE)
    assert call.note == (
        "this turn had 3 tool calls; only the first (`Tool: run_python`) ran, not "
        "`Tool: add_function`, `Tool: submit`: send one tool call per turn and read its result "
        "before the next"
    )
    # Counted as what it is: read with tolerance, two calls dropped (never an exact "ok" turn).
    assert (call.format, call.dropped_calls) == ("repaired", 2)


def test_a_turn_with_dropped_calls_is_counted_in_the_phase_record():
    from speedrunner.core.answers import FormatTally

    tally = FormatTally("inducer")
    for answer in ("Tool: view_codebook", "Tool: view_codebook\nTool: submit"):
        call = parse_tool_call(answer, OFFERED)
        tally.add(call.format, dropped_calls=call.dropped_calls)
    assert tally.record()["format"]["inducer"] == {
        "turns": 2,
        "repaired": 1,
        "lost": 0,
        "truncated": 0,
        "dropped_calls": 1,
    }


def test_a_block_cut_at_max_tokens_is_never_applied_as_an_edit():
    answer = "Tool: add_function\n```python\ndef go(env):\n    env.act('go forward')\n"
    call = parse_tool_call(answer, OFFERED, finish_reason="length", max_tokens=256)
    assert call.tool == "add_function" and call.block is None and call.format == "lost"
    assert call.problem == (
        "the ```python block of `add_function` was cut off before its closing fence "
        "(your answer was cut off at max_tokens=256 (finish_reason 'length'); that is all the "
        "room an answer has, so answer shorter: less reasoning, smaller code); the code is "
        "incomplete, so it was not applied: send it again, shorter "
        "(e.g. one function per add_function)"
    )
    # analysis code cut the same way still runs (read-only, sandboxed); the loop adds the cut note
    cut = parse_tool_call(f"Tool: run_python\n```python\n{CODE}", OFFERED, finish_reason="length")
    assert (cut.tool, cut.block, cut.format) == ("run_python", CODE, "repaired")


def test_an_answer_cut_before_any_tool_line_says_how_much_room_there_is():
    call = parse_tool_call(
        "Let me think about the episodes. First, episode 3 shows",
        OFFERED,
        finish_reason="length",
        max_tokens=64,
    )
    assert call.problem.endswith(
        "(your answer was cut off at max_tokens=64 (finish_reason 'length'); that is "
        "all the room an answer has, so answer shorter: less reasoning, smaller code)"
    )


def test_a_tool_line_inside_code_is_code_not_a_call():
    answer = 'Tool: run_python\n```python\nprint("Tool: submit")\n```'
    call = parse_tool_call(answer, OFFERED)
    assert (call.tool, call.note) == ("run_python", "")
