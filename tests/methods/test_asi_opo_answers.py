"""ASI's ``<functions>``/``<script>`` and OPO's ``<guide>`` read the way real models write
them: one row per variant, each asserting the meaning read or the exact problem."""

import pytest

from speedrunner.methods.wake_sleep.asi_parse import parse_induction
from speedrunner.methods.wake_sleep.opo import read_guide

FN = 'def go(env):\n    """Go."""\n    return env.act("go forward")'
HELP = "def _turn(env):\n    return env.act('turn left')"
SCRIPT = "go()\npick up"

INDUCTIONS = [
    # the exact form
    (f"<functions>\n```python\n{FN}\n```\n</functions>\n<script>\n{SCRIPT}\n</script>", ["go"], ["go()", "pick up"], "ok"),
    # prose and <think> around it; a <functions> mention inside the thinking never counts
    (f"<think>maybe <functions>def bad(:</functions></think>\nHere you go.\n<functions>\n```python\n{FN}\n```\n"
     f"</functions>\n<script>\n{SCRIPT}\n</script>\nThat should work.", ["go"], ["go()", "pick up"], "repaired"),
    # tags in another case, no language tag, two fenced blocks inside one tag
    (f"<FUNCTIONS>\n```\n{HELP}\n```\n```py\n{FN}\n```\n</FUNCTIONS>\n<Script>\n{SCRIPT}\n</Script>",
     ["_turn", "go"], ["go()", "pick up"], "ok"),
    # no fences at all; a missing </functions> before <script>
    (f"<functions>\n{FN}\n<script>\n{SCRIPT}\n</script>", ["go"], ["go()", "pick up"], "ok"),
    # a fenced script, backticks around actions
    (f"<functions>\n{FN}\n</functions>\n<script>\n```\n`go()`\n`pick up`\n```\n</script>", ["go"],
     ["go()", "pick up"], "ok"),
    # the answer ends without closing its tag (not cut: the model just stopped)
    (f"<functions>\n```python\n{FN}\n```", ["go"], [], "repaired"),
    # no tags: one fenced block of functions
    (f"Here are the functions:\n```python\n{FN}\n```", ["go"], [], "repaired"),
    # ``` inside a string literal does not end the block
    ('<functions>\n```python\ndef fence(env):\n    return "```"\n```\n</functions>', ["fence"], [], "ok"),
]


@pytest.mark.parametrize("answer, functions, script, form", INDUCTIONS)
def test_an_induction_answer_reads_as_its_functions_and_script(answer, functions, script, form):
    got = parse_induction(answer)
    assert got.problem is None, got.problem
    assert ([f.name for f in got.functions], got.script, got.format) == (functions, script, form)


INDUCTION_PROBLEMS = [
    ("I could not find a reusable function.", None, "no <functions> block in the answer"),
    (f"<functions>\n{FN}\n</functions>\n<functions>\n{HELP}\n</functions>", None,
     "the answer has 2 <functions> blocks; they were not merged: put every new function in one <functions> block"),
    (f"```python\n{FN}\n```\n```python\n{HELP}\n```", None, "no <functions> block in the answer"),
    (f"<functions>\n```python\n{FN}\n", "length",
     "the functions were cut off at max_tokens before their block closed; an incomplete function is never added"),
    ("<functions>\ndef go(env:\n</functions>", None, "the functions do not parse: line 1: '(' was never closed"),
    ("Let me analyse the episode step by", "length", "no <functions> block in the answer (it was cut off at max_tokens)"),
]


@pytest.mark.parametrize("answer, finish, problem", INDUCTION_PROBLEMS)
def test_an_induction_without_one_clear_reading_says_why(answer, finish, problem):
    got = parse_induction(answer, finish_reason=finish)
    assert (got.problem, got.functions, got.format) == (problem, [], "lost")


GUIDES = [
    ("<guide>\nPick up keys first.\n</guide>", "Pick up keys first.", "ok"),
    ("Here is the rewritten guide.\n<guide>\n- Pick up keys first.\n</guide>\nGood luck!", "- Pick up keys first.", "ok"),
    ("<think>The old guide missed doors.</think>\n<guide>Open doors.</guide>", "Open doors.", "repaired"),
    ("<GUIDE>Open doors.</GUIDE>", "Open doors.", "ok"),
    ("<guide>\n1. Open doors.\n2. Then go", "1. Open doors.\n2. Then go", "repaired"),   # cut at max_tokens
    ("## Strategy\n- Open doors.", "## Strategy\n- Open doors.", "repaired"),          # no tags: the whole answer
]


@pytest.mark.parametrize("answer, guide, form", GUIDES)
def test_a_guide_answer_reads_as_one_guide(answer, guide, form):
    got = read_guide(answer)
    assert (got.guide, got.problem, got.format) == (guide, None, form)


@pytest.mark.parametrize("answer, problem", [
    ("<guide>A</guide>\nor\n<guide>B</guide>", "the answer has 2 <guide> blocks; the old guide stays"),
    ("<think>only thinking</think>", "the answer was empty"),
    ("<guide></guide>", "the <guide> block was empty"),
])
def test_a_guide_answer_without_one_reading_keeps_the_old_guide(answer, problem):
    got = read_guide(answer)
    assert (got.guide, got.problem, got.format) == ("", problem, "lost")
