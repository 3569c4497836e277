"""``scrub``: what it removes, and that its shortcut for ordinary strings changes nothing."""

from __future__ import annotations

import random

import pytest

from speedrunner.core import redact
from speedrunner.core.redact import REDACTED, register_secret, scrub, scrub_json


@pytest.mark.parametrize(
    "text",
    [
        "error: sk-abcdefgh12345678 was refused",
        "key AIzaSyA1234567890abcdefghijk in a URL",
        "API_KEY = hunter2hunter2",
        "api-key: hunter2hunter2",
        "https://alice:wonderland@example.com/v1",
        "https://example.com/v1?model=x&token=s3cr3t",
        "GET /v1?sig=abc;page=2",
    ],
)
def test_every_secret_shape_is_redacted(text: str) -> None:
    assert REDACTED in scrub(text)
    assert REDACTED in scrub_json({"nested": [text]})["nested"][0]


def test_a_registered_secret_is_removed_longest_first(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(redact, "_secrets", ())  # this process's other tests keep their own
    register_secret("plainsecret")
    register_secret("plainsecret-long")
    assert scrub("got plainsecret-long and plainsecret") == f"got {REDACTED} and {REDACTED}"


def test_ordinary_strings_are_left_alone() -> None:
    for text in ("go forward", "actor", "fake-model", "12", "pick up the red key", ""):
        assert scrub(text) == text


def test_the_shortcut_agrees_with_the_patterns_on_random_strings() -> None:
    """Strings the shortcut lets through unscrubbed are exactly those no pattern changes."""
    pieces = [
        "sk",
        "-",
        "sk-",
        "AIza",
        "api",
        "API",
        "_",
        "key",
        "KEY",
        "=",
        ":",
        "/",
        "//",
        "@",
        "?",
        "&",
        ";",
        "token",
        "sig",
        "password",
        "abcdefgh12345678",
        "Z" * 22,
        " ",
        "\n",
        "https",
        "'",
        '"',
        "x",
    ]
    rng = random.Random(0)
    through = 0
    for _ in range(20_000):
        text = "".join(rng.choice(pieces) for _ in range(rng.randint(1, 12)))
        assert scrub(text) == redact._scrub_shapes(text), text
        if not redact._may_be_shaped_like_a_secret(text):
            through += 1
            assert redact._scrub_shapes(text) == text, text
    assert 1_000 < through < 19_000  # both paths were exercised
