"""Every bad request gets a 4xx JSON error that says what was wrong,
and the server keeps serving."""

from __future__ import annotations

import http.client
import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from speedrunner.benchmarks.babyai.env import BabyAITextEnv
from speedrunner.benchmarks.babyai.server import BabyAIServer, ServerSettings, start_in_thread
from speedrunner.errors import EnvError, InvalidActionError, UnknownNameError


@pytest.fixture()
def server() -> Iterator[BabyAIServer]:
    srv = start_in_thread(
        ServerSettings(port=0, episode_ttl_s=0.5, max_episodes=8, max_body_bytes=1024)
    )
    yield srv
    srv.shutdown()
    srv.server_close()


def call(
    srv: BabyAIServer,
    method: str,
    path: str,
    body: Any = None,
    *,
    raw: bytes | None = None,
    headers: dict[str, str] | None = None,
    authorized: bool = True,
) -> tuple[int, dict]:
    """One request on a connection of its own,
    with the server's token unless ``authorized=False``."""
    host, port = srv.server_address[:2]
    conn = http.client.HTTPConnection(host, port, timeout=5)
    data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
    conn.request(
        method,
        path,
        body=data,
        headers={**(auth_header(srv) if authorized else {}), **(headers or {})},
    )
    response = conn.getresponse()
    payload = json.loads(response.read())
    conn.close()
    return response.status, payload


def auth_header(srv: BabyAIServer) -> dict[str, str]:
    return {"Authorization": f"Bearer {srv.token}"}


def new_episode(srv: BabyAIServer, task: str = "goto", seed: int = 0) -> str:
    status, payload = call(srv, "POST", "/episodes", {"task": task, "seed": seed})
    assert status == 200, payload
    return payload["episode_id"]


def assert_still_serving(srv: BabyAIServer) -> None:
    eid = new_episode(srv, "pickup", 3)
    status, payload = call(srv, "POST", f"/episodes/{eid}/step", {"action": "turn left"})
    assert status == 200 and payload["steps"] == 1


def test_happy_path_schema(server: BabyAIServer) -> None:
    status, health = call(server, "GET", "/health")
    assert status == 200 and health["status"] == "ok" and "pick_up_seq_go_to" in health["tasks"]
    status, start = call(server, "POST", "/episodes", {"task": "pick_up_seq_go_to", "seed": 4})
    assert status == 200
    assert set(start) >= {
        "episode_id",
        "instruction",
        "observation",
        "structured",
        "actions",
        "max_steps",
    }
    assert start["instruction"].startswith("Your goal is to ") and start["max_steps"] == 128
    eid = start["episode_id"]
    status, step = call(server, "POST", f"/episodes/{eid}/step", {"action": "go forward"})
    assert status == 200
    assert set(step) >= {
        "observation",
        "structured",
        "reward",
        "done",
        "success",
        "progress",
        "steps",
    }
    status, again = call(
        server, "POST", f"/episodes/{eid}/reset", {"task": "pick_up_seq_go_to", "seed": 4}
    )
    assert (
        status == 200
        and again["observation"] == start["observation"]
        and again["episode_id"] == eid
    )
    assert call(server, "DELETE", f"/episodes/{eid}") == (200, {"deleted": eid})
    assert call(server, "DELETE", f"/episodes/{eid}")[0] == 404


@pytest.mark.parametrize(
    ("method", "path", "kwargs", "status", "code", "needle"),
    [
        (
            "POST",
            "/episodes",
            {"body": {"task": "gotoo", "seed": 0}},
            400,
            "unknown_task",
            "did you mean 'goto'",
        ),
        ("POST", "/episodes", {"body": {"task": "goto"}}, 400, "bad_request", "seed"),
        ("POST", "/episodes", {"body": {"task": "goto", "seed": -1}}, 400, "bad_request", "seed"),
        ("POST", "/episodes", {"body": [1, 2]}, 400, "malformed_json", "JSON object"),
        ("POST", "/episodes", {"raw": b"{task: goto"}, 400, "malformed_json", "not valid JSON"),
        (
            "POST",
            "/episodes",
            {"raw": b'{"task": "' + b"x" * 2000 + b'"}'},
            413,
            "body_too_large",
            "exceeds",
        ),
        (
            "POST",
            "/episodes/nope/step",
            {"body": {"action": "turn left"}},
            404,
            "unknown_episode",
            "POST /episodes",
        ),
        ("GET", "/nowhere", {}, 404, "unknown_route", "no route"),
        ("GET", "/episodes", {}, 405, "method_not_allowed", "use POST"),
        ("PUT", "/health", {"body": {}}, 405, "method_not_allowed", "use GET"),
    ],
)
def test_bad_requests(
    server: BabyAIServer, method: str, path: str, kwargs: dict, status: int, code: str, needle: str
) -> None:
    got_status, payload = call(server, method, path, **kwargs)
    assert got_status == status, payload
    assert payload["code"] == code and needle in payload["error"]
    if code == "unknown_task":
        assert "pick_up_seq_go_to" in payload["valid_tasks"]
    assert_still_serving(server)


