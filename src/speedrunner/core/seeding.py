"""Episode seeds derived from (run seed, split, index) through a stable hash.

Python's ``hash()`` is salted per process, so we use sha256: the same triple gives
the same seed on any machine, in any process, in any order of execution.
"""

from __future__ import annotations

import hashlib


def episode_seed(run_seed: int, split: str, index: int) -> int:
    """A 31-bit seed for episode ``index`` of ``split`` ("train" or "eval") in a run."""
    digest = hashlib.sha256(f"speedrunner/{run_seed}/{split}/{index}".encode()).digest()
    return int.from_bytes(digest[:4], "big") & 0x7FFFFFFF
