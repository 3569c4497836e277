"""Keep secrets out of everything we print or store.

``scrub(text)`` removes three kinds of secret:

- the values of the API keys this process uses: every key a provider reads is registered
  here (``register_secret``), so a gateway that echoes the key in an error body cannot
  carry it into stderr or ``llm_calls.jsonl``;
- credentials in URLs: ``user:password@`` and ``key=``/``token=``-style query parameters;
- anything key-shaped (``sk-...``, ``AIza...``, ``api_key=...``).

Apply it where text leaves the process: provider errors (``CallFailure``), log rows, run
files and error messages. It is not a proof of secrecy — a secret not registered and not
shaped like one passes — but every key SpeedRunner itself reads is registered.
"""

from __future__ import annotations

import re
import threading
from typing import Any

__all__ = ["register_secret", "scrub", "scrub_json", "scrub_url"]

REDACTED = "<redacted>"
_SECRET_PATTERNS = (
    re.compile(r"sk-[A-Za-z0-9_\-]{8,}"),
    re.compile(r"AIza[0-9A-Za-z_\-]{20,}"),
    re.compile(r"(?i)(api[_-]?key\s*[=:]\s*)[^\s&\"',}]+"),
)
# userinfo in a URL (scheme://user:pass@host or scheme://token@host)
_URL_USERINFO = re.compile(r"(?i)(\b[a-z][a-z0-9+.\-]*://)[^/\s@\"'<>]+@")
# credential-like query parameters
_URL_QUERY_SECRET = re.compile(
    r"(?i)([?&;](?:key|api[_-]?key|apikey|token|access[_-]?token|auth|password|passwd|secret|sig|signature)=)"
    r"[^&#\s\"'<>]+"
)
_MIN_SECRET_LEN = 6  # shorter values ("EMPTY", "x") would redact ordinary words

_secrets: tuple[str, ...] = ()
"""Registered secrets, longest first (a tuple replaced whole: read without a lock)."""
_lock = threading.Lock()


def register_secret(value: str | None) -> None:
    """Remember a secret value (an API key read from the environment) so ``scrub`` removes it."""
    global _secrets
    if value and len(value) >= _MIN_SECRET_LEN:
        with _lock:
            _secrets = tuple(sorted({*_secrets, value}, key=len, reverse=True))


def _may_be_shaped_like_a_secret(text: str) -> bool:
    """False when no pattern above can match: each needs one of these (``://`` has a ``:``).

    ``scrub`` runs on every string of every log row, most of them short words and numbers;
    this test spares them five regular-expression passes."""
    return "=" in text or ":" in text or "sk-" in text or "AIza" in text


def scrub(text: str) -> str:
    """``text`` with registered secrets, URL credentials and key-shaped values replaced."""
    if not text:
        return text
    for secret in _secrets:
        if secret in text:
            text = text.replace(secret, REDACTED)
    return _scrub_shapes(text) if _may_be_shaped_like_a_secret(text) else text


def _scrub_shapes(text: str) -> str:
    """``text`` with URL credentials and key-shaped values replaced."""
    text = _URL_USERINFO.sub(lambda m: m.group(1) + REDACTED + "@", text)
    text = _URL_QUERY_SECRET.sub(lambda m: m.group(1) + REDACTED, text)
    for pattern in _SECRET_PATTERNS:
        text = pattern.sub(lambda m: (m.group(1) if m.groups() else "") + REDACTED, text)
    return text


def scrub_url(url: str) -> str:
    return scrub(url)


def scrub_json(value: Any) -> Any:
    """A copy of a JSON-like value with every string scrubbed (keys included)."""
    if isinstance(value, str):
        return scrub(value)
    if isinstance(value, dict):
        return {scrub(k) if isinstance(k, str) else k: scrub_json(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [scrub_json(v) for v in value]
    return value
