"""``speedrunner report SWEEP.yaml``: a sweep file stands for the run directories it expands to.

The report then reads those directories like any others (grouping runs by what they ran), so
the command a sweep prints at its end is short and the same on every rerun.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from speedrunner.errors import ReportInputError
from speedrunner.sweep.spec import Sweep, load_sweep

RUN_MARKER = "config.resolved.json"
"""A run directory that has this file was started by a train entry point (the report's marker)."""


@dataclass
class ReportInputs:
    """What to report on: run directories (or folders of them), where to write by default, and
    lines for the user about sweep runs left out."""

    paths: list[Path]
    default_out: Path | None = None
    notes: list[str] = field(default_factory=list)


def is_sweep_file(path: Path) -> bool:
    """A YAML file with a top-level ``configs:`` (a run config has run/model/benchmark instead)."""
    if not (path.is_file() and path.suffix in (".yaml", ".yml")):
        return False
    try:
        data = yaml.safe_load(path.read_text("utf-8"))
    except (OSError, yaml.YAMLError, UnicodeDecodeError):
        return True  # load_sweep says what is wrong with it
    return isinstance(data, dict) and "configs" in data


def report_inputs(given: list[str]) -> ReportInputs:
    """Each argument as is, except a sweep file, which becomes its runs that have started.

    Raises ``ReportInputError`` for a sweep none of whose runs has started, and for a YAML
    file that is not a sweep (a run config passed by mistake).
    """
    inputs = ReportInputs(paths=[])
    sweeps = 0
    for text in given:
        path = Path(text)
        if path.is_file() and path.suffix in (".yaml", ".yml") and not is_sweep_file(path):
            raise ReportInputError(
                f"{path} is a YAML file but not a sweep file (it has no configs:); "
                "pass a sweep file, a run directory, or a folder holding run directories"
            )
        if not is_sweep_file(path):
            inputs.paths.append(path)
            continue
        sweep = load_sweep(path)
        started = [r.run_dir for r in sweep.runs if (r.run_dir / RUN_MARKER).is_file()]
        if not started:
            raise ReportInputError(_none_started(sweep))
        missing = len(sweep.runs) - len(started)
        if missing:
            inputs.notes.append(
                f"sweep {sweep.spec.name}: reporting {len(started)} of its {len(sweep.runs)} runs; "
                f"{missing} have not started "
                f"(`speedrunner sweep {shlex.quote(str(path))}` runs them)"
            )
        inputs.paths.extend(started)
        inputs.default_out = sweep.runs[0].log_file.parent.parent / "report"
        sweeps += 1
    if sweeps != 1 or len(given) != 1:
        inputs.default_out = None  # several inputs: the report's own default
    return inputs


def _none_started(sweep: Sweep) -> str:
    roots = sorted({str(r.run_dir.parents[3]) for r in sweep.runs})
    return (
        f"sweep {sweep.spec.name} ({sweep.path}): none of its {len(sweep.runs)} runs has started "
        f"(no run directory under {', '.join(roots)}); "
        f"run `speedrunner sweep {shlex.quote(str(sweep.path))}` first, "
        "from the directory you will report from (a relative output_root is relative to it)"
    )
