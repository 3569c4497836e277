"""BabyAI's task kinds, and which one an episode plays, from its seed alone.

Kept apart from ``levels`` (which imports minigrid, gymnasium and pygame) because the client
side of a run needs only this: its episodes are played on the BabyAI server, and a run's
start-up should not pay for the level generator. Kept apart from ``config`` (pydantic, a
seventh of a second) because the server, started afresh for every run, needs only this.
"""

from __future__ import annotations

import hashlib

TASK_KINDS = ("goto", "pickup", "open", "putnext", "pick_up_seq_go_to")
TASK_SETS = {"seq": ("pick_up_seq_go_to",), "mixed": TASK_KINDS, **{k: (k,) for k in TASK_KINDS}}


def kind_for_seed(seed: int, kinds: tuple[str, ...] = TASK_KINDS) -> str:
    """The task kind for ``seed`` among ``kinds``, via a stable hash (same in every process).

    A hash rather than ``seed % n`` so that kind and layout (which uses ``seed`` directly
    as the numpy seed) are not correlated through the low bits.
    """
    digest = hashlib.sha256(f"babyai-kind/{seed}".encode()).digest()
    return kinds[int.from_bytes(digest[:4], "big") % len(kinds)]
