"""A ``crafter.Env`` that replays identically in every process, and skips pixels on request.

Why this exists: Crafter's creature balancing (``Env._balance_chunk``) receives each
chunk's objects as a ``set``. Sets of plain objects iterate in memory-address order, so
``creatures[random.randint(...)]`` despawns a *different* creature in another process
and the same seed diverges after a few dozen steps. We pass the objects sorted by
position instead (two objects never share a cell, so the order is total). Nothing else
in Crafter 1.8.3 depends on set order or on salted ``hash()``: episode seeds hash a
tuple of ints, which Python does not salt.

The installed package is never edited; the fix is this subclass. It changes no rule of
the game, only which creature a random draw picks, so it is a different but equally
valid sample of the same dynamics.

``render_image=False`` makes ``reset``/``step`` return ``None`` instead of the 64x64 RGB
frame and skips the per-step semantic map in ``info``; text observations are built from
the world directly, so a text agent does not pay for pixels it never sees. One catch:
at night Crafter's renderer draws its noise texture from the *world's* RNG
(``LocalView._noise``), so rendering is part of the game's dynamics. Without a frame we
still draw (and discard) exactly those numbers, so a text episode is the same game as
the pixel episode with the same seed and actions.
"""

from __future__ import annotations

from typing import Any

import crafter


def _position_key(obj: Any) -> tuple[int, int]:
    return int(obj.pos[0]), int(obj.pos[1])


class DeterministicCrafterEnv(crafter.Env):
    """``crafter.Env`` with position-ordered creature balancing (cross-process determinism)."""

    def __init__(self, *, render_image: bool = True, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._render_image = render_image
        if not render_image:
            self._sem_view = _no_semantic_view

    def _balance_chunk(self, chunk: tuple[int, int, int, int], objs: Any) -> None:
        super()._balance_chunk(chunk, sorted(objs, key=_position_key))

    def _obs(self) -> Any:
        if self._render_image:
            return self.render()
        if self._world.daylight < 0.5:  # mirrors LocalView._light -> _noise
            unit = self._size // self._view
            self._world.random.uniform(32, 127, tuple(self._local_view._grid * unit))
        return None


def _no_semantic_view() -> None:
    """Stands in for Crafter's full-map semantic array, which text observations never use."""
    return None
