"""Benchmarks and methods are found through Python entry points, the shipped ones included;
unknown or broken ones say how to fix them; ``speedrunner train`` runs any of them."""

from __future__ import annotations

import dataclasses
import textwrap
from importlib.metadata import EntryPoint
from pathlib import Path
from typing import Any

import pytest

from speedrunner import cli, train_cli
from speedrunner.core import registry
from speedrunner.core.specs import BENCHMARKS, METHODS, BenchmarkSpec
from speedrunner.errors import ConfigError, UnknownNameError

TOY = BenchmarkSpec(name="toy", config="toy.config:ToyConfig", factory="toy.benchmark:Toy")
"""A spec an entry point of this test module points at (nothing of it is imported)."""
MISNAMED = BenchmarkSpec(name="other", config="toy.config:ToyConfig", factory="toy.benchmark:Toy")
TOY_AGAIN = dataclasses.replace(TOY, factory="another.benchmark:Toy")
MORE = dataclasses.replace(TOY, name="more")


class FakeDistribution:
    """An installed distribution as ``importlib.metadata`` shows it: a name and entry points."""

    def __init__(
        self, name: str, entries: list[tuple[str, str]], group: str = "speedrunner.benchmarks"
    ) -> None:
        self.metadata = {"Name": name}
        self.entry_points = [EntryPoint(n, v, group) for n, v in entries]


def fake_group(monkeypatch: pytest.MonkeyPatch, *entries: tuple[str, str]) -> None:
    """Make the installed distributions declare exactly these (name, value) benchmarks, one
    package each."""
    dists = [FakeDistribution(f"pkg-{i}", [entry]) for i, entry in enumerate(entries)]
    monkeypatch.setattr(registry, "distributions", lambda: dists)


def test_the_shipped_specs_are_declared_as_entry_points_of_the_installed_package() -> None:
    """What a reinstall (pip install -e .) writes into the metadata is what every command reads."""
    from speedrunner import catalog

    benchmarks = {d.name: d for d in registry.declared("speedrunner.benchmarks")}
    methods = {d.name: d for d in registry.declared("speedrunner.methods")}
    assert {"babyai", "crafter", "scienceworld"} <= set(benchmarks)
    assert {"react", "opo", "speedrunner", "speedrunner_no_cl", "asi", "voyager"} <= set(methods)
    assert benchmarks["babyai"].distribution == "speedrunner"
    assert benchmarks["babyai"].load() is catalog.BABYAI and methods["opo"].load() is catalog.OPO
    assert (
        BENCHMARKS.get("crafter") is catalog.CRAFTER and METHODS.get("voyager") is catalog.VOYAGER
    )


