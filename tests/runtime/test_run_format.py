"""The run-directory format version (``core.rundir.RUN_FORMAT``): a run directory of this version
resumes and reports in every later SpeedRunner of the same version; a draft written before the
version existed, or in another one, is refused by name (exit 2, no traceback), never upgraded.

``tests/fixtures/run_format_1`` was made by ``tests/fixtures/make_run_format_fixture.py`` (the
scripted model, no LLM): ``react`` finished, ``speedrunner`` stopped by SIGTERM after its first
batch. If a change makes these tests fail, that change needs a new format version (and a new
fixture beside this one), not an upgrade path.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

from speedrunner.cli import main
from speedrunner.core.rundir import RUN_FORMAT, check_run_format
from speedrunner.errors import RunFormatError

from ..e2e.harness import REPO, run

FIXTURES = REPO / "tests" / "fixtures"
FORMAT_1 = FIXTURES / "run_format_1"
RESUME = [
    sys.executable,
    "-m",
    "speedrunner.benchmarks.babyai.train",
    "--skip_preflight",
    "--resume",
]


def copy(tmp_path: Path, name: str) -> Path:
    return Path(shutil.copytree(FORMAT_1 / name, tmp_path / name))


def draft(tmp_path: Path, run_format: object = None) -> Path:
    """A format-1 run directory as a draft would hold it: provenance without a version (or
    another)."""
    run_dir = copy(tmp_path, "speedrunner")
    provenance = json.loads((run_dir / "provenance.json").read_text())
    provenance.pop("run_format")
    if run_format is not None:
        provenance["run_format"] = run_format
    (run_dir / "provenance.json").write_text(json.dumps(provenance))
    return run_dir


def test_the_fixture_is_of_the_version_this_code_writes() -> None:
    """Raising RUN_FORMAT means adding tests/fixtures/run_format_<new> beside the old one."""
    assert RUN_FORMAT == 1
    for name in ("react", "speedrunner"):
        assert check_run_format(FORMAT_1 / name)["run_format"] == 1


@pytest.mark.slow  # two resumes, each starting a BabyAI server
@pytest.mark.parametrize(("name", "rows_before"), [("react", 4), ("speedrunner", 2)])
def test_a_format_1_run_resumes_to_its_end_paying_nothing(
    tmp_path: Path, name: str, rows_before: int
) -> None:
    run_dir = copy(tmp_path, name)
    resolved = (run_dir / "config.resolved.json").read_text()
    proc = run([*RESUME, str(run_dir)], timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    checkpoint = json.loads((run_dir / "checkpoint.json").read_text())
    assert checkpoint["completed_batches"] == 2 and checkpoint["metrics_rows"] == 4
    assert (
        json.loads((FORMAT_1 / name / "checkpoint.json").read_text())["metrics_rows"] == rows_before
    )
    summary = json.loads((run_dir / "summary.json").read_text())
    assert (
        summary["status"] == "finished"
        and summary["spent_usd"] == 0.0
        and summary["scripted"] is True
    )
    assert (run_dir / "config.resolved.json").read_text() == resolved  # never rewritten
    assert (run_dir / "speedrun.json").is_file()


def test_format_1_runs_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "report"
    assert main(["report", str(FORMAT_1), "--out", str(out)]) == 0, capsys.readouterr().err
    summary = (out / "tables" / "summary.csv").read_text()
    assert summary.count("\n") == 3, summary  # the header and one row per run
    assert "scripted" in (out / "report.md").read_text()


def test_a_format_1_result_goes_on_the_leaderboard(tmp_path: Path) -> None:
    board = tmp_path / "LEADERBOARD.md"
    assert (
        main(
            [
                "leaderboard",
                "append",
                str(FORMAT_1 / "react"),
                "--allow-scripted",
                "--board",
                str(board),
            ]
        )
        == 0
    )
    assert "react" in board.read_text()


@pytest.mark.parametrize(
    ("run_format", "says"),
    [
        (None, "in no run-directory format version (an unreleased draft)"),
        (0, "in run format 0"),
    ],
)
def test_a_draft_is_refused_by_resume_naming_who_wrote_it(
    tmp_path: Path, run_format: object, says: str
) -> None:
    run_dir = draft(tmp_path, run_format)
    version = json.loads((run_dir / "provenance.json").read_text())["packages"]["speedrunner"]
    before = {p: p.read_bytes() for p in run_dir.rglob("*") if p.is_file()}
    proc = run([*RESUME, str(run_dir)], timeout=120)
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert says in proc.stderr and f"written by speedrunner {version}" in proc.stderr
    assert (
        "reads run format 1 only. Start a new run" in proc.stderr and "Traceback" not in proc.stderr
    )
    assert {
        p: p.read_bytes() for p in run_dir.rglob("*") if p.is_file()
    } == before  # nothing touched


def test_a_draft_is_refused_by_report_and_estimate(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run_dir = draft(tmp_path)
    assert main(["report", str(run_dir), "--out", str(tmp_path / "report")]) == 2
    err = capsys.readouterr().err
    assert "cannot be reported" in err and "unreleased draft" in err and "Start a new run" in err
    config = REPO / "configs" / "babyai" / "speedrunner-gpt-seq.yaml"
    assert main(["estimate", str(config), "--from", str(run_dir)]) == 2
    err = capsys.readouterr().err
    assert "cannot be used as a pilot" in err and "unreleased draft" in err
    assert not (tmp_path / "report").exists()


def test_a_directory_without_provenance_is_not_a_run_directory(tmp_path: Path) -> None:
    with pytest.raises(RunFormatError, match="not a SpeedRunner run directory"):
        check_run_format(tmp_path)
