"""The spending cap: a paid call starts only if it cannot take spend past the cap.

Before every paid call ``ManagedModel`` asks :meth:`SpendCap.reserve` for the call's worst
case (every input byte a token, all of ``max_tokens`` as output: ``ManagedModel._max_cost``).
The call may start only if

    spent so far + worst case of every call in flight + worst case of this call <= cap

so the money billed never exceeds the cap, however many episode threads (or sweep runs) call
at once. When the answer comes, its reservation is replaced by what it really cost.

Two caps can apply at once: the run's (``run.max_cost_usd``, one ``SpendCap`` per process,
shared by the actor and the inducer) and the sweep's (``max_cost_usd`` in the sweep file),
kept in a ledger file every run of the sweep locks with ``flock`` (:class:`SweepLedger`).
A call refused by either raises :class:`BudgetReached`; from then on every further call of the
process is refused too, so the run stops promptly and cleanly (exit code 3, status
``budget_reached``), and ``--resume`` with a higher cap continues it exactly.

What counts against the cap on a resume is what ``llm_calls.jsonl`` says was spent plus the
worst case of calls that were in flight when an earlier process was killed (they may have been
billed). What the run *shows* as spent is the log's figure alone (``core.llm.spent``); the
in-flight worst cases are shown beside it, never added in.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import threading
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from speedrunner.core.atomic import atomic_write_json, iter_jsonl
from speedrunner.core.interrupt import RunInterrupted
from speedrunner.core.llm.spent import usd

if TYPE_CHECKING:
    from speedrunner.core.config.schema import RunConfig

__all__ = [
    "BUDGET_EXIT_CODE",
    "SWEEP_CAP_ENV",
    "SWEEP_LEDGER_ENV",
    "BudgetReached",
    "Reservation",
    "SpendCap",
    "SweepLedger",
    "read_ledger",
    "require_prices",
    "run_spent",
    "spend_cap",
    "spent_in_log",
]

BUDGET_EXIT_CODE = 3
"""Exit code of a run (and a sweep) stopped by its spending cap."""
SWEEP_LEDGER_ENV = "SPEEDRUNNER_SPEND_LEDGER"
"""Path of the sweep's spend ledger (set by ``speedrunner sweep`` when the sweep has a cap)."""
SWEEP_CAP_ENV = "SPEEDRUNNER_SWEEP_MAX_COST_USD"
"""The sweep's cap in USD, beside the ledger."""
_EPS = 1e-12  # float sums of many small costs: a call that fits exactly must not be refused


class BudgetReached(RunInterrupted):
    """The next paid call could cross a spending cap: the run stops before it.

    A ``RunInterrupted`` (so a ``KeyboardInterrupt``): no ``except Exception`` in a method can
    swallow it and go on calling; the runtime unwinds exactly as on Ctrl-C, and the entry point
    reports it with its own status and exit code.
    """

    def __init__(self, *, scope: str, cap: float, spent: float, in_flight: float, this_call: float) -> None:
        self.scope, self.cap, self.spent, self.in_flight, self.this_call = scope, cap, spent, in_flight, this_call
        super().__init__(self._decision())

    @property
    def exit_code(self) -> int:
        return BUDGET_EXIT_CODE

    def _decision(self) -> str:
        """Why the call was refused, in the figures the check used at that moment. A run's own
        spend is not named here: calls in flight then finish after it (see :meth:`stopped`)."""
        if self.scope == "sweep":
            return (f"sweep spending cap {usd(self.cap)} reached: the sweep's runs together spent "
                    f"{usd(self.spent)}, calls in flight may cost up to {usd(self.in_flight)}, and the "
                    f"next call up to {usd(self.this_call)}")
        left = max(0.0, self.cap - self.spent - self.in_flight)
        return (f"run spending cap {usd(self.cap)} reached: the next call could cost up to "
                f"{usd(self.this_call)}, more than the {usd(left)} the cap had left (calls in "
                "flight counted at their worst case)")

    def stopped(self, spent: float | None, in_flight: float | None) -> str:
        """How the stop reads once the run has stopped: the run's spend (``core.llm.spent``) and
        the worst case of its calls still on the wire then, apart."""
        text = f"{self._decision()}. The run spent {usd(spent)}"
        if in_flight:
            text += f"; up to {usd(in_flight)} more was in flight when the cap stopped the run"
        return text


@dataclass
class Reservation:
    """One call's worst case, held against the caps until its answer's cost is known."""

    max_usd: float
    ledger_id: str | None = None
    settled: bool = False


