"""The actor's side of a turn: what the prompt says and how an answer becomes an action.

Parsing is lenient about form (case, whitespace, markdown around ``Action:``, ``<think>``
blocks, JSON, quotes, a trailing period, a unique prefix of a valid action) and strict about
meaning: anything that is not one action — two different actions included — is an invalid
action, answered with feedback that lists the actions and skills; the call still spends budget.
An answer cut at ``max_tokens`` is never completed: a prefix of an action (``pi`` for ``pick
up``), or an action that may be the start of a longer one, is lost and the model is told it
was cut.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field

from speedrunner.core.answers import (
    THINK,
    AnswerForm,
    AnswerReader,
    FormatOutcome,
    Line,
    Repair,
    format_outcome,
    json_objects,
    label_lines,
    label_regex,
    strip_think,
    truncated,
)
from speedrunner.core.llm.conversation import Conversation
from speedrunner.core.llm.types import Message
from speedrunner.core.prompts import load_prompts
from speedrunner.core.runtime.skill_call import SkillCall, looks_like_call, parse_skill_call
from speedrunner.core.trajectory import ActorStep

PROMPTS = load_prompts("speedrunner.core.runtime", "actor_prompts.yaml")
MAX_LISTED_ACTIONS = 40

_ACTION_LINE = label_regex(r"(?:next[ \t]+|final[ \t]+)?action")
_THOUGHT_LINE = label_regex(r"thought|reasoning|think")
_WRAPPERS = "`'\"*<>[]() "
_NEXT_TURN = re.compile(
    r"^[ \t]*(?:>[ \t]*)?(?:#{1,6}[ \t]*)?"
    r"[*_]*(?:observation|obs|user|human|assistant|system)[*_]*[ \t]*:"
    r"|^[ \t]*(?:>[ \t]*)?(?:#{1,6}[ \t]*)?(?:[-*+][ \t]+)?"
    r"[*_]*(?:thought|reasoning|think)[*_]*(?:[ \t]*[:=]|[ \t]+[-\u2013])",
    re.IGNORECASE | re.MULTILINE,
)
"""A line that starts the *next* turn: an observation or a speaker the model invented, or a
new ``Thought:`` after its Action line."""
_CHAT_TOKEN = re.compile(r"<\|(?:im_start|im_end|endoftext|eot_id|end|user|assistant)\|>")
ACTOR_STOP = ("\nObservation:", "<|im_start|>")
"""Stop sequences sent with every actor call where the provider accepts them: the env's own
label (every observation the actor is shown opens with ``Observation:``) and the chat
template's next message. Only words the model never needs inside its own turn: a new
``Thought:`` would also cut a turn with a preamble (``<think>`` ... ``</think>``, a sentence)
before its Action line, so invented ``Thought:``/``Action:`` pairs are cut by the reader
alone (:func:`own_turn`). The reader cuts at these strings too, anywhere, so an answer is
read the same whether the server stopped there or wrote on."""
MAX_SHOWN_REFUSED = 1500
"""Characters of a refused answer shown back to the model (the rest is said to be cut)."""


@dataclass(frozen=True)
class ParsedAnswer:
    """``action`` is the canonical action to execute, or ``None`` with ``error`` saying why."""

    thought: str
    action: str | None
    error: str | None = None
    raw_action: str = ""
    skill_call: SkillCall | None = None
    """Set when the action calls a skill; ``action`` is then the call's canonical text."""
    format: FormatOutcome = "ok"
    """How the answer's *form* was read: ``repaired`` when only the tolerant reading found the
    action, ``lost`` when no one action could be read (an unknown action is not a format loss)."""
    repairs: tuple[str, ...] = field(default=(), compare=False)
    """The names of the repairs reading the answer needed, in order."""


def _normalise(text: str) -> str:
    return " ".join(text.strip().rstrip(".!;").strip(_WRAPPERS).rstrip(".!").split()).lower()


def _clean_value(value: str) -> str:
    """An Action line's value without markdown around it: ``**`go_to('x')`**.`` ->
    ``go_to('x')``."""
    text = value.strip()
    while True:
        before = text
        text = text.strip().strip("*_").strip()
        if len(text) > 1 and text[0] == text[-1] == "`":
            text = text.strip("`").strip()
        if text.endswith((").", ");", ")!")):
            text = text[:-1]
        if text == before:
            return text


