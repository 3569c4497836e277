"""ScienceWorld task strings, variation splits, and the train / eval episode streams.

Task string grammar (what ``EpisodeSpec.task`` holds and ``reset(task, seed)`` reads)::

    <id>[/<split>][#<variation>]        e.g. "4-1/test#226", "3-3/train", "4-2"

``<id>`` is a task id from ``config.TASK_IDS`` (``"4-1"`` = find-living-thing);
``<split>`` is the package's fixed ``train``, ``dev`` or ``test`` variation split
(default ``train``); ``#<variation>`` names the variation exactly and must lie in that
split. Without it the seed picks: the ``seed % n``-th variation of the split. The
benchmark always writes the explicit form, so logs say which variation was played.

The package splits each task's variations into contiguous ranges (train ~50%, then dev
~25%, then test ~25%); ``SPLIT_SIZES`` records them so task strings can be built and
checked without a JVM (a test checks them against the package).
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from speedrunner.benchmarks.scienceworld.config import TASK_IDS, TASK_SETS
from speedrunner.core.names import unknown
from speedrunner.core.seeding import episode_seed
from speedrunner.errors import EnvError

SPLITS = ("train", "dev", "test")
# (train, dev, test) variation counts per task, in that order from variation 0.
SPLIT_SIZES: dict[str, tuple[int, int, int]] = {
    "3-1": (10, 5, 5),
    "3-2": (10, 5, 5),
    "3-3": (450, 225, 225),
    "3-4": (300, 150, 150),
    "4-1": (150, 75, 75),
    "4-2": (150, 75, 75),
    "4-3": (150, 75, 75),
    "4-4": (150, 75, 75),
}


def variations(task_id: str, split: str) -> range:
    """The variation indices of ``task_id`` in ``split``, in the package's order."""
    if task_id not in SPLIT_SIZES:
        raise EnvError(unknown("ScienceWorld task id", task_id, SPLIT_SIZES))
    if split not in SPLITS:
        raise EnvError(unknown("ScienceWorld split", split, SPLITS))
    sizes = SPLIT_SIZES[task_id]
    start = sum(sizes[: SPLITS.index(split)])
    return range(start, start + sizes[SPLITS.index(split)])


@dataclass(frozen=True)
class TaskRef:
    """One ScienceWorld episode: task id, split and the exact variation to load."""

    task_id: str
    split: str
    variation: int

    @property
    def task_name(self) -> str:
        """The package's task name, e.g. ``"find-living-thing"``."""
        return TASK_IDS[self.task_id]

    def __str__(self) -> str:
        return f"{self.task_id}/{self.split}#{self.variation}"


def parse_task(task: str, seed: int) -> TaskRef:
    """Resolve a task string (see the module docstring) and seed to one variation."""
    head, _, var_text = task.partition("#")
    task_id, _, split = head.partition("/")
    pool = variations(task_id.strip(), split.strip() or "train")
    if not var_text:
        return TaskRef(task_id.strip(), split.strip() or "train", pool[seed % len(pool)])
    try:
        variation = int(var_text)
    except ValueError as e:
        raise EnvError(
            f"bad ScienceWorld task {task!r}: variation after '#' must be an "
            f"integer, e.g. '4-1/test#226'"
        ) from e
    if variation not in pool:
        raise EnvError(
            f"bad ScienceWorld task {task!r}: variation {variation} is not in the "
            f"{split or 'train'} split of {task_id} ({pool.start}..{pool.stop - 1})"
        )
    return TaskRef(task_id.strip(), split.strip() or "train", variation)


def train_ref(task_set: str, rollouts: int, seed: int, index: int) -> TaskRef:
    """Training episode ``index`` with episode seed ``seed``.

    ``t3t4`` trains on t3 for the first half of ``rollouts`` and on t4 afterwards (the
    distribution shift the paper studies); every other set draws its subtask from the seed.
    """
    if task_set == "t3t4":
        pool = TASK_SETS["t3"] if index < rollouts // 2 else TASK_SETS["t4"]
    else:
        pool = TASK_SETS.get(task_set, (task_set,))
    task_id = pool[seed % len(pool)]
    train = variations(task_id, "train")
    return TaskRef(task_id, "train", train[(seed // len(pool)) % len(train)])


def eval_refs(task_set: str, n: int, run_seed: int) -> list[TaskRef]:
    """The fixed held-out set: ``n`` test-split episodes, round-robin over the subtasks.

    Each subtask walks its own seeded permutation of test variations, so a subtask's
    episodes are distinct variations until its test split is exhausted (3-1 and 3-2 have 5).
    """
    ids = TASK_SETS.get(task_set, (task_set,))
    orders = {}
    for task_id in ids:
        test = list(variations(task_id, "test"))
        random.Random(episode_seed(run_seed, f"eval/{task_id}", 0)).shuffle(test)
        orders[task_id] = test
    refs = []
    for i in range(n):
        task_id = ids[i % len(ids)]
        order = orders[task_id]
        refs.append(TaskRef(task_id, "test", order[(i // len(ids)) % len(order)]))
    return refs
