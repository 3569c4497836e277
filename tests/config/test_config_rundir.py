"""Run directories: layout, unique ids, never overwriting, provenance, no secrets, resume."""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import speedrunner
from speedrunner import train_cli
from speedrunner.core.config.loader import ConfigLoader
from speedrunner.core.rundir import create_run_dir
from speedrunner.errors import ConfigError

from .conftest import SECRET, WriteConfig

BABYAI_TRAIN = ("babyai", "speedrunner.benchmarks.babyai.train")
CRAFTER_TRAIN = ("crafter", "speedrunner.benchmarks.crafter.train")

# Comments, odd spacing and CRLF line ends: config.yaml must keep every byte of them.
RAW_CONFIG = (
    b"# my experiment   \r\n"
    b"run:\r\n"
    b"  seed: 2     # a comment\r\n"
    b"method:\r\n"
    b"  name: react\r\n"
    b"model: {provider: openai, name: gpt-5.4-mini}\r\n"
    b"benchmark:\r\n"
    b"  name: babyai\r\n"
    b"  task_set: seq\r\n"
)


@pytest.fixture
def config_file(tmp_path: Path) -> Path:
    path = tmp_path / "exp.yaml"
    path.write_bytes(RAW_CONFIG)
    return path


@pytest.fixture
def no_run(monkeypatch: pytest.MonkeyPatch) -> list[tuple[Any, Path, str]]:
    """Stub the run itself (and the endpoint pre-flight): entry points go through config,
    the runnable checks and the run dir only."""
    calls: list[tuple[Any, Path, str]] = []

    def fake_run(config: Any, run_dir: Path, run_id: str, session: Any = None) -> int:
        calls.append((config, run_dir, run_id))
        return 0

    monkeypatch.setattr(train_cli, "_run", fake_run)
    monkeypatch.setattr(train_cli, "preflight", lambda config: None)
    return calls


def all_files(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file()]


