"""Runs untrusted code — LLM-written skills, sleep-phase analysis — outside the main process.

Never in-process: ``exec`` with restricted globals is not a security boundary. Every
untrusted line runs in a child process under the strongest tier that works here
(``bwrap`` > ``unshare`` > ``rlimits``; see ``commands.py``), with rlimits, a stripped
environment, a scratch directory and a wall-clock timeout that kills its process group.

- ``open_skill_runner(skills, tier="auto", limits=None)``: the episode's ``SkillRunner``
  (``.tier``, ``.call(...)``, ``.close()``); one process per episode, reused by every call.
- ``open_analysis_session(tier="auto", mounts=(), limits=None)``: ``.run(code, timeout_s)``
  -> ``AnalysisResult``; ``.close()``.
- ``available_tiers()``: the tiers that work on this machine, strongest first.
- ``ProcessLimits``: memory, CPU, file size, open files, processes, scratch size, printed output.

The package imports its parts lazily: the sandbox child imports ``child.py`` from here
and must not pay for (or expose) the parent's side.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from speedrunner.core.sandbox.analysis import (
        AnalysisResult,
        AnalysisSession,
        open_analysis_session,
    )
    from speedrunner.core.sandbox.limits import ProcessLimits
    from speedrunner.core.sandbox.skills import SandboxSkillRunner, open_skill_runner
    from speedrunner.core.sandbox.tiers import available_tiers, resolve_tier

__all__ = [
    "AnalysisResult",
    "AnalysisSession",
    "ProcessLimits",
    "SandboxSkillRunner",
    "available_tiers",
    "open_analysis_session",
    "open_skill_runner",
    "resolve_tier",
]

_WHERE = {
    "AnalysisResult": "analysis",
    "AnalysisSession": "analysis",
    "open_analysis_session": "analysis",
    "ProcessLimits": "limits",
    "SandboxSkillRunner": "skills",
    "open_skill_runner": "skills",
    "available_tiers": "tiers",
    "resolve_tier": "tiers",
}


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_WHERE[name]}"), name)