def cut_at_stop(text: str) -> tuple[str, bool]:
    """``text`` up to the first of :data:`ACTOR_STOP`, as a server that honours them returns
    it (the stop string left out), and whether anything was cut."""
    at = min((i for i in (text.find(s) for s in ACTOR_STOP) if i >= 0), default=-1)
    return (text, False) if at < 0 else (text[:at], True)


def own_turn(body: str) -> tuple[str, bool]:
    """``body`` up to where the model began inventing the conversation's next turns (an
    ``Observation:``, a speaker, a chat-template token, or a new ``Thought:`` after its
    Action line; a stop sequence of :data:`ACTOR_STOP` wherever it is), and whether anything
    was cut. Small models write the env's answer and
    their next moves themselves; only their own turn is theirs to play."""
    body, cut = cut_at_stop(body)
    token = _CHAT_TOKEN.search(body)
    if token is not None:
        body, cut = body[: token.start()], True
    lines = label_lines(body, _ACTION_LINE, "Action")
    if lines:
        start = lines[0].end
        if not _clean_value(lines[0].value):  # the action is on the next line: skip past it
            value = _next_line(body, start)
            start = body.find(value, start) + len(value) if value else start
        boundary = _NEXT_TURN.search(body, start)
        if boundary is not None:
            body, cut = body[: boundary.start()], True
    return body, cut


def _cut_invented(body: str) -> str | None:
    own, cut = own_turn(body)
    return own if cut else None


INVENTED = Repair("invented next turns cut", _cut_invented)
"""The model's own turn only (:func:`own_turn`)."""


@dataclass(frozen=True)
class _Said:
    """The Action line(s) an answer holds, and the reasoning before them (``None``: the
    text before the first line)."""

    lines: list[Line]
    thought: str | None = None


def _action_lines(body: str) -> _Said | None:
    lines = label_lines(body, _ACTION_LINE, "Action")
    return _Said(lines) if lines else None


def _fenced_action_lines(body: str) -> _Said | None:
    lines = label_lines(body, _ACTION_LINE, "Action", in_fences=True)
    return _Said(lines) if lines else None


def action_reader(
    actions: list[str], skills: dict[str, str] | None
) -> AnswerReader[_Said | ParsedAnswer]:
    """Action lines as asked, else inside a code fence, else JSON, else a bare action (one
    of ``actions``, or a call when there are ``skills``)."""

    def bare(body: str) -> _Said | None:
        stripped = _clean_value(body)
        if stripped and (
            _normalise(stripped) in {_normalise(a) for a in actions}
            or (skills and looks_like_call(stripped))
        ):
            return _Said([Line("action", stripped, 0, 0, True)], "")
        return None

    return AnswerReader(
        (THINK, INVENTED),
        (
            AnswerForm("", _action_lines),
            AnswerForm("answer inside a code fence", _fenced_action_lines),
            AnswerForm("JSON answer", _json_action),
            AnswerForm("", bare),
        ),
    )


