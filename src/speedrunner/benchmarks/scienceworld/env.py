"""ScienceWorld as a ``TextEnv``: free-text actions in, the simulator's text out.

One JVM per env instance, started on the first ``reset`` (so building envs and
importing this module start nothing) and reused across episodes: each ``reset`` loads
the next variation into the same JVM. ``close()`` stops the JVM; an ``atexit`` hook
closes any env still open, and the package's ``die_on_exit`` gateway makes the JVM exit
when its parent process dies, so JVMs never outlive the run.

The JVM reads its options (heap cap, GC) from ``JAVA_TOOL_OPTIONS`` at launch; the
package does not let us pass options, so we set that variable for the duration of the
launch, under a lock because the environment is process-wide.

**Determinism trap** (the JVM twin of Crafter's): the simulator keeps objects in Scala
hash sets keyed by *identity* hash codes, which HotSpot draws from per-thread generators.
Room listings, valid-action lists, ambiguity menus and even gold paths then depend on
what the JVM did before, so a reused JVM replays a variation differently from a fresh
one. ``DETERMINISM_FLAGS`` (``-XX:hashCode=2``: every identity hash is 1) turn those sets
into insertion-ordered collision lists; a variation then reads the same in any JVM
after any history, at no visible cost at ScienceWorld's object counts.

Whatever the agent types reaches the simulator unchanged. "No known action matches that
input." and the numbered "Ambiguous request" prompt come back as ordinary observations
(answer the latter with the number). ``actions`` lists the currently valid action
strings, a hint rather than a limit.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import io
import json
import logging
import os
import socket
import threading
import weakref
from typing import Any

from speedrunner.benchmarks.scienceworld.tasks import TaskRef, parse_task
from speedrunner.core.env import Observation, StepResult, TextEnv
from speedrunner.core.interrupt import add_stop_hook
from speedrunner.errors import EnvError, InvalidActionError

_LAUNCH_LOCK = threading.Lock()
_OPEN: weakref.WeakSet[ScienceWorldTextEnv] = weakref.WeakSet()
_TASK_PREFIX = "Task Description:"
DETERMINISM_FLAGS = "-XX:+UnlockExperimentalVMOptions -XX:hashCode=2"
"""Always appended to the configured JVM options; see the module docstring."""
QUIET_STDOUT_FLAGS = "-Xlog:disable -Xlog:all=warning:stderr"
"""Always put before the configured JVM options. py4j learns the JVM's port from the first
line the JVM writes to stdout, and HotSpot's own log lines (e.g. "[warning][cds] ...") go to
stdout by default: one of them would arrive first and the launch would fail. Its warnings
now go to stderr (which py4j discards); a configured ``-Xlog`` that writes to stdout is
reported by ``launch_simulator``."""


def _close_all() -> None:
    for env in list(_OPEN):
        env.close()


atexit.register(_close_all)


def _not_from_py4j(record: logging.LogRecord) -> bool:
    return not record.name.startswith("py4j") and f"{os.sep}py4j{os.sep}" not in record.pathname


def quiet_py4j() -> None:
    """Silence py4j's own logging (connection errors with tracebacks, one per call in flight).

    Ctrl-C reaches the JVMs too (same process group), so every simulator call in flight and
    every later clean-up finds its JVM gone, and py4j logs each at ERROR with a traceback:
    through its ``py4j`` loggers, and through the root logger (``logging.exception``, which
    also installs a stderr handler). Those calls' results are discarded anyway; the run's one
    message says how to resume.
    """
    logging.getLogger("py4j").setLevel(logging.CRITICAL + 1)
    logging.getLogger().addFilter(_not_from_py4j)


add_stop_hook(quiet_py4j)


class _AckingReader(io.RawIOBase):
    """A py4j connection's socket, read with an immediate ACK before every ``recv``.

    py4j's Java side writes an answer through an 8 KB buffer, so an answer over 8 KB leaves
    in several small writes, and Nagle's algorithm holds each until the previous one is
    ACKed. This side, in request/response ("ping-pong") mode, delays that ACK, so every answer
    over 8 KB would wait for Linux's delayed-ACK timer. Setting ``TCP_QUICKACK`` before each
    read sends any pending ACK at once.
    """

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        self._sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_QUICKACK, 1)
        return self._sock.recv_into(buffer)


def _ack_at_once(connection: Any) -> Any:
    connection.stream = io.BufferedReader(_AckingReader(connection.socket))
    return connection


def _acking_connections(gateway: Any) -> None:
    """Make ``gateway``'s py4j connections, open and future, read with ``_AckingReader``.
    Without ``TCP_QUICKACK`` (not Linux) or py4j's internals as known, they stay as they are."""
    client = getattr(gateway, "_gateway_client", None)
    create = getattr(client, "_create_connection", None)
    if not hasattr(socket, "TCP_QUICKACK") or create is None or not hasattr(client, "deque"):
        return
    for connection in list(client.deque):
        _ack_at_once(connection)
    client._create_connection = lambda: _ack_at_once(create())


