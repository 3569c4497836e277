"""The spending cap: a paid attempt starts only if it cannot take spend past the cap.

Before every attempt on the wire ``ManagedModel`` asks :meth:`SpendCap.reserve` for its worst
case (every input byte a token, all of ``max_tokens`` as output: ``ManagedModel._max_cost``).
The attempt may start only if

    spent + may have been billed + worst case of every attempt in flight + this one <= cap

so the money billed never exceeds the cap, however many episode threads (or sweep runs) call
at once, provided the provider bills no more than it reports and bills an unanswered attempt
at most its worst case (docs/spending.md). When an answer comes, its reservation is replaced
by what it really cost; an answer that cost more than was reserved is counted as reported and
flagged (:attr:`SpendCap.overrun`), and the next reservation is checked against it. An
attempt that timed out, lost its connection or came back garbled may have been billed: its
worst case stays counted (:attr:`SpendCap.lost`) and is logged, never settled at $0.

Two caps can apply at once: the run's (``run.max_cost_usd``, one ``SpendCap`` per process,
shared by the actor and the inducer) and the sweep's (``max_cost_usd`` in the sweep file),
kept in a ledger file every run of the sweep locks with ``flock`` (:class:`SweepLedger`).
A call refused by either raises :class:`SpendCapReached`; from then on every further call of the
process is refused too, so the run stops promptly and cleanly (exit code 3, status
``budget_reached``), and ``--resume`` with a higher cap continues it exactly.

What counts against the cap on a resume is what ``llm_calls.jsonl`` says: the billed cost of
answered calls (``spent_usd``) plus the worst case of what may have been billed unseen
(``unknown_usd``: unanswered attempts, and calls in flight at a kill). What the run *shows*
as spent is the billed figure alone (``core.llm.spent``); the rest is shown beside it.
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

from speedrunner.core.atomic import atomic_write_json
from speedrunner.core.interrupt import RunInterrupted
from speedrunner.core.llm.spent import usd

if TYPE_CHECKING:
    from speedrunner.core.config.schema import RunConfig

__all__ = [
    "CAP_EXIT_CODE",
    "SWEEP_CAP_ENV",
    "SWEEP_LEDGER_ENV",
    "SpendCapReached",
    "CallCharge",
    "Reservation",
    "SpendCap",
    "SweepLedger",
    "read_ledger",
    "require_prices",
    "run_spent",
    "spend_cap",
    "spent_in_log",
    "unknown_in_log",
]

CAP_EXIT_CODE = 3
"""Exit code of a run (and a sweep) stopped by its spending cap."""
SWEEP_LEDGER_ENV = "SPEEDRUNNER_SPEND_LEDGER"
"""Path of the sweep's spend ledger (set by ``speedrunner sweep`` when the sweep has a cap)."""
SWEEP_CAP_ENV = "SPEEDRUNNER_SWEEP_MAX_COST_USD"
"""The sweep's cap in USD, beside the ledger."""
_EPS = 1e-12  # float sums of many small costs: a call that fits exactly must not be refused