@dataclass
class SpendCap:
    """Spend of this process's run against ``cap`` (None: no run cap), and the sweep's ledger.

    Thread-safe: the actor's episode threads and the inducer share one instance.
    """

    cap: float | None
    spent: float = 0.0
    """Billed cost of this run's completed calls (earlier processes included)."""
    lost: float = 0.0
    """Worst case of the calls earlier processes left in flight at a kill (they may have been
    billed): counted against the cap, never shown as spent."""
    ledger: SweepLedger | None = None
    reached: BudgetReached | None = None
    """Set by the first refused call; every later call is refused too."""
    _in_flight: float = 0.0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def active(self) -> bool:
        return self.cap is not None or self.ledger is not None

    def reserve(self, max_usd: float) -> Reservation:
        """Hold ``max_usd`` for a call about to start, or raise ``BudgetReached``."""
        with self._lock:
            if self.reached is not None:
                raise self._again()
            if self.cap is not None and self.spent + self.lost + self._in_flight + max_usd > self.cap + _EPS:
                self.reached = BudgetReached(scope="run", cap=self.cap, spent=self.spent + self.lost,
                                             in_flight=self._in_flight, this_call=max_usd)
                raise self.reached
            ledger_id = None
            if self.ledger is not None:
                try:
                    ledger_id = self.ledger.reserve(max_usd)
                except BudgetReached as e:
                    self.reached = e
                    raise
            self._in_flight += max_usd
            return Reservation(max_usd, ledger_id)

    def settle(self, reservation: Reservation, cost_usd: float) -> None:
        """The call ended: its worst case is replaced by what it cost (0 for a failed call)."""
        with self._lock:
            if reservation.settled:
                return
            reservation.settled = True
            self._in_flight = max(0.0, self._in_flight - reservation.max_usd)
            self.spent += cost_usd
            if self.ledger is not None and reservation.ledger_id is not None:
                self.ledger.settle(reservation.ledger_id, cost_usd)

    def add_spent(self, cost_usd: float) -> None:
        """A call made without a reservation (no cap is set) cost this much."""
        with self._lock:
            self.spent += cost_usd

    def snapshot(self) -> dict[str, Any]:
        """The cap's side of summary.json's ``spending`` (the spend itself is the log's)."""
        with self._lock:
            out: dict[str, Any] = {"max_cost_usd": self.cap, "reached": self.reached is not None,
                                   # calls hold their worst case only under a cap
                                   "in_flight_usd": round(self._in_flight, 6) if self.active else None}
            if self.ledger is not None:
                out["sweep_max_cost_usd"] = self.ledger.cap
            return out

    def describe(self, spent: float | None) -> str:
        """For the progress line: e.g. ``spent $0.4100 of cap $5.0000 (sweep: $3.2000 of $20.0000)``;
        ``spent`` is the run's spend (``core.llm.spent``)."""
        text = f"spent {usd(spent)}" + (f" of cap {usd(self.cap)}" if self.cap is not None else "")
        if self.ledger is not None:
            text += f" (sweep: {usd(self.ledger.total())} of {usd(self.ledger.cap)})"
        return text

    def _again(self) -> BudgetReached:
        r = self.reached
        assert r is not None
        return BudgetReached(scope=r.scope, cap=r.cap, spent=r.spent, in_flight=r.in_flight, this_call=r.this_call)


class SweepLedger:
    """The sweep's spend across all its runs, in one JSON file locked with ``flock``.

    Layout: ``{"runs": {run_id: {"spent": usd, "in_flight": {reservation_id: usd}}}}``. Each
    run process owns its entry: it sets ``spent`` when it starts (from its own log) and drops
    in-flight reservations an earlier, killed process of the same run left (the run counts
    those itself, as possibly billed). Reservations of a run that is never resumed stay
    counted: they may have been billed. The file lives on the file system the sweep's runs
    share (a SLURM array's nodes see it like the run directories).
    """

    def __init__(self, path: Path, cap: float, run_id: str) -> None:
        self.path, self.cap, self.run_id = Path(path), cap, run_id
        self._lock_path = self.path.with_name(self.path.name + ".lock")

    @classmethod
    def from_env(cls, run_id: str) -> SweepLedger | None:
        path = os.environ.get(SWEEP_LEDGER_ENV)
        cap = os.environ.get(SWEEP_CAP_ENV)
        if not path or not cap:
            return None
        return cls(Path(path), float(cap), run_id)

    def register(self, spent: float) -> None:
        """This run starts (or resumes) having spent ``spent``."""
        with self._locked() as data:
            data["runs"][self.run_id] = {"spent": spent, "in_flight": {}}

    def register_if_missing(self, spent: Callable[[], float]) -> None:
        """Enter this run with ``spent()`` unless it is in the ledger already."""
        with self._locked() as data:
            if self.run_id not in data["runs"]:
                data["runs"][self.run_id] = {"spent": spent(), "in_flight": {}}

    def total(self) -> float:
        with self._locked() as data:
            return _total(data)

    def reserve(self, max_usd: float) -> str:
        with self._locked() as data:
            runs = data["runs"]
            spent = sum(float(r.get("spent", 0.0)) for r in runs.values())
            in_flight = sum(float(v) for r in runs.values() for v in r.get("in_flight", {}).values())
            if spent + in_flight + max_usd > self.cap + _EPS:
                raise BudgetReached(scope="sweep", cap=self.cap, spent=spent, in_flight=in_flight,
                                    this_call=max_usd)
            rid = uuid.uuid4().hex
            runs.setdefault(self.run_id, {"spent": 0.0, "in_flight": {}})["in_flight"][rid] = max_usd
            return rid

    def settle(self, reservation_id: str, cost_usd: float) -> None:
        with self._locked() as data:
            entry = data["runs"].setdefault(self.run_id, {"spent": 0.0, "in_flight": {}})
            entry["in_flight"].pop(reservation_id, None)
            entry["spent"] = float(entry.get("spent", 0.0)) + cost_usd

    @contextlib.contextmanager
    def _locked(self) -> Iterator[dict[str, Any]]:
        """The ledger's data under an exclusive lock; written back (atomically) on exit."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self._lock_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            data = read_ledger(self.path)
            before = json.dumps(data, sort_keys=True)
            yield data
            if json.dumps(data, sort_keys=True) != before:
                atomic_write_json(self.path, data)
        finally:
            os.close(fd)  # closing releases the lock


def read_ledger(path: Path) -> dict[str, Any]:
    """The ledger's data (an empty one if the file is missing or unreadable)."""
    try:
        data = json.loads(Path(path).read_text("utf-8"))
    except (OSError, json.JSONDecodeError, UnicodeDecodeError):
        data = None
    if not isinstance(data, dict) or not isinstance(data.get("runs"), dict):
        data = {"runs": {}}
    return data


