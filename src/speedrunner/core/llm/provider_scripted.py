"""A deterministic, offline "model" for tests and the offline demo. No network, no key.

Two modes:

* **Built-in policy** (``model.script`` null). If any message has a line
  ``Available actions: a, b, c`` (the actor prompt's primitive-action list; the last such
  line wins), the answer is ``"Thought: ...\\nAction: <one of them>"``, the action chosen by
  sha256 of the messages plus ``call_id`` — the same call always gets the same action, in
  any process. Without such a line the answer is a fixed, clearly labelled placeholder:
  for ``guide`` calls a short, plausible strategy guide; for other purposes one line
  saying the scripted model writes no text of its own.
* **Script file** (``model.script`` = path to a YAML/JSON file). The answer depends only
  on the request's ``purpose`` and ``call_id`` — never on call order, threads or what this
  process has seen — so parallel runs and ``--resume`` (finished episodes are loaded from
  disk, not re-asked) get exactly the same answers. The file holds one of:

  - a **list** of response strings: the same list for every purpose;
  - a **mapping** whose entries are either ``purpose -> list of strings`` or
    ``exact call_id -> string``; both kinds may be mixed in one file.

  Lookup: an exact ``call_id`` entry wins. Otherwise the purpose's list (or the plain list)
  is indexed by the call id's trailing number — ``train/0012/actor/0003`` gets item 3,
  ``sleep/0004/guide/0000`` item 0 — so each episode and each sleep phase starts the list
  again and a script reads as "what the model says at turn k". A call id without a trailing
  number gets item 0. Past the end of a list the last item is repeated. A purpose with
  neither a list nor an exact entry raises ``LLMError`` naming what to add.

Token counts are approximate (characters / 4), so reports and plots have something to show;
every Completion from here is marked ``scripted=True`` and costs 0.0.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import get_args

import yaml

from speedrunner.core.config.schema import ModelConfig
from speedrunner.core.llm.provider import Provider, ProviderRequest, ProviderResult
from speedrunner.core.llm.types import Message, Purpose, Usage
from speedrunner.errors import ConfigError, LLMError, MissingFileError

__all__ = ["ScriptedProvider", "choose_action", "listed_actions", "pick_action"]

_ACTIONS_LABEL = "Available actions:"
_ACTIONS_LINE = re.compile(rf"^\s*{_ACTIONS_LABEL}\s*(.+?)\s*$", re.MULTILINE)
FALLBACK_TEXT = (
    "[SCRIPTED placeholder answer: the scripted model writes no text of its own, "
    "it only picks listed actions]"
)
PLACEHOLDERS: dict[str, str] = {
    # Plausible, benchmark-neutral and labelled: a reader of guide/gen_<g>.md must never take
    # it for an LLM's guide, nor for an error.
    "guide": (
        "<guide>[Placeholder guide written by the SCRIPTED model, not an LLM.]\n"
        "- Read the task first and name the objects it asks for.\n"
        "- Act on what the observation shows; do not assume what it does not say.\n"
        "- When an action changes nothing, try another one instead of repeating it.\n"
        "- Stop exploring once the goal is in reach, and finish it directly.</guide>"
    ),
}


def pick_action(messages: list[Message], call_id: str) -> str | None:
    """The built-in policy's action, or None when the prompt lists no actions."""
    return choose_action([(m.role, m.content) for m in messages], call_id)


def choose_action(turns: list[tuple[str, str]], call_id: str) -> str | None:
    """:func:`pick_action` over ``(role, content)`` pairs: what a fake server reads from a
    request body, without building a ``Message`` per turn of a long history."""
    found = listed_actions([content for _, content in turns])
    if not found:
        return None
    digest = hashlib.sha256()
    for role, content in turns:
        digest.update(f"{role}\x00{content}\x01".encode())
    digest.update(call_id.encode())
    return found[int.from_bytes(digest.digest()[:8], "big") % len(found)]


