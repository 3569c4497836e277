"""Pre-flight: an endpoint that is down or wrong stops the run with exit 2 *before* a run
directory exists, naming the endpoint, what answered and the fix."""

from __future__ import annotations

import http.server
import json
import socket
import threading
from pathlib import Path

import pytest

from speedrunner import train_cli
from speedrunner.testing.fake_llm_server import FakeLLMServer

REPO = Path(__file__).resolve().parents[2]
BABYAI = ("babyai", "speedrunner.benchmarks.babyai.train")
CONFIG = str(REPO / "configs" / "babyai" / "react-gpt-seq.yaml")


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class OtherService:
    """Something that is not what the config expects: answers every GET with an HTML page."""

    def __init__(self) -> None:
        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                body = b"<html>hello from another service</html>"
                self.send_response(404)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args) -> None:
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def other_service():
    service = OtherService()
    yield service
    service.stop()


@pytest.fixture
def fake_llm():
    server = FakeLLMServer(model_name="fake-model").start()
    yield server
    server.stop()


def train(tmp_path: Path, *sets: str, extra: tuple[str, ...] = ()) -> int:
    args = ["--config_file", CONFIG, "--quick_test", "--run_dir", str(tmp_path / "run"), *extra]
    for s in sets:
        args += ["--set", s]
    return train_cli.main(*BABYAI, args)


def vllm(url: str, name: str = "fake-model") -> tuple[str, ...]:
    return ("model.provider=vllm", f"model.base_url={url}", f"model.name={name}")


def test_a_model_endpoint_that_is_down_exits_2_before_the_run_dir(tmp_path, capsys) -> None:
    url = f"http://127.0.0.1:{closed_port()}/v1"
    assert train(tmp_path, *vllm(url)) == 2
    err = capsys.readouterr().err
    assert url in err and "did not answer" in err and "scripts/run_server.sh" in err
    assert "--skip_preflight" in err
    assert not (tmp_path / "run").exists()


def test_a_model_endpoint_that_is_something_else_exits_2(tmp_path, capsys, other_service) -> None:
    assert train(tmp_path, *vllm(other_service.url + "/v1")) == 2
    err = capsys.readouterr().err
    assert other_service.url in err and "HTTP 404" in err and "OpenAI-compatible" in err
    assert not (tmp_path / "run").exists()


def test_a_model_the_server_does_not_serve_exits_2(tmp_path, capsys, fake_llm) -> None:
    assert train(tmp_path, *vllm(fake_llm.base_url, name="Qwen/Other")) == 2
    err = capsys.readouterr().err
    assert "does not serve model.name='Qwen/Other'" in err and "fake-model" in err
    assert "--served-model-name" in err
    assert not (tmp_path / "run").exists()


def test_the_inducer_endpoint_is_checked_too(tmp_path, capsys, fake_llm) -> None:
    down = f"http://127.0.0.1:{closed_port()}/v1"
    rc = train(
        tmp_path,
        *vllm(fake_llm.base_url),
        "inducer.provider=vllm",
        f"inducer.base_url={down}",
        "inducer.name=fake-model",
    )
    assert rc == 2
    assert "inducer.provider vllm" in capsys.readouterr().err
    assert not (tmp_path / "run").exists()


def test_gemini_is_checked_with_models_get(monkeypatch) -> None:
    from speedrunner.catalog import config_loader
    from speedrunner.core.llm.preflight import check_model_endpoints
    from speedrunner.errors import PreflightError

    monkeypatch.setenv("GEMINI_API_KEY", "fake-key")
    server = FakeLLMServer(model_name="gemini-3-flash-preview").start()
    try:
        config = (
            config_loader()
            .load(
                REPO / "configs" / "babyai" / "react-gemini-seq.yaml",
                overrides=[f"model.base_url={server.base_url}"],
            )
            .config
        )
        check_model_endpoints(config.model)  # the fake Gemini API knows the model: no error
        with pytest.raises(PreflightError, match="knows no model 'gemini-nope'"):
            check_model_endpoints(config.model.model_copy(update={"name": "gemini-nope"}))
    finally:
        server.stop()
    with pytest.raises(PreflightError, match="did not answer"):
        check_model_endpoints(config.model)  # the server is gone now


def test_the_babyai_server_url_answered_by_another_service_exits_2(
    tmp_path, capsys, fake_llm, other_service
) -> None:
    rc = train(tmp_path, *vllm(fake_llm.base_url), f"benchmark.server_url={other_service.url}")
    assert rc == 2
    err = capsys.readouterr().err
    assert other_service.url in err and "something other than the BabyAI-Text server" in err
    assert "HTTP 404" in err and "hello from another service" in err and "deploy_env.py" in err
    assert not (tmp_path / "run").exists()


def test_a_remote_babyai_server_that_is_down_exits_2(tmp_path, capsys, fake_llm) -> None:
    url = f"http://127.0.0.1:{closed_port()}"
    rc = train(
        tmp_path,
        *vllm(fake_llm.base_url),
        f"benchmark.server_url={url}",
        "benchmark.autostart_server=false",
    )
    assert rc == 2
    err = capsys.readouterr().err
    assert url in err and "no BabyAI-Text server answers" in err and "deploy_env.py" in err
    assert not (tmp_path / "run").exists()


def test_skip_preflight_goes_on_to_make_the_run_dir(tmp_path, monkeypatch) -> None:
    calls: list[Path] = []
    monkeypatch.setattr(
        train_cli, "_run", lambda config, run_dir, run_id, session: calls.append(run_dir) or 0
    )
    url = f"http://127.0.0.1:{closed_port()}/v1"
    assert train(tmp_path, *vllm(url), extra=("--skip_preflight",)) == 0
    assert calls == [tmp_path / "run"]
    assert (
        json.loads((tmp_path / "run" / "config.resolved.json").read_text())["model"]["base_url"]
        == url
    )


def test_a_local_babyai_url_with_nothing_there_is_fine_with_autostart(
    tmp_path, fake_llm, monkeypatch
) -> None:
    calls: list[Path] = []
    monkeypatch.setattr(
        train_cli, "_run", lambda config, run_dir, run_id, session: calls.append(run_dir) or 0
    )
    url = f"http://127.0.0.1:{closed_port()}"
    assert train(tmp_path, *vllm(fake_llm.base_url), f"benchmark.server_url={url}") == 0
    assert calls == [tmp_path / "run"]
