"""One prompt-reading fake LLM for every shipped benchmark x method
(tests/e2e/test_shipped_configs.py).

It tells its roles apart by the system prompt, as a real model would see them:
- the actor: BabyAI's expert moves (``asi_fakes``), Crafter's scripted policy (``harness``),
  ScienceWorld's prompt-only player (``speedrunner.testing.scienceworld_player``; on task 3,
  which it cannot play, a wrong guess that ends the episode: ``T3_LOOKS``); once the
  knowledge offers the benchmark's skill, the first answer calls it;
- SpeedRunner's inducer (with or without code execution): adds the benchmark's skill, submits;
- ASI's inducer: the skill and the episode rewritten with it;
- OPO's guide writer: a short guide.
"""

from __future__ import annotations

import threading

from speedrunner.benchmarks.babyai.config import BabyAIConfig
from speedrunner.benchmarks.babyai.kinds import kind_for_seed
from speedrunner.core.seeding import episode_seed
from speedrunner.testing.fake_llm_server import Reply
from speedrunner.testing.native import native_reply
from speedrunner.testing.scienceworld_player import CODEBOOK, next_action, parse_goal

from .asi_fakes import FUNCTIONS, ASIFakeLLM
from .harness import GUIDE, policy_reply
from .speedrunner_fakes import INDUCER, tool

ASI_INDUCER = "reusable Python skills"
GUIDE_WRITER = "strategy guide"
CRAFTER_SKILL = '''def do_twice(env) -> str:
    """Interact with what you face, twice.

    Returns:
        The observation text after the second action.
    """
    env.act("Do")
    return env.act("Do")
'''
T3_LOOKS = 3
"""The player has no plan for task 3 (electricity): it looks around this many times, then
commits to a wrong focus, as a model out of its depth guesses; ScienceWorld scores that -100
and ends the episode (instead of 100 calls of "look around" up to the shipped cap)."""
SKILLS = {
    "babyai": ("go_forward_n", FUNCTIONS),
    "crafter": ("do_twice", CRAFTER_SKILL),
    "scienceworld": ("solve_task", CODEBOOK),
}


def babyai_levels(rollouts: int, eval_episodes: int) -> list[tuple[str, int]]:
    kinds = BabyAIConfig(task_set="seq").task_kinds
    seeds = [episode_seed(0, "train", i) for i in range(rollouts)] + [
        episode_seed(0, "eval", i) for i in range(eval_episodes)
    ]
    return [(kind_for_seed(s, kinds), s) for s in seeds]


class ShippedFake:
    """Callback for ``FakeLLMServer``; counts each role's calls."""

    def __init__(self, bench: str, *, levels: list[tuple[str, int]] | None = None) -> None:
        self.bench = bench
        self.skill, self.source = SKILLS[bench]
        self.expert = ASIFakeLLM(levels or []) if bench == "babyai" else None
        self.calls: dict[str, int] = {}
        self._lock = threading.Lock()

    def _count(self, role: str) -> None:
        with self._lock:
            self.calls[role] = self.calls.get(role, 0) + 1

    def __call__(self, body: dict) -> Reply:
        messages = body["messages"]
        system = messages[0]["content"]
        if INDUCER in system:
            self._count("inducer")
            turn = sum(m["role"] == "assistant" for m in messages)
            turns = [tool("add_function", self.source), f"Tool: submit\nadded {self.skill}"]
            text = turns[turn] if turn < len(turns) else "Tool: submit"
            return native_reply(body, Reply(text=text, prompt_tokens=1500, completion_tokens=150))
        if ASI_INDUCER in system:
            self._count("asi")
            if self.expert is not None:
                return self.expert._induce(messages[-1]["content"])
            text = (
                f"<functions>\n```python\n{self.source}```\n</functions>\n"
                f"<script>\n{self.skill}()\n</script>"
            )
            return Reply(text=text, prompt_tokens=800, completion_tokens=200)
        if GUIDE_WRITER in system:
            self._count("guide")
            return Reply(text=GUIDE, prompt_tokens=500, completion_tokens=40)
        self._count("actor")
        return self._act(body)

    def _act(self, body: dict) -> Reply:
        messages = body["messages"]
        if self.expert is not None:
            return self.expert._act(messages)
        first_turn = not any(m["role"] == "assistant" for m in messages)
        if first_turn and f"{self.skill}(" in messages[1]["content"]:
            return Reply(
                text=f"Thought: the skill does it.\nAction: {self.skill}()",
                prompt_tokens=100,
                completion_tokens=12,
            )
        if self.bench == "scienceworld":
            action = next_action(messages)
            if parse_goal(messages[1]["content"]) is None and len(messages) > 2 * T3_LOOKS:
                action = (
                    "focus on agent"  # no plan for it: a guess, which ScienceWorld ends at -100
                )
            return Reply(
                text=f"Thought: next step.\nAction: {action}",
                prompt_tokens=100,
                completion_tokens=12,
            )
        return policy_reply(body)