def test_a_stale_metadata_copy_found_first_does_not_hide_the_installed_declarations(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A source tree on PYTHONPATH may hold an old ``*.egg-info`` of the same package, without
    entry points or with old ones: the first copy wins per entry point, the others still count."""
    stale = FakeDistribution("toy_pkg", [("toy", f"{__name__}:TOY")])
    installed = FakeDistribution(
        "toy-pkg", [("toy", f"{__name__}:TOY_AGAIN"), ("more", f"{__name__}:MORE")]
    )
    monkeypatch.setattr(
        registry, "distributions", lambda: [FakeDistribution("toy-pkg", []), stale, installed]
    )
    found = registry.Registry("benchmark", BenchmarkSpec)
    assert found.names() == ["more", "toy"] and found.get("toy") is TOY


def test_a_package_is_found_through_its_entry_point(monkeypatch: pytest.MonkeyPatch) -> None:
    fake_group(monkeypatch, ("toy", f"{__name__}:TOY"))
    found = registry.Registry("benchmark", BenchmarkSpec)
    assert found.names() == ["toy"] and found.get("toy") is TOY and "toy" in found


def test_a_broken_plug_in_is_reported_when_named_and_does_not_hide_the_others(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fake_group(
        monkeypatch,
        ("toy", f"{__name__}:TOY"),
        ("gone", "no_such_package_xyz.specs:GONE"),
        ("wrong", f"{__name__}:MISNAMED"),
        ("odd", f"{__name__}:fake_group"),
    )
    found = registry.Registry("benchmark", BenchmarkSpec)
    assert found.names() == ["toy"]
    with pytest.raises(
        ConfigError, match=r"no_such_package_xyz.specs:GONE.*cannot be loaded: ModuleNotFoundError"
    ):
        found.get("gone")
    with pytest.raises(
        ConfigError,
        match="names itself 'other'; the entry point's name and the spec's name must agree",
    ):
        found.get("wrong")
    with pytest.raises(ConfigError, match="is a function, not a BenchmarkSpec"):
        found.get("odd")


def test_two_packages_declaring_one_name_is_an_error_naming_both(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fake_group(monkeypatch, ("toy", f"{__name__}:TOY"), ("toy", f"{__name__}:TOY_AGAIN"))
    found = registry.Registry("benchmark", BenchmarkSpec)
    assert found.names() == []
    with pytest.raises(
        ConfigError, match=r"'toy': declared twice: by .*:TOY\b.* and by .*:TOY_AGAIN"
    ):
        found.get("toy")


@pytest.mark.parametrize(
    ("registry_", "name", "group", "page", "close"),
    [
        (METHODS, "reactt", "speedrunner.methods", "docs/add-method.md", "react"),
        (BENCHMARKS, "babyia", "speedrunner.benchmarks", "docs/add-benchmark.md", "babyai"),
    ],
)
def test_an_unknown_name_says_how_to_register_one(registry_, name, group, page, close) -> None:
    with pytest.raises(UnknownNameError) as e:
        registry_.get(name)
    text = str(e.value)
    assert (
        f"did you mean '{close}'" in text
        and repr(group) in text
        and page in text
        and "pip install -e" in text
    )


def write(tmp_path: Path, text: str, name: str = "exp.yaml") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    return path


SCRIPTED = "model: {provider: scripted, name: scripted-uniform}\n"


def test_validate_config_refuses_a_skill_method_whose_skill_api_cannot_be_imported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    config = write(
        tmp_path,
        "method: {name: speedrunner}\nbenchmark: {name: crafter, task_set: crafter}\n" + SCRIPTED,
    )
    assert cli.main(["validate-config", str(config)]) == 0
    broken = dataclasses.replace(BENCHMARKS.get("crafter"), skill_api="no_such_skill_api_xyz")
    monkeypatch.setitem(BENCHMARKS._specs, "crafter", broken)
    capsys.readouterr()
    assert cli.main(["validate-config", str(config)]) == 2
    err = capsys.readouterr().err
    assert "skill API no_such_skill_api_xyz cannot be imported (ModuleNotFoundError" in err
    assert "Traceback" not in err
    # A method without skills does not need one.
    react = write(
        tmp_path,
        "method: {name: react}\nbenchmark: {name: crafter, task_set: crafter}\n" + SCRIPTED,
        "r.yaml",
    )
    assert cli.main(["validate-config", str(react)]) == 0


def test_a_skill_api_must_declare_its_primitive_actions(monkeypatch: pytest.MonkeyPatch) -> None:
    from speedrunner.core.runtime.skill_support import load_skill_api

    api = load_skill_api("crafter")
    assert "Noop" in api.primitives and api.module == "speedrunner.benchmarks.crafter.skill_api"
    assert load_skill_api("scienceworld").primitives == ()  # free-text actions
    undeclared = dataclasses.replace(BENCHMARKS.get("crafter"), skill_api="speedrunner.core.skill")
    monkeypatch.setitem(BENCHMARKS._specs, "crafter", undeclared)
    with pytest.raises(ConfigError, match="must declare PRIMITIVE_ACTIONS"):
        load_skill_api("crafter")
    monkeypatch.setitem(
        BENCHMARKS._specs, "crafter", dataclasses.replace(undeclared, skill_api=None)
    )
    with pytest.raises(ConfigError, match="declares no skill API"):
        load_skill_api("crafter")


@pytest.fixture
def no_run(monkeypatch: pytest.MonkeyPatch) -> list[tuple[Any, Path]]:
    """The train command up to the run itself: config, checks, run directory."""
    calls: list[tuple[Any, Path]] = []
    monkeypatch.setattr(
        train_cli,
        "_run",
        lambda config, run_dir, run_id, session: calls.append((config, run_dir)) or 0,
    )
    monkeypatch.setattr(train_cli, "preflight", lambda config: None)
    return calls


def test_speedrunner_train_runs_any_benchmark_and_method_and_resumes_any_run(
    tmp_path: Path, no_run: list[tuple[Any, Path]], capsys: pytest.CaptureFixture[str]
) -> None:
    configs = {
        "crafter": "method: {name: opo}\nbenchmark: {name: crafter, task_set: crafter}\n",
        "scienceworld": "method: {name: react}\nbenchmark: {name: scienceworld, task_set: t4}\n",
        "voyager": "method: {name: voyager}\nbenchmark: {name: crafter, task_set: crafter}\n",
    }
    for name, text in configs.items():
        path = write(tmp_path, text + SCRIPTED, f"{name}.yaml")
        assert (
            cli.main(["train", "--config_file", str(path), "--run_dir", str(tmp_path / name)]) == 0
        ), capsys.readouterr().err
    assert [(c.benchmark.name, c.method.name, d.name) for c, d in no_run] == [
        ("crafter", "opo", "crafter"),
        ("scienceworld", "react", "scienceworld"),
        ("crafter", "voyager", "voyager"),
    ]
    assert cli.main(["train", "--resume", str(tmp_path / "scienceworld")]) == 0
    assert no_run[-1][1] == tmp_path / "scienceworld"
    # The per-benchmark entry points keep refusing a config of another benchmark.
    assert (
        train_cli.main(
            "babyai",
            "speedrunner.benchmarks.babyai.train",
            ["--config_file", str(tmp_path / "crafter.yaml")],
        )
        == 2
    )
    assert "speedrunner train --config_file" in cli._parser().format_help()