class SpendCapReached(RunInterrupted):
    """The next paid call could cross a spending cap: the run stops before it.

    A ``RunInterrupted`` (so a ``KeyboardInterrupt``): no ``except Exception`` in a method can
    swallow it and go on calling; the runtime unwinds exactly as on Ctrl-C, and the entry point
    reports it with its own status and exit code.
    """

    def __init__(
        self, *, scope: str, cap: float, spent: float, in_flight: float, this_call: float
    ) -> None:
        self.scope, self.cap, self.spent, self.in_flight, self.this_call = (
            scope,
            cap,
            spent,
            in_flight,
            this_call,
        )
        self.overrun = 0.0
        """Dollars replies cost beyond their reservations before the stop (see
        ``SpendCap.overrun``)."""
        self.unknown = 0.0
        """What may have been billed unanswered when the run's cap refused (``SpendCap.lost``)."""
        super().__init__(self._decision())

    @property
    def exit_code(self) -> int:
        return CAP_EXIT_CODE

    def _decision(self) -> str:
        """Why the call was refused, in the figures the check used at that moment. A run's own
        spend is not named here: calls in flight then finish after it (see :meth:`stopped`)."""
        if self.scope == "sweep":
            return (
                f"sweep spending cap {usd(self.cap)} reached: the sweep's runs together spent "
                f"{usd(self.spent)}, calls in flight may cost up to {usd(self.in_flight)}, and the "
                f"next call up to {usd(self.this_call)}"
            )
        left = max(0.0, self.cap - self.spent - self.in_flight)
        return (
            f"run spending cap {usd(self.cap)} reached: the next call could cost up to "
            f"{usd(self.this_call)}, more than the {usd(left)} the cap had left (calls in "
            "flight counted at their worst case)"
        )

    def stopped(self, spent: float | None, in_flight: float | None) -> str:
        """How the stop reads once the run has stopped: the run's spend (``core.llm.spent``) and
        the worst case of its calls still on the wire then, apart."""
        text = f"{self._decision()}. The run spent {usd(spent)}"
        if self.unknown:
            text += (
                f"; up to {usd(self.unknown)} more may have been billed for requests that got "
                "no answer (summary.json: unknown_spend_usd)"
            )
        if self.overrun:
            text += (
                f"; replies cost {usd(self.overrun)} more than was reserved for them (the "
                "provider billed more than max_tokens allows for)"
            )
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
    """Billed cost of this run's answered calls (earlier processes included)."""
    lost: float = 0.0
    """Worst case of what may have been billed with no answer seen (attempts that timed out,
    lost their connection or came back garbled; calls in flight at a kill), earlier processes
    included: counted against the cap, never shown as spent."""
    ledger: SweepLedger | None = None
    reached: SpendCapReached | None = None
    """Set by the first refused call; every later call is refused too."""
    overrun: float = 0.0
    """Dollars replies of this process cost beyond what was reserved for them (a provider that
    billed more than it could at ``max_tokens``): counted as billed, and flagged."""
    _in_flight: float = 0.0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def active(self) -> bool:
        return self.cap is not None or self.ledger is not None

    def reserve(self, max_usd: float) -> Reservation:
        """Hold ``max_usd`` for an attempt about to start, or raise ``SpendCapReached``."""
        with self._lock:
            if self.reached is not None:
                raise self._again()
            if (
                self.cap is not None
                and self.spent + self.lost + self._in_flight + max_usd > self.cap + _EPS
            ):
                self.reached = SpendCapReached(
                    scope="run",
                    cap=self.cap,
                    spent=self.spent + self.lost,
                    in_flight=self._in_flight,
                    this_call=max_usd,
                )
                self.reached.overrun, self.reached.unknown = self.overrun, self.lost
                raise self.reached
            ledger_id = None
            if self.ledger is not None:
                try:
                    ledger_id = self.ledger.reserve(max_usd)
                except SpendCapReached as e:
                    e.overrun = self.overrun
                    self.reached = e
                    raise
            self._in_flight += max_usd
            return Reservation(max_usd, ledger_id)

    def settle(self, reservation: Reservation, cost_usd: float) -> float:
        """The attempt was answered (or surely not billed: ``cost_usd`` 0): its worst case is
        replaced by what it cost. Returns by how much the cost exceeded the reservation."""
        return self._end(reservation, cost_usd, lost=False)

    def settle_unanswered(self, reservation: Reservation) -> None:
        """The attempt got no answer it could read but may have been billed: its worst case
        stays counted, as :attr:`lost`."""
        self._end(reservation, reservation.max_usd, lost=True)

    def add_spent(self, cost_usd: float, *, overrun: float = 0.0) -> None:
        """A call made without a reservation (no cap is set) cost this much."""
        with self._lock:
            self.spent += cost_usd
            self.overrun += overrun

    def add_lost(self, max_usd: float) -> None:
        """An attempt made without a reservation (no cap is set) may have cost this much."""
        with self._lock:
            self.lost += max_usd

    def _end(self, reservation: Reservation, cost_usd: float, *, lost: bool) -> float:
        with self._lock:
            if reservation.settled:
                return 0.0
            reservation.settled = True
            self._in_flight = max(0.0, self._in_flight - reservation.max_usd)
            over = (
                max(0.0, cost_usd - reservation.max_usd)
                if reservation.max_usd != float("inf")
                else 0.0
            )
            self.overrun += over
            if lost:
                self.lost += cost_usd
            else:
                self.spent += cost_usd
            if self.ledger is not None and reservation.ledger_id is not None:
                self.ledger.settle(reservation.ledger_id, cost_usd)
            return over if over > _EPS else 0.0

    def snapshot(self) -> dict[str, Any]:
        """The cap's side of summary.json's ``spending`` (the spend itself is the log's)."""
        with self._lock:
            out: dict[str, Any] = {
                "max_cost_usd": self.cap,
                "reached": self.reached is not None,
                # calls hold their worst case only under a cap
                "in_flight_usd": round(self._in_flight, 6) if self.active else None,
                "over_reservation_usd": round(self.overrun, 6),
            }
            if self.ledger is not None:
                out["sweep_max_cost_usd"] = self.ledger.cap
            return out

    def describe(self, spent: float | None) -> str:
        """For the progress line: e.g.
        ``spent $0.4100 of cap $5.0000 (sweep: $3.2000 of $20.0000)``; ``spent`` is the run's
        spend (``core.llm.spent``)."""
        text = f"spent {usd(spent)}" + (f" of cap {usd(self.cap)}" if self.cap is not None else "")
        if self.lost > _EPS:
            text += f" (+ up to {usd(self.lost)} unanswered, may have been billed)"
        if self.ledger is not None:
            text += f" (sweep: {usd(self.ledger.total())} of {usd(self.ledger.cap)})"
        return text

    def _again(self) -> SpendCapReached:
        r = self.reached
        assert r is not None
        again = SpendCapReached(
            scope=r.scope, cap=r.cap, spent=r.spent, in_flight=r.in_flight, this_call=r.this_call
        )
        again.overrun, again.unknown = r.overrun, r.unknown
        return again


