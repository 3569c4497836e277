"""Episode files: one JSON file per episode, written atomically when it ends, so a file on disk
is always complete and a resumed run treats its presence as "this episode is done".

``load_trajectory`` turns every way a file can be broken into ``CorruptTrajectory``, which a
resumed run answers by moving the file aside (``quarantine``) and playing the episode again.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from speedrunner.core.atomic import atomic_write_json
from speedrunner.core.trajectory import CorruptTrajectory, Trajectory


def episode_path(run_dir: Path, split: str, index: int, eval_point: int | None = None) -> Path:
    if split == "eval":
        return run_dir / "episodes" / "eval" / f"at{eval_point:04d}" / f"{index:04d}.json"
    return run_dir / "episodes" / split / f"{index:04d}.json"


def save_trajectory(run_dir: Path, trajectory: Trajectory) -> Path:
    path = episode_path(run_dir, trajectory.split, trajectory.index, trajectory.eval_point)
    atomic_write_json(path, trajectory.to_json(), indent=None)
    return path


MAX_TRAJECTORY_BYTES = 256 * 1024 * 1024
"""Largest episode file read back. A real one stays far below (tens of MB at most): the sandbox
bounds each call tree, an episode keeps at most 2,000,000 characters of tree annotations, and the
rest is one observation per action and one answer per LLM call. A larger file (a runaway writer,
a planted file) is refused without being read, so it cannot take the parent's memory (JSON costs
several times its size in objects)."""


def load_trajectory(path: Path) -> Trajectory:
    """The stored episode; ``CorruptTrajectory`` (with the reason) if the file is not one."""
    size = path.stat().st_size
    if size > MAX_TRAJECTORY_BYTES:
        raise CorruptTrajectory(
            f"{path}: {size} bytes, more than an episode file may have "
            f"({MAX_TRAJECTORY_BYTES}); not read"
        )
    try:
        data = json.loads(path.read_text("utf-8"))
    except (ValueError, RecursionError, MemoryError) as e:  # JSONDecodeError, UnicodeDecodeError
        raise CorruptTrajectory(f"{path}: not readable JSON ({type(e).__name__})") from None
    try:
        return Trajectory.from_json(data)
    except CorruptTrajectory as e:
        raise CorruptTrajectory(f"{path}: {e}") from None


def quarantine(path: Path, reason: str) -> Path:
    """Move a corrupt file aside as ``<name>.corrupt`` (never overwriting an earlier one) and say so
    on stderr; returns where it went. Nothing is deleted: the bytes stay for a post-mortem."""
    target = path.with_name(path.name + ".corrupt")
    n = 1
    while target.exists():
        n += 1
        target = path.with_name(f"{path.name}.corrupt{n}")
    path.rename(target)
    print(
        f"speedrunner: {reason}; moved it to {target.name} and playing the episode again",
        file=sys.stderr,
    )
    return target


def load_or_quarantine(path: Path) -> Trajectory | None:
    """The stored episode at ``path``, or ``None`` after moving a corrupt file aside (resume)."""
    try:
        return load_trajectory(path)
    except CorruptTrajectory as e:
        quarantine(path, str(e))
        return None
