"""JSON lines over a pair of dedicated pipes, the only way parent and child talk.

The pipes are not the child's stdout or stderr, so nothing a skill prints can corrupt the
protocol. Both sides use this module; the parent treats everything it reads as hostile
(the child may run arbitrary code): a message is bounded in size, must decode to a JSON
object, and every wait has a deadline, so a child that floods, stalls or writes garbage
costs the parent a ``ProtocolError`` or ``ChannelTimeout``, never a hang or a crash.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import time
from typing import Any

MAX_MESSAGE_BYTES = 32 * 1024 * 1024
"""Longest line the parent accepts; a longer one is a protocol violation."""
_SEPARATORS = (",", "[", "{")
_BYTE_SEPARATORS = (b",", b"[", b"{")


def _reject(value: Any) -> Any:
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _make_encoder() -> Any:
    """``json``'s C encoder called directly: the hot path pays for one message per action
    each way, and skipping ``JSONEncoder``'s Python layers halves its cost. No circular
    check (our messages are trees; a cycle ends in ``RecursionError``)."""
    try:
        from json.encoder import c_make_encoder, encode_basestring_ascii

        chunks = c_make_encoder(
            None, _reject, encode_basestring_ascii, None, ":", ",", False, False, False
        )
        chunks({"probe": [1.5, None, True]}, 0)
        return lambda message: "".join(chunks(message, 0))
    except (ImportError, TypeError):  # no C accelerator, or its signature changed
        return json.JSONEncoder(separators=(",", ":"), allow_nan=False).encode


_encode = _make_encoder()
compact = _encode
"""Any JSON value as compact ASCII JSON text (the messages' encoding; ``tracing.value_cost``)."""
_scan = json.JSONDecoder(parse_constant=_reject_constant).scan_once


def separators(text: str | bytes) -> int:
    """The ``,`` ``[`` and ``{`` in ``text``, counted in C: in JSON, an upper bound on the values
    a decoder builds (each one but the first of a container follows a comma or opens one), so
    the cost of decoding a line is known before it is decoded."""
    seps = _BYTE_SEPARATORS if isinstance(text, bytes) else _SEPARATORS
    return sum(map(text.count, seps))  # type: ignore[arg-type]


class ChannelClosed(Exception):
    """The other side closed its end (the child exited or was killed, or the parent is gone)."""


class ChannelTimeout(Exception):
    """The deadline passed before a whole message arrived (or could be sent)."""


class ProtocolError(Exception):
    """The other side sent something that is not a bounded JSON object on one line."""


def encode(message: dict[str, Any]) -> bytes:
    """One message as a line of ASCII JSON (raises ``ValueError``/``TypeError`` if not
    JSON-able)."""
    return _encode(message).encode("ascii") + b"\n"


class Channel:
    """Reads from ``read_fd`` and writes to ``write_fd``, one JSON object per line.

    ``recv``/``send`` take an absolute ``time.monotonic()`` deadline, or ``None`` to block
    (the child blocks; the parent never does).
    """

    def __init__(
        self,
        read_fd: int,
        write_fd: int,
        *,
        nonblocking: bool = False,
        max_bytes: int = MAX_MESSAGE_BYTES,
    ) -> None:
        self.read_fd = read_fd
        self.write_fd = write_fd
        self.max_bytes = max_bytes
        """Longest message accepted; the parent lowers it to what its side of the protocol needs."""
        self.max_values: int | None = None
        """Most ``separators`` a received line may hold (``None``: any); past it the line is refused
        before it is decoded. The parent sets it to what an honest reply to its request can hold."""
        self._buffer = bytearray()
        self._scanned = 0
        if nonblocking:
            os.set_blocking(read_fd, False)
            os.set_blocking(write_fd, False)

    def send(self, message: dict[str, Any], deadline: float | None = None) -> None:
        self.send_bytes(encode(message), deadline)

    def send_bytes(self, data: bytes, deadline: float | None = None) -> None:
        try:  # fast path: the message fits the pipe and goes in one write
            written = os.write(self.write_fd, data)
        except BlockingIOError:
            written = 0
        except OSError as e:
            raise ChannelClosed(str(e)) from None
        view = memoryview(data)[written:]
        while view:
            try:
                written = os.write(self.write_fd, view)
            except BlockingIOError:
                _wait(self.write_fd, deadline, write=True)
                continue
            except (BrokenPipeError, OSError) as e:
                raise ChannelClosed(str(e)) from None
            view = view[written:]

    def recv(self, deadline: float | None = None) -> dict[str, Any]:
        """The next message; raises ``ChannelClosed``, ``ChannelTimeout`` or ``ProtocolError``."""
        if not self._buffer:  # fast path: one read brings exactly one whole message
            try:
                chunk = os.read(self.read_fd, 1 << 16)
            except BlockingIOError:
                _wait(self.read_fd, deadline, write=False)
            except OSError as e:
                raise ChannelClosed(str(e)) from None
            else:
                if not chunk:
                    raise ChannelClosed("end of stream")
                if chunk.find(b"\n") == len(chunk) - 1 and len(chunk) <= self.max_bytes:
                    return self._decode(chunk[:-1])
                self._buffer += chunk
        while True:
            end = self._buffer.find(b"\n", self._scanned)
            if end > self.max_bytes:
                raise ProtocolError(f"a message longer than {self.max_bytes} bytes")
            if end >= 0:
                line = bytes(self._buffer[:end])
                del self._buffer[: end + 1]
                self._scanned = 0
                return self._decode(line)
            self._scanned = len(self._buffer)
            if self._scanned > self.max_bytes:
                raise ProtocolError(f"a message longer than {self.max_bytes} bytes")
            try:
                chunk = os.read(self.read_fd, 1 << 16)
            except BlockingIOError:
                _wait(self.read_fd, deadline, write=False)
                continue
            except OSError as e:
                raise ChannelClosed(str(e)) from None
            if not chunk:
                raise ChannelClosed("end of stream")
            self._buffer += chunk

    def _decode(self, line: bytes) -> dict[str, Any]:
        limit = self.max_values
        if limit is not None and len(line) > limit and (count := separators(line)) > limit:
            raise ProtocolError(
                f"a message of {count} JSON values (its commas, [ and {{), more than the {limit} "
                "an honest reply to this request can hold; refused unread"
            )
        return _decode(line)

    def pending(self) -> bool:
        """Whether more has arrived (or the other side hung up) than the messages read so far:
        after a reply, anything pending was written by someone other than the honest server."""
        if self._buffer:
            return True
        try:
            ready, _, _ = select.select([self.read_fd], [], [], 0)
        except (OSError, ValueError):
            return False
        if not ready:
            return False
        try:
            chunk = os.read(self.read_fd, 1 << 16)
        except (BlockingIOError, OSError):
            return False
        self._buffer += chunk
        return bool(chunk)

    def close(self) -> None:
        for fd in {self.read_fd, self.write_fd}:
            with contextlib.suppress(OSError):
                os.close(fd)


def _wait(fd: int, deadline: float | None, *, write: bool) -> None:
    timeout = None if deadline is None else deadline - time.monotonic()
    if timeout is not None and timeout <= 0:
        raise ChannelTimeout("deadline passed")
    ready = select.select([], [fd], [], timeout) if write else select.select([fd], [], [], timeout)
    if not any(ready):
        raise ChannelTimeout("deadline passed")


def _decode(line: bytes) -> dict[str, Any]:
    try:
        text = line.decode("utf-8")
        message, end = _scan(text, 0)
    except StopIteration:
        raise ProtocolError("not JSON") from None
    except (ValueError, RecursionError) as e:  # UnicodeDecodeError; RecursionError: absurd nesting
        raise ProtocolError(f"not JSON: {type(e).__name__}") from None
    if end != len(text):
        raise ProtocolError("not JSON: trailing data")
    if not isinstance(message, dict):
        raise ProtocolError(f"expected a JSON object, got {type(message).__name__}")
    return message
