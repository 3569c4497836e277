"""BALROG's ``BabyAI-MixedTrainLocal-v0`` task kinds, built on upstream minigrid's BabyAI pieces.

Upstream ``minigrid`` ships the BabyAI room grids, instruction classes and verifier but no
MixedTrainLocal level, so the five kinds are generated here:

============================  ===========================================  =========
kind                          layout (no distractors)                      max_steps
============================  ===========================================  =========
``goto``                      one 8x8 room, one object                     64
``pickup``                    one 8x8 room, one object                     64
``open``                      two 8x8 rooms, locked door, key with agent   128
``putnext``                   one 8x8 room, two objects                    128
``pick_up_seq_go_to``         one 8x8 room, two objects                    128
============================  ===========================================  =========

Everything (layout, and the kind for the ``mixed`` task) is a pure function of the seed,
so ``make_level(kind, seed)`` gives the same episode in any process. Success is decided
by the BabyAI verifier (``goto`` needs the agent *facing* the object); the reward on
success is ``1 - 0.9 * steps / max_steps``.
"""

from __future__ import annotations

import hashlib
from typing import Any

from minigrid.core.roomgrid import RoomGrid
from minigrid.envs.babyai.core.roomgrid_level import RejectSampling, RoomGridLevel
from minigrid.envs.babyai.core.verifier import (
    AfterInstr,
    BeforeInstr,
    GoToInstr,
    ObjDesc,
    OpenInstr,
    PickupInstr,
    PutNextInstr,
)

from speedrunner.benchmarks.babyai.config import TASK_KINDS
from speedrunner.core.names import unknown
from speedrunner.errors import UnknownNameError

LEVEL_PREFIX = "BabyAI-MixedTrainLocal-v0/"
"""BALROG's task ids are ``<prefix><kind>``; the bare kind is accepted too."""
MIXED = "mixed"
"""Task id whose kind is drawn from the seed (``kind_for_seed``)."""
MAX_STEPS = {"goto": 64, "pickup": 64, "open": 128, "putnext": 128, "pick_up_seq_go_to": 128}
"""Environment step limit per kind (BALROG's values)."""
PORTABLE_TYPES = ("key", "ball", "box")
"""Object types placed in rooms (doors only appear in ``open``)."""
_MAX_REJECTIONS = 1000


def valid_tasks() -> list[str]:
    """Every task id the server accepts: the five kinds, ``mixed``, and prefixed forms."""
    kinds = [*TASK_KINDS, MIXED]
    return kinds + [LEVEL_PREFIX + k for k in kinds]


def resolve_task(task: str, seed: int) -> str:
    """Map a task id (bare, prefixed or ``mixed``) to a concrete kind, or raise with the valid list."""
    kind = task[len(LEVEL_PREFIX):] if task.startswith(LEVEL_PREFIX) else task
    if kind == MIXED:
        return kind_for_seed(seed, TASK_KINDS)
    if kind not in TASK_KINDS:
        raise UnknownNameError(unknown("BabyAI task", task, valid_tasks()))
    return kind


def kind_for_seed(seed: int, kinds: tuple[str, ...] = TASK_KINDS) -> str:
    """The task kind for ``seed`` among ``kinds``, via a stable hash (same in every process).

    A hash rather than ``seed % n`` so that kind and layout (which uses ``seed`` directly
    as the numpy seed) are not correlated through the low bits.
    """
    digest = hashlib.sha256(f"babyai-kind/{seed}".encode()).digest()
    return kinds[int.from_bytes(digest[:4], "big") % len(kinds)]


class MixedTrainLocalLevel(RoomGridLevel):
    """One MixedTrainLocal task kind; ``reset(seed=...)`` generates the layout.

    Why ``_gen_grid`` is overridden: upstream prints "Sampling rejected: ..." to stdout on
    every rejected layout. Redirecting ``sys.stdout`` around generation is not thread-safe
    (the server generates levels on many threads at once and a swapped global stdout can be
    left behind), so the rejection loop is re-implemented here without the print.
    """

    def __init__(self, kind: str, **kwargs: Any) -> None:
        if kind not in MAX_STEPS:
            raise UnknownNameError(unknown("BabyAI task kind", kind, TASK_KINDS))
        self.kind = kind
        self.num_dists = 0
        rooms = {"num_rows": 1, "num_cols": 2 if kind == "open" else 1}
        super().__init__(room_size=8, max_steps=MAX_STEPS[kind], **rooms, **kwargs)

    def _gen_grid(self, width: int, height: int) -> None:
        for _ in range(_MAX_REJECTIONS):
            try:
                RoomGrid._gen_grid(self, width, height)
                self.gen_mission()
                self.validate_instrs(self.instrs)
            except RejectSampling:
                continue
            break
        else:  # pragma: no cover - a 6x6 room with two objects always fits
            raise RuntimeError(f"could not generate a {self.kind} level in {_MAX_REJECTIONS} tries")
        self.surface = self.instrs.surface(self)
        self.mission = self.surface

    def gen_mission(self) -> None:
        getattr(self, f"_gen_{self.kind}")()

    def _distinct_objects(self, n: int) -> list[Any]:
        """Place ``n`` objects with pairwise different (type, color) so descriptions are unique."""
        objs: list[Any] = []
        seen: set[tuple[str, str]] = set()
        while len(objs) < n:
            kind, color = self._rand_elem(PORTABLE_TYPES), self._rand_color()
            if (kind, color) in seen:
                continue
            obj, _ = self.add_object(0, 0, kind, color)
            seen.add((kind, color))
            objs.append(obj)
        self.place_agent(0, 0)
        self.check_objs_reachable()
        return objs

    def _gen_goto(self) -> None:
        (obj,) = self._distinct_objects(1)
        self.instrs = GoToInstr(ObjDesc(obj.type, obj.color))

    def _gen_pickup(self) -> None:
        (obj,) = self._distinct_objects(1)
        self.instrs = PickupInstr(ObjDesc(obj.type, obj.color))

    def _gen_putnext(self) -> None:
        move, fixed = self._distinct_objects(2)
        self.instrs = PutNextInstr(ObjDesc(move.type, move.color), ObjDesc(fixed.type, fixed.color))

    def _gen_pick_up_seq_go_to(self) -> None:
        picked, target = self._distinct_objects(2)
        pickup = PickupInstr(ObjDesc(picked.type, picked.color))
        goto = GoToInstr(ObjDesc(target.type, target.color))
        # "pick up A, then go to B" or "go to B after you pick up A": same task, two surfaces.
        self.instrs = BeforeInstr(pickup, goto) if self._rand_bool() else AfterInstr(goto, pickup)

    def _gen_open(self) -> None:
        door, _ = self.add_door(0, 0, door_idx=0, locked=True)
        self.add_object(0, 0, "key", door.color)
        self.place_agent(0, 0)
        self.check_objs_reachable()
        self.instrs = OpenInstr(ObjDesc("door", door.color))


def make_level(task: str, seed: int) -> MixedTrainLocalLevel:
    """A freshly reset level for (task, seed); raises ``UnknownNameError`` for a bad task."""
    level = MixedTrainLocalLevel(resolve_task(task, seed))
    level.reset(seed=seed)
    return level
