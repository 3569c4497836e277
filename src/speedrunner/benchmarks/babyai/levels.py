"""BALROG's ``BabyAI-MixedTrainLocal-v0`` levels, seed for seed.

BALROG plays ``Level_MixedTrainLocal`` from its Minigrid fork (BartekCupial/Minigrid, on
minigrid 2.3.1), which upstream ``minigrid`` does not ship. The fork's room grids, world
objects, object placement, verifier and ``RoomGridLevel`` are the same as upstream's (3.2,
installed here), so the level is rebuilt here on upstream's ``LevelGen`` with the fork's
mission rules, making the same random draws in the same order; ``make_level(kind, seed)``
then gives BALROG's level for ``BabyAI-MixedTrainLocal-v0/<kind>`` with ``reset(seed=seed)``
(tested against 500 levels recorded from BALROG's own env).

============================  =====================================================  =========
kind                          layout (BALROG's ``num_dists: 0``)                     max_steps
============================  =====================================================  =========
``goto``                      one 8x8 room, one object                               64
``pickup``                    one 8x8 room, one object                               64
``open``                      two 8x8 rooms, locked door, its key outside            128
``putnext``                   one 8x8 room, two objects                              128
``pick_up_seq_go_to``         one 8x8 room, two objects                              128
============================  =====================================================  =========

The fork's rules: missions never mention "yellow box", "red key", "red door", "green ball"
or "grey door" (held out for its test levels); an ``open`` door is yellow, green, blue or
purple and the mission names its colour half the time; objects may repeat, and the mission
then says "a" instead of "the". Success is decided by the BabyAI verifier (``goto`` needs
the agent *facing* the object); the reward on success is ``1 - 0.9 * steps / max_steps``.

BALROG draws the kind of a ``mixed`` level at env construction from an unseeded generator,
which cannot be replayed; here the ``mixed`` task draws it from the seed (``kind_for_seed``).
"""

from __future__ import annotations

from typing import Any

from minigrid.core.roomgrid import RoomGrid
from minigrid.core.world_object import WorldObj
from minigrid.envs.babyai.core.levelgen import LevelGen
from minigrid.envs.babyai.core.roomgrid_level import RejectSampling
from minigrid.envs.babyai.core.verifier import (
    AfterInstr,
    BeforeInstr,
    GoToInstr,
    ObjDesc,
    OpenInstr,
    PickupInstr,
    PutNextInstr,
)

from speedrunner.benchmarks.babyai.kinds import TASK_KINDS, kind_for_seed
from speedrunner.core.names import unknown
from speedrunner.errors import UnknownNameError

LEVEL_PREFIX = "BabyAI-MixedTrainLocal-v0/"
"""BALROG's task ids are ``<prefix><kind>``; the bare kind is accepted too."""
MIXED = "mixed"
"""Task id whose kind is drawn from the seed (``kind_for_seed``)."""
MAX_STEPS = {"goto": 64, "pickup": 64, "open": 128, "putnext": 128, "pick_up_seq_go_to": 128}
"""Environment step limit per kind: 64 per navigation the mission needs, per room."""
HELD_OUT = ("yellow box", "red key", "red door", "green ball", "grey door")
"""Object descriptions the fork keeps out of training missions."""
OPEN_DOOR_COLORS = ("yellow", "green", "blue", "purple")
"""Colours of the locked door in ``open`` (red and grey are held out)."""
_MAX_REJECTIONS = 1000


def valid_tasks() -> list[str]:
    """Every task id the server accepts: the five kinds, ``mixed``, and prefixed forms."""
    kinds = [*TASK_KINDS, MIXED]
    return kinds + [LEVEL_PREFIX + k for k in kinds]


def resolve_task(task: str, seed: int) -> str:
    """Map a task id (bare, prefixed or ``mixed``) to a concrete kind,
    or raise with the valid list."""
    kind = task[len(LEVEL_PREFIX) :] if task.startswith(LEVEL_PREFIX) else task
    if kind == MIXED:
        return kind_for_seed(seed, TASK_KINDS)
    if kind not in TASK_KINDS:
        raise UnknownNameError(unknown("BabyAI task", task, valid_tasks()))
    return kind


