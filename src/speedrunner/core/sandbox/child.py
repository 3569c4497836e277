"""The sandbox child: limits itself, drops privileges, then serves the parent's requests.

Started as ``python -I -B -S -c <bootstrap> <package root> <read fd> <write fd>``. Order
matters and is the point of this module: the first message (trusted, from the parent)
says which limits to set and which modules to import; the child sets the rlimits,
imports everything it will need while it can still read the interpreter's files, becomes
uid 65534 if it started as root, and only then accepts requests that carry untrusted
code. Requests, one at a time:

- ``{"op": "load", "id", "source", "api_module"}``: check and compile the codebook (restricted)
  and run it once, to report an error in its module-level code;
- ``{"op": "call", "id", "name", "args", "kwargs", "observation", "max_actions", "scratch"}``:
  run a skill in a fresh namespace of the codebook (its module code run anew, functions
  traced), so nothing an earlier call left there is seen; each primitive action is an
  ``{"act", "id"}`` message answered by the parent before the skill goes on; ends with
  ``{"id", "result": {"tree", "returned", "error", "stopped_by", "scratch"}}``;
- ``{"op": "run", "id", "code"}`` (analysis mode): exec arbitrary code in a persistent
  namespace; answers ``{"id", "stdout", "error"}``.

Every reply echoes the request's ``id``; the parent treats a reply with another id (one
queued by code that wrote to the pipe itself) as a protocol violation.

The parent's side is ``skills.py`` / ``analysis.py``; this module imports nothing heavy.
"""

from __future__ import annotations

import builtins
import importlib
import json
import os
import resource
import signal
import sys
import time
from typing import TYPE_CHECKING, Any

from speedrunner.core.sandbox.channel import Channel, ChannelClosed
from speedrunner.core.sandbox.tracing import (
    LOAD_FAILED,
    PrintSink,
    Recorder,
    Stop,
    check_returned,
    check_scratch,
    own_traceback,
    traced,
)
from speedrunner.core.skill import MAX_ACTION_CHARS

if TYPE_CHECKING:
    from speedrunner.core.sandbox.restrict import CompiledCodebook

ANALYSIS_FILENAME = "<analysis>"


def main(argv: list[str]) -> None:
    parent = os.getppid()
    _die_with_parent(parent)
    channel = Channel(int(argv[0]), int(argv[1]))
    config = channel.recv()
    _limit(config["limits"])
    # Started with -S and -I: the parent names the plug-in roots (before site-packages, as
    # PYTHONPATH would be) and its site-packages directories.
    wanted = [*config.get("import_paths", ()), *config.get("site_packages", ())]
    sys.path += [p for p in wanted if p not in sys.path]
    for name in config["preload"]:
        importlib.import_module(name)
    server = SkillServer(channel, config) if config["mode"] == "skills" else AnalysisServer(config)
    if config.get("drop_to") is not None:
        _drop_privileges(int(config["drop_to"]))
        _die_with_parent(parent)  # a uid change clears the parent-death signal
        _explain_unreadable_imports(config["tier"])
    channel.send({"ready": os.getpid(), "uid": os.getuid()})
    while True:
        try:
            request = channel.recv()
        except ChannelClosed:
            os._exit(0)
        reply = server.handle(request)
        reply["id"] = request.get("id")
        try:
            channel.send(reply)
        except (
            TypeError,
            ValueError,
            RecursionError,
        ) as e:  # our bug if it happens; say so rather than die
            channel.send(
                {"id": request.get("id"), "error": f"the sandbox could not encode its reply: {e}"}
            )


def _die_with_parent(parent: int) -> None:
    """SIGKILL us when our parent dies, so a busy child never outlives a killed run.

    Our parent is the run itself (rlimits), unshare (which has the same signal, set by
    setpriv) or bwrap's init (``--die-with-parent``); without it a skill stuck in a loop
    would spin on until its CPU limit after a kill -9 of the run.
    """
    import ctypes

    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:  # it died before the signal was armed
        os._exit(0)


