"""ASI's ``<functions>``/``<script>`` and OPO's ``<guide>`` read the way real models write
them: one row per variant, each asserting the meaning read or the exact problem."""

import json

import pytest

from speedrunner.methods.wake_sleep.asi_parse import parse_induction
from speedrunner.methods.wake_sleep.opo import read_guide

FN = 'def go(env):\n    """Go."""\n    return env.act("go forward")'
HELP = "def _turn(env):\n    return env.act('turn left')"
SCRIPT = "go()\npick up"

INDUCTIONS = [
    # the exact form
    (
        f"<functions>\n```python\n{FN}\n```\n</functions>\n<script>\n{SCRIPT}\n</script>",
        ["go"],
        ["go()", "pick up"],
        "ok",
    ),
    # prose and <think> around it; a <functions> mention inside the thinking never counts
    (
        "<think>maybe <functions>def bad(:</functions></think>\nHere you go.\n"
        f"<functions>\n```python\n{FN}\n```\n"
        f"</functions>\n<script>\n{SCRIPT}\n</script>\nThat should work.",
        ["go"],
        ["go()", "pick up"],
        "repaired",
    ),
    # tags in another case, no language tag, two fenced blocks inside one tag
    (
        f"<FUNCTIONS>\n```\n{HELP}\n```\n```py\n{FN}\n```\n</FUNCTIONS>\n<Script>\n{SCRIPT}\n</Script>",
        ["_turn", "go"],
        ["go()", "pick up"],
        "ok",
    ),
    # no fences at all; a missing </functions> before <script>
    (f"<functions>\n{FN}\n<script>\n{SCRIPT}\n</script>", ["go"], ["go()", "pick up"], "ok"),
    # a fenced script, backticks around actions
    (
        f"<functions>\n{FN}\n</functions>\n<script>\n```\n`go()`\n`pick up`\n```\n</script>",
        ["go"],
        ["go()", "pick up"],
        "ok",
    ),
    # the answer ends without closing its tag (not cut: the model just stopped)
    (f"<functions>\n```python\n{FN}\n```", ["go"], [], "repaired"),
    # no tags: one fenced block of functions
    (f"Here are the functions:\n```python\n{FN}\n```", ["go"], [], "repaired"),
    # ``` inside a string literal does not end the block
    (
        '<functions>\n```python\ndef fence(env):\n    return "```"\n```\n</functions>',
        ["fence"],
        [],
        "ok",
    ),
]


TAGGED = f"<functions>\n```python\n{FN}\n```\n</functions>\n<script>\n{SCRIPT}\n</script>"
INDUCTIONS += [
    # JSON, as real models write it: the tagged answer as a JSON string, bare or in a fence
    (json.dumps({"answer": TAGGED}), ["go"], ["go()", "pick up"], "repaired"),
    (
        f"Here it is:\n```json\n{json.dumps({'response': TAGGED})}\n```",
        ["go"],
        ["go()", "pick up"],
        "repaired",
    ),
    # fields of their own: functions as source or a list of sources, the script as a list or lines
    (
        json.dumps({"functions": f"{HELP}\n\n{FN}", "script": ["go()", "pick up"]}),
        ["_turn", "go"],
        ["go()", "pick up"],
        "repaired",
    ),
    (
        f"```json\n{json.dumps({'functions': [HELP, FN], 'script': SCRIPT})}\n```",
        ["_turn", "go"],
        ["go()", "pick up"],
        "repaired",
    ),
    (
        json.dumps({"code": f"```python\n{FN}\n```", "script": SCRIPT}),
        ["go"],
        ["go()", "pick up"],
        "repaired",
    ),
    # the same answer twice (a model that repeated itself) is one answer
    (f"{TAGGED}\n\n{TAGGED}", ["go"], ["go()", "pick up"], "repaired"),
    (f"{json.dumps({'functions': FN})}\n{json.dumps({'functions': FN})}", ["go"], [], "repaired"),
]


@pytest.mark.parametrize("answer, functions, script, form", INDUCTIONS)
def test_an_induction_answer_reads_as_its_functions_and_script(answer, functions, script, form):
    got = parse_induction(answer)
    assert got.problem is None, got.problem
    assert ([f.name for f in got.functions], got.script, got.format) == (functions, script, form)


