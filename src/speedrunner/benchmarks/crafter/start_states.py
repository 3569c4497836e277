"""Crafter's first state per seed, built once per process and handed out as copies.

Why this exists: a Crafter episode's start costs CPU to generate the 64x64 world (Crafter's
Python loops around numba-compiled noise) and to decode the texture PNGs that every
``crafter.Env`` loads in its constructor, though text episodes never draw a pixel. The
actor's episodes run as threads of one process, so that CPU is held under the GIL while the
other episodes wait for it, and every evaluation round replays the same held-out seeds.

So the textures are loaded once (new envs are copies of one blank env, whose textures
every copy shares), and the state after ``reset()`` and the hidden ``Noop`` is kept per
``(area, length, seed)`` (least recently used first out) and handed out as a deep copy. A
copy plays exactly as a freshly generated world: Crafter's state is plain Python objects,
numpy arrays and a ``RandomState`` (copied with its position), and the one place object
addresses could leak into the dynamics, creature balancing over a ``set``, is made
address-independent by ``DeterministicCrafterEnv``. Tests compare copies with fresh worlds
step by step.
"""

from __future__ import annotations

import copy
import threading
from collections import OrderedDict
from typing import Any

from speedrunner.benchmarks.crafter.determinism import DeterministicCrafterEnv

DEFAULT_CAPACITY = 256
"""Start states kept (a few tens of KB each): 30 held-out seeds survive up to 226 new training
seeds between two evaluations (the paper's schedule has 50)."""


class StartStates:
    """``env(area, length, seed, first_action)``:
    a Crafter env as if just reset and stepped once."""

    def __init__(self, capacity: int = DEFAULT_CAPACITY) -> None:
        self.capacity = capacity
        self._lock = threading.Lock()
        self._blanks: dict[tuple[tuple[int, int], int], DeterministicCrafterEnv] = {}
        self._starts: OrderedDict[tuple[Any, ...], tuple[DeterministicCrafterEnv, bool]] = (
            OrderedDict()
        )

    def env(
        self, area: tuple[int, int], length: int, seed: int, first_action: int
    ) -> tuple[DeterministicCrafterEnv, bool]:
        """A fresh env of ``seed`` after ``reset()`` and ``step(first_action)``,
        and that step's ``done``."""
        key = (tuple(area), int(length), int(seed), int(first_action))
        with self._lock:
            start = self._starts.get(key)
            if start is not None:
                self._starts.move_to_end(key)
        if start is None:
            start = self._generate(key)
            with self._lock:
                self._starts[key] = start
                while len(self._starts) > self.capacity:
                    self._starts.popitem(last=False)
        env, done = start
        return _copy(env), done

    def _generate(self, key: tuple[Any, ...]) -> tuple[DeterministicCrafterEnv, bool]:
        area, length, seed, first_action = key
        env = _copy(self._blank(area, length))
        env._seed = seed  # all that crafter.Env.__init__ does with its seed is store it
        env.reset()
        _, _, done, _ = env.step(first_action)
        return env, bool(done)

    def _blank(self, area: tuple[int, int], length: int) -> DeterministicCrafterEnv:
        with self._lock:
            blank = self._blanks.get((area, length))
            if blank is None:
                blank = DeterministicCrafterEnv(
                    area=area, length=length, seed=0, render_image=False
                )
                self._blanks[(area, length)] = blank
        return blank


def _copy(env: DeterministicCrafterEnv) -> DeterministicCrafterEnv:
    """A deep copy that shares the (read-only) textures instead of copying them."""
    textures = env._textures
    return copy.deepcopy(env, {id(textures): textures})


START_STATES = StartStates()
"""The process's start states: every ``CrafterTextEnv`` draws from it."""