def parse_answer(
    text: str,
    actions: list[str],
    *,
    free_text: bool = False,
    skills: dict[str, str] | None = None,
    finish_reason: str | None = None,
    descriptions: dict[str, str] | None = None,
) -> ParsedAnswer:
    """Turn the model's text into one valid action (or an error to show the model).

    ``skills`` maps the public skill names the actor may call to their signatures; an action
    of the form ``name(literal, ...)`` is then a skill call (``core.runtime.skill_call``).
    Accepted forms: the prompt's ``Thought:``/``Action:`` lines with any markdown, case or
    heading around the label, the action on the line after a bare label, prose around them,
    ``<think>`` blocks (ignored), a JSON object with an ``action`` key, a bare action, a
    trailing period. A listed action followed by (or replaced by) its own entry of
    ``descriptions`` is that action, in any case or punctuation: models copy the prompt's
    line. Reading stops where the model starts inventing the next turn (:func:`own_turn`);
    two different actions within its own turn are never chosen between.
    """
    reading = action_reader(actions, skills).read(text)
    body, repairs, said = reading.text, list(reading.repairs), reading.value
    if isinstance(said, ParsedAnswer):
        return said
    if said is None:
        problem = 'no "Action: ..." line found'
        if not _clean_value(body):
            cut = " (it was cut off at max_tokens)" if truncated(finish_reason) else ""
            what = (
                "held only thinking (<think>...</think>), no action"
                if THINK.name in repairs
                else "was empty"
            )
            problem = f"the answer {what}{cut}"
        return ParsedAnswer(
            _thought(body, []), None, problem, format="lost", repairs=tuple(repairs)
        )
    thought = _thought(body, said.lines) if said.thought is None else said.thought
    values = []
    for line in said.lines:
        value = line.value
        if not _clean_value(value):  # "**Action:**" alone: the action is on the next line
            value = _next_line(body, line.end)
            if value:
                repairs.append("action on the line after its label")
        if not line.exact:
            repairs.append("marked-up Action label")
        values.append(value)
    distinct = list(dict.fromkeys(_clean_value(v) for v in values))
    if len(distinct) > 1:
        read = "; ".join(repr(v) for v in distinct)
        return ParsedAnswer(
            thought,
            None,
            f"the answer has {len(distinct)} different Action lines ({read}); "
            "only one action runs per turn: answer with exactly one Action line",
            values[-1],
            format="lost",
            repairs=tuple(repairs),
        )
    if len(values) > 1:
        repairs.append("the same Action line repeated")
    action_text = _clean_value(values[0])
    if action_text != values[0].strip():
        repairs.append("markup or period around the action")
    # Cut at max_tokens with the action as the answer's last words: the action itself may be cut.
    cut_here = truncated(finish_reason) and body.rstrip().endswith(values[0].strip())
    if skills and looks_like_call(action_text):
        call = parse_skill_call(action_text, skills)
        fmt, fixed = format_outcome(None, repairs), tuple(repairs)
        if isinstance(call, str):
            if cut_here:
                return ParsedAnswer(
                    thought,
                    None,
                    f"the answer was cut off inside its action ({action_text!r}); "
                    "a cut action is never run",
                    action_text,
                    format="lost",
                    repairs=fixed,
                )
            return ParsedAnswer(thought, None, call, action_text, format=fmt, repairs=fixed)
        return ParsedAnswer(
            thought, call.text, None, action_text, skill_call=call, format=fmt, repairs=fixed
        )
    parsed = _match_action(
        thought, action_text, actions, free_text, truncated(finish_reason), cut_here, descriptions
    )
    if parsed.error == _EMPTY_LINE or (parsed.error or "").startswith(_CUT):
        return dataclasses.replace(parsed, format="lost", repairs=tuple(repairs))
    if parsed.action is not None and parsed.action != action_text:
        repairs.append(LOOSE_ACTION)
    return dataclasses.replace(parsed, format=format_outcome(None, repairs), repairs=tuple(repairs))


LOOSE_ACTION = "action named loosely"
"""The repair of an action read as a listed one through its case, quotes, punctuation, its
copied description or a unique prefix."""


def _thought(body: str, lines: list[Line]) -> str:
    """The reasoning before the (first) Action line, ``Thought:`` labels taken off."""
    before = body[: lines[0].start] if lines else body
    kept = []
    for line in before.splitlines():
        m = _THOUGHT_LINE.match(line)
        text = (m.group("value") if m else line).strip(" *_#")
        if text and not text.startswith(("```", "~~~")):
            kept.append(text)
    return " ".join(kept)


def _next_line(body: str, end: int) -> str:
    for line in body[end:].splitlines():
        if line.strip() and not line.strip().startswith(("```", "~~~")):
            return line
    return ""


def _json_action(body: str) -> _Said | ParsedAnswer | None:
    """``{"thought": ..., "action": ...}`` (``args`` may list a skill's arguments)."""
    found = []
    for obj in json_objects(body):
        keys = {k.lower(): v for k, v in obj.items()}
        action = keys.get("action", keys.get("next_action"))
        if isinstance(action, str) and action.strip():
            args = keys.get("args", keys.get("arguments"))
            if isinstance(args, list) and "(" not in action:
                action = f"{action.strip()}({', '.join(repr(a) for a in args)})"
            thought = keys.get("thought", keys.get("reasoning", ""))
            found.append(
                (thought if isinstance(thought, str) else "", Line("action", action, 0, 0, False))
            )
    if len(found) > 1 and len({f[1].value for f in found}) > 1:
        read = "; ".join(repr(f[1].value) for f in found)
        return ParsedAnswer(
            "",
            None,
            f"the answer has {len(found)} JSON actions ({read}); only one action runs "
            "per turn: answer with exactly one Action line",
            format="lost",
        )
    if not found:
        return None
    return _Said([found[0][1]], found[0][0] or _thought(body, []))


