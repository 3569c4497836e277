"""Which task kind an episode plays, from its seed alone.

Kept apart from ``levels`` (which imports minigrid, gymnasium, networkx and pygame: a third
of a second) because the client side of a run needs only this: its episodes are played on
the BabyAI server, and a run's start-up should not pay for the level generator.
"""

from __future__ import annotations

import hashlib

from speedrunner.benchmarks.babyai.config import TASK_KINDS


def kind_for_seed(seed: int, kinds: tuple[str, ...] = TASK_KINDS) -> str:
    """The task kind for ``seed`` among ``kinds``, via a stable hash (same in every process).

    A hash rather than ``seed % n`` so that kind and layout (which uses ``seed`` directly
    as the numpy seed) are not correlated through the low bits.
    """
    digest = hashlib.sha256(f"babyai-kind/{seed}".encode()).digest()
    return kinds[int.from_bytes(digest[:4], "big") % len(kinds)]
