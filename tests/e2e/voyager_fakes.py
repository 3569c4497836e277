"""A fake LLM for Voyager on Crafter: each of Voyager's agents answers from its prompt alone.

Nothing depends on call order, so a resumed run that replays some answers from the cache
and asks the rest gets the same answers as an uninterrupted one. The schedule it drives
(``max_task_attempts: 2``, 2 worlds of 4 iterations each, tasks continuing in each world):

===== ==== =================== ======= ===================================================
world iter task                attempt what happens
===== ==== =================== ======= ===================================================
0     0    collect wood (fixed) 1      the skill raises: failure, no critic call
0     1    collect wood         2      a working skill: the achievement decides success
0     2    explore the area     1      curriculum re-asked once; LLM critic re-asked once; fails
0     3    explore the area     2      LLM critic: fails; the task joins ``failed``
1     4    collect wood         1      a new world, no wood: a new version, the old one kept
                                       as collect_woodV2
1     5    explore the area     1      wood held now; calls collect_wood; LLM critic:
                                       success; leaves ``failed``
1     6    make iron sword      1      the achievement is not unlocked: failure, no critic call
1     7    make iron sword      2      the same; the task joins ``failed``
===== ==== =================== ======= ===================================================
"""

from __future__ import annotations

import json
import re

from speedrunner.testing.fake_llm_server import Reply

HELPER = '''from speedrunner.benchmarks.crafter.skill_api import facing, inventory, nearest


def _step_towards(env, dx: int, dy: int) -> str:
    """One step that brings the player closer to the offset (dx, dy)."""
    if abs(dx) >= abs(dy):
        return env.act("Move East" if dx > 0 else "Move West")
    return env.act("Move South" if dy > 0 else "Move North")
'''

COLLECT_WOOD = (
    HELPER
    + '''

def collect_wood(env) -> str:
    """Walk to the nearest tree and hit it until one more piece of wood is held.

    Returns:
        What happened.
    """
    start = inventory(env.state).get("wood", 0)
    for i in range(150):
        if env.done:
            return "the episode ended"
        if inventory(env.state).get("wood", 0) > start:
            return "collected wood"
        if facing(env.state) == "tree":
            env.act("Do")
            continue
        tree = nearest(env.state, "tree")
        if tree is None:
            env.act("Move West" if (i // 8) % 2 == 0 else "Move North")
            continue
        _step_towards(env, tree["dx"], tree["dy"])
    return "no wood collected"
'''
)
COLLECT_WOOD_V2 = COLLECT_WOOD.replace(
    "one more piece of wood is held.", "one more piece of wood is held (Version 2)."
)
BROKEN = '''def collect_wood(env) -> str:
    """Collect wood (a first try that gives up at once).

    Returns:
        Never returns.
    """
    raise ValueError("no tree in reach")
'''
EXPLORE = '''def explore_the_area(env) -> str:
    """Walk a few steps west to see more of the world.

    Returns:
        What happened.
    """
    for _ in range(3):
        env.act("Move West")
    return "explored"
'''
EXPLORE_WITH_WOOD = '''def explore_the_area(env) -> str:
    """Collect wood, then walk a few steps west to see more of the world.

    Returns:
        What happened.
    """
    collect_wood(env)
    for _ in range(3):
        env.act("Move West")
    return "explored after collecting wood"
'''
IRON_SWORD = '''def craft_iron_sword(env) -> str:
    """Collect wood towards an iron sword (not enough for one).

    Returns:
        What happened.
    """
    return collect_wood(env)
'''
DESCRIPTION = (
    "Walks to what the task needs and uses it, step by step, until the inventory shows the result."
)


def code_answer(code: str) -> str:
    return f"Explain: none.\nPlan: 1) find it 2) use it.\nCode:\n```python\n{code}```\n"


def _line(text: str, label: str) -> str:
    m = re.search(rf"^{label}: (.*)$", text, re.MULTILINE)
    return m.group(1) if m else ""


