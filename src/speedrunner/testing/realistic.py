"""A fake LLM that answers like a real one: a correct answer, sometimes dressed as real models
dress it.

For each request it reads only what a model reads — the messages (and the tools offered) —
recognises which of the project's prompts it is (the actor, SpeedRunner's inducer, ASI's
inducer, OPO's guide writer, Voyager's curriculum / action / critic / description agents)
and writes a plausible, well-formed answer to it. Then, at the configured ``variants`` rate,
it rewrites that answer the way real models do: markdown around the labels, a ``<think>``
block, prose before and after, a cut at ``max_tokens`` (``finish_reason: length``), JSON
instead of the asked-for text, a label in the wrong case, two calls in one turn, or a
plainly wrong answer. Under native tool calling (``tools`` in the request) the variants are
a call written as text instead, two calls in one turn and arguments that are not JSON.

Everything is seeded by ``seed`` and the request itself, never by call order, so the same
request always gets the same answer: a resumed run sees what the killed one saw. Every reply
is logged with its role, its variant and the clean answer it was written from
(:meth:`RealisticFake.how_served`), so a script can tell from a run's records which turns a
variant cost (``benchmarks/format_robustness.py``, ``testing.format_audit``).

The actor calls an offered skill when one fits the task's next step (``skill_choice``), else
plays its policy (``actor``: e.g. ``expert.ExpertActor``; none: a listed action at random). The
SpeedRunner inducer writes skills that do a benchmark's steps where it knows them (``fake_skills``).

Serve it with ``speedrunner fake-llm --port 8000 [--variants 0.3] [--seed N] [--policy expert]``
and point a config at it (``model.provider=vllm``, ``model.base_url=http://127.0.0.1:8000/v1``).
"""

from __future__ import annotations

import collections
import hashlib
import json
import random
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from speedrunner.core.llm.provider import split_think
from speedrunner.core.llm.provider_scripted import listed_actions
from speedrunner.methods.wake_sleep.speedrunner_native import native_arguments
from speedrunner.methods.wake_sleep.speedrunner_tools import TOOLS, parse_tool_call
from speedrunner.testing.fake_llm_server import FakeLLMServer, Reply
from speedrunner.testing.fake_skills import skills_for
from speedrunner.testing.native import native_reply, offered_tools
from speedrunner.testing.prompt_reading import primitive_actions
from speedrunner.testing.skill_choice import choose_skill_call

__all__ = [
    "FORMAT_VARIANTS",
    "POLICIES",
    "TEXT_VARIANTS",
    "RealisticFake",
    "Served",
    "answer_key",
    "one_answer",
    "reply_key",
    "serve",
]

TEXT_VARIANTS = (
    "markdown",
    "think",
    "prose",
    "truncated",
    "json",
    "wrong_case",
    "two_calls",
    "wrong",
)
"""The text variants, drawn uniformly when a request is chosen for one."""
NATIVE_VARIANTS = ("as_text", "two_calls", "bad_arguments", "think")
"""The variants of a native tool call."""
FORMAT_VARIANTS = frozenset(TEXT_VARIANTS + NATIVE_VARIANTS) - {"wrong"}
"""The variants that change an answer's form, not its meaning ("wrong" changes its meaning)."""
_REPEATING = frozenset({"guide", "asi", "curriculum", "voyager_action", "critic", "description"})
"""Roles whose "two calls" variant writes the same answer twice (one meaning); the actor's
second action and the inducer's second tool call differ from the first."""


def one_answer(role: str, variant: str) -> bool | None:
    """Whether an answer served as ``variant`` still carries exactly one answer (True: markdown,
    ``<think>``, prose, JSON, a label's case, a native call written as text, the same answer
    twice), or cannot be read without feedback (False: cut at ``max_tokens``, two different
    actions or calls, arguments that are not JSON); None when it is no format variant (clean,
    or a plainly wrong answer)."""
    if variant not in FORMAT_VARIANTS:
        return None
    if variant == "two_calls":
        return role in _REPEATING
    return variant not in ("truncated", "bad_arguments")


@dataclass(frozen=True)
class Served:
    """How one reply was written: for which prompt, as which variant, from which clean answer."""

    role: str
    variant: str
    clean: str


