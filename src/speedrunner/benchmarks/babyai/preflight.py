"""Pre-flight for BabyAI-Text: is the server at ``benchmark.server_url`` ours, or can we start one?

Run before the run directory exists, so a wrong URL costs nothing. Three outcomes: our
server answers ``GET /health`` (fine); nothing listens and the URL is local with
``autostart_server`` on (fine: the run starts a private server); anything else is a
``PreflightError`` that says what answered and how to fix it.
"""

from __future__ import annotations

import http.client
import json
import sys
from urllib.parse import urlsplit

from speedrunner.benchmarks.babyai import auth
from speedrunner.benchmarks.babyai.benchmark import LOCAL_HOSTS
from speedrunner.benchmarks.babyai.config import BabyAIConfig
from speedrunner.benchmarks.babyai.env import START_HINT
from speedrunner.errors import PreflightError

SERVICE = "babyai-text"


def check_server(config: BabyAIConfig, timeout_s: float = 3.0) -> None:
    url = config.server_url
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port or 80, timeout=timeout_s)
    try:
        conn.request(
            "GET", parts.path.rstrip("/") + "/health", headers=auth.header(auth.find_token(url))
        )
        response = conn.getresponse()
        status, body = response.status, response.read(4096)
    except (OSError, http.client.HTTPException) as e:
        if parts.hostname in LOCAL_HOSTS and config.autostart_server:
            return  # nothing there: the run starts its own server on a free port
        raise PreflightError(
            f"benchmark.server_url {url}: no BabyAI-Text server answers ({e}); "
            f"{START_HINT}, or use a local URL with benchmark.autostart_server: true "
            "(--skip_preflight skips this check)"
        ) from None
    finally:
        conn.close()
    try:
        answer = json.loads(body)
        service, code = answer.get("service"), answer.get("code")
    except (json.JSONDecodeError, UnicodeDecodeError, AttributeError):
        service = code = None
    if (
        status == 503 and code == "too_many_connections"
    ):  # ours, busy: the run's requests wait for a slot
        print(
            f"warning: the BabyAI-Text server at {url} is busy (503 too_many_connections: other "
            "clients hold its connections); the run starts and its requests retry until a slot "
            "frees",
            file=sys.stderr,
        )
        return
    if status == 401 and service == SERVICE:  # a BabyAI server that is not ours to use
        if parts.hostname in LOCAL_HOSTS and config.autostart_server:
            return  # the run starts its own on a free port (and says so)
        raise PreflightError(
            f"benchmark.server_url {url}: the BabyAI-Text server there refuses this run (401): it "
            f"serves only the user who started it, with its token; {auth.where(url)} "
            "(--skip_preflight skips this check)"
        )
    if status != 200 or service != SERVICE:
        seen = body.decode("utf-8", "replace").strip().replace("\n", " ")[:120]
        raise PreflightError(
            f"benchmark.server_url {url}: something other than the BabyAI-Text server answers "
            f"there (GET /health gave HTTP {status}: {seen!r}). Stop it or free the port, or point "
            f"benchmark.server_url at a BabyAI-Text server ({START_HINT}) "
            "(--skip_preflight skips this check)"
        )