def listed_actions(contents: list[str]) -> list[str]:
    """The conversation's last ``Available actions:`` line, split (``contents``: the messages'
    texts, oldest first). Only messages holding the label go through the regex: a multiline
    ``^`` is tried at every position, and late in a Crafter episode the history is tens of
    kilobytes a call (over all of it, the regex was about half a fake server's CPU a request)."""
    for content in reversed(contents):
        if _ACTIONS_LABEL in content and (lines := _ACTIONS_LINE.findall(content)):
            return [a.strip() for a in lines[-1].split(",") if a.strip()]
    return []


_TRAILING_NUMBER = re.compile(r"(?:^|/)(\d+)$")
_PURPOSES = frozenset(get_args(Purpose))


class _Script:
    """A loaded script file: per-purpose lists (``None`` key = every purpose) and exact ids."""

    def __init__(self, lists: dict[str | None, list[str]], exact: dict[str, str]) -> None:
        self.lists = lists
        self.exact = exact

    def lookup(self, purpose: Purpose, call_id: str, model: str) -> str:
        if call_id in self.exact:
            return self.exact[call_id]
        items = self.lists.get(purpose) or self.lists.get(None)
        if not items:
            raise LLMError(
                f"scripted model {model!r}: the script has no response for call {call_id!r} "
                f"(purpose {purpose!r}); add a list under {purpose!r} or an entry for "
                f"{call_id!r} to model.script"
            )
        match = _TRAILING_NUMBER.search(call_id)
        index = int(match.group(1)) if match else 0
        return items[min(index, len(items) - 1)]


def _load_script(path: str) -> _Script:
    p = Path(path)
    if not p.is_file():
        raise MissingFileError(
            f"model.script {path!r} does not exist (a YAML/JSON list of responses)"
        )
    text = p.read_text("utf-8")
    data = json.loads(text) if p.suffix == ".json" else yaml.safe_load(text)
    shape = (
        "model.script must hold a non-empty list of response strings, or a mapping whose "
        "entries are purpose -> non-empty list of strings or exact call_id -> string"
    )
    if isinstance(data, list):
        if data and all(isinstance(x, str) for x in data):
            return _Script({None: data}, {})
        raise ConfigError(shape, source=path)
    if not isinstance(data, dict) or not data:
        raise ConfigError(shape, source=path)
    lists: dict[str | None, list[str]] = {}
    exact: dict[str, str] = {}
    for key, value in data.items():
        key = str(key)
        if isinstance(value, list) and value and all(isinstance(x, str) for x in value):
            if key not in _PURPOSES:
                raise ConfigError(
                    f"model.script: list under {key!r}, which is not a purpose "
                    f"({', '.join(sorted(_PURPOSES))}); exact call ids take one string",
                    source=path,
                )
            lists[key] = value
        elif isinstance(value, str):
            if key in _PURPOSES:
                raise ConfigError(
                    f"model.script: purpose {key!r} needs a list of strings, not one string",
                    source=path,
                )
            exact[key] = value
        else:
            raise ConfigError(f"{shape} (bad entry {key!r})", source=path)
    return _Script(lists, exact)


class ScriptedProvider(Provider):
    """Answers without any LLM; see the module docstring for the two modes."""

    name = "scripted"
    endpoints = ["scripted://local"]

    def __init__(self, config: ModelConfig) -> None:
        self.model = config.name
        self.script = _load_script(config.script) if config.script else None

    def call(self, request: ProviderRequest) -> ProviderResult:
        if self.script is not None:
            text = self.script.lookup(request.purpose, request.call_id, self.model)
        else:
            action = pick_action(request.messages, request.call_id)
            if action is None:
                text = PLACEHOLDERS.get(request.purpose, FALLBACK_TEXT)
            else:
                text = f"Thought: scripted policy, deterministic choice.\nAction: {action}"
        prompt_chars = sum(len(m.content) for m in request.messages)
        return ProviderResult(
            text=text,
            reasoning=None,
            usage=Usage(input_uncached=prompt_chars // 4, output=max(1, len(text) // 4)),
            finish_reason="stop",
        )

    def on_replay(self, purpose: Purpose, call_id: str) -> None:
        """Nothing to do: script answers depend on the call id alone, not on a position."""
