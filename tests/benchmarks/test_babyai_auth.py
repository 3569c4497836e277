"""The BabyAI-Text server serves only the user who started it: a request without its token is
refused before any work, and the token lives in a file only that user can read, where the
user's runs find it."""

from __future__ import annotations

import os
import socket
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from speedrunner.benchmarks.babyai import auth
from speedrunner.benchmarks.babyai.benchmark import BabyAIBenchmark
from speedrunner.benchmarks.babyai.config import BabyAIConfig
from speedrunner.benchmarks.babyai.env import ServerAuthError
from speedrunner.benchmarks.babyai.preflight import check_server
from speedrunner.benchmarks.babyai.server import BabyAIServer, ServerSettings, start_in_thread
from speedrunner.errors import PreflightError


@pytest.fixture()
def runtime(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "runtime"
    monkeypatch.setenv(auth.RUNTIME_DIR_ENV, str(path))
    monkeypatch.delenv(auth.TOKEN_ENV, raising=False)
    return path


@pytest.fixture()
def server(runtime: Path) -> Iterator[BabyAIServer]:
    srv = start_in_thread(ServerSettings(port=0))
    yield srv
    srv.shutdown()
    srv.server_close()


def test_the_token_file_is_readable_only_by_its_user_and_removed_at_stop(runtime: Path) -> None:
    srv = start_in_thread(ServerSettings(port=0))
    try:
        path = runtime / f"babyai-server-{socket.gethostname()}-{srv.server_address[1]}.token"
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        assert stat.S_IMODE(runtime.stat().st_mode) == 0o700
        assert path.read_text().strip() == srv.token and len(srv.token) >= 32
        assert auth.find_token(srv.url) == srv.token
        assert [p.name for p in runtime.iterdir()] == [path.name]  # no temporary file left behind
    finally:
        srv.shutdown()
        srv.server_close()
    assert not path.exists()


def test_servers_on_the_same_port_of_two_nodes_sharing_a_home_keep_their_own_tokens(
    runtime: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    files = {}
    for host in ("node-a", "node-b"):
        monkeypatch.setattr(socket, "gethostname", lambda host=host: host)
        files[host] = auth.TokenFile(8080, f"token-of-{host}")
    try:
        for host in ("node-a", "node-b"):
            monkeypatch.setattr(socket, "gethostname", lambda host=host: host)
            assert auth.find_token("http://127.0.0.1:8080") == f"token-of-{host}"
    finally:
        for file in files.values():
            file.remove()


def test_a_runtime_directory_others_can_enter_is_refused(runtime: Path) -> None:
    runtime.mkdir(mode=0o755)
    os.chmod(runtime, 0o755)
    with pytest.raises(auth.TokenFileError, match="chmod 700"):
        BabyAIServer(ServerSettings(port=0))
    assert list(runtime.iterdir()) == []


def test_a_token_file_left_by_a_killed_server_is_removed_by_the_next(runtime: Path) -> None:
    runtime.mkdir(mode=0o700)
    stale = auth.token_path(1)
    stale.write_text("a-token-of-a-server-that-was-killed\n")
    srv = start_in_thread(ServerSettings(port=0))
    try:
        assert not stale.exists()
    finally:
        srv.shutdown()
        srv.server_close()


def test_a_run_pointed_at_another_users_server_starts_its_own_or_says_how_to_get_the_token(
    runtime: Path, capsys
) -> None:
    other = start_in_thread(
        ServerSettings(port=0), token_file=False
    )  # its token is in no file of ours
    try:
        config = BabyAIConfig(server_url=other.url, autostart_server=False)
        with pytest.raises(PreflightError, match=r"refuses this run \(401\).*babyai-server-"):
            check_server(config)
        with pytest.raises(ServerAuthError, match=r"refused this run \(401 unauthorized\)"):
            BabyAIBenchmark(config, rollouts=1, eval_episodes=0).make_env()
        mine = BabyAIBenchmark(BabyAIConfig(server_url=other.url), rollouts=1, eval_episodes=0)
        check_server(mine.config)  # a local URL with autostart: fine, the run starts its own
        env = mine.make_env()
        try:
            assert env.reset("goto", 1).text and mine._server is not None and mine._url != other.url
        finally:
            env.close()
            mine.close()
        assert "serves another user" in capsys.readouterr().err
        assert len(other.store) == 0
    finally:
        other.shutdown()
        other.server_close()
