"""The ``env`` skill code gets inside the sandbox: public data and ``act``, no live object.

Skill code can read every attribute of what it is handed (the restricted layer stops names,
not objects), so the handle holds nothing it must not see: its slots are the observation
(``text``, ``state``, ``done``), ``actions_left`` and ``scratch``; it has no ``__dict__``
(a ``functools.cached_property`` has nothing to read), and its class is read-only and
cannot be subclassed (no class attribute can be added to reach something or to keep state
between calls: ``env.scratch`` is the one place for that). ``act`` reaches the protocol
pipe through ``bind``, module state skill code has no name for.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

_READ_ONLY = (
    "the env's class is read-only in skill code: keep state between calls of one episode in "
    "env.scratch (a dict of JSON values)"
)
_FIELDS = ("text", "state", "done", "actions_left", "scratch")
_bound: list[Any] = []
"""``[send, stop]`` of the child's server: ``send(action) -> reply``,
``stop(reason) -> exception``."""


def bind(send: Callable[[str], dict[str, Any]], stop: Callable[[str], BaseException]) -> None:
    """Connect every ``SandboxEnv``'s ``act`` to the child's server (once, before any skill
    runs)."""
    _bound[:] = [send, stop]


class _ReadOnlyClass(type):
    """Metaclass of ``SandboxEnv``: no attribute of the class can be set or removed."""

    def __setattr__(cls, name: str, value: Any) -> None:
        raise TypeError(_READ_ONLY)

    def __delattr__(cls, name: str) -> None:
        raise TypeError(_READ_ONLY)


class SandboxEnv(metaclass=_ReadOnlyClass):
    """The ``SkillEnv`` of a sandboxed skill call (same attributes and ``act``)."""

    __slots__ = _FIELDS

    def __init_subclass__(cls, **kwargs: Any) -> None:
        raise TypeError("the env's class cannot be subclassed in skill code")

    def __init__(
        self,
        text: str,
        state: dict[str, Any],
        done: bool = False,
        *,
        actions_left: int | None = None,
        scratch: dict[str, Any] | None = None,
    ) -> None:
        self.text = text
        self.state = state
        self.done = done
        self.actions_left = actions_left
        self.scratch = {} if scratch is None else scratch

    def __setattr__(self, name: str, value: Any) -> None:
        if name not in _FIELDS:
            raise AttributeError(
                f"env has no attribute {name!r} (its attributes: {', '.join(_FIELDS)}); keep "
                "state between calls in env.scratch"
            )
        object.__setattr__(self, name, value)

    def __repr__(self) -> str:
        return f"<env: done={self.done!r}, actions_left={self.actions_left!r}>"

    def act(self, action: str) -> str:
        """Take one primitive action; returns the new observation text (``state`` updates too)."""
        send, stop = _bound
        if self.done:
            raise stop("episode_done")
        if self.actions_left is not None and isinstance(action, str):
            self.actions_left = max(self.actions_left - 1, 0)
        reply = send(action)
        self.text, self.state, self.done = reply["text"], reply["structured"], reply["done"]
        return self.text
