"""``speedrunner validate-config`` and ``speedrunner configs list|copy``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import speedrunner
from speedrunner import cli
from speedrunner.core.config.loader import ConfigLoader
from speedrunner.shipped_configs import configs_root, list_configs, shipped_config_path

from .conftest import WriteConfig


def run_cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    rc = cli.main(list(args))
    out, err = capsys.readouterr()
    return rc, out, err


# ---------------------------------------------------------------- validate-config


def test_validate_config_prints_the_resolved_config(
    loader: ConfigLoader, write_config: WriteConfig, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_config("""
        method: {name: opo}
        model:
          sampling: {temperature: 0.4}
        benchmark: {name: scienceworld, task_set: t3}
    """)
    rc, out, err = run_cli(
        capsys, "validate-config", str(path), "--quick_test", "--set", "run.seed=5"
    )
    assert rc == 0, err
    resolved = json.loads(out)
    assert resolved == loader.load(path, quick_test=True, overrides=["run.seed=5"]).resolved_json()
    # Resolved means every layer applied and every default filled in.
    assert resolved["run"]["seed"] == 5
    assert resolved["run"]["rollouts"] == 4
    assert resolved["model"]["sampling"] == {
        "temperature": 0.4,
        "top_p": 1.0,
        "max_tokens": 4096,
        "seed": None,
    }
    assert resolved["method"]["guide_max_chars"] == 6000
    assert resolved["benchmark"]["max_llm_calls"] == 5
    assert f"{path}: valid" in err


def test_validate_config_on_a_bad_file_prints_only_errors(
    write_config: WriteConfig, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_config("""
        method: {name: react}
        benchmark: {name: babyai, max_llm_calls: 0}
    """)
    rc, out, err = run_cli(capsys, "validate-config", str(path))
    assert rc == 2
    assert out == ""
    assert err.startswith(f"error: invalid configuration ({path})")
    assert "line 2: benchmark.max_llm_calls" in err and "greater than or equal to 1" in err


# ----------------------------------------------------------------------- configs


def test_validate_config_says_what_the_train_command_would_say(
    write_config: WriteConfig,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    unimplemented_speedrunner: None,
) -> None:
    path = write_config("""
        method: {name: speedrunner}
        benchmark: {name: babyai}
    """)
    rc, out, err = run_cli(capsys, "validate-config", str(path))
    assert rc == 2 and out == ""
    assert "method 'speedrunner' is not implemented in this version yet" in err
    assert ": valid" not in err


def test_validate_config_needs_no_api_key_but_says_the_run_will(
    write_config: WriteConfig,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Checking a file needs no secret (the README's own example runs without a key); the
    train command still refuses before it makes anything."""
    from speedrunner.train_cli import main as train

    path = write_config("""
        method: {name: react}
        benchmark: {name: babyai}
    """)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    rc, out, err = run_cli(capsys, "validate-config", str(path))
    assert rc == 0, err
    assert json.loads(out)["method"]["name"] == "react"
    assert f"{path}: valid" in err
    assert "note:" in err and "OPENAI_API_KEY" in err

    monkeypatch.chdir(path.parent)
    assert train("babyai", "speedrunner.benchmarks.babyai.train", ["--config_file", str(path)]) == 2
    assert "OPENAI_API_KEY" in capsys.readouterr().err
    assert not (path.parent / "runs").exists()