def test_invalid_action_lists_valid_ones(server: BabyAIServer) -> None:
    eid = new_episode(server)
    status, payload = call(server, "POST", f"/episodes/{eid}/step", {"action": "pickup"})
    assert status == 400 and payload["code"] == "invalid_action"
    assert "did you mean 'pick up'" in payload["error"]
    assert payload["valid_actions"] == [
        "turn left",
        "turn right",
        "go forward",
        "pick up",
        "drop",
        "toggle",
    ]
    status, payload = call(server, "POST", f"/episodes/{eid}/step", {"action": "go forward"})
    assert status == 200 and payload["steps"] == 1  # the invalid action was not executed


def test_expired_episode_is_410_and_client_recovers(server: BabyAIServer) -> None:
    eid = new_episode(server)
    env = BabyAITextEnv(server.url)
    first = env.reset("goto", 1)
    time.sleep(0.7)  # ttl 0.5 s
    status, payload = call(server, "POST", f"/episodes/{eid}/step", {"action": "turn left"})
    assert status == 410 and payload["code"] == "episode_expired" and "expired" in payload["error"]
    with pytest.raises(EnvError, match="expired"):
        env.step("turn left")
    assert env.reset("goto", 1) == first  # reset after expiry starts a new episode
    env.close()
    assert_still_serving(server)


def test_step_after_done_and_episode_cap(server: BabyAIServer) -> None:
    eid = new_episode(server, "goto", 0)
    for _ in range(64):
        status, payload = call(server, "POST", f"/episodes/{eid}/step", {"action": "turn left"})
    assert payload["done"] and not payload["success"] and payload["truncated"]
    status, payload = call(server, "POST", f"/episodes/{eid}/step", {"action": "turn left"})
    assert status == 409 and "reset" in payload["error"]
    for _ in range(7):
        new_episode(server)
    status, payload = call(server, "POST", "/episodes", {"task": "goto", "seed": 0})
    assert status == 503 and payload["code"] == "too_many_episodes"


def test_missing_content_length_is_411(server: BabyAIServer) -> None:
    host, port = server.server_address[:2]
    conn = http.client.HTTPConnection(host, port, timeout=5)
    conn.putrequest("POST", "/episodes")
    conn.putheader("Authorization", f"Bearer {server.token}")
    conn.endheaders()
    response = conn.getresponse()
    assert response.status == 411 and json.loads(response.read())["code"] == "length_required"
    conn.close()
    assert_still_serving(server)


def test_client_errors_are_named(server: BabyAIServer) -> None:
    env = BabyAITextEnv(server.url)
    with pytest.raises(EnvError, match="reset"):
        env.step("turn left")
    with pytest.raises(UnknownNameError, match="valid:"):
        env.reset("gotoo", 0)
    env.reset("open", 5)
    with pytest.raises(InvalidActionError, match="did you mean 'toggle'"):
        env.step("togle")
    env.close()
    env.close()  # idempotent


def test_concurrent_episodes_are_independent(server: BabyAIServer) -> None:
    server.settings.max_episodes = server.store.max_episodes = 64
    results: dict[int, list[str]] = {}

    def play(i: int) -> None:
        env = BabyAITextEnv(server.url)
        env.reset("putnext", i % 3)
        results[i] = [env.step(a).observation.text for a in ["turn left", "go forward"] * 5]
        env.close()

    threads = [threading.Thread(target=play, args=(i,)) for i in range(12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for i in range(12):
        assert results[i] == results[i % 3]


def test_the_server_as_a_process_imports_neither_pydantic_nor_networkx() -> None:
    """Every run starts a server process afresh, so what it imports is paid per run: not the
    config layer (pydantic) nor networkx, which minigrid's package init would import for its
    WFC environments (BabyAI never builds one; minigrid stubs them when networkx is missing).
    Together ~40 % of its start-up. The served levels are played by every BabyAI e2e run."""
    import importlib.util
    import subprocess
    import sys

    # Without networkx installed, minigrid would skip it anyway and this test would prove nothing.
    assert importlib.util.find_spec("networkx") is not None, (
        "networkx is a dev dependency: pip install -e '.[dev]'"
    )
    proc = subprocess.run(
        [
            sys.executable,
            "-X",
            "importtime",
            "-m",
            "speedrunner.benchmarks.babyai.server",
            "--help",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    imported = {
        line.rsplit("|", 1)[-1].strip()
        for line in proc.stderr.splitlines()
        if line.startswith("import time:")
    }
    assert {"minigrid", "speedrunner.benchmarks.babyai.levels"} <= imported
    assert "pydantic" not in imported
    assert not [
        name for name in imported if name.startswith("networkx.")
    ]  # a blocked import is still listed


def test_a_server_imported_as_a_module_leaves_networkx_importable() -> None:
    """Doing without networkx is for the server's own process only (``__main__``)."""
    import importlib
    import sys

    import speedrunner.benchmarks.babyai.server  # noqa: F401  (imported above too: already in sys.modules)

    assert sys.modules.get("networkx", "absent") is not None
    assert importlib.import_module("networkx").Graph is not None