def test_default_path_layout_and_sequential_ids(
    loader: ConfigLoader, config_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    loaded = loader.load(config_file, overrides=["run.seed=3"])
    first = create_run_dir(loaded)
    expected_parent = Path("runs") / "babyai" / "react-gpt-5.4-mini-seq" / "seed3"
    assert first == expected_parent / "r0001"
    first_bytes = {p: p.read_bytes() for p in all_files(first)}

    second = create_run_dir(loaded)
    assert second == expected_parent / "r0002"
    # The first run is untouched.
    assert {p: p.read_bytes() for p in all_files(first)} == first_bytes
    assert json.loads((second / "provenance.json").read_text())["run_id"] == "r0002"


def test_run_ids_skip_past_existing_ones(
    loader: ConfigLoader, config_file: Path, tmp_path: Path
) -> None:
    loaded = loader.load(config_file, overrides=[f"run.output_root={tmp_path / 'out'}"])
    parent = tmp_path / "out" / "babyai" / "react-gpt-5.4-mini-seq" / "seed2"
    (parent / "r0007").mkdir(parents=True)
    (parent / "notes").mkdir()
    assert create_run_dir(loaded) == parent / "r0008"


def test_model_label_in_the_path(
    loader: ConfigLoader, write_config: WriteConfig, tmp_path: Path
) -> None:
    qwen = write_config(f"""
        run: {{output_root: {tmp_path / "out"}}}
        method: {{name: opo}}
        model: {{provider: vllm, name: Qwen/Qwen3.5-35B-A3B, base_url: "http://127.0.0.1:5012/v1"}}
        benchmark: {{name: scienceworld, task_set: t3t4}}
    """)
    path = create_run_dir(loader.load(qwen))
    assert path.relative_to(tmp_path / "out").parts == (
        "scienceworld",
        "opo-Qwen3.5-35B-A3B-t3t4",
        "seed0",
        "r0001",
    )

    scripted = loader.load(qwen, overrides=["model={provider: scripted, name: whatever}"])
    assert create_run_dir(scripted).parent.parent.name == "opo-scripted-t3t4"


def test_the_provider_is_part_of_the_experiment(
    loader: ConfigLoader, write_config: WriteConfig, tmp_path: Path
) -> None:
    """The same model name on OpenAI and on a vLLM server are two experiments, never r0001/r0002
    of one (the report would average them)."""
    openai = write_config(f"""
        run: {{output_root: {tmp_path / "out"}}}
        method: {{name: react}}
        model: {{provider: openai, name: gpt-5.4-mini}}
        benchmark: {{name: babyai}}
    """)
    served = loader.load(
        openai, overrides=["model.provider=vllm", "model.base_url=http://127.0.0.1:5012/v1"]
    )
    a, b = create_run_dir(loader.load(openai)), create_run_dir(served)
    assert a.parent.parent.name == "react-gpt-5.4-mini-seq"  # the usual layout is unchanged
    assert b.parent.parent.name == "react-gpt-5.4-mini_vllm-seq"
    assert a.name == b.name == "r0001"


def test_staging_left_by_a_killed_creator_is_removed_and_a_live_ones_is_kept(
    loader: ConfigLoader, config_file: Path, tmp_path: Path
) -> None:
    """A kill during creation leaves ``.<id>.creating-<pid>``; the next creation cleans it up."""
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    stale = tmp_path / f".pinned.creating-{dead.pid}"
    live = tmp_path / f".pinned.creating-{os.getppid()}"  # a process that is certainly running
    for d in (stale, live):
        (d / "partial").mkdir(parents=True)
    run_dir = create_run_dir(loader.load(config_file), run_dir=tmp_path / "pinned")
    assert (run_dir / "config.yaml").exists()
    assert not stale.exists() and live.exists()


def test_provenance_is_complete_and_byte_exact(
    loader: ConfigLoader, config_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    argv = ["train.py", "--config_file", str(config_file), "--set", "run.seed=5"]
    monkeypatch.setattr(sys, "argv", argv)
    loaded = loader.load(config_file, overrides=["run.seed=5"], quick_test=True)
    run_dir = create_run_dir(loaded, run_dir=tmp_path / "pinned")
    assert run_dir == tmp_path / "pinned"

    assert (run_dir / "config.yaml").read_bytes() == RAW_CONFIG
    resolved = json.loads((run_dir / "config.resolved.json").read_text())
    assert resolved == loaded.resolved_json()
    assert resolved["run"]["seed"] == 5 and resolved["run"]["rollouts"] == 4  # --set and preset in

    prov = json.loads((run_dir / "provenance.json").read_text())
    assert prov["config_file_sha256"] == hashlib.sha256(RAW_CONFIG).hexdigest()
    assert prov["config_source"] == str(config_file)
    assert prov["overrides"] == ["run.seed=5"]
    assert prov["quick_test"] is True
    assert prov["command"] == [sys.executable, *argv]
    assert prov["run_id"] == "pinned"
    assert prov["scripted_model"] is False
    # The commit of the checkout holding the code (None only when it is not in git).
    head = subprocess.run(
        ["git", "rev-parse", "HEAD"],
        cwd=Path(speedrunner.__file__).parent,
        capture_output=True,
        text=True,
    )
    if head.returncode == 0:
        assert prov["git_commit"] == head.stdout.strip()
        assert re.fullmatch(r"[0-9a-f]{40}", prov["git_commit"])
        assert isinstance(prov["git_dirty"], bool)
    else:
        assert prov["git_commit"] is None and prov["git_dirty"] is None
    packages = prov["packages"]
    assert packages["pydantic"] == importlib.metadata.version("pydantic")
    assert packages["speedrunner"] == importlib.metadata.version("speedrunner")
    assert "pyyaml" in packages


def test_api_keys_never_reach_the_run_dir(
    loader: ConfigLoader, config_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    gemini_key = "AIzaSyFAKE0123456789abcdefghijk"
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    monkeypatch.setenv("GEMINI_API_KEY", gemini_key)
    monkeypatch.setattr(
        sys,
        "argv",
        [
            "train.py",
            "--config_file",
            str(config_file),
            SECRET,
            f"--openai-key={SECRET}",
            "api_key=hunter2hunter2",
            f"GEMINI={gemini_key}",
        ],
    )
    loaded = loader.load(config_file, overrides=["run.seed=1", "model.api_key_env=OPENAI_API_KEY"])
    run_dir = create_run_dir(loaded, run_dir=tmp_path / "run")

    files = all_files(run_dir)
    assert {p.name for p in files} >= {"config.yaml", "config.resolved.json", "provenance.json"}
    for path in files:
        text = path.read_bytes().decode("utf-8", errors="replace")
        for secret in ("SECRET123456789", "hunter2hunter2", "0123456789abcdefghijk"):
            assert secret not in text, f"{secret} leaked into {path.name}"
    command = json.loads((run_dir / "provenance.json").read_text())["command"]
    assert "<redacted>" in command[4]  # the argv was recorded, just without the key


def test_run_dir_that_is_not_empty_is_refused(
    loader: ConfigLoader, config_file: Path, tmp_path: Path
) -> None:
    loaded = loader.load(config_file)
    occupied = tmp_path / "occupied"
    occupied.mkdir()
    (occupied / "checkpoint.json").write_text("{}")
    with pytest.raises(ConfigError, match="not empty; runs are never overwritten"):
        create_run_dir(loaded, run_dir=occupied)
    assert [p.name for p in occupied.iterdir()] == ["checkpoint.json"]
    assert (occupied / "checkpoint.json").read_text() == "{}"

    empty = tmp_path / "empty"
    empty.mkdir()
    assert create_run_dir(loaded, run_dir=empty) == empty
    with pytest.raises(ConfigError, match="not empty"):
        create_run_dir(loaded, run_dir=empty)  # a second run into the same pinned dir

    a_file = tmp_path / "a_file"
    a_file.write_text("x")
    with pytest.raises(ConfigError, match="is a file, not a directory"):
        create_run_dir(loaded, run_dir=a_file)


def test_train_entry_point_creates_the_run_dir_and_refuses_to_reuse_it(
    config_file: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    no_run: list[tuple[Any, Path, str]],
) -> None:
    monkeypatch.chdir(tmp_path)
    assert train_cli.main(*BABYAI_TRAIN, ["--config_file", str(config_file)]) == 0
    assert train_cli.main(*BABYAI_TRAIN, ["--config_file", str(config_file)]) == 0
    parent = Path("runs/babyai/react-gpt-5.4-mini-seq/seed2")
    assert [(c[1], c[2]) for c in no_run] == [
        (parent / "r0001", "r0001"),
        (parent / "r0002", "r0002"),
    ]
    assert (parent / "r0001" / "config.yaml").read_bytes() == RAW_CONFIG

    rc = train_cli.main(
        *BABYAI_TRAIN, ["--config_file", str(config_file), "--run_dir", str(parent / "r0001")]
    )
    assert rc == 2
    assert "is not empty; runs are never overwritten" in capsys.readouterr().err
    assert len(no_run) == 2


# ------------------------------------------------------------------------- resume


@pytest.fixture
def existing_run(loader: ConfigLoader, config_file: Path, tmp_path: Path) -> Path:
    return create_run_dir(
        loader.load(config_file, overrides=["run.seed=4"]), run_dir=tmp_path / "run"
    )


@pytest.mark.parametrize(
    "extra",
    [
        ["--set", "run.seed=9"],
        ["--quick_test"],
        ["--config_file", "x.yaml"],
        ["--run_dir", "elsewhere"],
    ],
    ids=["set", "quick_test", "config_file", "run_dir"],
)
def test_resume_takes_no_other_layers(
    extra: list[str],
    existing_run: Path,
    capsys: pytest.CaptureFixture[str],
    no_run: list[tuple[Any, Path, str]],
) -> None:
    before = {p: p.read_bytes() for p in all_files(existing_run)}
    rc = train_cli.main(*BABYAI_TRAIN, ["--resume", str(existing_run), *extra])
    assert rc == 2
    err = capsys.readouterr().err
    if extra[0] == "--set":  # run.seed decides results: it may not change on resume
        assert "run.seed cannot change on --resume" in err and "model.timeout_s" in err
    else:
        assert "--resume continues a run as configured" in err and extra[0] in err
    assert no_run == []
    assert {p: p.read_bytes() for p in all_files(existing_run)} == before


def test_resume_of_a_non_run_directory_is_a_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], no_run: list[tuple[Any, Path, str]]
) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "notes.txt").write_text("hi")
    assert train_cli.main(*BABYAI_TRAIN, ["--resume", str(plain)]) == 2
    err = capsys.readouterr().err
    assert f"{plain} is not a SpeedRunner run directory" in err
    assert "config.yaml" in err and "provenance.json" in err

    assert train_cli.main(*BABYAI_TRAIN, ["--resume", str(tmp_path / "nowhere")]) == 2
    err = capsys.readouterr().err
    assert (
        f"{tmp_path / 'nowhere'}: the directory does not exist" in err
        and "not a SpeedRunner" not in err
    )
    assert train_cli.main(*BABYAI_TRAIN, ["--resume", str(plain / "notes.txt")]) == 2
    assert "notes.txt: not a directory" in capsys.readouterr().err
    assert no_run == []