def test_speedrunner_help_is_plain_text(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        cli.main(["--help"])
    out = capsys.readouterr().out
    assert "``" not in out and "python -m speedrunner.benchmarks." in out


def test_configs_list_shows_every_shipped_config(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = run_cli(capsys, "configs", "list")
    assert rc == 0
    names = out.split()
    assert names == list_configs()
    run_configs = [p for p in configs_root().glob("*/*.yaml") if p.parent.name != "sweeps"]
    assert len(names) == len(run_configs)  # recorded data below is not a config
    assert not any(n.startswith("sweeps/") for n in names)  # sweep files are not run configs
    assert {
        "babyai/react-gpt-seq",
        "crafter/voyager-gpt-crafter",
        "scienceworld/speedrunner-gpt-t4",
    } <= set(names)


def test_configs_are_package_data() -> None:
    root = configs_root()
    assert root.is_relative_to(Path(speedrunner.__file__).parent)
    assert (
        shipped_config_path("babyai/react-gpt-seq.yaml") == root / "babyai" / "react-gpt-seq.yaml"
    )
    assert (
        shipped_config_path("configs/babyai/react-gpt-seq")
        == root / "babyai" / "react-gpt-seq.yaml"
    )


def test_configs_copy_is_rerun_safe_and_keeps_edits(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    shipped = shipped_config_path("scienceworld/speedrunner-gpt-t4").read_bytes()
    dest = tmp_path / "mine" / "speedrunner-gpt-t4.yaml"

    rc, out, _ = run_cli(capsys, "configs", "copy", "scienceworld/speedrunner-gpt-t4", "mine/")
    assert rc == 0 and "copied" in out
    assert dest.read_bytes() == shipped

    os.utime(dest, ns=(1_000_000_000, 1_000_000_000))
    rc, out, _ = run_cli(capsys, "configs", "copy", "scienceworld/speedrunner-gpt-t4", "mine")
    assert rc == 0 and "unchanged" in out
    assert dest.stat().st_mtime_ns == 1_000_000_000  # not even rewritten

    edited = shipped.replace(b"seed: 0", b"seed: 1")
    assert edited != shipped
    dest.write_bytes(edited)
    rc, out, err = run_cli(capsys, "configs", "copy", "scienceworld/speedrunner-gpt-t4", str(dest))
    assert rc == 2 and out == ""
    assert str(dest) in err and "--overwrite" in err
    assert dest.read_bytes() == edited

    rc, out, _ = run_cli(
        capsys, "configs", "copy", "scienceworld/speedrunner-gpt-t4", str(dest), "--overwrite"
    )
    assert rc == 0 and "overwritten" in out
    assert dest.read_bytes() == shipped


def test_configs_copy_by_short_name_to_a_file_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    dest = tmp_path / "exp.yaml"
    rc, _, _ = run_cli(capsys, "configs", "copy", "react-qwen-crafter", str(dest))
    assert rc == 0
    assert dest.read_bytes() == shipped_config_path("crafter/react-qwen-crafter").read_bytes()


def test_configs_copy_unknown_name_suggests(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rc, out, err = run_cli(capsys, "configs", "copy", "babyai/react-gpt-seg", str(tmp_path))
    assert rc == 2 and out == ""
    assert "no shipped config 'babyai/react-gpt-seg'" in err
    assert "did you mean 'babyai/react-gpt-seq'" in err
    assert list(tmp_path.iterdir()) == []


def test_configs_copy_works_outside_the_repo(tmp_path: Path) -> None:
    """From a directory with no repo around it, through a fresh interpreter; then validate it."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    copy = subprocess.run(
        [sys.executable, "-m", "speedrunner.cli", "configs", "copy", "babyai/opo-gpt-seq", "."],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert copy.returncode == 0, copy.stderr
    assert (tmp_path / "opo-gpt-seq.yaml").read_bytes() == shipped_config_path(
        "babyai/opo-gpt-seq"
    ).read_bytes()
    check = subprocess.run(
        [sys.executable, "-m", "speedrunner.cli", "validate-config", "opo-gpt-seq.yaml"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert check.returncode == 0, check.stderr
    assert json.loads(check.stdout)["method"]["name"] == "opo"


def test_exit_codes_mean_the_same_everywhere(capsys: pytest.CaptureFixture[str]) -> None:
    """`speedrunner --help`, a train entry point's --help and the getting-started guide give exit 1
    one meaning."""
    from speedrunner.errors import EXIT_CODES
    from speedrunner.train_cli import build_parser

    with pytest.raises(SystemExit):
        cli.main(["--help"])
    speedrunner_help = capsys.readouterr().out
    train_help = build_parser("python -m speedrunner.benchmarks.babyai.train").format_help()
    guide = (Path(__file__).resolve().parents[2] / "docs" / "getting-started.md").read_text("utf-8")
    for text in (speedrunner_help, train_help, guide):
        assert EXIT_CODES in text
    assert "1 a bug" not in speedrunner_help
