"""Config mistakes fail loudly before any work: exit 2, the file, the key, the line, a fix.

Each case goes through ``speedrunner validate-config`` and through the train entry point
that would have run it, which must also leave no run directory behind.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from speedrunner import cli, train_cli
from speedrunner.core.config.loader import ConfigLoader
from speedrunner.errors import ConfigError

from .conftest import WriteConfig

TRAIN = {
    "babyai": ("babyai", "speedrunner.benchmarks.babyai.train"),
    "crafter": ("crafter", "speedrunner.benchmarks.crafter.train"),
    "scienceworld": ("scienceworld", "speedrunner.benchmarks.scienceworld.train"),
    "voyager": ("crafter", "speedrunner.benchmarks.crafter.train_voyager"),
}


def validate(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    rc = cli.main(["validate-config", *args])
    out, err = capsys.readouterr()
    return rc, out, err


def train(capsys: pytest.CaptureFixture[str], which: str, *args: str) -> tuple[int, str]:
    rc = train_cli.main(*TRAIN[which], list(args))
    return rc, capsys.readouterr().err


def assert_nothing_created(workdir: Path, before: set[str]) -> None:
    assert not (workdir / "runs").exists()
    assert {p.name for p in workdir.iterdir()} == before


# Each case: YAML text, the train entry point it was meant for, expected message parts.
CASES = {
    "malformed_yaml": (
        """
        run:
          seed: 0
        method:
          name: react
            extra: indented
        benchmark:
          name: babyai
        """,
        "babyai",
        ["malformed YAML", "line 5"],
    ),
    "unknown_section": (
        """
        run:
          seed: 0
        methd:
          name: react
        benchmark:
          name: babyai
        """,
        "babyai",
        [
            "line 3",
            "unknown section 'methd'",
            "did you mean 'method'",
            "valid sections: run, method",
        ],
    ),
    "unknown_key": (
        """
        run:
          seed: 0
          rolouts: 20
        method:
          name: react
        benchmark:
          name: babyai
        """,
        "babyai",
        ["line 3", "unknown key 'run.rolouts'", "did you mean 'rollouts'", "valid keys here:"],
    ),
    "unknown_nested_key": (
        """
        method:
          name: react
        model:
          sampling:
            temprature: 0.5
        benchmark:
          name: babyai
        """,
        "babyai",
        ["line 5", "unknown key 'model.sampling.temprature'", "did you mean 'temperature'"],
    ),
    "unknown_benchmark_key": (
        """
        method:
          name: react
        benchmark:
          name: babyai
          server_ur: http://127.0.0.1:8080
        """,
        "babyai",
        ["line 5", "unknown key 'benchmark.server_ur'", "did you mean 'server_url'"],
    ),
    "unknown_method_name": (
        """
        method:
          name: speedruner
        benchmark:
          name: crafter
        """,
        "crafter",
        ["line 2", "method.name", "'speedruner'", "did you mean 'speedrunner'"],
    ),
    "wrong_type": (
        """
        run:
          rollouts: "200"
        method:
          name: react
        benchmark:
          name: babyai
        """,
        "babyai",
        ["line 2", "run.rollouts", "valid integer", "'200'"],
    ),
    "coerced_no_for_a_string": (
        """
        method:
          name: react
        model:
          provider: openai
          name: no
        benchmark:
          name: babyai
        """,
        "babyai",
        ["line 5", "model.name", "boolean false", 'quote it: "no"'],
    ),
    "coerced_off_for_a_string": (
        """
        method:
          name: react
        model:
          provider: gemini
          name: gemini-3-flash-preview
          thinking_level: off
        benchmark:
          name: babyai
        """,
        "babyai",
        ["line 6", "model.thinking_level", 'quote it: "off"'],
    ),
    "coerced_on_for_a_string_or_list": (
        """
        method:
          name: react
        model:
          provider: vllm
          base_url: on
        benchmark:
          name: babyai
        """,
        "babyai",
        ["line 5", "model.base_url:", 'quote it: "on"'],
    ),
    "coerced_yes_for_a_task_set": (
        """
        method:
          name: react
        benchmark:
          name: scienceworld
          task_set: yes
        """,
        "scienceworld",
        ["line 5", "benchmark.task_set", 'quote it: "yes"'],
    ),
    "voyager_outside_crafter": (
        """
        method:
          name: voyager
        benchmark:
          name: babyai
        """,
        "babyai",
        ["line 2", "method 'voyager' runs only on crafter", "not on 'babyai'"],
    ),
    "flag_that_changes_a_method_name": (
        """
        method:
          name: speedrunner
          code_execution: false
        benchmark:
          name: babyai
        """,
        "babyai",
        ["line 3", "method.code_execution", "speedrunner_no_cl"],
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_validate_config_reports_file_key_line_and_fix(
    case: str, write_config: WriteConfig, capsys: pytest.CaptureFixture[str]
) -> None:
    text, _, expected = CASES[case]
    path = write_config(text, name=f"{case}.yaml")
    rc, out, err = validate(capsys, str(path))
    assert rc == 2
    assert out == ""  # no resolved config for a bad file
    assert f"{case}.yaml" in err
    for part in expected:
        assert part in err, f"{part!r} missing from:\n{err}"


@pytest.mark.parametrize("case", sorted(CASES))
def test_train_entry_point_refuses_before_creating_a_run_dir(
    case: str,
    write_config: WriteConfig,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    text, which, expected = CASES[case]
    path = write_config(text, name=f"{case}.yaml")
    monkeypatch.chdir(tmp_path)
    before = {p.name for p in tmp_path.iterdir()}
    rc, err = train(capsys, which, "--config_file", str(path))
    assert rc == 2
    assert f"{case}.yaml" in err
    for part in expected:
        assert part in err, f"{part!r} missing from:\n{err}"
    assert_nothing_created(tmp_path, before)


def test_missing_file_names_it_and_suggests_a_near_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "react-gpt-seq.yaml").write_text("method: {name: react}\n")
    missing = tmp_path / "react-gpt-seg.yaml"
    rc, out, err = validate(capsys, str(missing))
    assert rc == 2 and out == ""
    assert "react-gpt-seg.yaml does not exist" in err
    assert "did you mean 'react-gpt-seq.yaml'" in err

    monkeypatch.chdir(tmp_path)
    rc, err = train(capsys, "babyai", "--config_file", str(missing), "--run_dir", "mine")
    assert rc == 2
    assert "react-gpt-seg.yaml does not exist" in err
    assert not (tmp_path / "mine").exists() and not (tmp_path / "runs").exists()


def test_a_directory_is_not_a_config_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rc, _, err = validate(capsys, str(tmp_path))
    assert rc == 2
    assert "is a directory, not a file" in err


def test_all_problems_are_reported_at_once(write_config: WriteConfig, loader: ConfigLoader) -> None:
    path = write_config("""
        run:
          rolouts: 20
        method:
          name: react
        model:
          name: no
        benchmark:
          name: babyai
          max_llm_calls: "30"
    """)
    with pytest.raises(ConfigError) as info:
        loader.load(path)
    problems = info.value.problems
    assert len(problems) == 3, problems
    text = str(info.value)
    assert "line 2: unknown key 'run.rolouts'" in text
    assert "line 6: model.name" in text
    assert "line 9: benchmark.max_llm_calls" in text


def test_duplicate_key_is_an_error_with_both_lines(
    write_config: WriteConfig, loader: ConfigLoader
) -> None:
    path = write_config("""
        method:
          name: react
        benchmark:
          name: babyai
          max_llm_calls: 30
          max_llm_calls: 10
    """)
    with pytest.raises(
        ConfigError,
        match=r"line 6: key 'benchmark.max_llm_calls' appears twice \(first on line 5\)",
    ):
        loader.load(path)


def test_set_override_errors_name_the_set_layer_and_hint_to_quote(
    write_config: WriteConfig, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_config("""
        method: {name: react}
        benchmark: {name: babyai}
    """)
    rc, out, err = validate(capsys, str(path), "--set", "model.name=no")
    assert rc == 2 and out == ""
    assert "[--set] model.name" in err and 'quote it: "no"' in err

    rc, out, err = validate(capsys, str(path), "--set", "modle.name=x")
    assert rc == 2 and out == ""
    assert "[--set] unknown section 'modle'" in err and "did you mean 'model'" in err

    rc, _, err = validate(capsys, str(path), "--set", "run.seed")
    assert rc == 2
    assert "expected dotted.key=value" in err


def test_schedule_that_does_not_fit_is_refused(
    write_config: WriteConfig, loader: ConfigLoader
) -> None:
    path = write_config("""
        run: {rollouts: 200, sleep_every: 10, eval_every: 25}
        method: {name: react}
        benchmark: {name: babyai}
    """)
    with pytest.raises(
        ConfigError, match=r"line 1: .*eval_every \(25\) must be a multiple of sleep_every \(10\)"
    ):
        loader.load(path)


def test_api_key_pasted_into_api_key_env_is_refused(
    write_config: WriteConfig, loader: ConfigLoader
) -> None:
    path = write_config("""
        method: {name: react}
        model:
          api_key_env: sk-proj-abcdefghijklmnop1234
        benchmark: {name: babyai}
    """)
    with pytest.raises(
        ConfigError, match=r"line 3: model.api_key_env: .*NAME of the environment variable"
    ):
        loader.load(path)
    assert (
        loader.load(path, overrides=["model.api_key_env=MY_OPENAI_KEY"]).config.model.api_key_env
        == "MY_OPENAI_KEY"
    )


# ----------------------------------------------------------- entry-point combinations

SCIENCEWORLD = """
    method:
      name: react
    benchmark:
      name: scienceworld
      task_set: t4
