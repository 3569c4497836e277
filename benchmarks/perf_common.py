"""What the performance scripts share: a result row with its target, a fake actor for the
fake LLM server, a run built the way the train entry point builds it, and the RSS of a
process tree read from /proc.

Not a test helper: the scripts under ``benchmarks/`` import it (run them from the repo root,
``python benchmarks/<name>.py``; Python puts ``benchmarks/`` on the path).
"""

from __future__ import annotations

import io
import math
import os
import statistics
import subprocess
import tarfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

from speedrunner.testing.fake_llm_server import Reply

REPO = Path(__file__).resolve().parents[1]
CONFIGS = REPO / "configs"

# A policy per benchmark that never wins (BabyAI: no "pick up"; ScienceWorld: only looks),
# so every episode plays its whole LLM-call budget and episodes are alike in length.
ACTIONS = {
    "babyai": ["turn left", "go forward", "turn right", "go forward"],
    "crafter": ["Move West", "Move North", "Do", "Move East", "Move South", "Noop"],
    "scienceworld": ["look around", "inventory"],
}


@dataclass(frozen=True)
class Row:
    """One figure of the table: a measured value and, when the issue sets one, its target."""

    figure: str
    value: float
    unit: str
    target: float | None = None
    direction: Literal["<", "<=", ">="] = "<="
    detail: str = ""

    @property
    def met(self) -> bool | None:
        if self.target is None or math.isnan(self.value):
            return None
        if self.direction == "<":
            return self.value < self.target
        return self.value <= self.target if self.direction == "<=" else self.value >= self.target

    def verdict(self) -> str:
        """``met``, ``MISSED by ...`` (absolute and relative), or ``-`` (no target)."""
        if self.target is None:
            return "-"
        if math.isnan(self.value):
            return "not measured"
        if self.met:
            return "met"
        gap = abs(self.value - self.target)
        return f"MISSED by {fmt(gap)} {self.unit} ({self.value / self.target:.2f}x the target)"

    def target_text(self) -> str:
        return "-" if self.target is None else f"{self.direction} {fmt(self.target)} {self.unit}"

    def as_json(self) -> dict[str, Any]:
        row = {**asdict(self), "met": self.met, "verdict": self.verdict()}
        if math.isnan(self.value):
            row["value"] = None  # JSON has no NaN
        return row


def fmt(x: float) -> str:
    if math.isnan(x):
        return "nan"
    if x == 0 or abs(x) >= 100:
        return f"{x:.0f}"
    if abs(x) >= 10:
        return f"{x:.1f}"
    if abs(x) >= 0.1:
        return f"{x:.2f}"
    return f"{x:.3f}"


def table(rows: list[Row]) -> str:
    """The rows as one aligned text table (figure, value, target, verdict, detail)."""
    lines = [("figure", "value", "target", "verdict", "detail")]
    lines += [
        (r.figure, f"{fmt(r.value)} {r.unit}", r.target_text(), r.verdict(), r.detail) for r in rows
    ]
    widths = [max(len(line[i]) for line in lines) for i in range(4)]
    out = []
    for n, line in enumerate(lines):
        out.append(
            "  ".join(cell.ljust(w) for cell, w in zip(line[:4], widths, strict=True))
            + "  "
            + line[4]
        )
        if n == 0:
            out.append("-" * (sum(widths) + 8 + len("detail")))
    return "\n".join(out)


def quantile(values: list[float], q: float) -> float:
    """The q-quantile (0..1) by linear interpolation; NaN for no values."""
    if not values:
        return math.nan
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[round(q * 100) - 1]


def fake_actor(benchmark: str):
    """A callback for ``FakeLLMServer``: answers with the benchmark's action cycle by turn."""
    cycle = ACTIONS[benchmark]

    def reply(body: dict[str, Any]) -> Reply:
        turn = sum(m.get("role") == "assistant" for m in body.get("messages", []))
        return Reply(
            text=f"Thought: keep looking.\nAction: {cycle[turn % len(cycle)]}",
            prompt_tokens=100,
            cached_tokens=80,
            completion_tokens=10,
        )

    return reply


def fake_model_overrides(base_url: str) -> list[str]:
    """``--set`` overrides pointing a run's actor at the fake server (priced, so cost is logged)."""
    return [
        "model.provider=vllm",
        f"model.base_url={base_url}",
        "model.name=fake-model",
        "model.prices={input: 1.0, cached_input: 0.1, output: 2.0}",
    ]


def clean_env() -> dict[str, str]:
    """The environment for a child run: no API keys, this worktree's package first."""
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env["PYTHONPATH"] = os.pathsep.join([str(REPO / "src"), *filter(None, [env.get("PYTHONPATH")])])
    env["PYTHONUNBUFFERED"] = "1"
    return env


# ----------------------------------------------------------------------------- /proc
def process_tree(root: int) -> list[int]:
    """``root`` and all its descendants alive now (from /proc/<pid>/stat parent ids)."""
    parents: dict[int, int] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue  # exited meanwhile
        # the command name may hold spaces and parentheses: the fields follow the last ')'
        fields = stat[stat.rfind(b")") + 2 :].split()
        parents[int(entry.name)] = int(fields[1])
    tree, frontier = [root], [root]
    while frontier:
        frontier = [pid for pid, ppid in parents.items() if ppid in frontier]
        tree += frontier
    return tree


def rss_bytes(pid: int) -> int:
    """Resident set size of one process (0 if it is gone)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def tree_rss(root: int) -> tuple[int, int]:
    """Summed RSS of ``root``'s process tree and the number of processes in it.

    Pages shared between processes (the JVMs' libraries) count once per process: an upper
    bound on the memory the tree holds.
    """
    pids = process_tree(root)
    return sum(rss_bytes(p) for p in pids), len(pids)


def checkout_dir(spec: str, tmp: Path) -> Path:
    """A directory as given, or the commit ``spec`` unpacked from this repository
    (:func:`unpack_commit`): the "before" side of a before/after script."""
    if Path(spec).is_dir():
        return Path(spec).resolve()
    return unpack_commit(spec, tmp)


def unpack_commit(spec: str, tmp: Path) -> Path:
    """Commit ``spec`` of this repository unpacked under ``tmp`` with ``git archive``: the
    "before" side of a before/after comparison, without touching the working tree."""
    target = tmp / f"checkout-{spec}"
    archive = subprocess.run(
        ["git", "-C", str(REPO), "archive", "--format=tar", spec], capture_output=True, check=True
    )
    target.mkdir(parents=True, exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
        tar.extractall(target, filter="tar")
    return target