def test_resume_of_a_corrupt_run_directory_is_a_clear_error(
    existing_run: Path, capsys: pytest.CaptureFixture[str], no_run: list[tuple[Any, Path, str]]
) -> None:
    (existing_run / "provenance.json").write_text("{not json")
    assert train_cli.main(*BABYAI_TRAIN, ["--resume", str(existing_run)]) == 2
    assert "is corrupt" in capsys.readouterr().err
    assert no_run == []


def test_resume_with_the_wrong_benchmark_names_the_right_entry_point(
    existing_run: Path, capsys: pytest.CaptureFixture[str], no_run: list[tuple[Any, Path, str]]
) -> None:
    assert train_cli.main(*CRAFTER_TRAIN, ["--resume", str(existing_run)]) == 2
    err = capsys.readouterr().err
    assert "is a babyai run" in err
    assert (
        f"speedrunner train --resume {existing_run}" in err
    )  # the generic command resumes any run
    assert no_run == []


def test_resume_continues_the_same_run_with_the_same_config(
    loader: ConfigLoader,
    config_file: Path,
    existing_run: Path,
    no_run: list[tuple[Any, Path, str]],
) -> None:
    before = {p: p.read_bytes() for p in all_files(existing_run)}
    assert train_cli.main(*BABYAI_TRAIN, ["--resume", str(existing_run)]) == 0
    [(config, run_dir, run_id)] = no_run
    assert run_dir == existing_run and run_id == "run"
    assert config == loader.load(config_file, overrides=["run.seed=4"]).config
    assert config.run.seed == 4
    # Resuming re-creates nothing; provenance.json gains a trace of the resume (no --set:
    # no overrides), and the run's lock is gone once the resume is over.
    after = {p: p.read_bytes() for p in all_files(existing_run)}
    provenance = existing_run / "provenance.json"
    assert {p: b for p, b in after.items() if p != provenance} == {
        p: b for p, b in before.items() if p != provenance
    }
    old, new = json.loads(before[provenance]), json.loads(after[provenance])
    assert new.pop("resumes")[0]["overrides"] == [] and "resumes" not in old
    assert new == old
    assert not (existing_run / ".lock").exists()


