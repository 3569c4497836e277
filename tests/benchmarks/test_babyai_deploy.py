"""``python BALROG/deploy_env.py deploy.key=value``: argument errors and a real start."""

from __future__ import annotations

import http.client
import json
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

DEPLOY = Path(__file__).parents[2] / "BALROG" / "deploy_env.py"


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(DEPLOY), *args], capture_output=True, text=True,
                          timeout=60)


@pytest.mark.parametrize(("args", "needle"), [
    (["deploy.prot=8080"], "did you mean 'deploy.port'"),
    (["port=8080"], "did you mean 'deploy.port'"),
    (["deploy.port=eighty"], "deploy.port must be a int"),
    (["deploy.port"], "expected key=value"),
    (["deploy.verbose=maybe"], "deploy.verbose must be a bool"),
])
def test_argument_errors_exit_2(args: list[str], needle: str) -> None:
    result = run(*args)
    assert result.returncode == 2, result.stderr
    assert needle in result.stderr and "usage:" in result.stderr
    assert result.stdout == ""


def test_help_lists_keys() -> None:
    result = run("--help")
    assert result.returncode == 0 and "deploy.episode_ttl_s" in result.stdout


def test_deploy_serves_on_the_given_port() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([sys.executable, str(DEPLOY), f"deploy.port={port}",
                             "deploy.max_episodes=3", "deploy.episode_ttl_s=60"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline, health = time.monotonic() + 30, None
        while time.monotonic() < deadline and health is None:
            try:
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
                conn.request("GET", "/health")
                health = json.loads(conn.getresponse().read())
                conn.close()
            except OSError:
                time.sleep(0.05)
        assert health is not None and health["service"] == "babyai-text"
    finally:
        proc.terminate()
        out, _ = proc.communicate(timeout=10)
    assert b"Sampling rejected" not in out
