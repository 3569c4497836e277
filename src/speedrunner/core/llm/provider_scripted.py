"""A deterministic, offline "model" for tests and the offline demo. No network, no key.

Two modes:

* **Built-in policy** (``model.script`` null). If any message has a line
  ``Available actions: a, b, c`` (the actor prompt's primitive-action list; the last such
  line wins), the answer is ``"Thought: ...\\nAction: <one of them>"``, the action chosen by
  sha256 of the messages plus ``call_id`` — the same call always gets the same action, in
  any process. Without such a line (inducer, critic, ...) the answer is a fixed, clearly
  labelled text.
* **Script file** (``model.script`` = path to a YAML/JSON file). Either a list of response
  strings, consumed in order *per purpose* (the n-th actor call gets item n; the n-th
  inducer call also gets item n), or a mapping ``purpose -> list``. Calls answered from the
  replay cache still advance the position (``on_replay``), so a resumed run continues the
  script where it left off. Running past the end raises ``LLMError``.

Token counts are approximate (characters / 4), so reports and plots have something to show;
every Completion from here is marked ``scripted=True`` and costs 0.0.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from collections import defaultdict
from pathlib import Path

import yaml

from speedrunner.core.config.schema import ModelConfig
from speedrunner.core.llm.provider import ProviderRequest, ProviderResult
from speedrunner.core.llm.types import Message, Purpose, Usage
from speedrunner.errors import ConfigError, LLMError, MissingFileError

__all__ = ["ScriptedProvider", "pick_action"]

_ACTIONS_LINE = re.compile(r"^\s*Available actions:\s*(.+?)\s*$", re.MULTILINE)
FALLBACK_TEXT = "[scripted response: no 'Available actions:' line in the prompt, nothing to choose]"


def pick_action(messages: list[Message], call_id: str) -> str | None:
    """The built-in policy's action, or None when the prompt lists no actions."""
    found: list[str] = []
    for m in messages:
        for match in _ACTIONS_LINE.finditer(m.content):
            found = [a.strip() for a in match.group(1).split(",") if a.strip()]
    if not found:
        return None
    digest = hashlib.sha256()
    for m in messages:
        digest.update(f"{m.role}\x00{m.content}\x01".encode())
    digest.update(call_id.encode())
    return found[int.from_bytes(digest.digest()[:8], "big") % len(found)]


def _load_script(path: str) -> list[str] | dict[str, list[str]]:
    p = Path(path)
    if not p.is_file():
        raise MissingFileError(
            f"model.script {path!r} does not exist (a YAML/JSON list of responses)"
        )
    text = p.read_text("utf-8")
    data = json.loads(text) if p.suffix == ".json" else yaml.safe_load(text)
    if isinstance(data, list) and all(isinstance(x, str) for x in data):
        return data
    if isinstance(data, dict) and all(
        isinstance(v, list) and all(isinstance(x, str) for x in v) for v in data.values()
    ):
        return {str(k): v for k, v in data.items()}
    raise ConfigError(
        "model.script must hold a list of response strings, or a mapping purpose -> list of strings",
        source=path,
    )


class ScriptedProvider:
    """Answers without any LLM; see the module docstring for the two modes."""

    name = "scripted"
    endpoints = ["scripted://local"]

    def __init__(self, config: ModelConfig) -> None:
        self.model = config.name
        self.script = _load_script(config.script) if config.script else None
        self._position: dict[str, int] = defaultdict(int)
        self._lock = threading.Lock()

    def _next_scripted(self, script: list[str] | dict[str, list[str]], purpose: Purpose) -> str:
        items = script if isinstance(script, list) else script.get(purpose, [])
        with self._lock:
            index = self._position[purpose]
            self._position[purpose] += 1
        if index >= len(items):
            raise LLMError(
                f"scripted model {self.model!r}: script has {len(items)} response(s) for purpose "
                f"{purpose!r}, call #{index + 1} asked for one more; lengthen the script"
            )
        return items[index]

    def call(self, request: ProviderRequest) -> ProviderResult:
        if self.script is not None:
            text = self._next_scripted(self.script, request.purpose)
        else:
            action = pick_action(request.messages, request.call_id)
            if action is None:
                text = FALLBACK_TEXT
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
        """A replayed call consumed its script item in the earlier process: skip it here too."""
        if self.script is not None:
            with self._lock:
                self._position[purpose] += 1