_LABEL = re.compile(r"^(Thought|Action|Tool|Task|Reasoning|Explain|Plan|Code):", re.MULTILINE)
_SUMMARY_ACTION = re.compile(r"^\s+action: (.+?)(?:  -> .*)?$", re.MULTILINE)
_BATCH = re.compile(r"Sleep phase after batch (\d+)")


@dataclass
class RealisticFake:
    """Callback for :class:`FakeLLMServer`: ``RealisticFake(variants=0.3, seed=0)``."""

    variants: float = 0.3
    """Fraction of answers rewritten into one real-model variant (0: always the clean answer)."""
    seed: int = 0
    role_variants: dict[str, float] = field(default_factory=dict)
    """Per-role rates that replace ``variants`` (e.g. ``{"guide": 1.0}``: every guide answer is a
    variant), so a short run meets enough variants of its rarer prompts."""
    actor: Callable[[list[tuple[str, str]]], str | None] | None = None
    """A policy for the actor's clean answers (messages -> answer, None: the fake's own, a
    listed action at random), e.g. ``testing.babyai_expert.BabyAIExpert``, which wins levels
    so that ASI has successful episodes to induce from; its answers get variants as any. A
    fitting offered skill is called before it is asked."""
    counts: collections.Counter[str] = field(default_factory=collections.Counter)
    """Answers given, per ``role/variant`` (``actor/clean``, ``inducer/markdown``, ...)."""
    log: dict[str, list[Served]] = field(default_factory=dict)
    """How each reply was served (key: :func:`reply_key`)."""
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def __post_init__(self) -> None:
        for rate in (self.variants, *self.role_variants.values()):
            if not 0.0 <= rate <= 1.0:
                raise ValueError(f"variants is a rate between 0 and 1, got {rate}")

    def __call__(self, body: dict[str, Any]) -> Reply:
        messages = _messages(body)
        rng = random.Random(_digest(self.seed, body))
        role, text = _answer(messages, rng, self.actor)
        max_tokens = int(
            body.get("max_tokens")
            or body.get("max_completion_tokens")
            or (body.get("generationConfig") or {}).get("maxOutputTokens")
            or 4096
        )
        variant = "clean"
        native = bool(offered_tools(body)) and role in ("inducer", "voyager_action")
        if rng.random() < self.role_variants.get(role, self.variants):
            variant = rng.choice(NATIVE_VARIANTS if native else TEXT_VARIANTS)
        reply = (
            _native(body, text, variant, rng, role)
            if native
            else _dress(text, role, variant, rng, max_tokens)
        )
        prompt_chars = sum(len(c) for _, c in messages) + len(json.dumps(body.get("tools") or []))
        reply.prompt_tokens = max(1, prompt_chars // 4)
        if reply.finish_reason != "length":
            reply.completion_tokens = max(
                1, len(reply.text or "") // 4 + 10 * len(reply.tool_calls or ())
            )
        with self._lock:
            self.counts[f"{role}/{variant}"] += 1
            self.log.setdefault(reply_key(reply.text, reply.tool_calls), []).append(
                Served(role, variant, text)
            )
        return reply

    def how_served(
        self, text: str | None, tool_calls: list[dict[str, Any]] | None = None
    ) -> list[Served]:
        """How the reply a run recorded (its text, its native calls) was served; [] when this
        fake never served it."""
        return self.log.get(reply_key(text, tool_calls), [])


def answer_key(text: str) -> str:
    """An answer as a run records it: ``<think>`` blocks moved out (the providers do), stripped."""
    return split_think(text)[0].strip()


def reply_key(text: str | None, tool_calls: Any = None) -> str:
    """A reply as a run records it: :func:`answer_key` of its text and its native calls' names
    and arguments (the ids are the provider's)."""
    calls = [(c.get("name"), c.get("arguments")) for c in tool_calls or ()]
    return json.dumps([answer_key(text or ""), calls])


# -- reading the request ---------------------------------------------------------------------------
def _messages(body: dict[str, Any]) -> list[tuple[str, str]]:
    """(role, text) of every message, from a chat-completions or a Gemini body."""
    if "messages" in body:
        return [(m.get("role", ""), m.get("content") or "") for m in body["messages"]]
    out = []
    system = body.get("systemInstruction") or body.get("system_instruction")
    if system:
        out.append(("system", "".join(p.get("text", "") for p in system.get("parts", []))))
    for c in body.get("contents") or ():
        text = "".join(
            p.get("text", "") or json.dumps(p.get("functionResponse", ""))
            for p in c.get("parts", [])
        )
        out.append(("assistant" if c.get("role") == "model" else "user", text))
    return out


def _digest(seed: int, body: dict[str, Any]) -> int:
    what = {k: body.get(k) for k in ("messages", "contents", "systemInstruction", "tools")}
    blob = json.dumps([seed, what], sort_keys=True, default=str).encode()
    return int.from_bytes(hashlib.sha256(blob).digest()[:8], "big")


# -- the clean answers -----------------------------------------------------------------------------
def _answer(
    messages: list[tuple[str, str]],
    rng: random.Random,
    actor: Callable[[list[tuple[str, str]]], str | None] | None = None,
) -> tuple[str, str]:
    """(role, clean answer) for the prompt these messages are."""
    system = next((c for r, c in messages if r == "system"), "")
    first = next((c for r, c in messages if r == "user"), "")
    last = messages[-1][1] if messages else ""
    turn = sum(r == "assistant" for r, _ in messages)
    if "You maintain a codebook" in system:
        accepted = any(r in ("user", "tool") and "Accepted." in c for r, c in messages[2:])
        return "inducer", _inducer(first, last, turn, rng, accepted)
    for marker, role, answer in _ROLES:
        if marker in system:
            return role, answer(first, last, turn, rng)
    call = choose_skill_call(
        messages
    )  # a skill that fits the next step, as competent models call one
    if call is not None:
        name = call.split("(")[0]
        return "actor", f"Thought: the skill {name} does the next step of the task.\nAction: {call}"
    return "actor", (actor(messages) if actor is not None else None) or _actor(messages, rng)


def _actor(messages: list[tuple[str, str]], rng: random.Random) -> str:
    actions = listed_actions([content for _, content in messages])
    action = rng.choice(actions) if actions else "look around"
    return f"Thought: {action} looks useful from here.\nAction: {action}"


def _skill(name: str, primitive: str) -> str:
    return skills_for("", name, primitive)[0]


def _primitive(prompt: str) -> str:
    listed = primitive_actions(prompt)
    return listed[0] if listed else "look around"


def _inducer(first: str, last: str, turn: int, rng: random.Random, accepted: bool) -> str:
    """Look at the draft; add the benchmark's useful skills when the draft lacks them (again,
    until accepted; elsewhere one small skill per batch); submit."""
    batch = _BATCH.search(first)
    generic = f"repeat_first_action_b{batch.group(1) if batch else 0}"
    source, names = skills_for(first, generic, _primitive(first))
    if turn == 0:
        return "Let me look at the draft first.\nTool: view_codebook"
    if turn == 1 and all(re.search(rf"^def {n}\(", last, re.MULTILINE) for n in names):
        return "Tool: submit\nthe skills the tasks need are already there"
    if not accepted and turn < 6:
        return (
            f"Skills for the task's steps save calls.\nTool: add_function\n```python\n{source}```"
        )
    return (
        f"Tool: submit\nadded {', '.join(names)}"
        if accepted
        else "Tool: submit\nno change this time"
    )


def _asi(first: str, last: str, turn: int, rng: random.Random) -> str:
    name = "repeat_first_action_" + hashlib.sha256(last.encode()).hexdigest()[:6]
    script = [a for a in _SUMMARY_ACTION.findall(last) if not a.startswith("INVALID")] or [
        _primitive(last)
    ]
    return (
        f"<functions>\n```python\n{_skill(name, _primitive(last))}```\n</functions>\n"
        f"<script>\n" + "\n".join(script) + "\n</script>"
    )


def _guide(first: str, last: str, turn: int, rng: random.Random) -> str:
    return (
        "<guide>\n- Read the task and name the objects it needs.\n- Act on what the observation "
        "shows; when an action changes nothing, try another.\n- Finish the goal directly once it "
        "is in reach.\n</guide>"
    )


def _curriculum(first: str, last: str, turn: int, rng: random.Random) -> str:
    task = rng.choice(
        ["collect wood", "collect sapling", "place table", "eat cow", "explore the area"]
    )  # the last: the LLM critic judges
    return f"Reasoning: it is doable from the start.\nTask: {task}"


def _voyager_action(first: str, last: str, turn: int, rng: random.Random) -> str:
    task = re.search(r"^Task: (.+)$", first, re.MULTILINE)
    name = (
        re.sub(r"\W+", "_", (task.group(1) if task else "explore").strip().lower()).strip("_")
        or "explore"
    )
    code = (
        f'def {name}(env) -> str:\n    """Walk west and act on what is in front, a few times.\n\n'
        f'    Returns:\n        What happened.\n    """\n    for _ in range(5):\n'
        f'        if env.done:\n            return "the episode ended"\n'
        f'        env.act("Move West")\n        env.act("Do")\n    return "walked and acted"\n'
    )
    return f"Explain: none.\nPlan: 1) walk 2) act on what is in front.\nCode:\n```python\n{code}```"


def _critic(first: str, last: str, turn: int, rng: random.Random) -> str:
    success = rng.random() < 0.5
    return json.dumps(
        {
            "reasoning": "The inventory shows what changed.",
            "success": success,
            "critique": "" if success else "Walk to the resource first, then use Do.",
        }
    )


def _description(first: str, last: str, turn: int, rng: random.Random) -> str:
    return "Walks in one direction and acts on what it faces, a few times, until the episode ends."


_Answer = Callable[[str, str, int, random.Random], str]
_ROLES: tuple[tuple[str, str, _Answer], ...] = (
    ("reusable Python skills", "asi", _asi),
    ("strategy guide", "guide", _guide),
    ("next immediate task", "curriculum", _curriculum),
    ("writes Python skills for Crafter", "voyager_action", _voyager_action),
    ("assesses my progress", "critic", _critic),
    ("writes a description", "description", _description),
)


# -- the variants ----------------------------------------------------------------------------------
def _dress(text: str, role: str, variant: str, rng: random.Random, max_tokens: int) -> Reply:
    if variant == "clean":
        return Reply(text=text)
    if variant == "markdown":
        style = rng.choice(["**{}:**", "### {}:", "*{}*:"])
        return Reply(text=_LABEL.sub(lambda m: style.format(m.group(1)), text))
    if variant == "think":
        return Reply(
            text="<think>\nThe user wants the answer in a fixed format. Let me work it out.\n"
            f"</think>\n\n{text}"
        )
    if variant == "prose":
        return Reply(
            text=f"Sure! Here is my answer.\n\n{text}\n\nLet me know if you need anything else."
        )
    if variant == "truncated":
        cut = max(1, int(len(text) * rng.uniform(0.3, 0.8)))
        return Reply(text=text[:cut], finish_reason="length", completion_tokens=max_tokens)
    if variant == "json":
        return Reply(text=_as_json(text, role, rng))
    if variant == "wrong_case":
        case = rng.choice([str.lower, str.upper])
        return Reply(text=_LABEL.sub(lambda m: case(m.group(1)) + ":", text))
    if variant == "two_calls":
        return Reply(text=_two_calls(text, role))
    return Reply(text=_wrong(role))


def _as_json(text: str, role: str, rng: random.Random) -> str:
    """The answer as JSON, as models write it when they prefer JSON: the asked-for fields, or
    (half the time, for the prompts that ask for text) the whole text answer under ``answer``,
    bare or in a ```` ```json ```` fence."""
    fields = {
        m.group(1).lower(): m.group(2).strip()
        for m in re.finditer(r"^(\w+):[ \t]*(.*)$", text, re.MULTILINE)
    }
    code = re.search(r"```python\n(.*?)```", text, re.DOTALL)
    if role == "inducer":
        call = parse_tool_call(text, set(TOOLS))
        return json.dumps({"tool": call.tool, **native_arguments(call)})
    if role == "actor":
        return json.dumps(
            {"thought": fields.get("thought", ""), "action": fields.get("action", "")}
        )
    if role == "critic":
        return f"```json\n{text}\n```"
    own: dict[str, Any] | None = None
    if role == "guide":
        own = {"guide": re.sub(r"</?guide>", "", text).strip()}
    elif role == "asi":
        script = re.search(r"<script>\n(.*?)</script>", text, re.DOTALL)
        own = {
            "functions": code.group(1) if code else "",
            "script": script.group(1).split("\n")[:-1] if script else [],
        }
    elif role == "curriculum":
        own = {"reasoning": fields.get("reasoning", ""), "task": fields.get("task", "")}
    elif role == "voyager_action":
        own = {
            "explain": fields.get("explain", ""),
            "plan": fields.get("plan", ""),
            "code": code.group(1) if code else "",
        }
    if own is None or rng.random() < 0.5:
        own = {"answer": text}
    written = json.dumps(own, indent=rng.choice([None, 2]))
    return f"```json\n{written}\n```" if rng.random() < 0.5 else written


def _two_calls(text: str, role: str) -> str:
    if role == "actor":
        return f"{text}\nAction: {text.rsplit('Action:', 1)[-1].strip()} again"
    if role == "inducer":
        return f"{text}\nTool: view_codebook"
    return f"{text}\n\n{text}"


def _wrong(role: str) -> str:
    return {
        "actor": "Thought: I will fly.\nAction: fly to the moon",
        "inducer": "Tool: rewrite_everything\n```python\nprint('hello')\n```",
        "critic": "The task went fine, I think.",
    }.get(role, "I am not able to help with that request.")


def _native(body: dict[str, Any], text: str, variant: str, rng: random.Random, role: str) -> Reply:
    """A native-tool turn: the clean call as ``tool_calls``, or one of its variants."""
    if variant == "as_text":
        return Reply(text=text)  # the call written as text: the text protocol reads it
    reply = (
        _voyager_call(body, text)
        if role == "voyager_action"
        else native_reply(body, Reply(text=text))
    )
    calls = list(reply.tool_calls or ())
    if not calls:
        return reply
    if variant == "two_calls":
        calls.append(
            {"name": "view_codebook", "arguments": "{}"} if role == "inducer" else dict(calls[0])
        )
    elif variant == "bad_arguments":
        calls[0] = {**calls[0], "arguments": str(calls[0]["arguments"])[:-1]}
    elif variant == "think":
        reply.text = "<think>Which tool next? The draft first.</think>" + (reply.text or "")
    reply.tool_calls = [
        {**c, "id": f"call_{i}_{rng.randrange(10**6)}"} for i, c in enumerate(calls)
    ]
    return reply


def _voyager_call(body: dict[str, Any], text: str) -> Reply:
    """The action agent's answer as a ``submit_skill`` call (when the request offers it)."""
    code = re.search(r"```python\n(.*?)```", text, re.DOTALL)
    plan = re.search(r"^Plan:[ \t]*(.*)$", text, re.MULTILINE)
    if "submit_skill" not in offered_tools(body) or code is None:
        return Reply(text=text)
    arguments = json.dumps({"plan": plan.group(1) if plan else "", "code": code.group(1)})
    return Reply(text=None, tool_calls=[{"name": "submit_skill", "arguments": arguments}])


POLICIES = {"random": "fake-realistic", "expert": "fake-expert"}
"""Actor policies of the served fake -> the model name it serves by default: ``random`` (a
listed action at random), ``expert`` (``testing.expert.ExpertActor``: BabyAI's bot,
ScienceWorld's task-4 player). Under either, a fitting offered skill is called first."""


def serve(
    port: int,
    *,
    variants: float = 0.3,
    seed: int = 0,
    model_name: str | None = None,
    policy: str = "random",
) -> FakeLLMServer:
    """Start the realistic fake on 127.0.0.1:``port`` (0: any free port); the caller stops it."""
    if policy not in POLICIES:
        raise ValueError(f"policy is one of {', '.join(POLICIES)}, got {policy!r}")
    actor = None
    if policy == "expert":
        from speedrunner.testing.expert import ExpertActor

        actor = ExpertActor()
    fake = RealisticFake(variants=variants, seed=seed, actor=actor)
    return FakeLLMServer(
        callback=fake, model_name=model_name or POLICIES[policy], port=port
    ).start()
