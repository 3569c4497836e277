"""A fake LLM for SpeedRunner runs on BabyAI: the expert actor of ``asi_fakes`` and a
scripted multi-turn inducer (as native tool calls when the request offers tools).

The inducer's answers depend only on the conversation it is shown (which sleep phase: is
``go_forward_n`` already in the codebook; which turn: how many answers it has given), so a
resumed run asks exactly the same questions. First sleep: analyse the experience with
``run_python`` (``speedrunner_no_cl``: read an episode instead), add ``go_forward_n`` and
``turn_around``, submit. Second sleep: analyse the skill's calls, add ``step_forward``,
rewrite ``go_forward_n`` to use it, try it with ``test_skill`` (``speedrunner`` only), make
``step_forward`` private, delete ``turn_around``, submit.
"""

from __future__ import annotations

import threading

from speedrunner.testing.fake_llm_server import Reply
from speedrunner.testing.native import native_reply

from .asi_fakes import FUNCTIONS, SKILL, ASIFakeLLM

INDUCER = "You maintain a codebook"
TURN_AROUND = '''def turn_around(env) -> str:
    """Turn to face the other way.

    Returns:
        The observation text after turning.
    """
    env.act("turn left")
    return env.act("turn left")
'''
STEP_FORWARD = '''def step_forward(env) -> str:
    """Take one step forward unless the episode has ended.

    Returns:
        The observation text after the step.
    """
    return env.text if env.done else env.act("go forward")
'''
GO_FORWARD_N_V2 = '''def go_forward_n(env, n: int) -> str:
    """Take up to n steps forward, stopping early when the episode ends.

    Args:
        n: how many steps to take.

    Returns:
        The observation text after the last step.
    """
    text = env.text
    for _ in range(n):
        if env.done:
            break
        text = step_forward(env)
    return text
'''
FORWARD_RUNS = """import collections
runs = collections.Counter()
for t in episodes(generation=0):
    k = 0
    for a in t.primitive_actions() + ["end"]:
        if a == "go forward":
            k += 1
        elif k:
            runs[k] += 1
            k = 0
print("episodes", [t.index for t in episodes()], "successes", len(episodes(success=True)))
print("forward runs", sorted(runs.items()))
"""
SKILL_CALLS = """calls = [c for t in episodes(skill="go_forward_n") for c in t.skill_calls()]
print("go_forward_n calls", len(calls), "errors", sum(1 for c in calls if c["tree"]["error"]),
      "actions", sum(len(c["actions"]) for c in calls))
"""
SLOW = "import time\ntime.sleep(1.5)\n"


def tool(name: str, code: str | None = None) -> str:
    block = f"\n```python\n{code}```" if code is not None else ""
    return f"Let me work on the codebook.\nTool: {name}{block}"


def inducer_turns(*, code: bool, learn: bool, slow: bool = False) -> tuple[list[str], list[str]]:
    """The scripted answers of the first and the second sleep phase."""
    pre = SLOW if slow else ""
    look0 = (
        tool("run_python", pre + FORWARD_RUNS)
        if code
        else "Let me read an episode.\nTool: view_episode 0"
    )
    look1 = (
        tool("run_python", pre + SKILL_CALLS)
        if code
        else "Let me look at the counts.\nTool: view_codebook"
    )
    if not learn:
        return [look0, "Tool: submit\nnothing to learn"], [look1, "Tool: submit\nnothing to learn"]
    first = [
        look0,
        tool("add_function", FUNCTIONS),
        tool("add_function", TURN_AROUND),
        "Tool: submit\nadded go_forward_n and turn_around",
    ]
    check = (
        [tool("test_skill 2 0", f"{SKILL}(2)\n")] if code else []
    )  # try the rewrite on episode 2's start
    second = [
        look1,
        tool("add_function", STEP_FORWARD),
        tool(f"edit_function {SKILL}", GO_FORWARD_N_V2),
        *check,
        "Tool: make_private step_forward",
        "Tool: delete_function turn_around",
        "Tool: submit\nfactored out a private step helper; dropped the unused turn_around",
    ]
    return first, second


class SpeedRunnerFakeLLM(ASIFakeLLM):
    """``ASIFakeLLM``'s expert actor, and the scripted inducer above."""

    def __init__(
        self,
        levels: list[tuple[str, int]],
        *,
        code: bool = True,
        learn: bool = True,
        slow: bool = False,
    ) -> None:
        super().__init__(levels)
        self.turns = inducer_turns(code=code, learn=learn, slow=slow)
        self.inducer_calls = 0
        self._count = threading.Lock()

    def __call__(self, body: dict) -> Reply:
        messages = body["messages"]
        if INDUCER not in messages[0]["content"]:
            return self._act(messages)
        with self._count:
            self.inducer_calls += 1
        sleep = 1 if f"def {SKILL}(" in messages[1]["content"] else 0
        turn = sum(m["role"] == "assistant" for m in messages)
        answers = self.turns[sleep]
        text = answers[turn] if turn < len(answers) else "Tool: submit"
        return native_reply(body, Reply(text=text, prompt_tokens=1500, completion_tokens=150))
