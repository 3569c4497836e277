"""``python BALROG/deploy_env.py deploy.key=value``: argument errors and a real start."""

from __future__ import annotations

import http.client
import json
import socket
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

DEPLOY = Path(__file__).parents[2] / "BALROG" / "deploy_env.py"


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(DEPLOY), *args], capture_output=True, text=True, timeout=60
    )


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["deploy.prot=8080"], "did you mean 'deploy.port'"),
        (["port=8080"], "did you mean 'deploy.port'"),
        (["deploy.port=eighty"], "deploy.port must be a int"),
        (["deploy.port"], "expected key=value"),
        (["deploy.verbose=maybe"], "deploy.verbose must be a bool"),
    ],
)
def test_argument_errors_exit_2(args: list[str], needle: str) -> None:
    result = run(*args)
    assert result.returncode == 2, result.stderr
    assert needle in result.stderr and "usage:" in result.stderr
    assert result.stdout == ""


def test_help_lists_keys() -> None:
    result = run("--help")
    assert result.returncode == 0 and "deploy.episode_ttl_s" in result.stdout


def test_deploy_serves_on_the_given_port_to_its_user_only(
    tmp_path: Path, monkeypatch, capsys
) -> None:
    """The user's command keeps working, and the server it starts writes its token (mode 0600)
    where the runs the user starts find it; a request without it gets 401. Stopping the server
    removes the file, and the token is never printed."""
    from speedrunner.benchmarks.babyai import auth
    from speedrunner.benchmarks.babyai.benchmark import BabyAIBenchmark
    from speedrunner.benchmarks.babyai.config import BabyAIConfig

    runtime = tmp_path / "runtime"
    monkeypatch.setenv(
        auth.RUNTIME_DIR_ENV, str(runtime)
    )  # for the server (its environment) and for us
    monkeypatch.delenv(auth.TOKEN_ENV, raising=False)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    token_file = auth.token_path(port)
    proc = subprocess.Popen(
        [
            sys.executable,
            str(DEPLOY),
            f"deploy.port={port}",
            "deploy.max_episodes=3",
            "deploy.episode_ttl_s=60",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        deadline, health = time.monotonic() + 30, None
        while time.monotonic() < deadline and health is None:
            try:
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
                conn.request("GET", "/health")
                response = conn.getresponse()
                health = response.status, json.loads(response.read())
                conn.close()
            except OSError:
                time.sleep(0.05)
        assert health is not None and health[0] == 401 and health[1]["service"] == "babyai-text"
        assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
        token = token_file.read_text().strip()
        config = BabyAIConfig(server_url=f"http://127.0.0.1:{port}", autostart_server=False)
        bench = BabyAIBenchmark(config, rollouts=1, eval_episodes=0)
        env = bench.make_env()  # finds the token by port
        assert env.reset("goto", 0).text and bench._server is None
        env.close()
        bench.close()
    finally:
        proc.terminate()
        out, err = proc.communicate(timeout=10)
    assert b"Sampling rejected" not in out
    assert str(token_file).encode() in err and token.encode() not in out + err
    assert not token_file.exists()
