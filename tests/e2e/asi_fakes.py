"""A fake LLM for ASI runs on BabyAI: an expert actor (minigrid's bot) and a scripted inducer.

The actor plays the bot's action for the level it recognises from the first message (the
mission and first observation), counting the primitive actions already taken. When the
codebook offers ``go_forward_n``, it calls it for every run of two or more forward steps
the bot is about to take, so an episode that uses the skill needs fewer LLM calls. The
inducer answers every induction call with ``go_forward_n`` and the episode's actions
rewritten with it (parsed back from the trajectory it is shown).
"""

from __future__ import annotations

import re
import threading

from speedrunner.benchmarks.babyai.levels import make_level
from speedrunner.benchmarks.babyai.text import observe
from speedrunner.testing.babyai_expert import bot_actions
from speedrunner.testing.fake_llm_server import Reply

SKILL = "go_forward_n"
FUNCTIONS = '''def go_forward_n(env, n: int) -> str:
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
        text = env.act("go forward")
    return text
'''
SLOW_FUNCTIONS = FUNCTIONS.replace(
    "    text = env.text\n", "    text = env.text\n    for _ in range(2_000_000):\n        pass\n"
)
_CALL = re.compile(rf"{SKILL}\((\d+)\)")
_ACTION = re.compile(r"^Action:\s*(.+?)\s*$", re.MULTILINE)
_SUMMARY_ACTION = re.compile(r"^\s+action: (.+?)(?:  -> .*)?$", re.MULTILINE)


def grouped(actions: list[str] | tuple[str, ...], start: int = 0) -> str:
    """The next actor action from ``start``: a ``go_forward_n(k)`` for k >= 2 forward steps."""
    k = 0
    while start + k < len(actions) and actions[start + k] == "go forward":
        k += 1
    return f"{SKILL}({k})" if k >= 2 else actions[start]


class ASIFakeLLM:
    """Callback for ``FakeLLMServer``; ``levels`` are the (kind, seed) pairs the run may play."""

    def __init__(
        self,
        levels: list[tuple[str, int]],
        *,
        add_skill: bool = True,
        script_override: list[str] | None = None,
        slow_skill: bool = False,
    ) -> None:
        self.by_start = {}
        for kind, seed in levels:
            level = make_level(kind, seed)
            self.by_start[(level.mission, observe(level)[0])] = (kind, seed)
        self.add_skill = add_skill
        self.script_override = script_override
        self.slow_skill = (
            slow_skill  # the skill burns ~0.2 s of CPU first, so a kill can land inside it
        )
        self.inductions = 0
        self._lock = threading.Lock()

    def __call__(self, body: dict) -> Reply:
        messages = body["messages"]
        if "reusable Python skills" in messages[0]["content"]:
            return self._induce(messages[-1]["content"])
        return self._act(messages)

    def _act(self, messages: list[dict]) -> Reply:
        first = messages[1]["content"]
        key = next(
            (k for k in self.by_start if f"Your goal is to {k[0]}" in first and k[1] in first), None
        )
        if key is None:
            return Reply(text="Thought: I do not know this level.\nAction: turn left")
        solution = bot_actions(*self.by_start[key])
        done = 0
        for m in messages[2:]:
            if m["role"] != "assistant":
                continue
            action = _ACTION.search(m["content"]).group(1)
            call = _CALL.fullmatch(action)
            done += int(call.group(1)) if call else 1
        if done >= len(solution):
            return Reply(text="Thought: done.\nAction: turn left")
        skill_offered = f"{SKILL}(" in first
        action = grouped(solution, done) if skill_offered else solution[done]
        return Reply(
            text=f"Thought: the expert's move.\nAction: {action}",
            prompt_tokens=100,
            completion_tokens=10,
        )

    def _induce(self, prompt: str) -> Reply:
        with self._lock:
            self.inductions += 1
        trajectory = prompt.split("A successful episode:", 1)[1]
        actions = [a for a in _SUMMARY_ACTION.findall(trajectory) if not a.startswith("INVALID")]
        script, i = [], 0
        while i < len(actions):
            line = grouped(actions, i)
            script.append(line)
            call = _CALL.fullmatch(line)
            i += int(call.group(1)) if call else 1
        if self.script_override is not None:
            script = self.script_override
        functions = (SLOW_FUNCTIONS if self.slow_skill else FUNCTIONS) if self.add_skill else ""
        text = (
            f"<functions>\n```python\n{functions}```\n</functions>\n<script>\n"
            + "\n".join(script)
            + "\n</script>"
        )
        return Reply(text=text, prompt_tokens=800, completion_tokens=200)
