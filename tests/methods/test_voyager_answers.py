"""Voyager's answers read the way real models write them: the action agent's code, the
critic's JSON and the curriculum's Task line, one row per variant."""

import json

import pytest

from speedrunner.core.llm.types import ToolUse
from speedrunner.methods.voyager.attempt import read_code, read_skill_call
from speedrunner.methods.voyager.critic import Verdict, parse_critic_answer, read_critic
from speedrunner.methods.voyager.voyager import read_task, read_task_answer

FN = 'def collect_wood(env):\n    """Collect wood."""\n    return env.act("do")\n'
HELP = "def _face(env):\n    return env.act('noop')\n"

EXACT = f"Explain: trees are near.\nPlan: 1) go\nCode:\n```python\n{FN}```"
CODE = [
    (EXACT, FN, "ok"),
    (f"**Code:**\n```python\n{FN}```", FN, "repaired"),
    (
        f"### Code\n```py\n{HELP}```\n```python\n{FN}```",
        HELP + "\n" + FN,
        "repaired",
    ),  # helpers then the skill
    (
        f"<think>\n```python\ndef wrong(env): pass\n```\n</think>\nCode:\n```python\n{FN}```",
        FN,
        "repaired",
    ),
    (f"Code:\n```\n{FN}```", FN, "repaired"),  # no language tag
    (f"Code:\n```python\n{FN}", FN, "repaired"),  # the model stopped, fence open
    (
        'Code:\n```python\ndef fence(env):\n    return "```"\n```',
        'def fence(env):\n    return "```"\n',
        "ok",
    ),
    (f"Here is the skill.\n```python\n{FN}```\nIt chops a tree.", FN, "repaired"),  # no Code label
    (
        f"Plan:\n```text\n1. find a tree\n```\nCode:\n```python\n{FN}```",
        FN,
        "ok",
    ),  # a text block is not code
    (f"{EXACT}\n\n{EXACT}", FN, "repaired"),  # the answer said twice
]


@pytest.mark.parametrize("answer, code, form", CODE)
def test_the_action_agents_code_is_every_python_block_after_the_code_label(answer, code, form):
    got = read_code(answer)
    assert (got.code, got.problem, got.format) == (code, None, form)


def test_an_answer_without_python_code_has_none():
    assert read_code("I would chop a tree.").code is None
    assert read_code("```text\nchop\n```").problem == "the answer has no ```python code block"


JSON_CODE = [
    # the text answer as a JSON string (bare, in a fence); the code as a field of its own
    (json.dumps({"answer": EXACT}), FN),
    (f"```json\n{json.dumps({'response': EXACT})}\n```", FN),
    (json.dumps({"explain": "", "plan": "1) go", "code": FN}), FN),
    (
        f"Here:\n```json\n{json.dumps({'plan': 'go', 'code': HELP + chr(10) + FN})}\n```",
        HELP + "\n" + FN,
    ),
    (json.dumps({"code": f"```python\n{FN}```"}), FN),  # fenced inside the string
    (f"{json.dumps({'code': FN})}\n{json.dumps({'code': FN})}", FN),  # the same answer twice
]


@pytest.mark.parametrize("answer, code", JSON_CODE)
def test_an_action_agent_answer_written_as_json_is_read_from_its_strings(answer, code):
    got = read_code(answer)
    assert (got.code, got.problem, got.format) == (code, None, "repaired")


def test_two_json_answers_with_different_code_are_not_chosen_between():
    got = read_code(f"{json.dumps({'code': FN})}\nor\n{json.dumps({'code': HELP})}")
    assert (got.code, got.format) == (None, "lost")
    assert got.problem == (
        "the answer has 2 JSON objects with different code (defining collect_wood; _face); "
        "nothing ran: answer with one Code block"
    )


NATIVE = [
    ((ToolUse("c1", "submit_skill", json.dumps({"plan": "go", "code": FN})),), FN, None, "ok", 0),
    (
        (ToolUse("c1", "submit_skill", json.dumps({"code": f"```python\n{FN}```"})),),
        FN,
        None,
        "repaired",
        0,
    ),
    (
        (
            ToolUse("c1", "submit_skill", json.dumps({"code": FN})),
            ToolUse("c2", "submit_skill", json.dumps({"code": HELP})),
        ),
        FN,
        None,
        "repaired",
        1,
    ),
    (
        (ToolUse("c1", "submit_skill", '{"code": "def f(env):'),),
        None,
        "the arguments of `submit_skill` are not valid JSON "
        "(Unterminated string starting at at character 9); send "
        'one JSON object with "code"',
        "lost",
        0,
    ),
    (
        (ToolUse("c1", "submit_skill", "{}"),),
        None,
        '`submit_skill` needs "code": the skill\'s Python source as a string',
        "lost",
        0,
    ),
    (
        (ToolUse("c1", "run_python", "{}"),),
        None,
        "unknown tool 'run_python'; the one tool is submit_skill",
        "lost",
        0,
    ),
]


@pytest.mark.parametrize("uses, code, problem, form, dropped", NATIVE)
def test_a_native_skill_call_is_read_from_its_arguments(uses, code, problem, form, dropped):
    got = read_skill_call("", uses)
    assert (got.code, got.problem, got.format, got.dropped_calls) == (code, problem, form, dropped)