"""
VOYAGER = """
    method:
      name: voyager
    benchmark:
      name: crafter
"""
REACT_CRAFTER = """
    method:
      name: react
    benchmark:
      name: crafter
"""


@pytest.mark.parametrize(
    ("text", "which", "expected"),
    [
        pytest.param(
            SCIENCEWORLD,
            "babyai",
            [
                "line 4",
                "benchmark 'scienceworld'",
                "runs 'babyai'",
                "speedrunner train --config_file",
            ],
            id="scienceworld_config_to_babyai",
        ),
        pytest.param(
            REACT_CRAFTER,
            "scienceworld",
            ["line 4", "benchmark 'crafter'", "runs 'scienceworld'"],
            id="crafter_config_to_scienceworld",
        ),
        pytest.param(
            VOYAGER,
            "crafter",
            [
                "line 2",
                "method.name 'voyager'",
                "python -m speedrunner.benchmarks.crafter.train_voyager",
            ],
            id="voyager_via_crafter_train",
        ),
        pytest.param(
            REACT_CRAFTER,
            "voyager",
            [
                "line 2",
                "method.name is 'react'",
                "runs only method 'voyager'",
                "speedrunner train --config_file",
            ],
            id="react_via_train_voyager",
        ),
    ],
)
def test_config_for_another_entry_point_is_refused(
    text: str,
    which: str,
    expected: list[str],
    write_config: WriteConfig,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    path = write_config(text, name="other.yaml")
    monkeypatch.chdir(tmp_path)
    before = {p.name for p in tmp_path.iterdir()}
    rc, err = train(
        capsys, which, "--config_file", str(path), "--run_dir", str(tmp_path / "pinned")
    )
    assert rc == 2
    assert "other.yaml" in err
    for part in expected:
        assert part in err, f"{part!r} missing from:\n{err}"
    assert_nothing_created(tmp_path, before)


def test_unimplemented_method_refuses_before_creating_a_run_dir(
    write_config: WriteConfig,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    unimplemented_speedrunner: None,
) -> None:
    path = write_config("""
        method: {name: speedrunner}
        benchmark: {name: babyai}
    """)
    monkeypatch.chdir(tmp_path)
    before = {p.name for p in tmp_path.iterdir()}
    rc, err = train(capsys, "babyai", "--config_file", str(path))
    assert rc == 2
    assert "'speedrunner' is not implemented" in err
    assert_nothing_created(tmp_path, before)


def test_missing_api_key_is_a_user_error_before_any_run_dir(
    write_config: WriteConfig,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY")
    path = write_config("""
        method: {name: react}
        benchmark: {name: babyai}
    """)
    monkeypatch.chdir(tmp_path)
    rc, err = train(capsys, "babyai", "--config_file", str(path))
    assert not (tmp_path / "runs").exists()
    assert "OPENAI_API_KEY" in err
    assert "--resume" not in err
    assert rc == 2


@pytest.mark.parametrize("which", sorted(TRAIN))
def test_python_m_entry_points_exit_2_on_a_foreign_config(
    which: str, write_config: WriteConfig, tmp_path: Path
) -> None:
    """The real modules are wired to the right benchmark and entry point."""
    # Voyager's entry point is a Crafter one: a plain Crafter config is foreign there.
    foreign = {"babyai": "crafter", "voyager": "crafter"}.get(which, "babyai")
    path = write_config(
        f"""
        method: {{name: react}}
        benchmark: {{name: {foreign}}}
    """,
        name="foreign.yaml",
    )
    proc = subprocess.run(
        [sys.executable, "-m", TRAIN[which][1], "--config_file", str(path)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2, proc.stderr
    assert "foreign.yaml" in proc.stderr
    if which == "voyager":
        assert "runs only method 'voyager'" in proc.stderr
    else:
        assert f"this entry point runs '{TRAIN[which][0]}'" in proc.stderr
    assert not (tmp_path / "runs").exists()
