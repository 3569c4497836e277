"""Which offered skill a competent actor would call next, read from the actor's conversation.

The instruction is split into its steps ("go to the blue key after you pick up the grey
key": pick up the grey key, then go to the blue key); the first step the observation does
not show done is matched to an offered skill by the verb its name (else its docstring's
first line) carries, and the step's objects become the call's literal arguments
(``pick_up_object("grey key")``). A skill without parameters fits when its docstring
describes the instruction itself (most of the docstring's words are the instruction's). A
call already made in the episode is not made again: a competent model whose skill did not
finish a step goes on by hand. Only the request is read, as a model reads it.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from speedrunner.testing.prompt_reading import OfferedSkill, offered_skills

__all__ = ["Step", "choose_skill_call", "instruction_of", "steps_of"]

_OBJECT = r"(?:the |a |an )?(?P<{}>[a-z]+(?: [a-z]+)?)"
_CLAUSES = (
    (
        "put next to",
        re.compile(r"^put " + _OBJECT.format("a") + r" next to " + _OBJECT.format("b") + "$"),
    ),
    ("pick up", re.compile(r"^pick up " + _OBJECT.format("a") + "$")),
    ("go to", re.compile(r"^go to " + _OBJECT.format("a") + "$")),
    ("open", re.compile(r"^open " + _OBJECT.format("a") + "$")),
)
_VERB_WORDS = {"put next to": ("put",), "pick up": ("pick",), "go to": ("go",), "open": ("open",)}
_ACTION = re.compile(r"^Action:[ \t]*(.+?)[ \t]*$", re.MULTILINE)
_STOP = frozenset(
    {
        "a",
        "an",
        "the",
        "to",
        "of",
        "in",
        "on",
        "at",
        "it",
        "is",
        "and",
        "or",
        "then",
        "first",
        "your",
        "you",
        "this",
        "that",
        "with",
        "for",
        "by",
        "be",
        "args",
        "returns",
        "str",
    }
)


@dataclass(frozen=True)
class Step:
    """One step of an instruction: its verb (``"pick up"``) and the objects it names."""

    verb: str
    objects: tuple[str, ...]


def instruction_of(messages: list[tuple[str, str]]) -> str:
    """The episode's instruction: the paragraph before the first ``Observation:`` of the
    first user message (the actor prompt puts it there)."""
    first = next((c for r, c in messages if r == "user"), "")
    head = first.split("\n\nObservation:", 1)[0]
    return head.rsplit("\n\n", 1)[-1].strip()


def steps_of(instruction: str) -> list[Step]:
    """The instruction's steps in the order they must be done; [] when it is not a sequence
    of known verbs."""
    text = re.sub(r"^your goal is to ", "", instruction.strip().lower()).rstrip(".")
    if " after you " in text:
        later, earlier = text.split(" after you ", 1)
        parts = [earlier, later]
    else:
        parts = re.split(r",? then |, and | and ", text)
    steps = []
    for part in parts:
        step = _clause(part.strip())
        if step is None:
            return []
        steps.append(step)
    return steps


def _clause(text: str) -> Step | None:
    for verb, pattern in _CLAUSES:
        m = pattern.match(text)
        if m is not None:
            return Step(verb, tuple(v for v in m.groups() if v))
    return None


def _done(step: Step, observation: str) -> bool:
    """Whether the observation shows the step done (only a carried object shows it)."""
    carried = re.search(r"^you carry an? ([a-z ]+)$", observation.lower(), re.MULTILINE)
    return (
        step.verb == "pick up"
        and carried is not None
        and set(step.objects[0].split()) <= set(carried.group(1).split())
    )


def _words(text: str) -> set[str]:
    return {w for w in re.findall(r"[a-z]+", text.lower()) if w not in _STOP}


def _fits(skill: OfferedSkill, step: Step) -> int:
    """How well ``skill`` does ``step``: 2 its name says the verb, 1 its docstring's first
    line does, 0 not at all (or it takes another number of arguments)."""
    if len(skill.params) != len(step.objects):
        return 0
    verb = _VERB_WORDS[step.verb]
    if all(w in skill.name.lower().split("_") for w in verb):
        other = {"go", "pick", "put", "open"} - set(verb)
        return 0 if other & set(skill.name.lower().split("_")) else 2
    summary = skill.doc.split("\n", 1)[0].lower()
    return 1 if all(re.search(rf"\b{w}\b", summary) for w in verb) else 0


def _whole_task(skill: OfferedSkill, instruction: str) -> bool:
    """A skill without parameters fits when most of its summary's words are the instruction's."""
    if skill.params:
        return False
    summary = _words(skill.doc.split("\n\n", 1)[0])
    return len(summary) >= 3 and len(summary & _words(instruction)) >= 0.5 * len(summary)


def _call(skill: OfferedSkill, objects: tuple[str, ...]) -> str:
    return f"{skill.name}({', '.join(json.dumps(o) for o in objects)})"


def choose_skill_call(messages: list[tuple[str, str]]) -> str | None:
    """The call expression (``go_to("blue key")``) a competent actor would answer next, or
    None when no offered skill fits the next step (or it was already called this episode)."""
    contents = [c for _, c in messages]
    users = [c for r, c in messages if r == "user"]
    # the skills section opens the episode; a refused turn's feedback lists them again
    skills = offered_skills("\n".join(users[:1] + users[-1:] if len(users) > 1 else users))
    if not skills:
        return None
    made = {
        m.group(1).strip() for r, c in messages if r == "assistant" for m in _ACTION.finditer(c)
    }
    instruction = instruction_of(messages)
    observation = contents[-1].rsplit("Observation:\n", 1)[-1]
    candidates: list[str] = []
    steps = steps_of(instruction)
    step = next((s for s in steps if not _done(s, observation)), None)
    if step is not None:
        ranked = sorted(
            (s for s in skills if _fits(s, step)), key=lambda s: (-_fits(s, step), s.name)
        )
        candidates += [_call(s, step.objects) for s in ranked]
    candidates += [_call(s, ()) for s in skills if _whole_task(s, instruction)]
    return next((c for c in candidates if c not in made), None)
