"""Voyager's answers read the way real models write them: the action agent's code, the
critic's JSON and the curriculum's Task line, one row per variant."""

import pytest

from speedrunner.methods.voyager.attempt import read_code
from speedrunner.methods.voyager.critic import Verdict, parse_critic_answer
from speedrunner.methods.voyager.voyager import read_task

FN = 'def collect_wood(env):\n    """Collect wood."""\n    return env.act("do")\n'
HELP = "def _face(env):\n    return env.act('noop')\n"

CODE = [
    (f"Explain: trees are near.\nPlan: 1) go\nCode:\n```python\n{FN}```", FN),
    (f"**Code:**\n```python\n{FN}```", FN),
    (f"### Code\n```py\n{HELP}```\n```python\n{FN}```", HELP + "\n" + FN),        # helpers then the skill
    (f"<think>\n```python\ndef wrong(env): pass\n```\n</think>\nCode:\n```python\n{FN}```", FN),
    (f"Code:\n```\n{FN}```", FN),                                                   # no language tag
    (f"Code:\n```python\n{FN}", FN),                                                # the model stopped, fence open
    ('Code:\n```python\ndef fence(env):\n    return "```"\n```', 'def fence(env):\n    return "```"\n'),
    (f"Here is the skill.\n```python\n{FN}```\nIt chops a tree.", FN),              # no Code label
    (f"Plan:\n```text\n1. find a tree\n```\nCode:\n```python\n{FN}```", FN),        # a text block is not code
]


@pytest.mark.parametrize("answer, code", CODE)
def test_the_action_agents_code_is_every_python_block_after_the_code_label(answer, code):
    assert read_code(answer)[1] == code


def test_an_answer_without_python_code_has_none():
    assert read_code("I would chop a tree.")[1] is None
    assert read_code("```text\nchop\n```")[1] is None


CRITIC = [
    ('{"reasoning": "r", "success": true, "critique": ""}', Verdict(True, "", "llm", "r")),
    ('Sure: {"reasoning": "r", "success": false, "critique": "c"} done', Verdict(False, "c", "llm", "r")),
    ('```json\n{"reasoning": "r", "success": true, "critique": ""}\n```', Verdict(True, "", "llm", "r")),
    ('<think>{"success": false}</think>\n{"reasoning": "r", "success": true, "critique": ""}',
     Verdict(True, "", "llm", "r")),
    ('{"reasoning": "r", "success": true, "critique": "",}', Verdict(True, "", "llm", "r")),     # trailing comma
    ("{'reasoning': 'r', 'success': True, 'critique': ''}", Verdict(True, "", "llm", "r")),       # Python dict
    ('{"reasoning": "r", "success": "false", "critique": "c"}', Verdict(False, "c", "llm", "r")),
    ('{"success": true}', Verdict(True, "", "llm", "")),
]


@pytest.mark.parametrize("answer, verdict", CRITIC)
def test_the_critics_verdict_is_read_from_what_models_write(answer, verdict):
    assert parse_critic_answer(answer) == verdict


@pytest.mark.parametrize("answer, problem", [
    ("it worked", "no JSON object in the answer"),
    ('{"reasoning": "r", "success": "yes"}', '"success" must be true or false'),
    ('{"success": true} ... on reflection {"success": false}',
     'the answer has 2 JSON objects that disagree on "success"; give exactly one'),
    ('{"success": tru}', "the JSON does not parse (Expecting value)"),
    ('{"reasoning": 3, "success": true}', '"reasoning" and "critique" must be strings'),
])
def test_a_critic_answer_without_one_verdict_says_why(answer, problem):
    assert parse_critic_answer(answer) == problem


@pytest.mark.parametrize("answer, task", [
    ("Reasoning: wood first.\nTask: Collect Wood.", "collect wood"),
    ("**Task:** collect wood", "collect wood"),
    ("### Task: Place Table", "place table"),
    ("<think>Task: defeat zombie</think>\nTask: collect sapling", "collect sapling"),
    ("Task: collect wood\nSo again, Task: collect wood", "collect wood"),
    ("Task: collect wood\nTask: place table", ""),           # two different tasks: asked again
    ("I think wood.", ""),
])
def test_the_curriculum_task_line(answer, task):
    assert read_task(answer) == task