_EMPTY_LINE = "the Action line was empty"
_CUT = "the answer was cut off"


def _words(text: str) -> list[str]:
    return re.sub(r"[^0-9a-z]+", " ", text.lower()).split()


def _within(part: list[str], whole: list[str]) -> bool:
    return any(whole[i : i + len(part)] == part for i in range(len(whole) - len(part) + 1))


def _by_words(
    raw: str, actions: list[str], descriptions: dict[str, str] | None, *, trailing: bool = False
) -> str | None:
    """The one listed action ``raw`` names once case and punctuation are set aside: the
    action itself (``Turn_Left!``), its own description alone, or the action followed by
    (part of) its description (``Turn left (rotate 90 degrees in place)``, ``Move East: walk
    one cell east ...``); with ``trailing``, also the action followed by words naming no other
    action. ``None`` when no action, or more than one, fits."""
    said = _words(raw)
    if not said:
        return None
    hits = set()
    for action in actions:
        name = _words(action)
        meaning = _words((descriptions or {}).get(action, ""))
        rest = said[len(name) :] if said[: len(name)] == name else None
        if said == name or (meaning and (said == meaning or (rest and _within(rest, meaning)))):
            hits.add(action)
    if len(hits) == 1:
        return hits.pop()
    if hits or not trailing:
        return None
    # The action followed by words of the model's own (its target: "pick up the purple box"),
    # as long as they name no other action ("turn left then go forward" is two actions).
    led = [a for a in actions if _words(a) and said[: len(_words(a))] == _words(a)]
    if not led:
        return None
    action = max(led, key=lambda a: len(_words(a)))
    rest = said[len(_words(action)) :]
    return None if any(_within(_words(a), rest) for a in actions if _words(a)) else action


def _match_action(
    thought: str,
    raw: str,
    actions: list[str],
    free_text: bool,
    cut: bool = False,
    cut_here: bool = False,
    descriptions: dict[str, str] | None = None,
) -> ParsedAnswer:
    """``raw`` as one of ``actions``. ``cut``: the answer hit ``max_tokens``, so a prefix is never
    completed; ``cut_here``: it was cut right after this action, which may be the start of a
    longer one (or, on a free-text benchmark, of any command)."""
    wanted = _normalise(raw)
    if not wanted:
        return ParsedAnswer(thought, None, _EMPTY_LINE, raw)
    by_norm = {_normalise(a): a for a in actions}
    if wanted in by_norm:
        longer = [a for n, a in by_norm.items() if n != wanted and n.startswith(wanted)]
        if cut_here and longer:
            return ParsedAnswer(
                thought,
                None,
                f"{_CUT} right after {raw.strip()!r}, which may be the start of "
                f"{', '.join(longer[:3])}: a cut action is never run",
                raw,
            )
        return ParsedAnswer(thought, by_norm[wanted], None, raw)
    # Words after a whole action are read as its target only when the answer was not cut
    # there (they might start a longer action) and only when commands are not free text.
    named = _by_words(raw, actions, descriptions, trailing=not free_text and not cut)
    if named is not None:
        return ParsedAnswer(thought, named, None, raw)
    if free_text:  # any command may be tried; never complete a partial one into another
        if cut_here:
            return ParsedAnswer(
                thought,
                None,
                f"{_CUT} inside its action ({raw.strip()!r}); a cut action is never run",
                raw,
            )
        return ParsedAnswer(
            thought, " ".join(raw.strip().rstrip(".").strip("`'\"").split()), None, raw
        )
    prefixed = [a for n, a in by_norm.items() if n.startswith(wanted)]
    if cut and prefixed:
        return ParsedAnswer(
            thought,
            None,
            f"{_CUT} inside its action ({raw.strip()!r}, the start of "
            f"{', '.join(prefixed[:3])}); a cut action is never completed",
            raw,
        )
    if len(prefixed) == 1:
        return ParsedAnswer(thought, prefixed[0], None, raw)
    if len(prefixed) > 1:
        return ParsedAnswer(
            thought, None, f"{raw.strip()!r} is ambiguous: it could be {', '.join(prefixed)}", raw
        )
    return ParsedAnswer(thought, None, f"{raw.strip()!r} is not a valid action", raw)


