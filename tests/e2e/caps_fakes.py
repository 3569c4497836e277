"""Fakes for the caps checks: a hand-written codebook installed through SpeedRunner's real
inducer protocol (one ``add_function`` per function, callees first, then ``submit``), and an
actor that answers one high-level skill call per turn once the codebook offers it.

Both read only what a model reads: the inducer its conversation (is the skill already in the
codebook it was shown; how many answers it has given), the actor its first message (is the
skill listed) and, for BabyAI, the mission in it.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from speedrunner.testing.fake_llm_server import Reply

CODEBOOKS = Path(__file__).resolve().parents[1] / "fixtures" / "codebooks"
INDUCER = "You maintain a codebook"


def add_function_blocks(source: str) -> list[str]:
    """The module as ``add_function`` blocks: imports and constants travel with the first
    function, every later block is one function, in file order (callees before callers)."""
    tree = ast.parse(source)
    lines = source.splitlines(keepends=True)
    body = tree.body[1:] if isinstance(tree.body[0], ast.Expr) else tree.body
    starts = [n.lineno for n in body if isinstance(n, ast.FunctionDef)]
    first = body[0].lineno
    bounds = [first, *starts[1:], len(lines) + 1]
    return [
        "".join(lines[a - 1 : b - 1]).strip() + "\n"
        for a, b in zip(bounds, bounds[1:], strict=False)
    ]


class InstallingInducer:
    """Installs ``source`` in the first sleep phase; later phases submit unchanged."""

    def __init__(self, source: str, skill: str) -> None:
        self.blocks = add_function_blocks(source)
        self.skill = skill

    def answer(self, messages: list[dict]) -> Reply:
        turn = sum(m["role"] == "assistant" for m in messages)
        installed = f"def {self.skill}(" in messages[1]["content"]
        if installed or turn >= len(self.blocks):
            return Reply(
                text="The codebook is ready.\nTool: submit\nInstalled the hand-written skills.",
                prompt_tokens=2000,
                completion_tokens=20,
            )
        return Reply(
            text=f"Adding the next function of the library.\nTool: add_function\n```python\n"
            f"{self.blocks[turn]}```",
            prompt_tokens=2000,
            completion_tokens=400,
        )


class OneCallActor:
    """``call(first_message)`` is the skill call to make, or ``None`` when it is not offered."""

    def __init__(self, inducer: InstallingInducer, call, primitive: str) -> None:
        self.inducer, self.call, self.primitive = inducer, call, primitive
        self.actor_calls = 0

    def __call__(self, body: dict) -> Reply:
        messages = body["messages"]
        if INDUCER in messages[0]["content"]:
            return self.inducer.answer(messages)
        self.actor_calls += 1
        first = messages[1]["content"]
        action = self.call(first) if f"{self.inducer.skill}(" in first else None
        thought = "The library plays this for me." if action else "No skill for this yet."
        return Reply(
            text=f"<think>Look at the skills first.</think>\nThought: {thought}\n"
            f"Action: {action or self.primitive}",
            prompt_tokens=1500,
            completion_tokens=30,
        )


def crafter_fake() -> OneCallActor:
    inducer = InstallingInducer((CODEBOOKS / "crafter_keep_playing.py").read_text(), "keep_playing")
    return OneCallActor(inducer, lambda first: "keep_playing()", "Noop")


_MISSIONS = [
    re.compile(r"pick up (?:the|a) (\w+ \w+), then go to (?:the|a) (\w+ \w+)"),
    re.compile(r"go to (?:the|a) (\w+ \w+) after you pick up (?:the|a) (\w+ \w+)"),
]


def babyai_call(first: str) -> str | None:
    """``pick_up_then_go_to("<first>", "<second>")`` from the mission in the first message."""
    for i, pattern in enumerate(_MISSIONS):
        m = pattern.search(first)
        if m:
            a, b = (m.group(1), m.group(2)) if i == 0 else (m.group(2), m.group(1))
            return f'pick_up_then_go_to("{a}", "{b}")'
    return None


def babyai_fake() -> OneCallActor:
    inducer = InstallingInducer(
        (CODEBOOKS / "babyai_pick_up_then_go_to.py").read_text(), "pick_up_then_go_to"
    )
    return OneCallActor(inducer, babyai_call, "turn left")
