"""What differs between benchmarks and methods is declared in their specs and read from there:
the sweep's shared services and memory, estimate's sizes and bounds, the report's knowledge."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from speedrunner.core.specs import BENCHMARKS, METHODS
from speedrunner.sweep.spec import SweepRun

REPO = Path(__file__).resolve().parents[2]
SERVED: list[list[str]] = []


@contextlib.contextmanager
def fake_service(runs: list[SweepRun]) -> Iterator[Callable[[SweepRun], list[str]]]:
    """A sweep service (``BenchmarkSpec.sweep_service``): it sees its benchmark's runs only."""
    SERVED.append([r.benchmark for r in runs])
    yield lambda run: [f"benchmark.max_env_actions={7 + run.index}"]
    SERVED.append(["stopped"])


def sweep_file(tmp_path: Path) -> Path:
    path = tmp_path / "sweep.yaml"
    path.write_text(
        textwrap.dedent(f"""
        name: declared
        configs:
          - {REPO}/configs/crafter/react-gpt-crafter.yaml
          - {REPO}/configs/scienceworld/react-gpt-t4.yaml
        output_root: {tmp_path / "out"}
        set: {{model.provider: scripted}}
    """)
    )
    return path


def test_a_sweep_enters_the_service_a_benchmark_declares_and_reserves_its_declared_memory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from speedrunner.sweep.services import benchmark_services
    from speedrunner.sweep.spec import load_sweep

    crafter = dataclasses.replace(
        BENCHMARKS.get("crafter"),
        sweep_service=f"{__name__}:fake_service",
        memory_gb_per_episode=0.5,
    )
    monkeypatch.setitem(BENCHMARKS._specs, "crafter", crafter)
    runs = load_sweep(sweep_file(tmp_path)).runs
    by_bench = {r.benchmark: r for r in runs}
    assert by_bench["crafter"].memory_bytes == int(
        0.5 * by_bench["crafter"].parallel_episodes * 2**30
    )
    SERVED.clear()
    with benchmark_services(runs) as operational:
        assert operational(by_bench["crafter"]) == [
            f"benchmark.max_env_actions={7 + by_bench['crafter'].index}"
        ]
        assert operational(by_bench["scienceworld"]) == []  # it declares no service
    assert SERVED == [["crafter"], ["stopped"]]


def test_estimate_reads_the_declared_sizes_and_bounds_and_says_when_none_are_declared(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from speedrunner.catalog import config_loader
    from speedrunner.core.estimate import estimate

    config = config_loader().load(REPO / "configs" / "crafter" / "react-gpt-crafter.yaml").config
    declared = estimate(config)
    assert any("10,000 bytes and one observation <= 3,000 bytes" in a for a in declared.assumptions)
    monkeypatch.setitem(
        BENCHMARKS._specs,
        "crafter",
        dataclasses.replace(BENCHMARKS.get("crafter"), prompt_bytes=None, observation_bytes=None),
    )
    monkeypatch.setitem(
        METHODS._specs, "react", dataclasses.replace(METHODS.get("react"), cost_bounds=None)
    )
    undeclared = estimate(config)
    notes = " ".join(undeclared.assumptions)
    assert (
        "16,000 bytes and one observation <= 8,000 bytes" in notes and "declares no sizes" in notes
    )
    assert "method 'react' declares no cost bounds (MethodSpec.cost_bounds)" in notes
    assert "the knowledge shown stays under 60,000 bytes" in notes
    assert undeclared.roles[0].input_tokens_max > declared.roles[0].input_tokens_max


def test_the_report_shows_any_method_knowledge_folder_under_its_declared_title(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from speedrunner.core.reporting.knowledge import diffs, generations

    (tmp_path / "config.resolved.json").write_text(json.dumps({"method": {"name": "react"}}))
    (tmp_path / "episodes").mkdir()
    (tmp_path / "episodes" / "gen_0.json").write_text("{}")  # not knowledge
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "gen_1.md").write_text("batch 0: 1 of 2\n")
    (notes / "gen_2.md").write_text("batch 0: 1 of 2\nbatch 1: 2 of 2\n")
    gens = generations(tmp_path)
    assert [(g.generation, g.kind, g.text) for g in gens] == [
        (1, "notes", "batch 0: 1 of 2\n"),
        (2, "notes", "batch 0: 1 of 2\nbatch 1: 2 of 2\n"),
    ]
    assert "+batch 1: 2 of 2" in diffs(gens)[0][2] and "gen_2.md" in diffs(gens)[0][2]
    monkeypatch.setitem(
        METHODS._specs, "react", dataclasses.replace(METHODS.get("react"), knowledge_title="Notes")
    )
    assert {g.kind for g in generations(tmp_path)} == {"Notes"}


def test_the_shipped_declarations_keep_what_was_written_by_name_before() -> None:
    """Skills, multi-turn sleeps and codebook titles, as the shipped methods had them."""
    from speedrunner.core.runtime.caps import caps_in_force

    assert {n for n in METHODS.names() if METHODS.get(n).uses_skills} == {
        "speedrunner",
        "speedrunner_no_cl",
        "asi",
        "voyager",
    }
    assert {n for n in METHODS.names() if METHODS.get(n).multi_turn_sleep} == {
        "speedrunner",
        "speedrunner_no_cl",
    }
    assert [
        METHODS.get(n).knowledge_title
        for n in ("speedrunner", "speedrunner_no_cl", "asi", "voyager")
    ] == ["SpeedRunner", "SpeedRunner (no code execution)", "ASI", "Voyager"]
    assert "max_inducer_turns" in caps_in_force({"name": "speedrunner", "max_inducer_turns": 20})
    assert "max_inducer_turns" not in caps_in_force({"name": "asi", "max_inducer_turns": 20})


def test_a_skill_method_on_a_benchmark_without_a_skill_api_is_refused_before_anything_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from speedrunner import cli

    monkeypatch.setitem(
        BENCHMARKS._specs, "crafter", dataclasses.replace(BENCHMARKS.get("crafter"), skill_api=None)
    )
    config = tmp_path / "c.yaml"
    config.write_text(
        "method: {name: asi}\nbenchmark: {name: crafter, task_set: crafter}\n"
        "model: {provider: scripted, name: scripted-uniform}\n"
    )
    assert (
        cli.main(["train", "--config_file", str(config), "--run_dir", str(tmp_path / "run")]) == 2
    )
    assert "declares no skill API" in capsys.readouterr().err
    assert not (tmp_path / "run").exists()
