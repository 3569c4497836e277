"""Lazy registries of benchmarks and methods, filled from Python entry points.

A package declares its specs under the entry point groups ``speedrunner.benchmarks`` and
``speedrunner.methods`` (``name = "package.module:SPEC"``); the shipped ones are declared the
same way in SpeedRunner's own ``pyproject.toml``. Specs name their code as ``"module:attr"``
strings, so discovering them imports no env, JVM or server.
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Callable
from dataclasses import dataclass
from importlib.metadata import distributions
from typing import Any, Generic, Protocol, TypeVar

from speedrunner.core.names import suggest
from speedrunner.errors import ConfigError, UnknownNameError


class Named(Protocol):
    """A spec: it carries the name it is registered under."""

    @property
    def name(self) -> str: ...


T = TypeVar("T", bound=Named)

HOW_TO_REGISTER = {
    "benchmark": ("speedrunner.benchmarks", "docs/add-benchmark.md"),
    "method": ("speedrunner.methods", "docs/add-method.md"),
}
"""Per kind: the entry point group a package declares it under, and the page that says how."""


def load_entry_point(entry_point: str) -> Any:
    """Import ``"package.module:attr"`` and return the attribute."""
    module_name, _, attr = entry_point.partition(":")
    module = importlib.import_module(module_name)
    try:
        return getattr(module, attr)
    except AttributeError as e:
        raise ImportError(f"{module_name} has no attribute {attr!r} ({entry_point})") from e


@dataclass(frozen=True)
class Declared:
    """One entry point of a group: its name, what it points at and the distribution declaring it."""

    name: str
    value: str
    distribution: str
    load: Callable[[], Any]


def declared(group: str) -> list[Declared]:
    """Every entry point of ``group`` in the installed distributions: the one place that asks.

    Every metadata copy on ``sys.path`` is read, the first one of a distribution winning per
    entry point: a stale ``*.egg-info`` left in a source tree on ``PYTHONPATH`` (which
    ``importlib.metadata.entry_points`` would take alone) cannot hide the installed declarations.
    """
    found: dict[tuple[str, str], Declared] = {}
    for dist in distributions():
        name = dist.metadata["Name"] or "?"
        for ep in dist.entry_points:
            key = (name.lower().replace("_", "-"), ep.name)
            if ep.group == group and key not in found:
                found[key] = Declared(ep.name, ep.value, name, ep.load)
    return list(found.values())


class Registry(Generic[T]):
    """A name -> spec table, filled on first use from the entry point group of its kind.

    ``register`` adds a spec by hand (tests); unknown names raise with a close-match
    suggestion and how to register one.
    """

    def __init__(self, kind: str, spec_type: type[T]) -> None:
        self.kind = kind
        self.group, self.guide = HOW_TO_REGISTER[kind]
        self.spec_type = spec_type
        self._specs: dict[str, T] = {}
        self._origin: dict[str, str] = {}
        self._broken: dict[str, str] = {}
        self._discovered = False
        self._lock = threading.RLock()  # loading a spec's module may look a name up

    def register(self, name: str, spec: T, *, origin: str = "register()") -> None:
        if name in self._specs:
            raise ValueError(
                f"{self.kind} {name!r} is declared twice: by {self._origin[name]} and by {origin}"
            )
        self._specs[name] = spec
        self._origin[name] = origin

    def discover(self) -> None:
        """Load every spec declared under the group (once). A spec that cannot be loaded is kept
        aside with its reason, which is raised when its name is asked for."""
        with self._lock:
            if not self._discovered:
                self._discover()
                self._discovered = True

    def _discover(self) -> None:
        for ep in declared(self.group):
            origin = f"{ep.distribution} ({self.group}: {ep.name} = {ep.value})"
            try:
                spec = ep.load()
            except Exception as e:  # a broken plug-in must not stop the others
                self._broken[ep.name] = f"{origin} cannot be loaded: {type(e).__name__}: {e}"
                continue
            if not isinstance(spec, self.spec_type):
                self._broken[ep.name] = (
                    f"{origin} is a {type(spec).__name__}, not a {self.spec_type.__name__}"
                )
                continue
            if spec.name != ep.name:
                self._broken[ep.name] = (
                    f"{origin} names itself {spec.name!r}; "
                    "the entry point's name and the spec's name must agree"
                )
                continue
            if ep.name in self._specs and self._specs[ep.name] is spec:
                continue  # the same distribution seen twice on sys.path
            if ep.name in self._specs or ep.name in self._broken:
                first = self._origin.pop(ep.name, None) or self._broken[ep.name]
                self._specs.pop(ep.name, None)
                self._broken[ep.name] = (
                    f"declared twice: by {first} and by {origin}; uninstall one of those packages"
                )
                continue
            self.register(ep.name, spec, origin=origin)

    def get(self, name: str) -> T:
        self.discover()
        try:
            return self._specs[name]
        except KeyError:
            pass
        if name in self._broken:
            raise ConfigError(
                f"{self.kind} {name!r}: {self._broken[name]} (fix or reinstall that package; "
                f"see {self.guide})"
            )
        raise UnknownNameError(self.unknown_message(name)) from None

    def unknown_message(self, name: str) -> str:
        valid = self.names()
        known = (
            f"valid: {', '.join(valid)}"
            if valid
            else (
                f"no {self.kind} is installed at all (the installed metadata may predate its entry "
                "points: reinstall with pip install -e .)"
            )
        )
        return (
            f"unknown {self.kind} {name!r}{suggest(name, valid)}; {known}. A package adds a "
            f"{self.kind} by declaring its spec under the entry point group {self.group!r} in its "
            f"pyproject.toml, then pip install -e it (see {self.guide})"
        )

    def names(self) -> list[str]:
        self.discover()
        return sorted(self._specs)

    def __contains__(self, name: object) -> bool:
        self.discover()
        return name in self._specs
