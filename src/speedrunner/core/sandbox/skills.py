"""The parent's side of skill calls: a ``SkillRunner`` over one sandbox process per episode.

The env never leaves the parent. A call sends ``{"op": "call"}``; the skill's every
``env.act`` arrives as ``{"act": action}``, which the runner serves by calling the
episode's ``step`` and replying with the observation (or the env's refusal), counting
actions as it goes. The runner alone decides when a call ends early:

- ``max_actions``: the next ``act`` is answered ``{"stop": ...}`` and the skill unwinds
  (private ``BaseException`` in the child), so the tree and prints survive. Every action
  that reaches ``step`` counts, a refused one too (a skill retrying a refused action in a
  loop is stopped by the cap, not only by the clock);
- ``episode_done``: same, for an ``act`` after the episode ended;
- a protocol violation (``schema.py``: a message of the wrong shape or size, a reply to
  another request or one waiting on the pipe before its request was sent, a tree that does
  not account for exactly the served actions or names a function the codebook does not
  have): the call
  ends as an error built from the served actions (``sandbox_violation`` in its tree), the
  process is killed and ``violations`` counts it;
- ``timeout``: wall clock. The process group is killed (a skill stuck in C code or a loop
  cannot be unwound); the tree is rebuilt from the actions the parent served, and the next
  call transparently starts a fresh process (reloading the codebook).

The process and the compiled codebook are reused across calls, so a call costs pipe round
trips, not a process start; each call runs the codebook anew in a fresh namespace
(``child.py``), so no state but ``env.scratch`` passes from one call to the next. Convention:
every skill takes the ``SkillEnv`` as its first parameter; the actor's call supplies the rest
(``go_to("red ball")`` runs ``go_to(env, "red ball")``).
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from typing import Any

from speedrunner.core import pyast
from speedrunner.core.sandbox.channel import ChannelTimeout, compact, separators
from speedrunner.core.sandbox.lifecycle import SandboxOwner
from speedrunner.core.sandbox.limits import ProcessLimits
from speedrunner.core.sandbox.process import SandboxDied, SandboxProcess, SandboxViolation
from speedrunner.core.sandbox.schema import (
    SKILL_MESSAGE_BYTES,
    check_act,
    check_load_reply,
    check_result,
    reconcile,
    reply_bytes,
    reply_values,
)
from speedrunner.core.sandbox.tiers import resolve_tier
from speedrunner.core.skill import SKILL_IMPORTS, SkillCall, SkillOutcome, Skills

MAX_EPISODE_TREE_CHARS = 2_000_000
"""Characters of the child's trees (``check_result``'s measure of everything a call keeps from
the child: every key of every node) one episode keeps in all; past it, a call is stored as its
served actions only. With the per-call budget (``schema.call_budget``) this bounds the parent's
memory and the episode file whatever the child sends, at any number of calls."""
_DROPPED_ERROR_CHARS = 300
"""Characters of a call's error kept once the episode's budget is spent (the rest is dropped)."""
_MODULE_NAME = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*$")


def open_skill_runner(
    skills: Skills, *, tier: str = "auto", limits: ProcessLimits | None = None
) -> SandboxSkillRunner:
    """Start the episode's sandbox for ``skills`` (``tier``: ``auto`` = the strongest that works
    here)."""
    return SandboxSkillRunner(skills, resolve_tier(tier), limits or ProcessLimits())


def launch_skill_process(
    tier: str, limits: ProcessLimits, api_module: str, *, wait: bool = False
) -> SandboxProcess:
    """A skill child with the modules skill code may import, launched and, unless ``wait``, not
    waited for: it boots while the caller goes on (``wait_ready()`` or the first request waits)."""
    return SandboxProcess(
        tier,
        limits,
        mode="skills",
        preload=[*SKILL_IMPORTS, api_module],
        max_message_bytes=SKILL_MESSAGE_BYTES,
        wait=wait,
    )


def load_codebook_in(
    process: SandboxProcess, source: str, api_module: str, deadline: float
) -> str | None:
    """Send a codebook to a skill child that has none yet: ``None`` if it loaded, else the load
    error (the codebook's own traceback). ``ChannelTimeout``/``SandboxDied`` as for any request."""
    request_id = SandboxProcess.new_request_id()
    process.start_request(
        {"op": "load", "id": request_id, "source": source, "api_module": api_module}, deadline
    )
    return check_load_reply(process.receive(deadline), request_id)


class SandboxSkillRunner(SandboxOwner):
    """Implements ``speedrunner.core.runtime.skill_call.SkillRunner``; see the module docstring."""

    def __init__(
        self,
        skills: Skills,
        tier: str,
        limits: ProcessLimits,
        process: SandboxProcess | None = None,
    ) -> None:
        """``process``: a skill child booted ahead for this runner (``launch_skill_process`` with
        the same tier, limits and API module, never used); without one, one is launched now."""
        super().__init__("the skill runner")
        if not _MODULE_NAME.match(skills.api_module):
            raise ValueError(f"not a module name: {skills.api_module!r}")
        self.skills = skills
        self.tier = tier
        self.limits = limits
        self.processes_started = 0
        self.violations = 0
        """Protocol violations so far (each ended its call and restarted the sandbox)."""
        self.episode_scratch: dict[str, Any] = {}
        """The authoritative ``env.scratch`` of the episode: sent with every call, replaced by what
        a call that ended cleanly left (checked), kept across sandbox restarts."""
        self.tree_chars = 0
        self._functions = pyast.top_level_functions(skills.source)
        """What a nested call in a tree may be named: the codebook's own functions (parsed by the
        parent once per source and shared by every episode's runner; not the child's word)."""
        self._load_error: str | None = None
        self._loaded = False
        # Launched now, waited for at the first call: the child boots while the episode goes on
        # (its next model call). A sandbox that cannot be launched fails here; one that does not
        # come up, at the first call, before anything is sent to it.
        self._process = process if process is not None else self._start_process()
        self.processes_started += 1

    @property
    def scratch(self) -> Any:
        return None if self._process is None else self._process.scratch

    def _ensure_process(self) -> SandboxProcess:
        if self._process is not None:
            self._finish_start()  # one that died booting is reported, not silently replaced
        process, fresh = self._live_process()
        if fresh:
            self.processes_started += 1
            self._loaded = False
            self._load_error = None
            self._finish_start()
        return process

    def _finish_start(self) -> None:
        assert self._process is not None
        try:
            self._process.wait_ready()
        except BaseException:
            self._discard_process()
            raise

    def _start_process(self) -> SandboxProcess:
        """A fresh skill child, launched, not waited for (tests replace it by one running hostile
        code, to check that the parent holds even when the restricted layer has been left)."""
        return launch_skill_process(self.tier, self.limits, self.skills.api_module)

    def call(
        self,
        call: SkillCall,
        *,
        step: Callable[[str], dict[str, Any]],
        observation: dict[str, Any],
        max_actions: int,
        timeout_s: float,
    ) -> SkillOutcome:
        process = self._ensure_process()
        with process.same_cpu():
            return self._call(process, call, step, observation, max_actions, timeout_s)

    def _call(
        self,
        process: SandboxProcess,
        call: SkillCall,
        step: Callable[[str], dict[str, Any]],
        observation: dict[str, Any],
        max_actions: int,
        timeout_s: float,
    ) -> SkillOutcome:
        deadline = time.monotonic() + timeout_s
        served: list[dict[str, Any]] = []
        try:
            if not self._loaded:
                self._load_error = load_codebook_in(
                    process, self.skills.source, self.skills.api_module, deadline
                )
                self._loaded = True
            if self._load_error is not None:
                return _failed(call, self._load_error)
            echoed = compact([list(call.args), dict(call.kwargs)])
            max_values = reply_values(max_actions, separators(echoed))
            if process.channel is not None:
                process.channel.max_bytes = reply_bytes(
                    self.limits.max_print_chars, max_actions, len(echoed)
                )
                process.channel.max_values = max_values
            call_id = SandboxProcess.new_request_id()
            process.start_request(
                {
                    "op": "call",
                    "id": call_id,
                    "name": call.name,
                    "args": list(call.args),
                    "kwargs": dict(call.kwargs),
                    "max_actions": max_actions,
                    "max_values": max_values,
                    "scratch": self.episode_scratch,
                    "observation": {
                        "text": observation["text"],
                        "structured": observation["structured"],
                        "done": bool(observation.get("done")),
                    },
                },
                deadline,
            )
            return self._serve(
                process,
                call,
                call_id,
                step,
                bool(observation.get("done")),
                max_actions,
                deadline,
                served,
            )
        except ChannelTimeout:
            self._discard_process()
            return _timed_out(call, served, timeout_s)
        except SandboxViolation as e:
            self._discard_process()
            self.violations += 1
            return _violated(call, served, str(e))
        except SandboxDied as e:
            self._discard_process()
            return _failed(
                call, f"{e}\n(the sandbox process is restarted for the next call)", served
            )
        # step() failed (env dead) or we were interrupted: the child is mid-call
        except BaseException:
            self._discard_process()
            raise

    def _serve(
        self,
        process: SandboxProcess,
        call: SkillCall,
        call_id: str,
        step: Callable[[str], dict[str, Any]],
        done: bool,
        max_actions: int,
        deadline: float,
        served: list[dict[str, Any]],
    ) -> SkillOutcome:
        stop: str | None = None
        while True:
            # a child that never waits would never see the deadline
            if time.monotonic() >= deadline:
                raise ChannelTimeout("deadline passed")
            message = process.receive(deadline)
            if "act" in message:
                action = check_act(message, call_id)
                if stop is None and done:
                    stop = "episode_done"
                elif stop is None and len(served) >= max_actions:
                    stop = "max_actions"
                if stop is not None:
                    reply: dict[str, Any] = {"stop": stop}
                else:
                    reply = step(action)
                    if "error" in reply:
                        served.append({"action": action, "error": str(reply["error"])})
                        reply = {"error": str(reply["error"])}
                    else:
                        served.append(
                            {"action": action, "text": reply["text"], "done": bool(reply["done"])}
                        )
                        reply = {
                            "text": reply["text"],
                            "structured": reply["structured"],
                            "done": bool(reply["done"]),
                        }
                        done = reply["done"]
                process.request(reply, deadline)
                continue
            result, kept = check_result(
                message, call_id, self.limits.max_print_chars, self._functions, max_actions
            )
            if process.channel is not None and process.channel.pending():
                raise SandboxViolation(
                    "it broke the protocol (more arrived after the call's result: code in the "
                    "sandbox wrote to the protocol pipe itself)"
                )
            tree = reconcile(result["tree"], served)
            self.episode_scratch = result.get("scratch", {})
            self.tree_chars += kept
            # the child saw it end too
            if stop is None and done and result["stopped_by"] == "episode_done":
                stop = "episode_done"
            return _outcome(
                call, tree, result, stop, served, self.tree_chars <= MAX_EPISODE_TREE_CHARS
            )


def _outcome(
    call: SkillCall,
    tree: dict[str, Any],
    result: dict[str, Any],
    stop: str | None,
    served: list[dict[str, Any]],
    keep_annotations: bool,
) -> SkillOutcome:
    error = result.get("error")
    stopped_by = result["stopped_by"]
    if stop is not None:  # the parent's word on why the call stopped wins over the child's
        stopped_by = stop
    elif stopped_by in ("max_actions", "episode_done"):  # the parent never said so
        stopped_by = "error" if error is not None else "returned"
    # the child's error too is its word: only its start is kept past the budget
    if not keep_annotations:
        error_text = tree.get("error")
        if isinstance(error_text, str) and len(error_text) > _DROPPED_ERROR_CHARS:
            error_text = error_text[:_DROPPED_ERROR_CHARS] + " [...]"
        tree = _tree(call, served, error_text)
        tree["annotations_dropped"] = (
            f"the episode's call trees passed {MAX_EPISODE_TREE_CHARS} characters: "
            "this call keeps only the actions the parent served"
        )
    tree["name"], tree["args"], tree["kwargs"] = call.name, list(call.args), dict(call.kwargs)
    tree["stopped_by"] = stopped_by
    return SkillOutcome(tree, returned=result.get("returned"), error=error, stopped_by=stopped_by)


def _violated(call: SkillCall, served: list[dict[str, Any]], message: str) -> SkillOutcome:
    """A protocol violation: the call ends as an error built from what the parent served."""
    error = (
        f"the skill's sandbox {message.removeprefix('it ')}; "
        "the call was ended and the sandbox restarted"
    )
    tree = _tree(call, served, error)
    tree["stopped_by"] = "error"
    tree["sandbox_violation"] = message
    return SkillOutcome(tree, error=error, stopped_by="error")


def _tree(
    call: SkillCall, served: list[dict[str, Any]], error: str | None = None
) -> dict[str, Any]:
    return {
        "name": call.name,
        "args": list(call.args),
        "kwargs": dict(call.kwargs),
        "calls": [],
        "actions": list(served),
        "returned": None,
        "error": error,
        "prints": "",
    }


def _failed(
    call: SkillCall, error: str, served: list[dict[str, Any]] | None = None
) -> SkillOutcome:
    tree = _tree(call, served or [], error)
    tree["stopped_by"] = "error"
    return SkillOutcome(tree, error=error, stopped_by="error")


def _timed_out(call: SkillCall, served: list[dict[str, Any]], timeout_s: float) -> SkillOutcome:
    tree = _tree(
        call,
        served,
        f"timed out after {timeout_s:g} s: the sandbox process was killed (its nested "
        "calls and prints are lost; the next call starts a fresh one)",
    )
    tree["stopped_by"] = "timeout"
    return SkillOutcome(tree, stopped_by="timeout")