def _limit(limits: dict[str, int]) -> None:
    mib = 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (limits["memory_mb"] * mib,) * 2)
    resource.setrlimit(resource.RLIMIT_CPU, (limits["cpu_s"], limits["cpu_s"] + 1))
    resource.setrlimit(resource.RLIMIT_FSIZE, (limits["file_size_mb"] * mib,) * 2)
    resource.setrlimit(resource.RLIMIT_NOFILE, (limits["open_files"],) * 2)
    resource.setrlimit(resource.RLIMIT_NPROC, (limits["processes"],) * 2)
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    signal.signal(
        signal.SIGXFSZ, signal.SIG_IGN
    )  # an oversized write fails with EFBIG instead of killing us


def _drop_privileges(uid: int) -> None:
    """Become ``uid`` for good (real, effective and saved ids; no groups), or die trying."""
    os.setgroups([])
    os.setgid(uid)
    os.setuid(uid)
    try:
        os.setuid(0)
    except PermissionError:
        pass
    else:
        os._exit(70)  # the drop did not hold: never run untrusted code as root
    if os.getuid() != uid or os.geteuid() != uid or os.getegid() != uid:
        os._exit(70)


class _UnreadableImports:
    """Last import finder: says why a module that was not preloaded cannot be imported.

    Without bwrap the child sees the host's files as uid 65534; if the interpreter lives
    where that uid cannot read (e.g. under /root), only preloaded modules are importable.
    """

    def __init__(self, tier: str) -> None:
        self.tier = tier

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> None:
        raise ModuleNotFoundError(
            f"No module named {name!r} available: under the {self.tier!r} sandbox tier the code "
            f"runs as uid {os.getuid()}, which cannot read this interpreter's files "
            f"({sys.prefix}), so only modules imported before the sandbox started can be used "
            "(use the bwrap tier, or a Python installation other users can read)",
            name=name,
        )


def _explain_unreadable_imports(tier: str) -> None:
    stdlib = os.path.dirname(os.__file__)
    if not os.access(stdlib, os.R_OK | os.X_OK):
        sys.meta_path.append(_UnreadableImports(tier))


class _Capture:
    """Points ``sys.stdout``/``sys.stderr`` at a writer for the duration of a request."""

    def __init__(self, write: Any) -> None:
        self.sink = PrintSink(write)

    def __enter__(self) -> None:
        self.saved = sys.stdout, sys.stderr
        sys.stdout = sys.stderr = self.sink

    def __exit__(self, *exc: object) -> None:
        sys.stdout, sys.stderr = self.saved


