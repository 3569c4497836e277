"""Lazy string-entry-point registries, in the manner of ``gymnasium.envs.registration``.

Registering stores ``"module:attr"``; nothing is imported until ``load`` is called, so
``import speedrunner.core`` never starts a JVM or a server.
"""

from __future__ import annotations

import importlib
from typing import Any, Generic, TypeVar

from speedrunner.core.names import unknown
from speedrunner.errors import UnknownNameError

T = TypeVar("T")


def load_entry_point(entry_point: str) -> Any:
    """Import ``"package.module:attr"`` and return the attribute."""
    module_name, _, attr = entry_point.partition(":")
    module = importlib.import_module(module_name)
    try:
        return getattr(module, attr)
    except AttributeError as e:
        raise ImportError(f"{module_name} has no attribute {attr!r} ({entry_point})") from e


class Registry(Generic[T]):
    """A name -> spec table; unknown names raise with a close-match suggestion."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._specs: dict[str, T] = {}

    def register(self, name: str, spec: T) -> None:
        if name in self._specs:
            raise ValueError(f"{self.kind} {name!r} is already registered")
        self._specs[name] = spec

    def get(self, name: str) -> T:
        try:
            return self._specs[name]
        except KeyError:
            raise UnknownNameError(unknown(self.kind, name, self._specs)) from None

    def names(self) -> list[str]:
        return sorted(self._specs)

    def __contains__(self, name: object) -> bool:
        return name in self._specs
