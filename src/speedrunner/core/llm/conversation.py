"""An append-only conversation that keeps what every call needs of it up to date as it grows.

The actor sends its whole episode history on every turn (the paper's protocol): thousands of
messages late in a Crafter episode. Rebuilding the wire messages, the cache key's hash, the
log's digest and the byte count from scratch on each call made a call cost O(history) in
CPU, under the GIL, so parallel episodes serialised on it. A :class:`Conversation` does that
work once per message, when the message is appended; a call then costs O(new turn) in our
code, and the only O(history) work left is encoding the bytes that go over the wire.

The digests are *the same bytes* the from-scratch formulas hash (``request_hash``,
``messages_digest``), folded in message by message, so cache keys written before this module
existed still match and resumed runs replay instead of paying again.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, TypeVar, overload

from speedrunner.core.llm.types import Message

__all__ = ["Conversation", "as_conversation", "message_dict"]

T = TypeVar("T")


def _canonical(value: Any) -> str:
    """The canonical JSON the request hash is defined over (sorted keys, compact, UTF-8)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _has_tool_fields(m: Message) -> bool:
    return bool(m.tool_calls) or m.tool_call_id is not None or m.tool_name is not None


def message_dict(m: Message) -> dict[str, Any]:
    """The message as the request hash and the call log see it: ``role`` and ``content``,
    plus the native tool fields only when set (so a plain message hashes as it always did)."""
    d: dict[str, Any] = {"role": m.role, "content": m.content}
    if m.tool_calls:
        d["tool_calls"] = [
            {
                "id": t.id,
                "name": t.name,
                "arguments": t.arguments,
                **({"signature": t.signature} if t.signature else {}),
            }
            for t in m.tool_calls
        ]
    if m.tool_call_id is not None:
        d["tool_call_id"] = m.tool_call_id
    if m.tool_name is not None:
        d["tool_name"] = m.tool_name
    return d


class Conversation(Sequence[Message]):
    """Messages plus running state for the request hash, the log digest and the input size.

    Only ever appended to. Thread-safe: the runtime may read it from a call while nothing
    appends, and the per-encoder views are filled under a lock.
    """

    def __init__(self, messages: Iterable[Message] = ()) -> None:
        self._messages: list[Message] = []
        # request_hash is sha256 over {"messages":[m0,m1,...],"model":...}; keep the open prefix.
        self._request_prefix = hashlib.sha256(b'{"messages":[')
        self._digest = hashlib.sha256()  # messages_digest: role NUL content SOH, message by message
        self._views: dict[Callable[[Message], Any], list[Any]] = {}
        self._lock = threading.Lock()
        self.input_bytes = 0
        """UTF-8 bytes of every role and content (an upper bound on input tokens)."""
        for m in messages:
            self.append(m)

    def append(self, message: Message) -> None:
        with self._lock:
            comma = b"," if self._messages else b""
            canonical = _canonical(message_dict(message))
            self._request_prefix.update(comma + canonical.encode())
            extra = canonical if _has_tool_fields(message) else ""  # plain messages: old digest
            self._digest.update(f"{message.role}\x00{message.content}{extra}\x01".encode())
            self.input_bytes += len(message.content.encode("utf-8")) + len(message.role)
            if extra:
                self.input_bytes += len(extra.encode("utf-8"))
            self._messages.append(message)

    def extend(self, messages: Iterable[Message]) -> None:
        for m in messages:
            self.append(m)

    # -- Sequence ----------------------------------------------------------------------------
    @overload
    def __getitem__(self, i: int) -> Message: ...
    @overload
    def __getitem__(self, i: slice) -> list[Message]: ...
    def __getitem__(self, i: int | slice) -> Message | list[Message]:
        return self._messages[i]

    def __len__(self) -> int:
        return len(self._messages)

    def __iter__(self) -> Iterator[Message]:
        return iter(self._messages)

    def __repr__(self) -> str:
        return f"Conversation({len(self._messages)} messages)"

    # -- what a call needs -------------------------------------------------------------------
    def request_hash(self, tail: dict[str, Any]) -> str:
        """sha256 of ``{"messages": [...], **tail}`` in canonical JSON, without re-encoding
        the messages (``tail``'s keys must all sort after ``"messages"``)."""
        if any(k <= "messages" for k in tail):
            raise ValueError(
                f"request_hash: every tail key must sort after 'messages', got {sorted(tail)}"
            )
        with self._lock:
            h = self._request_prefix.copy()
        rest = _canonical(tail)  # '{"model":...}' -> continue the open object after the list
        h.update(b"]" + (b"," + rest[1:].encode() if tail else b"}"))
        return h.hexdigest()

    def digest(self) -> str:
        """``messages_digest`` of the conversation so far."""
        with self._lock:
            return self._digest.copy().hexdigest()

    def mapped(self, encode: Callable[[Message], T]) -> list[T]:
        """``[encode(m) for m in self]``, with each message encoded once over the
        conversation's life. ``encode`` must be a pure module-level function (it is the key)
        and its results must never be mutated: they are shared between calls."""
        with self._lock:
            view = self._views.setdefault(encode, [])
            if len(view) < len(self._messages):
                view.extend(encode(m) for m in self._messages[len(view) :])
            return list(view)


def as_conversation(messages: Sequence[Message]) -> Conversation:
    """The conversation itself when the caller keeps one (the actor does), else a new one
    built in one pass (one-off prompts: the guide, the inducer)."""
    return messages if isinstance(messages, Conversation) else Conversation(messages)