INDUCTION_PROBLEMS = [
    ("I could not find a reusable function.", None, "no <functions> block in the answer"),
    (
        f"<functions>\n{FN}\n</functions>\n<functions>\n{HELP}\n</functions>",
        None,
        "the answer has 2 <functions> blocks; they were not merged: put every new function in "
        "one <functions> block",
    ),
    (f"```python\n{FN}\n```\n```python\n{HELP}\n```", None, "no <functions> block in the answer"),
    (
        f"<functions>\n```python\n{FN}\n",
        "length",
        "the functions were cut off at max_tokens before their block closed; an incomplete "
        "function is never added",
    ),
    (
        "<functions>\ndef go(env:\n</functions>",
        None,
        "the functions do not parse: line 1: '(' was never closed",
    ),
    (
        "Let me analyse the episode step by",
        "length",
        "no <functions> block in the answer (it was cut off at max_tokens)",
    ),
    # JSON with two different answers: not merged, and the problem says what each held
    (
        f"{json.dumps({'functions': FN})}\nor\n{json.dumps({'functions': HELP})}",
        None,
        "the answer has 2 JSON objects that differ (functions: go; _turn); they were not merged: "
        "answer with one <functions> block and one <script> block",
    ),
    # JSON cut before it closed: never half-used (its <functions> is inside a JSON string)
    (
        json.dumps({"answer": f"<functions>\n{FN}\n</functions>"})[:60],
        "length",
        "the answer's JSON object never closed (it was cut off at max_tokens); an incomplete "
        "answer is never used",
    ),
]


@pytest.mark.parametrize("answer, finish, problem", INDUCTION_PROBLEMS)
def test_an_induction_without_one_clear_reading_says_why(answer, finish, problem):
    got = parse_induction(answer, finish_reason=finish)
    assert (got.problem, got.functions, got.format) == (problem, [], "lost")


GUIDES = [
    ("<guide>\nPick up keys first.\n</guide>", "Pick up keys first.", "ok"),
    (
        "Here is the rewritten guide.\n<guide>\n- Pick up keys first.\n</guide>\nGood luck!",
        "- Pick up keys first.",
        "ok",
    ),
    (
        "<think>The old guide missed doors.</think>\n<guide>Open doors.</guide>",
        "Open doors.",
        "repaired",
    ),
    ("<GUIDE>Open doors.</GUIDE>", "Open doors.", "ok"),
    (
        "<guide>\n1. Open doors.\n2. Then go",
        "1. Open doors.\n2. Then go",
        "repaired",
    ),  # cut at max_tokens
    (
        "## Strategy\n- Open doors.",
        "## Strategy\n- Open doors.",
        "repaired",
    ),  # no tags: the whole answer
]


GUIDES += [
    # JSON: read from the decoded string, never word for word (no literal "\n" in a guide)
    (
        json.dumps({"answer": "<guide>\n- Open doors.\n- Then go.\n</guide>"}),
        "- Open doors.\n- Then go.",
        "repaired",
    ),
    (f"```json\n{json.dumps({'guide': '- Open doors.'})}\n```", "- Open doors.", "repaired"),
    (
        json.dumps({"reasoning": "doors matter", "strategy": ["Open doors.", "Then go."]}),
        "- Open doors.\n- Then go.",
        "repaired",
    ),
    (f"Sure!\n{json.dumps({'guide': 'Open doors.'})}", "Open doors.", "repaired"),
    # JSON cut at max_tokens inside its string: what was written, decoded (as a cut tagged guide)
    (
        json.dumps({"answer": "<guide>\n1. Open doors.\n2. Then go to the key"})[:-12],
        "1. Open doors.\n2. Then go",
        "repaired",
    ),
    (
        "<guide>Open doors.</guide>\n\n<guide>Open doors.</guide>",
        "Open doors.",
        "repaired",
    ),  # said twice
    # a JSON example inside a prose guide is part of the guide, not its answer
    (
        '<guide>\nWrite {"text": "x"} only when asked; otherwise open doors first and keep '
        "going.\n</guide>",
        'Write {"text": "x"} only when asked; otherwise open doors first and keep going.',
        "ok",
    ),
]


@pytest.mark.parametrize("answer, guide, form", GUIDES)
def test_a_guide_answer_reads_as_one_guide(answer, guide, form):
    got = read_guide(answer)
    assert (got.guide, got.problem, got.format) == (guide, None, form)


@pytest.mark.parametrize(
    "answer, problem",
    [
        (
            "<guide>A</guide>\nor\n<guide>B</guide>",
            "the answer has 2 <guide> blocks; the old guide stays",
        ),
        ("<think>only thinking</think>", "the answer was empty"),
        ("<guide></guide>", "the <guide> block was empty"),
        (
            f"{json.dumps({'guide': 'Open doors.'})} or {json.dumps({'guide': 'Pick up keys.'})}",
            "the answer has 2 JSON objects with different guides ('Open doors.'; 'Pick up keys.'); "
            "the old guide stays",
        ),
    ],
)
def test_a_guide_answer_without_one_reading_keeps_the_old_guide(answer, problem):
    got = read_guide(answer)
    assert (got.guide, got.problem, got.format) == ("", problem, "lost")
