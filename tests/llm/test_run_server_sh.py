"""scripts/run_server.sh with a stand-in `vllm` on PATH that records its arguments."""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "run_server.sh"


@pytest.fixture
def fake_vllm(tmp_path: Path) -> Path:
    bindir = tmp_path / "bin"
    bindir.mkdir()
    exe = bindir / "vllm"
    exe.write_text(
        f'#!/bin/sh\nfor a in "$@"; do printf "%s\\n" "$a"; done > {tmp_path / "args.txt"}\n'
    )
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
    return bindir


def _run(args: list[str], path: str, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("SR_")}
    clean.update(env, PATH=path)
    return subprocess.run(
        ["bash", str(SCRIPT), *args], capture_output=True, text=True, env=clean, timeout=30
    )


def _args(tmp_path: Path) -> list[str]:
    return (tmp_path / "args.txt").read_text().splitlines()


def _opt(args: list[str], name: str) -> str:
    return args[args.index(name) + 1]


def test_defaults(fake_vllm, tmp_path):
    r = _run([], f"{fake_vllm}:/usr/bin:/bin")
    assert r.returncode == 0, r.stderr
    assert "base_url: http://127.0.0.1:5012/v1" in r.stdout
    a = _args(tmp_path)
    assert a[:2] == ["serve", "Qwen/Qwen3.5-35B-A3B"]
    assert _opt(a, "--port") == "5012" and _opt(a, "--host") == "127.0.0.1"
    assert _opt(a, "--served-model-name") == "Qwen/Qwen3.5-35B-A3B"
    assert _opt(a, "--reasoning-parser") == "qwen3" and _opt(a, "--generation-config") == "vllm"
    assert _opt(a, "--tensor-parallel-size") == "1" and _opt(a, "--data-parallel-size") == "1"
    assert "--enable-prefix-caching" in a and "--language-model-only" in a
    assert "--enable-prompt-tokens-details" in a  # vLLM reports cached_tokens only with it
    assert _opt(a, "--max-model-len") and _opt(a, "--gpu-memory-utilization")
    # native tool calls (model.tool_protocol: native): Qwen3.5's XML tool-call format
    assert "--enable-auto-tool-choice" in a and _opt(a, "--tool-call-parser") == "qwen3_coder"


def test_tool_call_parser_flag_env_and_none(fake_vllm, tmp_path):
    path = f"{fake_vllm}:/usr/bin:/bin"
    assert _run(["--tool-call-parser", "hermes"], path, SR_TOOL_CALL_PARSER="none").returncode == 0
    assert _opt(_args(tmp_path), "--tool-call-parser") == "hermes"
    assert _run([], path, SR_TOOL_CALL_PARSER="none").returncode == 0
    a = _args(tmp_path)
    assert "--tool-call-parser" not in a and "--enable-auto-tool-choice" not in a


def test_env_vars_override_defaults(fake_vllm, tmp_path):
    r = _run(
        [],
        f"{fake_vllm}:/usr/bin:/bin",
        SR_PORT="7001",
        SR_MODEL="Qwen/Small",
        SR_PREFIX_CACHING="0",
        SR_REASONING_PARSER="none",
        SR_LANGUAGE_MODEL_ONLY="0",
        SR_PROMPT_TOKENS_DETAILS="0",
        SR_DATA_PARALLEL_SIZE="4",
        SR_HOST="0.0.0.0",
    )
    assert r.returncode == 0, r.stderr
    assert "base_url: http://127.0.0.1:7001/v1" in r.stdout
    a = _args(tmp_path)
    assert (
        a[1] == "Qwen/Small"
        and _opt(a, "--port") == "7001"
        and _opt(a, "--data-parallel-size") == "4"
    )
    assert _opt(a, "--host") == "0.0.0.0"
    assert "--no-enable-prefix-caching" in a and "--reasoning-parser" not in a
    assert "--language-model-only" not in a
    assert "--enable-prompt-tokens-details" not in a