def _total(data: dict[str, Any]) -> float:
    runs = data["runs"].values()
    return sum(float(r.get("spent", 0.0)) + sum(float(v) for v in r.get("in_flight", {}).values()) for r in runs)


def spent_in_log(calls_path: Path) -> float:
    """Money spent on answers logged in ``llm_calls.jsonl`` (sum of ``spent_usd``; unknown prices
    count 0 here, which is why a cap requires a price for every model of the run)."""
    if not Path(calls_path).is_file():
        return 0.0
    total = 0.0
    for row in iter_jsonl(calls_path):
        spent = row.get("spent_usd")
        if isinstance(spent, int | float):
            total += float(spent)
    return total


def run_spent(run_dir: Path, run_id: str) -> float:
    """What a run spent over all its processes: its log, plus the worst case of calls that were
    in flight when a process of it was killed (they may have been billed)."""
    from speedrunner.core.llm.journal import unaccounted

    lost = unaccounted(Path(run_dir) / "llm_cache.sqlite", run_id).get("max_usd")
    return spent_in_log(Path(run_dir) / "llm_calls.jsonl") + (float(lost) if isinstance(lost, int | float) else 0.0)


def spend_cap(config: RunConfig, run_id: str, cache_path: Path, calls_path: Path) -> SpendCap:
    """The run's cap (and its sweep's ledger), knowing what earlier processes of the run spent.

    Called after ``journal.reconcile``, so the log holds every answer paid for; calls that were
    in flight at a kill count with their worst case (they may have been billed).
    """
    from speedrunner.core.llm.journal import unaccounted

    lost = unaccounted(cache_path, run_id).get("max_usd")
    spent = spent_in_log(calls_path)
    earlier = float(lost) if isinstance(lost, int | float) else 0.0
    ledger = SweepLedger.from_env(run_id)
    if ledger is not None:
        ledger.register(spent + earlier)
    return SpendCap(config.run.max_cost_usd, spent=spent, lost=earlier, ledger=ledger)


def require_prices(config: RunConfig) -> None:
    """A cap needs a price for every paid model: an unknown cost could never be kept under it."""
    from speedrunner.core.llm.prices import resolve_prices
    from speedrunner.errors import ConfigError

    capped = config.run.max_cost_usd is not None or bool(os.environ.get(SWEEP_CAP_ENV))
    if not capped:
        return
    for role, model in (("model", config.model), ("inducer", config.inducer)):
        if model is None or model.provider == "scripted" or resolve_prices(model) is not None:
            continue
        raise ConfigError(
            f"a spending cap is set (run.max_cost_usd or the sweep's max_cost_usd), but {role} "
            f"{model.name!r} has no price, so no call's cost could be bounded; set one, e.g. "
            f"--set '{role}.prices={{input: 0.75, cached_input: 0.075, output: 4.5}}' (USD per 1M "
            "tokens), or add the model to speedrunner/data/prices.yaml")
    embedding = getattr(config.method, "embedding", None)  # Voyager's retrieval embeddings
    if embedding is not None and embedding.prices is None:
        raise ConfigError(
            f"a spending cap is set, but method.embedding {embedding.name!r} has no price; set "
            "method.embedding.prices (USD per 1M tokens), or remove method.embedding to rank with BM25")
