"""The actor's side of a turn: what the prompt says and how an answer becomes an action.

Parsing is lenient about form (case, whitespace, ``Action:`` variants, quotes, a unique
prefix of a valid action) and strict about meaning: anything that is not one action is
an invalid action, answered with feedback; the call still spends budget.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from speedrunner.core.llm.conversation import Conversation
from speedrunner.core.llm.types import Message, Usage
from speedrunner.core.prompts import load_prompts
from speedrunner.core.runtime.skill_call import SkillCall, looks_like_call, parse_skill_call

PROMPTS = load_prompts("speedrunner.core.runtime", "actor_prompts.yaml")
MAX_LISTED_ACTIONS = 40

_ACTION_LINE = re.compile(r"^\W*(?:next\s+)?action\s*[:=\-]\s*(.*)$", re.IGNORECASE)
_THOUGHT_LINE = re.compile(r"^\W*(?:thought|reasoning|think)\s*[:=\-]\s*(.*)$", re.IGNORECASE)
_WRAPPERS = "`'\"*<>[]() "


@dataclass(frozen=True)
class ParsedAnswer:
    """``action`` is the canonical action to execute, or ``None`` with ``error`` saying why."""

    thought: str
    action: str | None
    error: str | None = None
    raw_action: str = ""
    skill_call: SkillCall | None = None
    """Set when the action calls a skill; ``action`` is then the call's canonical text."""


@dataclass
class ActorStep:
    """One actor turn, as stored in the trajectory and rendered back into the prompt."""

    index: int
    call_id: str
    observation: str
    raw_text: str
    reasoning: str | None
    thought: str
    parsed_action: str | None
    raw_action: str = ""
    executed: list[str] = field(default_factory=list)
    error: str | None = None
    reward: float = 0.0
    usage: Usage = field(default_factory=Usage)
    cost_usd: float | None = None
    latency_s: float = 0.0
    cached: bool = False
    finish_reason: str | None = None
    skill_call: dict[str, Any] | None = None
    """The call tree when the action called a skill (``SkillOutcome.tree``); its primitive
    actions are in ``executed``."""


def _normalise(text: str) -> str:
    return " ".join(text.strip().strip(_WRAPPERS).rstrip(".!").split()).lower()


def parse_answer(text: str, actions: list[str], *, free_text: bool = False,
                 skills: dict[str, str] | None = None) -> ParsedAnswer:
    """Turn the model's text into one valid action (or an error to show the model).

    ``skills`` maps the public skill names the actor may call to their signatures; an action
    of the form ``name(literal, ...)`` is then a skill call (``core.runtime.skill_call``).
    """
    thought_lines, action_text = [], None
    for line in text.splitlines():
        if (m := _ACTION_LINE.match(line)) is not None:
            action_text = m.group(1)
        elif (m := _THOUGHT_LINE.match(line)) is not None:
            thought_lines.append(m.group(1).strip())
        elif action_text is None and line.strip():
            thought_lines.append(line.strip())
    thought = " ".join(thought_lines)
    if action_text is None:
        stripped = text.strip()
        if not stripped:
            return ParsedAnswer(thought, None, "the answer was empty")
        if _normalise(stripped) in {_normalise(a) for a in actions} or (skills and looks_like_call(stripped)):
            action_text = stripped  # a bare action with no "Action:" label
        else:
            return ParsedAnswer(thought, None, 'no "Action: ..." line found')
    if skills and looks_like_call(action_text):
        call = parse_skill_call(action_text, skills)
        if isinstance(call, str):
            return ParsedAnswer(thought, None, call, action_text)
        return ParsedAnswer(thought, call.text, None, action_text, skill_call=call)
    return _match_action(thought, action_text, actions, free_text)