class SkillServer:
    """Runs skill calls; the env stays in the parent, reached through ``{"act"}`` messages."""

    def __init__(self, channel: Channel, config: dict[str, Any]) -> None:
        import speedrunner.core.sandbox.restrict  # noqa: F401  (imported while the files are readable)
        from speedrunner.core.sandbox.handle import SandboxEnv, bind
        from speedrunner.errors import EnvError

        self.channel = channel
        self.max_print_chars = int(config["limits"]["max_print_chars"])
        self.codebook: CompiledCodebook | None = None
        self.functions: set[str] = set()
        self.recorder: Recorder | None = None
        self.call_id: Any = None
        self.env_error = EnvError
        bind(self.send, self.stop)
        self.env_type = SandboxEnv

    def handle(self, request: dict[str, Any]) -> dict[str, Any]:
        if request.get("op") == "load":
            return self.load(request["source"], request["api_module"])
        if request.get("op") == "call":
            return {"result": self.call(request)}
        return {"error": f"unknown request {request.get('op')!r}"}

    def load(self, source: str, api_module: str) -> dict[str, Any]:
        from speedrunner.core.sandbox.restrict import compile_codebook

        discard = Recorder(0, self.env_type)
        try:
            with _Capture(discard.write):
                codebook = compile_codebook(source, api_module)
                _, functions = codebook.instantiate()
        except BaseException as e:
            return {"loaded": False, "error": f"{LOAD_FAILED}:\n" + own_traceback(e)}
        self.codebook = codebook
        self.functions.update(functions)
        return {"loaded": True, "functions": sorted(self.functions)}

    def fresh_namespace(self, codebook: CompiledCodebook) -> dict[str, Any]:
        """The codebook run anew for one call (its module-level prints dropped), functions
        traced."""
        discard = Recorder(0, self.env_type)
        with _Capture(discard.write):
            namespace, functions = codebook.instantiate()
        for name in functions:
            namespace[name] = traced(namespace[name], lambda: self.recorder)
        return namespace

    def stop(self, reason: str) -> Stop:
        if self.recorder is not None and self.recorder.stopped is None:
            self.recorder.stopped = reason
        return Stop(reason)

    def send(self, action: str) -> dict[str, Any]:
        """The ``Transport`` of the call's env: one action to the parent, its reply back."""
        if not isinstance(action, str):
            raise TypeError(f"act() takes an action string, not {type(action).__name__}")
        if len(action) > MAX_ACTION_CHARS:
            raise ValueError(
                f"an action has at most {MAX_ACTION_CHARS} characters, not {len(action)}"
            )
        self.channel.send({"act": action, "id": self.call_id})
        try:
            reply = self.channel.recv()
        except ChannelClosed:
            os._exit(0)
        rec = self.recorder
        if "stop" in reply:
            raise self.stop(str(reply["stop"]))
        if rec is not None:  # the parent fills in what it served for action number i
            rec.action({"i": rec.actions_sent})
            rec.actions_sent += 1
        if "error" in reply:
            raise self.env_error(reply["error"])
        return reply

    def call(self, request: dict[str, Any]) -> dict[str, Any]:
        name = request["name"]
        observation = request["observation"]
        self.call_id = request.get("id")
        rec = self.recorder = Recorder(self.max_print_chars, self.env_type)
        returned: Any = None
        error: str | None = None
        given = request.get("scratch") or {}
        env = None
        try:
            if self.codebook is None:
                raise RuntimeError("no codebook is loaded")
            if name not in self.functions:
                raise LookupError(f"no skill named {name!r} in the codebook")
            namespace = self.fresh_namespace(self.codebook)
            if name not in namespace:
                raise LookupError(
                    f"no skill named {name!r} in this run of the codebook's module code"
                )
            env = self.env_type(
                observation["text"],
                observation["structured"],
                bool(observation.get("done")),
                actions_left=request.get("max_actions"),
                scratch=json.loads(json.dumps(given)),
            )
            with _Capture(rec.write):
                value = namespace[name](env, *request["args"], **request["kwargs"])
            returned, error = check_returned(value)
        except Stop:
            pass
        except (
            BaseException
        ) as e:  # SystemExit, KeyboardInterrupt and MemoryError included: we go on
            error = own_traceback(e)
        finally:
            self.recorder = None
        scratch = given
        if env is not None:
            kept, scratch_error = check_scratch(getattr(env, "scratch", None))
            if scratch_error is None:
                scratch = kept
            else:
                error = error or scratch_error
        tree = rec.finish()
        if tree["name"] == "?":
            tree.update(name=name, args=request["args"], kwargs=request["kwargs"])
        if error is not None:
            tree["error"] = error
        stopped_by = rec.stopped or ("error" if error is not None else "returned")
        tree["stopped_by"] = stopped_by
        return {
            "tree": tree,
            "returned": returned,
            "error": error,
            "stopped_by": stopped_by,
            "scratch": scratch,
        }


class AnalysisServer:
    """Runs arbitrary analysis code in one namespace that lives as long as the process."""

    def __init__(self, config: dict[str, Any]) -> None:
        self.max_print_chars = int(config["limits"]["max_print_chars"])
        self.namespace: dict[str, Any] = {"__name__": "__analysis__", "__builtins__": builtins}

    def handle(self, request: dict[str, Any]) -> dict[str, Any]:
        import linecache

        if request.get("op") != "run":
            return {"error": f"unknown request {request.get('op')!r}"}
        code = request["code"]
        out: list[str] = []
        budget = [self.max_print_chars, 0]

        def write(text: str) -> int:
            if not isinstance(text, str):
                raise TypeError(f"write() argument must be str, not {type(text).__name__}")
            kept = text[: max(budget[0], 0)]
            budget[0] -= len(kept)
            budget[1] += len(text) - len(kept)
            out.append(kept)
            return len(text)

        error = None
        started = time.monotonic()
        linecache.cache[ANALYSIS_FILENAME] = (
            len(code),
            None,
            code.splitlines(True),
            ANALYSIS_FILENAME,
        )
        try:
            with _Capture(write):
                exec(compile(code, ANALYSIS_FILENAME, "exec"), self.namespace)
        except BaseException as e:
            error = own_traceback(e, keep=lambda f: f != __file__)
        stdout = "".join(out)
        if budget[1]:
            stdout += f"\n[... {budget[1]} more printed characters not kept]"
        return {"stdout": stdout, "error": error, "duration_s": time.monotonic() - started}
