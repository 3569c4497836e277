"""A sandboxed Python session for the sleep phase's analysis code.

The sleep-phase agent writes arbitrary Python to study stored trajectories. It runs in
the same kind of child as skills (no network, no keys, limits, uid 65534) but with the
whole language: any stdlib import, ``open`` included. Under ``bwrap`` the only files it
can see besides the interpreter are the ``mounts`` it was given, read-only at the same
paths (e.g. one run's experience directory), so nothing else under the run directory —
configs, caches, logs with secrets — is readable; ``unshare`` builds the same view. Under
``rlimits`` mounts are not enforced (the session can read whatever its uid can), so a
session with mounts runs there only if the user named that tier.

State (variables, imported modules) persists between ``run`` calls of one session. A
timeout or a crash kills the process; the next ``run`` starts a fresh one, and the
result says that state was lost.

The code may write on the protocol pipe itself. Each ``run`` carries a fresh random id its
reply must echo; the reply is checked (``schema.py``); anything waiting on the pipe before a
``run`` is sent, and anything more arriving after its reply, is a protocol violation too: the
run ends with an error saying so (``violation``), the process is replaced, and
``violations`` counts it. So a reply written before the ``run`` it claims to answer (queued,
or left by a thread for later) is never believed. What is not prevented: code running in
the session can read the id of the ``run`` being served from the process's own memory and
answer it in the server's place; the output of analysis code is that code's word anyway.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from speedrunner.core.sandbox.channel import ChannelTimeout
from speedrunner.core.sandbox.lifecycle import SandboxOwner
from speedrunner.core.sandbox.limits import ProcessLimits
from speedrunner.core.sandbox.process import SandboxDied, SandboxProcess, SandboxViolation
from speedrunner.core.sandbox.schema import analysis_message_bytes, check_run_reply
from speedrunner.core.sandbox.tiers import check_analysis_tier, isolation_note, resolve_tier

PRELOAD = (
    "argparse",
    "ast",
    "base64",
    "bisect",
    "collections",
    "collections.abc",
    "contextlib",
    "copy",
    "csv",
    "dataclasses",
    "datetime",
    "decimal",
    "difflib",
    "encodings.idna",
    "enum",
    "fnmatch",
    "fractions",
    "functools",
    "glob",
    "gzip",
    "hashlib",
    "heapq",
    "inspect",
    "io",
    "itertools",
    "json",
    "logging",
    "math",
    "operator",
    "os",
    "pathlib",
    "pprint",
    "random",
    "re",
    "shutil",
    "signal",
    "socket",
    "statistics",
    "string",
    "struct",
    "subprocess",
    "sys",
    "tempfile",
    "textwrap",
    "threading",
    "time",
    "traceback",
    "typing",
    "uuid",
    "zipfile",
)
"""Imported before the child drops privileges: under ``rlimits``/``unshare`` with an interpreter
that uid 65534 cannot read (e.g. under /root), these are the modules a session can use."""


@dataclass(frozen=True)
class AnalysisResult:
    """What one ``run`` did: printed output (capped), the error if any, and how long it took."""

    stdout: str
    error: str | None
    timed_out: bool
    duration_s: float
    violation: str | None = None
    """Set when the sandbox broke the protocol (e.g. the code wrote a reply of its own)."""


def open_analysis_session(
    *,
    tier: str = "auto",
    mounts: Sequence[Path | str] = (),
    limits: ProcessLimits | None = None,
    requested: str | None = None,
    preload: Sequence[str] = (),
) -> AnalysisSession:
    """Start a session; ``mounts`` (existing paths) are readable in it, read-only, at the same
    paths.

    With ``mounts`` (a run directory's data) the ``rlimits`` tier is refused unless it was
    chosen by name: ``requested`` is what the user asked for (``run.sandbox``), when ``tier``
    is what it resolved to; it defaults to ``tier``. ``preload``: modules imported (besides
    ``PRELOAD``) before the child drops privileges, for interpreters other uids cannot read.
    """
    paths = [Path(m).resolve(strict=True) for m in mounts]
    resolved = resolve_tier(tier)
    if paths:
        check_analysis_tier(tier if requested is None else requested, resolved)
    return AnalysisSession(
        resolved, paths, limits or ProcessLimits(), tuple(preload), requested=requested
    )


class AnalysisSession(SandboxOwner):
    """``run(code, timeout_s)`` as many times as needed, then ``close()``."""

    def __init__(
        self,
        tier: str,
        mounts: list[Path],
        limits: ProcessLimits,
        preload: tuple[str, ...] = (),
        *,
        requested: str | None = None,
    ) -> None:
        super().__init__("the analysis session")
        self.tier = tier
        self.requested = requested
        """What ``run.sandbox`` asked for; says why a weak tier was used (``isolation``)."""
        self.preload = (*PRELOAD, *preload)
        self.mounts = mounts
        self.limits = limits
        self.violations = 0
        """Protocol violations so far (each ended its run and replaced the process)."""
        self._ensure_process()

    @property
    def isolation(self) -> str | None:
        """The weak-isolation note a sleep record carries (``None`` unless the tier is rlimits)."""
        return isolation_note(self.tier, self.requested)

    def _start_process(self) -> SandboxProcess:
        return SandboxProcess(
            self.tier,
            self.limits,
            mode="analysis",
            preload=self.preload,
            read_only=self.mounts,
            max_message_bytes=analysis_message_bytes(self.limits.max_print_chars),
        )

    def _ensure_process(self) -> SandboxProcess:
        return self._live_process()[0]

    def run(self, code: str, timeout_s: float) -> AnalysisResult:
        """Execute ``code`` in the session's namespace; never raises for anything the code does."""
        started = time.monotonic()
        deadline = started + timeout_s
        process = self._ensure_process()
        request_id = SandboxProcess.new_request_id()
        try:
            process.start_request({"op": "run", "id": request_id, "code": code}, deadline)
            stdout, error = check_run_reply(
                process.receive(deadline), request_id, self.limits.max_print_chars
            )
            if process.channel is not None and process.channel.pending():
                raise SandboxViolation(
                    "it broke the protocol (more arrived after the reply: the code wrote to "
                    "the sandbox's protocol pipe itself)"
                )
        except ChannelTimeout:
            self._discard_process()
            return AnalysisResult(
                "",
                f"timed out after {timeout_s:g} s: the session's process was killed; "
                "the next run starts a fresh one (variables are lost)",
                True,
                time.monotonic() - started,
            )
        except SandboxViolation as e:
            self._discard_process()
            self.violations += 1
            return AnalysisResult(
                "",
                f"the sandbox {str(e).removeprefix('it ')}; this run's output was discarded "
                "and the session restarted (variables are lost)",
                False,
                time.monotonic() - started,
                violation=str(e),
            )
        except SandboxDied as e:
            self._discard_process()
            return AnalysisResult(
                "",
                f"{e}\n(the next run starts a fresh process; variables are lost)",
                False,
                time.monotonic() - started,
            )
        except BaseException:
            self._discard_process()
            raise
        return AnalysisResult(stdout, error, False, time.monotonic() - started)

    def restart(self) -> None:
        """Replace the process (the next ``run`` starts a fresh one; variables are lost)."""
        self._discard_process()