@dataclass
class CallCharge:
    """One call's hold on the caps over its attempts: each attempt on the wire is held at its
    worst case until its cost is known; an attempt that may have been billed unanswered keeps
    it (``unknown_usd``), and the next attempt reserves afresh (it may be refused)."""

    cap: SpendCap | None
    """None: no cap checks, only the unknown spend is kept (for the call log)."""
    worst: float | None
    """One attempt's worst case (None: the price is unknown)."""
    unknown_usd: float | None = 0.0
    """Worst case of this call's attempts that may have been billed unanswered (None: unpriced)."""
    unanswered: int = 0
    _held: Reservation | None = None

    def __post_init__(self) -> None:
        self.before_attempt()

    @property
    def capped(self) -> bool:
        return self.cap is not None and self.cap.active

    def before_attempt(self) -> None:
        """Hold the next attempt's worst case (raises ``SpendCapReached`` if it could cross a
        cap)."""
        if self.capped and self._held is None:
            assert self.cap is not None
            self._held = self.cap.reserve(float("inf") if self.worst is None else self.worst)

    def unanswered_attempt(self) -> None:
        """The attempt timed out, lost its connection or came back unreadable: may have been
        billed."""
        self.unanswered += 1
        self.unknown_usd = (
            None
            if self.worst is None or self.unknown_usd is None
            else self.unknown_usd + self.worst
        )
        if self._held is not None:
            assert self.cap is not None
            self.cap.settle_unanswered(self._held)
            self._held = None
        elif self.cap is not None and self.worst is not None:
            self.cap.add_lost(self.worst)

    def answered(self, cost_usd: float) -> float:
        """The call's answer cost ``cost_usd``; returns by how much that exceeded one attempt's
        worst case (0.0: it did not)."""
        over = 0.0 if self.worst is None else max(0.0, cost_usd - self.worst)
        over = over if over > _EPS else 0.0
        if self._held is not None:
            assert self.cap is not None
            held, self._held = self._held, None
            self.cap.settle(held, cost_usd)
        elif self.cap is not None:
            self.cap.add_spent(cost_usd, overrun=over)
        return over

    def release(self) -> None:
        """The call ended with no billable attempt still held (failed for good, or stopped)."""
        if self._held is not None:
            assert self.cap is not None
            held, self._held = self._held, None
            self.cap.settle(held, 0.0)


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
            in_flight = sum(
                float(v) for r in runs.values() for v in r.get("in_flight", {}).values()
            )
            if spent + in_flight + max_usd > self.cap + _EPS:
                raise SpendCapReached(
                    scope="sweep", cap=self.cap, spent=spent, in_flight=in_flight, this_call=max_usd
                )
            rid = uuid.uuid4().hex
            runs.setdefault(self.run_id, {"spent": 0.0, "in_flight": {}})["in_flight"][rid] = (
                max_usd
            )
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
    return sum(
        float(r.get("spent", 0.0)) + sum(float(v) for v in r.get("in_flight", {}).values())
        for r in runs
    )


def spent_in_log(calls_path: Path) -> float:
    """Money spent on answers logged in ``llm_calls.jsonl`` (sum of ``spent_usd``; unknown prices
    count 0 here, which is why a cap requires a price for every model of the run)."""
    return _log_sums(calls_path)[0]


def unknown_in_log(calls_path: Path) -> float:
    """Worst case of what may have been billed unanswered, as logged (sum of ``unknown_usd``)."""
    return _log_sums(calls_path)[1]


def _log_sums(calls_path: Path) -> tuple[float, float]:
    from speedrunner.core.llm.spent import CallLogTotals

    totals = CallLogTotals(calls_path).read()
    return totals.priced_usd, totals.unknown_priced_usd


def run_spent(run_dir: Path, run_id: str) -> float:
    """What a run counts against a sweep's cap over all its processes: its log's billed spend
    plus the worst case of what may have been billed unanswered (timeouts; calls in flight at
    a kill, logged by the resume that found them)."""
    spent, unknown = _log_sums(Path(run_dir) / "llm_calls.jsonl")
    return spent + unknown


def spend_cap(config: RunConfig, run_id: str, cache_path: Path, calls_path: Path) -> SpendCap:
    """The run's cap (and its sweep's ledger), knowing what earlier processes of the run spent.

    Called after ``journal.reconcile``, so the log holds every answer paid for and every
    attempt or call (in flight at a kill) that may have been billed unanswered.
    """
    spent, unknown = _log_sums(calls_path)
    ledger = SweepLedger.from_env(run_id)
    if ledger is not None:
        ledger.register(spent + unknown)
    return SpendCap(config.run.max_cost_usd, spent=spent, lost=unknown, ledger=ledger)


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
            "tokens), or add the model to speedrunner/data/prices.yaml"
        )
    config.method.check_prices()  # e.g. Voyager's retrieval embeddings
