"""The fake LLM server takes as many simultaneous connections as a real endpoint would:
30 parallel episodes (an evaluation) must not be refused and sent into retry back-off."""

from __future__ import annotations

import http.client
import json
import threading
import time

from speedrunner.testing.fake_llm_server import FakeLLMServer


def test_sixty_clients_connecting_at_once_are_all_accepted_at_once() -> None:
    n = 60
    barrier = threading.Barrier(n)
    connect_s: list[float] = []
    statuses: list[int] = []
    errors: list[str] = []
    body = json.dumps({"model": "fake-model", "messages": [{"role": "user", "content": "hi"}]})

    with FakeLLMServer(latency_s=0.05) as server:

        def call() -> None:
            conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
            barrier.wait()
            try:
                started = time.monotonic()
                conn.connect()
                connect_s.append(time.monotonic() - started)
                conn.request(
                    "POST",
                    "/v1/chat/completions",
                    body=body,
                    headers={"Content-Type": "application/json"},
                )
                statuses.append(conn.getresponse().status)
            except OSError as e:
                errors.append(repr(e))
            finally:
                conn.close()

        threads = [threading.Thread(target=call) for _ in range(n)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()

    assert errors == []
    assert statuses == [200] * n
    # A connection beyond a full accept backlog has its SYN dropped and retried after 1 s.
    assert max(connect_s) < 0.9
