"""The run's experience as the sleep-phase inducer's analysis code sees it.

SpeedRunner's inducer runs Python in a sandbox session (``core/sandbox/analysis.py``)
whose only readable run files are the training episodes and the codebook generations,
mounted read-only. This module is what that code imports to load them; it needs only
the standard library and ``core.runtime.trajectory``, so it imports inside the sandbox.

The session is prepared with ``configure(...)`` before the inducer's first code runs;
the inducer then calls::

    from speedrunner.core.experience import episodes, codebook_source
    eps = episodes(generation=1, success=False)         # list[Trajectory]
    for t in episodes(skill="go_to"):                   # episodes that called go_to
        for call in t.skill_calls():                    # {"step", "call", "tree", "actions"}
            print(t.index, call["call"], call["tree"]["error"])

Only episodes up to the batch being slept on are visible (``upto``), so a sleep phase
re-run after a kill sees exactly what it saw the first time, even if later files exist.

In a codebook run every sleep phase writes one generation, so training batch ``b`` is
the batch played with generation ``b``: ``batch=`` and ``generation=`` select the same
episodes. Both are offered because the inducer thinks in both.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from speedrunner.core.runtime.trajectory import Trajectory, load_trajectory

__all__ = ["codebook_source", "configure", "episodes", "generations"]


@dataclass(frozen=True)
class _Where:
    episodes_dir: Path
    codebook_dir: Path
    upto: int
    """The last episode index the current sleep phase may see."""


_where: _Where | None = None


def configure(episodes_dir: str | Path, codebook_dir: str | Path, upto: int) -> None:
    """Point this module at one run's experience (the method calls this, not the inducer)."""
    global _where
    _where = _Where(Path(episodes_dir), Path(codebook_dir), upto)


def _here() -> _Where:
    if _where is None:
        raise RuntimeError("speedrunner.core.experience is not configured: call configure(episodes_dir, "
                           "codebook_dir, upto) first")
    return _where


def episodes(*, batch: int | None = None, generation: int | None = None, success: bool | None = None,
             skill: str | None = None) -> list[Trajectory]:
    """Training episodes in index order, filtered by batch, codebook generation, outcome,
    and whether any skill call (nested calls included) used the function ``skill``."""
    where = _here()
    found = []
    for path in sorted(where.episodes_dir.glob("*.json")):
        if not path.stem.isdigit() or int(path.stem) > where.upto:
            continue
        t = load_trajectory(path)
        if generation is not None and t.knowledge_version != generation:
            continue
        if batch is not None and t.knowledge_version != batch:
            continue
        if success is not None and t.success != success:
            continue
        if skill is not None and not any(_calls(c["tree"], skill) for c in t.skill_calls()):
            continue
        found.append(t)
    return found


def _calls(tree: dict | None, name: str) -> bool:
    stack = [tree] if tree else []
    while stack:
        node = stack.pop()
        if node.get("name") == name:
            return True
        stack.extend(c for c in node.get("calls") or () if isinstance(c, dict))
    return False


def generations() -> list[int]:
    """The codebook generations stored so far."""
    return sorted(int(p.stem.removeprefix("gen_")) for p in _here().codebook_dir.glob("gen_*.py"))


def codebook_source(generation: int) -> str:
    """The Python source of one stored codebook generation."""
    return (_here().codebook_dir / f"gen_{generation}.py").read_text("utf-8")
