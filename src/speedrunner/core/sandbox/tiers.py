"""Which isolation tiers work on this machine, and which one a caller gets.

A tier counts as available only if a real child started under it: bubblewrap may be
installed yet refused by the kernel (no user namespaces, a container without
CAP_SYS_ADMIN), ``unshare`` may exist without permission to use it. Each tier is
probed once per process, on first use, and the answer cached.
"""

from __future__ import annotations

import functools
import logging
import threading
from typing import Protocol

from speedrunner.core.sandbox.commands import TIERS, tool
from speedrunner.core.sandbox.limits import ProcessLimits
from speedrunner.errors import SandboxUnavailableError

log = logging.getLogger(__name__)

_warned = threading.Event()
_lock = threading.Lock()
_WEAK_TIER_WARNING = (
    "sandbox: untrusted code runs under the 'rlimits' tier — resource limits and uid 65534 only: "
    "it can reach the network and read any file that uid can read. Install bubblewrap "
    "(apt-get install bubblewrap) for real isolation."
)


_WEAK_WHAT = (
    "resource limits and a uid of its own only, no mount, network or pid namespace: it could read "
    "whatever that uid may read, reach the network and the host's /tmp"
)
WEAK_ISOLATION_NOTE = (
    f"WEAK ISOLATION: LLM-written code ran under the 'rlimits' sandbox tier: {_WEAK_WHAT}"
)
"""What the report's banner says about runs under the rlimits tier (each run's own note says
why)."""
_WHY_RLIMITS = {
    "rlimits": "chosen by name, run.sandbox=rlimits",
    "auto": "run.sandbox=auto, and no stronger tier worked on this machine (install bubblewrap: "
    "apt-get install bubblewrap); skill code runs there, analysis code over the run never does",
}


def isolation_note(tier: str | None, requested: str | None = None) -> str | None:
    """What summary.json and the sleep records say about a run whose LLM-written code ran under
    ``tier``: a note for the rlimits tier, else ``None``. ``requested`` (``run.sandbox``) says how
    it got there: named, or ``auto`` finding nothing stronger (the skills of ASI and Voyager
    may)."""
    if tier != "rlimits":
        return None
    why = _WHY_RLIMITS.get(requested or "")
    return (
        "WEAK ISOLATION: LLM-written code ran under the 'rlimits' sandbox tier"
        f"{f' ({why})' if why else ''}: {_WEAK_WHAT}"
    )


class TierChoice(Protocol):
    """The tier a run's skill code got and what ``run.sandbox`` asked for
    (``core.method.SkillSupport`` declares both; it lives above this module, so it is named here
    by its shape)."""

    @property
    def sandbox_tier(self) -> str: ...

    @property
    def sandbox_requested(self) -> str | None: ...


def sandbox_summary(support: TierChoice | None) -> dict[str, str | None]:
    """summary.json's ``sandbox_tier`` (``None``: the method runs no LLM-written code) and
    ``isolation``."""
    if support is None:
        return {"sandbox_tier": None, "isolation": None}
    tier = support.sandbox_tier
    return {"sandbox_tier": tier, "isolation": isolation_note(tier, support.sandbox_requested)}


def check_analysis_tier(requested: str, resolved: str) -> None:
    """The rule for analysis code over a run directory: never under ``rlimits`` unless the user
    named it.

    Without a mount namespace, analysis code reads the whole run directory (its
    ``llm_calls.jsonl``, config, cache) and other runs' held-out episodes, and what it prints
    goes to the LLM; ``auto`` must not quietly land there.
    """
    if resolved == "rlimits" and requested != "rlimits":
        raise SandboxUnavailableError(
            "only the 'rlimits' sandbox tier works here, and analysis code under it could read "
            "the whole run directory (LLM call logs, config, caches) and other runs' evaluation "
            "episodes: install bubblewrap (apt-get install bubblewrap) or make unshare work, or "
            "accept the risk by naming the tier: run.sandbox=rlimits (--set run.sandbox=rlimits); "
            "every artifact then says so"
        )


def available_tiers() -> list[str]:
    """The tiers that really start a child here, strongest first (probed once, then cached)."""
    with _lock:
        return [tier for tier in TIERS if _probe(tier) is None]


def why_unavailable(tier: str) -> str | None:
    """``None`` if ``tier`` works here, else why not."""
    if tier not in TIERS:
        raise SandboxUnavailableError(
            f"unknown sandbox tier {tier!r}; tiers: auto, {', '.join(TIERS)}"
        )
    with _lock:
        return _probe(tier)


def resolve_tier(tier: str = "auto") -> str:
    """``tier`` itself if it works here (``auto``: the strongest that does), else an error."""
    if tier == "auto":
        tiers = available_tiers()
        if not tiers:  # even a plain child failed: report that problem
            raise SandboxUnavailableError(
                f"no sandbox tier works here: {why_unavailable('rlimits')}"
            )
        chosen = tiers[0]
    else:
        problem = why_unavailable(tier)
        if problem is not None:
            raise SandboxUnavailableError(f"sandbox tier {tier!r} is not available here: {problem}")
        chosen = tier
    if chosen == "rlimits" and not _warned.is_set():
        _warned.set()
        log.warning(_WEAK_TIER_WARNING)
    return chosen


@functools.cache
def _probe(tier: str) -> str | None:
    from speedrunner.core.sandbox.process import SandboxProcess, SandboxStartError

    wrapper = {"bwrap": "bwrap", "unshare": "unshare"}.get(tier)
    if wrapper is not None and tool(wrapper) is None:
        hint = " (Debian/Ubuntu: apt-get install bubblewrap)" if tier == "bwrap" else ""
        return f"{wrapper} is not installed{hint}"
    try:
        process = SandboxProcess(tier, ProcessLimits(), mode="analysis", startup_timeout_s=30)
    except (SandboxStartError, OSError) as e:
        return str(e)
    process.kill()
    return None