@functools.cache
def _simulator_class() -> type:
    """The package's ``ScienceWorldEnv`` with its valid commands fetched in one py4j call,
    over connections that do not wait for delayed ACKs (``_AckingReader``).

    Every ``step`` (and ``reset``) lists the valid commands, often a thousand of them. The
    package converts the JVM's list element by element, one py4j round trip each, which costs
    more CPU on both sides than the step itself. The same
    list also comes as one JSON string (``getValidActionObjectCombinationsJSON``, the call
    the package's ``..._with_templates`` uses); sorted, it is the plain list (which the
    simulator sorts). If a command ever breaks that JSON (the JVM writes it by hand), the
    package's own list is used. ``tests/benchmarks/test_scienceworld_env.py`` compares both.
    """
    from scienceworld import ScienceWorldEnv

    class Simulator(ScienceWorldEnv):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            _acking_connections(self._gateway)

        def __del__(self) -> None:
            if hasattr(self, "_gateway"):  # a launch that failed has nothing to close
                super().__del__()

        def get_valid_action_object_combinations(self) -> list[str]:
            try:
                listed = json.loads(self.server.getValidActionObjectCombinationsJSON())[
                    "validActions"
                ]
                return sorted(str(entry["action"]) for entry in listed)
            except (ValueError, KeyError, TypeError):
                return super().get_valid_action_object_combinations()

    return Simulator


def launch_simulator(env_step_limit: int, jvm_options: str) -> Any:
    """Start one ScienceWorld JVM with ``jvm_options`` (between ``QUIET_STDOUT_FLAGS`` and
    ``DETERMINISM_FLAGS``)."""
    from py4j.protocol import Py4JError

    with _LAUNCH_LOCK:
        previous = os.environ.get("JAVA_TOOL_OPTIONS")
        os.environ["JAVA_TOOL_OPTIONS"] = f"{QUIET_STDOUT_FLAGS} {jvm_options} {DETERMINISM_FLAGS}"
        try:
            return _simulator_class()("", envStepLimit=env_step_limit)
        except (OSError, Py4JError) as e:
            raise EnvError(
                f"could not start the ScienceWorld JVM ({e}); check that Java 11+ "
                f"is on PATH (`java -version`) and that "
                f"jvm_options={jvm_options!r} are valid JVM flags"
            ) from e
        except ValueError as e:  # py4j read something other than the port from the JVM's stdout
            raise EnvError(
                f"the ScienceWorld JVM wrote to stdout before its port ({e}); with "
                f"jvm_options={jvm_options!r}, send JVM logs to stderr or a file "
                f"(e.g. -Xlog:gc:stderr or -Xlog:gc:file=gc.log, not -Xlog:gc)"
            ) from e
        finally:
            if previous is None:
                os.environ.pop("JAVA_TOOL_OPTIONS", None)
            else:
                os.environ["JAVA_TOOL_OPTIONS"] = previous


def stop_simulator(sim: Any) -> None:
    """Shut a ScienceWorld JVM down and wait for it (kill it if it lingers)."""
    proc = sim._gateway.java_process
    with contextlib.suppress(Exception):  # the JVM may already be gone; the wait decides
        sim.close()
    try:
        proc.wait(timeout=5)
    except Exception:
        proc.kill()
        proc.wait(timeout=5)


