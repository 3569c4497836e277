"""Fixtures for the config-layer tests: fake API keys, a loader, a config-file writer."""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

from speedrunner.catalog import config_loader
from speedrunner.core.config.loader import ConfigLoader

SECRET = "sk-test-SECRET123456789"
"""A key-looking value; it must never reach a run directory."""

WriteConfig = Callable[..., Path]


@pytest.fixture(autouse=True)
def _fake_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    """Provider construction in preflight needs keys; these are fake and checked for leaks."""
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    monkeypatch.setenv("GEMINI_API_KEY", "AIzaFAKEgeminiKEY0123456789abcdef")
    monkeypatch.delenv("GOOGLE_API_KEY", raising=False)


@pytest.fixture
def loader() -> ConfigLoader:
    return config_loader()


@pytest.fixture
def write_config(tmp_path: Path) -> WriteConfig:
    """Write dedented YAML text to ``tmp_path/<name>`` and return the path."""

    def write(text: str, name: str = "exp.yaml") -> Path:
        path = tmp_path / name
        path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
        return path

    return write


@pytest.fixture
def unimplemented_speedrunner(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every shipped method is implemented; this makes 'speedrunner' look unimplemented again,
    so the refusal of an unimplemented method stays tested."""
    import dataclasses

    import speedrunner.catalog  # noqa: F401  (registers the methods)
    from speedrunner.core.specs import METHODS

    spec = dataclasses.replace(METHODS.get("speedrunner"), factory=None)
    monkeypatch.setitem(METHODS._specs, "speedrunner", spec)