def render_actions(actions: list[str], descriptions: dict[str, str] | None = None) -> str:
    """One line listing the actions (capped), then what they mean when the env says so, one
    line per action, ``- name: meaning``: a model that copies such a line still names one
    action (``parse_answer`` reads ``name: meaning`` as ``name``). The first line stays a
    comma list because scripted and fake models read their choices from it."""
    listed = ", ".join(actions[:MAX_LISTED_ACTIONS])
    if len(actions) > MAX_LISTED_ACTIONS:
        listed += (
            f"\n(and {len(actions) - MAX_LISTED_ACTIONS} more valid commands; "
            "any command may be tried)"
        )
    if descriptions:
        listed += "\n" + "\n".join(f"- {name}: {meaning}" for name, meaning in descriptions.items())
    return listed


def first_user_message(
    instruction: str, actions: str, knowledge: tuple[str, str] | None, observation: str
) -> str:
    """The episode's first message; ``actions`` is already rendered (``render_actions``)."""
    rendered = (
        ""
        if knowledge is None
        else PROMPTS.render("knowledge", title=knowledge[0], text=knowledge[1])
    )
    return PROMPTS.render(
        "first_user",
        knowledge=rendered,
        actions=actions,
        instruction=instruction,
        observation=observation,
    )


def assistant_message(step: ActorStep) -> Message:
    """The actor's turn as the conversation shows it: for an executed turn the *executed*
    action (not the raw text, not the reasoning); for a refused turn what the model wrote
    (its own turn, without invented next turns), so the feedback that follows is about
    words it can see, and nothing it did not write (no made-up ``Thought: -``)."""
    if step.parsed_action is None:
        body, _ = own_turn(strip_think(step.raw_text)[0])
        body = body.strip()
        if len(body) > MAX_SHOWN_REFUSED:
            body = body[:MAX_SHOWN_REFUSED] + " [...]"
        return Message("assistant", body or "(empty answer)")
    if not step.thought:
        return Message("assistant", PROMPTS.render("assistant_action", action=step.parsed_action))
    return Message(
        "assistant", PROMPTS.render("assistant", thought=step.thought, action=step.parsed_action)
    )


def user_message(
    step: ActorStep, observation: str, actions: list[str], skills: dict[str, str] | None = None
) -> Message:
    """What the env said after ``step``, with one line of feedback first when the step was
    refused: why, and the valid actions (and the skills' signatures when there are skills)."""
    feedback = (
        ""
        if step.error is None
        else PROMPTS.render(
            "invalid_action",
            problem=step.error.rstrip("."),
            actions=_valid_choices(actions, skills),
        )
        + "\n"
    )
    return Message("user", PROMPTS.render("next_user", feedback=feedback, observation=observation))


def _valid_choices(actions: list[str], skills: dict[str, str] | None) -> str:
    listed = render_actions(actions)
    if skills:
        listed += "\nor call a skill: " + ", ".join(skills.values())
    return listed


class ActorHistory:
    """The actor's conversation, grown as steps are taken: each turn is rendered once, so a
    call late in a 2,000-step episode costs O(turn) here, not O(history), and the LLM layer
    gets a :class:`Conversation` whose hashes are already folded in.

    Steps must not change once rendered (the episode finishes a step before the next call).
    """

    def __init__(self, first_user: str, skills: dict[str, str] | None = None) -> None:
        self.skills = skills
        self.conversation = Conversation(
            [Message("system", PROMPTS.render("system")), Message("user", first_user)]
        )
        self._rendered = 0  # steps whose assistant and user messages are both in
        self._assistant_in = (
            False  # the next step's assistant message is in, its observation not yet
        )

    def sync(
        self, steps: list[ActorStep], next_observation: str | None, actions: list[str]
    ) -> Conversation:
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
            self.conversation.append(user_message(steps[i], observation, actions, self.skills))
            self._rendered += 1
            self._assistant_in = False
        return self.conversation


def to_messages(
    first_user: str,
    steps: list[ActorStep],
    next_observation: str | None,
    actions: list[str],
    skills: dict[str, str] | None = None,
) -> list[Message]:
    """The whole conversation so far, rendered from scratch; only ever appended to, so its
    prefix stays stable. The episode keeps an :class:`ActorHistory` instead."""
    return list(ActorHistory(first_user, skills).sync(steps, next_observation, actions))