class ScienceWorldTextEnv(TextEnv):
    """One ScienceWorld episode at a time; ``progress()`` is score / 100 (failure = 0)."""

    accepts_free_text = True  # any text reaches the simulator; actions is a hint

    def __init__(
        self,
        *,
        simplification: str = "easy",
        env_step_limit: int = 10000,
        jvm_options: str = "-Xmx512m -XX:+UseSerialGC",
    ) -> None:
        self.simplification = simplification
        self.env_step_limit = env_step_limit
        self.jvm_options = jvm_options
        self._sim: Any = None
        self._ref: TaskRef | None = None
        self._info: dict[str, Any] = {}
        self._score = 0
        self._done = False
        self._templates: list[str] = []

    def __repr__(self) -> str:
        jvm = "running" if self._sim is not None else "not started"
        return f"ScienceWorldTextEnv(simplification={self.simplification!r}, jvm {jvm})"

    @property
    def instruction(self) -> str:
        return self._info.get("taskDesc", "").removeprefix(_TASK_PREFIX).strip()

    @property
    def actions(self) -> list[str]:
        return list(self._info.get("valid", []))

    @property
    def prompt_actions(self) -> list[str]:
        """Command templates for the actor's prompt (``open OBJ``, ``focus on OBJ``, ...):
        the concrete valid commands number in the thousands. ``reset task`` is left out."""
        return list(self._templates)

    @property
    def step_limit(self) -> int:
        """The simulator's ``env_step_limit``."""
        return self.env_step_limit

    @property
    def action_descriptions(self) -> dict[str, str]:
        return {
            "OBJ": "an object or place named as the observation names it, e.g. "
            "'open door to kitchen', 'pick up thermometer', 'focus on red wire'"
        }

    @property
    def task(self) -> TaskRef | None:
        """The episode being played (task id, split, variation)."""
        return self._ref

    @property
    def score(self) -> int:
        """ScienceWorld's score, -100..100 (negative: the task failed, e.g. wrong focus)."""
        return self._score

    @property
    def success(self) -> bool:
        return self._score >= 100

    def progress(self) -> float:
        return max(self._score, 0) / 100.0

    def reset(self, task: str, seed: int) -> Observation:
        ref = parse_task(task, seed)
        if self._sim is None:
            self._sim = launch_simulator(self.env_step_limit, self.jvm_options)
            _OPEN.add(self)
        text, info = self._call(self._load_and_reset, ref)
        self._ref, self._info, self._score, self._done = ref, info, int(info["score"]), False
        self._templates = [
            t for t in self._call(self._sim.get_possible_actions) if t != "reset task"
        ]
        return self._observation(text)

    def step(self, action: str) -> StepResult:
        if self._ref is None:
            raise EnvError(
                "ScienceWorldTextEnv.step() before reset(): call reset(task, seed) first"
            )
        if self._done:
            raise EnvError(
                "the ScienceWorld episode is over; call reset(task, seed) to start another"
            )
        if not isinstance(action, str):
            raise InvalidActionError(
                f"a ScienceWorld action is text, got {type(action).__name__}; "
                f"e.g. one of: {', '.join(self.actions[:5])}"
            )
        text, reward, done, info = self._call(self._sim.step, action)
        self._info, self._score, self._done = info, int(info["score"]), bool(done)
        return StepResult(
            observation=self._observation(text),
            reward=float(reward),
            done=self._done,
            info={
                "score": self._score,
                "moves": int(info["moves"]),
                "success": self.success,
                "task": str(self._ref),
            },
        )

    def close(self) -> None:
        sim, self._sim = self._sim, None
        _OPEN.discard(self)
        if sim is not None:
            stop_simulator(sim)

    def _load_and_reset(self, ref: TaskRef) -> tuple[str, dict[str, Any]]:
        """Build the episode's world once and take the package's first move, ``look around``.

        The package's ``reset()`` is the JVM's ``reset``, which is ``load`` again with the same
        arguments (every build reseeds the simulator's random generator and object ids from the
        variation), then that first move: after a ``load`` it would rebuild the world just
        built. ``tests/benchmarks/test_scienceworld_env.py`` checks
        that both starts give the same observations."""
        self._sim.load(ref.task_name, ref.variation, self.simplification)
        text, _, _, info = self._sim.step("look around")
        return text, info

    def _call(self, fn: Any, *args: Any) -> Any:
        """Run a simulator call; a dead JVM becomes an ``EnvError`` and the next reset restarts
        it."""
        from py4j.protocol import Py4JError

        try:
            return fn(*args)
        except Py4JError as e:
            self.close()
            raise EnvError(
                f"the ScienceWorld JVM failed ({type(e).__name__}: {e}); the env "
                f"was closed, and the next reset(task, seed) starts a new JVM"
            ) from e

    def _observation(self, text: str) -> Observation:
        info = self._info
        return Observation(
            text=text,
            structured={
                "look": info["look"],
                "inventory": info["inv"],
                "task": self.instruction,
                "valid_actions": list(info["valid"]),
            },
        )