def _match_action(thought: str, raw: str, actions: list[str], free_text: bool) -> ParsedAnswer:
    wanted = _normalise(raw)
    if not wanted:
        return ParsedAnswer(thought, None, "the Action line was empty", raw)
    by_norm = {_normalise(a): a for a in actions}
    if wanted in by_norm:
        return ParsedAnswer(thought, by_norm[wanted], None, raw)
    if free_text:  # any command may be tried; never complete a partial one into another
        return ParsedAnswer(thought, " ".join(raw.strip().strip("`'\"").split()), None, raw)
    prefixed = [a for n, a in by_norm.items() if n.startswith(wanted)]
    if len(prefixed) == 1:
        return ParsedAnswer(thought, prefixed[0], None, raw)
    if len(prefixed) > 1:
        return ParsedAnswer(thought, None, f"{raw.strip()!r} is ambiguous: it could be {', '.join(prefixed)}", raw)
    return ParsedAnswer(thought, None, f"{raw.strip()!r} is not a valid action", raw)


def render_actions(actions: list[str], descriptions: dict[str, str] | None = None) -> str:
    """One line listing the actions (capped), then what they mean when the env says so."""
    listed = ", ".join(actions[:MAX_LISTED_ACTIONS])
    if len(actions) > MAX_LISTED_ACTIONS:
        listed += f"\n(and {len(actions) - MAX_LISTED_ACTIONS} more valid commands; any command may be tried)"
    if descriptions:
        listed += "\n" + "\n".join(f"- {name}: {meaning}" for name, meaning in descriptions.items())
    return listed


def first_user_message(instruction: str, actions: str, knowledge: tuple[str, str] | None,
                       observation: str) -> str:
    """The episode's first message; ``actions`` is already rendered (``render_actions``)."""
    rendered = "" if knowledge is None else PROMPTS.render("knowledge", title=knowledge[0], text=knowledge[1])
    return PROMPTS.render(
        "first_user", knowledge=rendered, actions=actions, instruction=instruction, observation=observation,
    )


def assistant_message(step: ActorStep) -> Message:
    """The actor's turn as the conversation shows it: the *executed* action (not the raw
    text, not the reasoning)."""
    shown = step.parsed_action if step.parsed_action is not None else (step.raw_action or step.raw_text).strip()[:200]
    return Message("assistant", PROMPTS.render("assistant", thought=step.thought or "-", action=shown))


def user_message(step: ActorStep, observation: str, actions: list[str]) -> Message:
    """What the env said after ``step``, with feedback first when the step was invalid."""
    feedback = "" if step.error is None else PROMPTS.render(
        "invalid_action", problem=step.error, actions=render_actions(actions)
    ) + "\n"
    return Message("user", PROMPTS.render("next_user", feedback=feedback, observation=observation))


class ActorHistory:
    """The actor's conversation, grown as steps are taken: each turn is rendered once, so a
    call late in a 2,000-step episode costs O(turn) here, not O(history), and the LLM layer
    gets a :class:`Conversation` whose hashes are already folded in.

    Steps must not change once rendered (the episode finishes a step before the next call).
    """

    def __init__(self, first_user: str) -> None:
        self.conversation = Conversation([Message("system", PROMPTS.render("system")), Message("user", first_user)])
        self._rendered = 0          # steps whose assistant and user messages are both in
        self._assistant_in = False  # the next step's assistant message is in, its observation not yet

    def sync(self, steps: list[ActorStep], next_observation: str | None, actions: list[str]) -> Conversation:
        """Append what ``steps`` (all taken so far) added since the last sync; ``next_observation``
        is what followed the last step (None: not known yet)."""
        while self._rendered < len(steps):
            i = self._rendered
            if not self._assistant_in:
                self.conversation.append(assistant_message(steps[i]))
                self._assistant_in = True
            observation = steps[i + 1].observation if i + 1 < len(steps) else next_observation
            if observation is None:
                break
            self.conversation.append(user_message(steps[i], observation, actions))
            self._rendered += 1
            self._assistant_in = False
        return self.conversation


def to_messages(first_user: str, steps: list[ActorStep], next_observation: str | None,
                actions: list[str]) -> list[Message]:
    """The whole conversation so far, rendered from scratch; only ever appended to, so its
    prefix stays stable. The episode keeps an :class:`ActorHistory` instead."""
    return list(ActorHistory(first_user).sync(steps, next_observation, actions))