class MixedTrainLocalLevel(LevelGen):
    """One MixedTrainLocal kind; ``reset(seed=...)`` generates BALROG's level for that seed.

    Every random draw below (order, range, what is redrawn on rejection) is the fork's,
    because the seed only reproduces BALROG's level if the whole sequence of draws does.
    Two things are ours: the kind is given instead of drawn at construction, and rejected
    layouts are not printed (upstream prints "Sampling rejected" to stdout; swapping
    ``sys.stdout`` around it is not thread-safe, and the server builds levels on many threads).
    """

    def __init__(self, kind: str, **kwargs: Any) -> None:
        if kind not in MAX_STEPS:
            raise UnknownNameError(unknown("BabyAI task kind", kind, TASK_KINDS))
        self.kind = kind
        super().__init__(
            room_size=8,
            num_rows=1,
            num_cols=2 if kind == "open" else 1,
            num_dists=0,
            locations=False,
            unblocking=False,
            implicit_unlock=False,
            action_kinds=[kind],
            instr_kinds=["action", "seq1"],
            **kwargs,
        )

    def _gen_grid(self, width: int, height: int) -> None:
        """``RoomGridLevel._gen_grid``'s rejection loop, without its prints."""
        for _ in range(_MAX_REJECTIONS):
            try:
                RoomGrid._gen_grid(self, width, height)
                self.gen_mission()
                self.validate_instrs(self.instrs)
            except (RejectSampling, RecursionError):
                continue
            break
        else:  # pragma: no cover - a 6x6 room with two objects always fits
            raise RuntimeError(f"could not generate a {self.kind} level in {_MAX_REJECTIONS} tries")
        self.surface = self.instrs.surface(self)
        self.mission = self.surface

    def gen_mission(self) -> None:
        """Redraw the whole layout until every object is reachable and the mission is allowed."""
        self._rand_elem(self.action_kinds)  # the fork draws its (single) kind here; keep the draw
        accepted = reachable = False
        while not (accepted and reachable):
            self._clear_rooms()
            if self.kind == "open":
                reachable = self._gen_open()
            else:
                self.place_agent()
                extra = 1 if self.kind in ("goto", "pickup") else 2
                objs = self.add_distractors(
                    num_distractors=self.num_dists + extra, all_unique=False
                )
                reachable = self.check_objs_reachable(raise_exc=False)
                self.instrs = getattr(self, f"_instr_{self.kind}")(objs)
            accepted = not self._mentions_held_out()

    # -- one layout per kind -----------------------------------------------------------------
    def _gen_open(self) -> bool:
        color = self._rand_elem(list(OPEN_DOOR_COLORS))
        self._add_locked_room(color)
        self.connect_all()
        for j in range(self.num_rows):
            for i in range(self.num_cols):
                if self.get_room(i, j) is not self.locked_room:
                    self.add_distractors(i, j, num_distractors=self.num_dists, all_unique=False)
        while True:  # the agent starts outside the locked room
            self.place_agent()
            if self.room_from_pos(*self.agent_pos) is not self.locked_room:
                break
        reachable = self.check_objs_reachable(raise_exc=False)
        self.instrs = OpenInstr(ObjDesc("door", self._rand_elem([None, color])))
        return reachable

    def _instr_goto(self, objs: list[WorldObj]) -> GoToInstr:
        obj = self._rand_elem(objs)
        return GoToInstr(ObjDesc(obj.type, obj.color))

    def _instr_pickup(self, objs: list[WorldObj]) -> PickupInstr:
        return PickupInstr(self._pickable_desc(objs))

    def _instr_putnext(self, objs: list[WorldObj]) -> PutNextInstr:
        move = self._pickable_desc(objs)
        return PutNextInstr(move, self._second_desc(objs, move))

    def _instr_pick_up_seq_go_to(self, objs: list[WorldObj]) -> BeforeInstr | AfterInstr:
        picked = self._pickable_desc(objs)
        pickup, goto = PickupInstr(picked), GoToInstr(self._second_desc(objs, picked))
        # "pick up A, then go to B" or "go to B after you pick up A": same task, two surfaces.
        if self._rand_elem(["Before", "After"]) == "Before":
            return BeforeInstr(pickup, goto)
        return AfterInstr(goto, pickup)

    def _pickable_desc(self, objs: list[WorldObj]) -> ObjDesc:
        obj = self._rand_elem(objs)
        while obj.type == "door":
            obj = self._rand_elem(objs)
        return ObjDesc(obj.type, obj.color)

    def _second_desc(self, objs: list[WorldObj], first: ObjDesc) -> ObjDesc:
        """Another object; it may look like the first only if the first has a twin."""
        obj = self._rand_elem(objs)
        if (obj.type, obj.color) == (first.type, first.color):
            twins, _ = ObjDesc(first.type, first.color).find_matching_objs(self)
            while len(twins) < 2 and (obj.type, obj.color) == (first.type, first.color):
                obj = self._rand_elem(objs)
        return ObjDesc(obj.type, obj.color)

    # -- the fork's helpers ------------------------------------------------------------------
    def _mentions_held_out(self) -> bool:
        surface = self.instrs.surface(self)
        return any(words in surface for words in HELD_OUT)

    def _add_locked_room(self, color: str) -> None:
        """A locked door of ``color`` in an inner wall, and its key in another room."""
        while True:
            i, j = self._rand_int(0, self.num_cols), self._rand_int(0, self.num_rows)
            door_idx = self._rand_int(0, 4)
            self.locked_room = self.get_room(i, j)
            if self.locked_room.neighbors[door_idx] is not None:
                door, _ = self.add_door(i, j, door_idx, color=color, locked=True)
                break
        while True:
            i, j = self._rand_int(0, self.num_cols), self._rand_int(0, self.num_rows)
            if self.get_room(i, j) is not self.locked_room:
                self.add_object(i, j, "key", door.color)
                break

    def _clear_rooms(self) -> None:
        """Empty the grid back to bare room walls and redraw the door positions, as the fork
        does before each layout attempt (it appends the rooms to ``room_grid`` again, which
        only lengthens a list nothing reads past ``num_rows``; kept, since it is the fork's)."""
        self.grid.grid = [None] * self.width * self.height
        for j in range(self.num_rows):
            row = []
            for i in range(self.num_cols):
                room = self.get_room(i, j)
                room.doors, room.door_pos, room.neighbors = [None] * 4, [None] * 4, [None] * 4
                room.locked, room.objs = False, []
                row.append(room)
                self.grid.wall_rect(*room.top, *room.size)
            self.room_grid.append(row)
        for j in range(self.num_rows):
            for i in range(self.num_cols):
                room = self.room_grid[j][i]
                x_low, y_low = room.top[0] + 1, room.top[1] + 1
                x_high, y_high = room.top[0] + room.size[0] - 1, room.top[1] + room.size[1] - 1
                # Door positions, in the order right, down, left, up.
                if i < self.num_cols - 1:
                    room.neighbors[0] = self.room_grid[j][i + 1]
                    room.door_pos[0] = (x_high, self._rand_int(y_low, y_high))
                if j < self.num_rows - 1:
                    room.neighbors[1] = self.room_grid[j + 1][i]
                    room.door_pos[1] = (self._rand_int(x_low, x_high), y_high)
                if i > 0:
                    room.neighbors[2] = self.room_grid[j][i - 1]
                    room.door_pos[2] = room.neighbors[2].door_pos[0]
                if j > 0:
                    room.neighbors[3] = self.room_grid[j - 1][i]
                    room.door_pos[3] = room.neighbors[3].door_pos[1]
        self.agent_pos = (
            (self.num_cols // 2) * (self.room_size - 1) + self.room_size // 2,
            (self.num_rows // 2) * (self.room_size - 1) + self.room_size // 2,
        )
        self.agent_dir = 0


def make_level(task: str, seed: int) -> MixedTrainLocalLevel:
    """A freshly reset level for (task, seed); raises ``UnknownNameError`` for a bad task."""
    level = MixedTrainLocalLevel(resolve_task(task, seed))
    level.reset(seed=seed)
    return level