class VoyagerFakeLLM:
    """Callback for ``FakeLLMServer``: Voyager's four agents and the evaluation actor. When the
    request offers the ``submit_skill`` tool (``model.tool_protocol: native``), the action
    agent calls it with the same plan and code instead of writing them as text."""

    def __call__(self, body: dict) -> Reply:
        messages = body["messages"]
        system, user = messages[0]["content"], messages[1]["content"] if len(messages) > 1 else ""
        reasked = any(m["role"] == "assistant" for m in messages)
        if "next immediate task" in system:
            return Reply(
                text=self.curriculum(user, reasked), prompt_tokens=300, completion_tokens=20
            )
        if "writes Python skills for Crafter" in system:
            text = self.action(user)
            if any(
                t.get("function", {}).get("name") == "submit_skill" for t in body.get("tools") or ()
            ):
                code = text.split("```python\n", 1)[1].rsplit("```", 1)[0]
                call = {
                    "name": "submit_skill",
                    "arguments": json.dumps({"plan": _line(text, "Plan"), "code": code}),
                }
                return Reply(text=None, tool_calls=[call], prompt_tokens=900, completion_tokens=200)
            return Reply(text=text, prompt_tokens=900, completion_tokens=200)
        if "assesses my progress" in system:
            return Reply(text=self.critic(user, reasked), prompt_tokens=400, completion_tokens=30)
        if "writes a description" in system:
            return Reply(text=DESCRIPTION, prompt_tokens=200, completion_tokens=25)
        return Reply(
            text=self.actor(messages), prompt_tokens=500, cached_tokens=300, completion_tokens=10
        )

    @staticmethod
    def curriculum(user: str, reasked: bool) -> str:
        completed, failed = (
            _line(user, "Completed tasks so far"),
            _line(user, "Failed tasks that are too hard"),
        )
        held = _line(user, "- inventory")
        if completed == "collect wood" and failed == "none":
            return (
                "Reasoning: explore.\nTask: explore the area"
                if reasked
                else "I think we should look around."
            )
        if completed == "collect wood" and "wood:" not in held:
            return "Reasoning: wood again, better.\nTask: Collect wood."
        if completed == "collect wood":
            return "Reasoning: try again now.\nTask: explore the area"
        return "Reasoning: a big goal.\nTask: make iron sword"

    @staticmethod
    def action(user: str) -> str:
        task, context = _line(user, "Task"), _line(user, "Context")
        library = re.split(
            r"\n(?:Code from the last attempt|This is the first attempt)",
            user.split("Skills in my library", 1)[1],
        )[0]
        if task == "collect wood":
            if "def collect_wood" in library:
                return code_answer(COLLECT_WOOD_V2)
            return code_answer(BROKEN if context.startswith("attempt 1") else COLLECT_WOOD)
        if task == "explore the area":
            return code_answer(EXPLORE_WITH_WOOD if "Version 2" in library else EXPLORE)
        return code_answer(IRON_SWORD)

    @staticmethod
    def critic(user: str, reasked: bool) -> str:
        if "explored after collecting wood" in user:
            return json.dumps({"reasoning": "It saw more.", "success": True, "critique": ""})
        if _line(user, "Context").startswith("attempt 1") and not reasked:
            return "Looks fine to me."
        return json.dumps(
            {
                "reasoning": "Nothing new was found.",
                "success": False,
                "critique": "Collect wood first, then walk further.",
            }
        )

    @staticmethod
    def actor(messages: list[dict]) -> str:
        first = "\n".join(m["content"] for m in messages[:2])
        turns = sum(m["role"] == "assistant" for m in messages)
        if "collect_wood()" in first and turns == 0:
            return "Thought: use my skill.\nAction: collect_wood()"
        return "Thought: wait.\nAction: Noop"


WAIT_FOREVER = '''def collect_wood(env) -> str:
    """Wait for a tree to walk by (it never does).

    Returns:
        What happened.
    """
    for _ in range(1000):
        env.act("Noop")
    return "waited"
'''
THINK_FOREVER = '''def collect_wood(env) -> str:
    """Think about wood without acting (it never ends).

    Returns:
        Never returns.
    """
    n = 0
    while n >= 0:
        n += 1
    return "thought"
'''


class CappedVoyagerFakeLLM(VoyagerFakeLLM):
    """The action agent's first attempt at the fixed first task plays ``Noop`` until the
    per-call action cap stops it, its second computes until the time limit kills it; no
    achievement follows, so no critic or curriculum call is made."""

    @staticmethod
    def action(user: str) -> str:
        return code_answer(
            WAIT_FOREVER if _line(user, "Context").startswith("attempt 1") else THINK_FOREVER
        )