def test_a_native_turn_without_a_call_is_read_as_text():
    assert read_skill_call(EXACT, ()).code == FN


CRITIC = [
    ('{"reasoning": "r", "success": true, "critique": ""}', Verdict(True, "", "llm", "r")),
    (
        'Sure: {"reasoning": "r", "success": false, "critique": "c"} done',
        Verdict(False, "c", "llm", "r"),
    ),
    (
        '```json\n{"reasoning": "r", "success": true, "critique": ""}\n```',
        Verdict(True, "", "llm", "r"),
    ),
    (
        '<think>{"success": false}</think>\n{"reasoning": "r", "success": true, "critique": ""}',
        Verdict(True, "", "llm", "r"),
    ),
    (
        '{"reasoning": "r", "success": true, "critique": "",}',
        Verdict(True, "", "llm", "r"),
    ),  # trailing comma
    (
        "{'reasoning': 'r', 'success': True, 'critique': ''}",
        Verdict(True, "", "llm", "r"),
    ),  # Python dict
    ('{"reasoning": "r", "success": "false", "critique": "c"}', Verdict(False, "c", "llm", "r")),
    ('{"success": true}', Verdict(True, "", "llm", "")),
]


@pytest.mark.parametrize("answer, verdict", CRITIC)
def test_the_critics_verdict_is_read_from_what_models_write(answer, verdict):
    assert parse_critic_answer(answer) == verdict


@pytest.mark.parametrize(
    "answer, problem",
    [
        ("it worked", "no JSON object in the answer"),
        ('{"reasoning": "r", "success": "yes"}', '"success" must be true or false'),
        (
            '{"success": true} ... on reflection {"success": false}',
            'the answer has 2 JSON objects that disagree on "success"; give exactly one',
        ),
        ('{"success": tru}', "the JSON does not parse (Expecting value)"),
        ('{"reasoning": 3, "success": true}', '"reasoning" and "critique" must be strings'),
    ],
)
def test_a_critic_answer_without_one_verdict_says_why(answer, problem):
    assert parse_critic_answer(answer) == problem


@pytest.mark.parametrize(
    "answer, task",
    [
        ("Reasoning: wood first.\nTask: Collect Wood.", "collect wood"),
        ('{"task": "collect wood"}', "collect wood"),
        ('```json\n{"reasoning": "wood first", "task": "Collect Wood"}\n```', "collect wood"),
        (json.dumps({"answer": "Reasoning: wood first.\nTask: place table"}), "place table"),
        (
            '{"next_task": "collect sapling"} and again {"next_task": "collect sapling"}',
            "collect sapling",
        ),
        ("**Task:** collect wood", "collect wood"),
        ("### Task: Place Table", "place table"),
        ("<think>Task: defeat zombie</think>\nTask: collect sapling", "collect sapling"),
        ("Task: collect wood\nSo again, Task: collect wood", "collect wood"),
        ("Task: collect wood\nTask: place table", ""),  # two different tasks: asked again
        ("I think wood.", ""),
    ],
)
def test_the_curriculum_task_line(answer, task):
    assert read_task(answer) == task


@pytest.mark.parametrize(
    "answer, finish, problem",
    [
        (
            "Task: collect wood\nTask: place table",
            None,
            "the answer has 2 different Task lines ('collect wood'; 'place table'); "
            "propose exactly one",
        ),
        (
            '{"task": "collect wood"}\n{"task": "place table"}',
            None,
            "the answer has 2 different tasks in JSON ('collect wood'; 'place table'); "
            "propose exactly one",
        ),
        ("I think wood.", None, "the answer has no line 'Task: <the next task>'"),
        (
            "Reasoning: wood is near.\nTask: collect wo",
            "length",
            "the answer was cut off at max_tokens right after its Task line, "
            "so the task 'collect wo' may be incomplete",
        ),
        (
            '{"reasoning": "wood is near", "task": "coll',
            "length",
            "the answer has no line 'Task: <the next task>' (it was cut off at max_tokens)",
        ),
    ],
)
def test_a_curriculum_answer_without_one_task_says_what_was_read(answer, finish, problem):
    got = read_task_answer(answer, finish)
    assert (got.task, got.problem, got.format) == ("", problem, "lost")


def test_a_cut_answer_whose_task_line_is_followed_by_more_text_keeps_its_task():
    got = read_task_answer("Task: collect wood\nReasoning: it is near and", "length")
    assert (got.task, got.problem) == ("collect wood", None)


@pytest.mark.parametrize(
    "answer, form",
    [
        ('{"reasoning": "r", "success": true, "critique": ""}', "ok"),
        ('Sure: {"reasoning": "r", "success": false, "critique": "c"} done', "repaired"),
        ('```json\n{"reasoning": "r", "success": true, "critique": ""}\n```', "repaired"),
        ("{'reasoning': 'r', 'success': True, 'critique': ''}", "repaired"),
        ('{"reasoning": "r", "success": "true", "critique": ""}', "repaired"),
        (json.dumps({"answer": '{"reasoning": "r", "success": true, "critique": ""}'}), "repaired"),
    ],
)
def test_the_critics_answer_is_counted_ok_only_in_the_asked_form(answer, form):
    got = read_critic(answer)
    assert (
        got.verdict is not None
        and got.verdict.success == ("false" not in answer)
        and got.format == form
    )