def test_resume_may_change_operational_keys_and_records_it(
    existing_run: Path, no_run: list[tuple[Any, Path, str]]
) -> None:
    rc = train_cli.main(
        *BABYAI_TRAIN,
        [
            "--resume",
            str(existing_run),
            "--set",
            "model.timeout_s=33",
            "--set",
            "run.parallel_episodes=1",
        ],
    )
    assert rc == 0
    [(config, _, _)] = no_run
    assert (
        config.model.timeout_s == 33 and config.run.parallel_episodes == 1 and config.run.seed == 4
    )
    resolved = json.loads((existing_run / "config.resolved.json").read_text())
    assert resolved["model"]["timeout_s"] == 33
    resumes = json.loads((existing_run / "provenance.json").read_text())["resumes"]
    assert resumes[-1]["overrides"] == ["model.timeout_s=33", "run.parallel_episodes=1"]


def test_a_run_directory_in_use_is_refused(
    existing_run: Path, capsys: pytest.CaptureFixture[str], no_run: list[tuple[Any, Path, str]]
) -> None:
    from speedrunner.core.rundir import run_lock

    with run_lock(existing_run):  # another process is running or resuming it
        assert train_cli.main(*BABYAI_TRAIN, ["--resume", str(existing_run)]) == 2
        assert f"is in use by PID {os.getpid()}" in capsys.readouterr().err
        # A new run pinned to the busy directory is told who holds it, not "not empty".
        rc = train_cli.main(
            *BABYAI_TRAIN,
            ["--config_file", str(existing_run / "config.yaml"), "--run_dir", str(existing_run)],
        )
        assert rc == 2
        assert f"in use by PID {os.getpid()}" in capsys.readouterr().err
    assert no_run == []
    assert not (existing_run / ".lock").exists()  # the holder left: no stale lock file