def test_flags_override_env_and_extra_args_pass_through(fake_vllm, tmp_path):
    r = _run(
        [
            "--port",
            "6100",
            "--served-model-name",
            "qwen",
            "--max-model-len",
            "8192",
            "--tensor-parallel-size",
            "2",
            "--gpu-memory-utilization",
            "0.5",
            "--generation-config",
            "auto",
            "--no-prefix-caching",
            "--reasoning-parser",
            "deepseek_r1",
            "--",
            "--seed",
            "3",
        ],
        f"{fake_vllm}:/usr/bin:/bin",
        SR_PORT="7001",
    )
    assert r.returncode == 0, r.stderr
    assert "http://127.0.0.1:6100/v1" in r.stdout and "model.name: qwen" in r.stdout
    a = _args(tmp_path)
    assert _opt(a, "--port") == "6100" and _opt(a, "--served-model-name") == "qwen"
    assert _opt(a, "--max-model-len") == "8192" and _opt(a, "--tensor-parallel-size") == "2"
    assert _opt(a, "--gpu-memory-utilization") == "0.5" and _opt(a, "--generation-config") == "auto"
    assert _opt(a, "--reasoning-parser") == "deepseek_r1" and "--no-enable-prefix-caching" in a
    assert a[-2:] == ["--seed", "3"]


def test_prompt_tokens_details_flags(fake_vllm, tmp_path):
    path = f"{fake_vllm}:/usr/bin:/bin"
    r = _run(["--no-prompt-tokens-details"], path)
    assert r.returncode == 0, r.stderr
    assert "--enable-prompt-tokens-details" not in _args(tmp_path)
    r = _run(["--prompt-tokens-details"], path, SR_PROMPT_TOKENS_DETAILS="0")  # flag wins
    assert r.returncode == 0, r.stderr
    assert _args(tmp_path).count("--enable-prompt-tokens-details") == 1


def test_help_and_bad_option(tmp_path):
    r = _run(["--help"], "/usr/bin:/bin")
    assert r.returncode == 0 and "--data-parallel-size" in r.stdout and "SR_PORT" in r.stdout
    assert "--no-prompt-tokens-details" in r.stdout and "SR_PROMPT_TOKENS_DETAILS" in r.stdout
    bad = _run(["--bogus"], "/usr/bin:/bin")
    assert bad.returncode == 2 and "unknown option" in bad.stderr


def test_missing_vllm_fails_clearly(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    r = _run([], f"{empty}:/usr/bin:/bin")
    assert r.returncode != 0
    assert "vLLM is not installed" in r.stderr and "pip install" in r.stderr


def test_replicas_start_one_server_per_gpu_group_and_print_the_url_list(tmp_path):
    """--replicas N: N servers on consecutive ports, replica i on GPUs i*TP.., the list to
    paste into model.base_url; each replica is a real process (a stand-in that records)."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    exe = bindir / "vllm"
    exe.write_text(
        '#!/bin/sh\nport=""; prev=""\n'
        'for a in "$@"; do [ "$prev" = --port ] && port="$a"; prev="$a"; done\n'
        f"echo $$ > {tmp_path}/pid-$port\n"
        f'echo "$CUDA_VISIBLE_DEVICES $*" > {tmp_path}/replica-$port.txt\n'
        "exec sleep 30\n"
    )
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
    proc = subprocess.Popen(
        ["bash", str(SCRIPT), "--replicas", "3", "--tensor-parallel-size", "2", "--port", "6000"],
        env={
            **{k: v for k, v in os.environ.items() if not k.startswith("SR_")},
            "PATH": f"{bindir}:/usr/bin:/bin",
        },
        stdout=subprocess.PIPE,
        text=True,
    )
    import time

    deadline = time.monotonic() + 20
    while len(list(tmp_path.glob("replica-*.txt"))) < 3 and time.monotonic() < deadline:
        time.sleep(0.1)
    # the script's trap stops its replicas (exec: the pid it kills is the server itself)
    proc.terminate()
    out, _ = proc.communicate(timeout=30)
    assert [line.strip() for line in out.splitlines()[1:4]] == [
        "- http://127.0.0.1:6000/v1",
        "- http://127.0.0.1:6001/v1",
        "- http://127.0.0.1:6002/v1",
    ]
    seen = {p.name: p.read_text().split() for p in tmp_path.glob("replica-*.txt")}
    assert seen["replica-6000.txt"][0] == "0,1" and seen["replica-6002.txt"][0] == "4,5"
    assert all(v[1:3] == ["serve", "Qwen/Qwen3.5-35B-A3B"] for v in seen.values())
    time.sleep(0.2)
    alive = [p for p in tmp_path.glob("pid-*") if _running(int(p.read_text()))]
    assert not alive, f"replicas left running after the script was stopped: {alive}"


def _running(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


@pytest.mark.parametrize("bad", ["0", "x", "-1"])
def test_replicas_must_be_a_positive_number(tmp_path, bad):
    r = _run(["--replicas", bad], "/usr/bin:/bin")
    assert r.returncode == 2 and "--replicas" in r.stderr
