"""Ctrl-C and SIGTERM stop a run at once — in a retry back-off or in a request — say so with
the run's own resume command, and leave a run that ``--resume`` finishes.

Real signals to a real ``python -m speedrunner.benchmarks.babyai.train`` subprocess whose
model endpoint is down (connection refused, or a server that answers 503) or hangs.
"""

from __future__ import annotations

import json
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest

from speedrunner.testing.fake_llm_server import FakeLLMServer, Reply

from .harness import REPO, clean_env, policy_reply, run, start_server, train_cmd

pytestmark = pytest.mark.slow

# Far longer than any of the waits below: a run that waited out its retries (or its
# request) would take minutes, so finishing within this bound proves it did not.
PROMPT_EXIT_S = 10.0


class Launched:
    """A train subprocess whose stderr is read line by line as it comes."""

    def __init__(self, cmd: list[str]) -> None:
        self.proc = subprocess.Popen(
            cmd,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=REPO,
            env=clean_env(),
        )
        self.err: list[str] = []
        self.out: list[str] = []
        self._threads = [
            threading.Thread(target=self._pump, args=(s, b), daemon=True)
            for s, b in ((self.proc.stderr, self.err), (self.proc.stdout, self.out))
        ]
        for t in self._threads:
            t.start()

    def _pump(self, stream, sink: list[str]) -> None:
        for line in stream:
            sink.append(line)

    def wait_for(self, predicate, timeout: float = 120.0) -> None:
        deadline = time.monotonic() + timeout
        while not predicate():
            if self.proc.poll() is not None:
                raise AssertionError(
                    f"the run exited early ({self.proc.returncode}):\n{''.join(self.err)[-3000:]}"
                )
            if time.monotonic() > deadline:
                self.proc.kill()
                raise AssertionError(f"timed out waiting; stderr:\n{''.join(self.err)[-3000:]}")
            time.sleep(0.05)

    def signal_and_wait(self, *signums: int) -> tuple[int, float]:
        sent = time.monotonic()
        for s in signums:
            self.proc.send_signal(s)
            time.sleep(0.05)
        try:
            code = self.proc.wait(timeout=120)
        finally:
            self.proc.kill()
        for t in self._threads:
            t.join(timeout=5)
        return code, time.monotonic() - sent

    @property
    def stderr(self) -> str:
        return "".join(self.err)


def retrying(launched: Launched) -> bool:
    return "retrying in" in launched.stderr


@pytest.mark.parametrize(
    "signums, code",
    [
        ((signal.SIGINT,), 130),
        ((signal.SIGINT, signal.SIGINT), 130),  # a double Ctrl-C still ends with the message
        ((signal.SIGTERM,), 143),
    ],
    ids=["ctrl-c", "double-ctrl-c", "sigterm"],
)
def test_a_signal_ends_a_retry_back_off_at_once(tmp_path: Path, signums, code) -> None:
    # Connection refused on every attempt; 20 attempts of back-off would take many minutes.
    run_dir = tmp_path / "run"
    launched = Launched(
        train_cmd(
            "babyai",
            "react-gpt-seq.yaml",
            run_dir,
            "http://127.0.0.1:9/v1",
            "--skip_preflight",
            "--set",
            "model.max_attempts=20",
        )
    )
    launched.wait_for(lambda: retrying(launched))
    rc, took = launched.signal_and_wait(*signums)
    assert rc == code, launched.stderr[-3000:]
    assert took < PROMPT_EXIT_S, f"took {took:.1f}s to stop"
    err = launched.stderr
    assert err.count("interrupted (") == 1
    assert f"--resume {run_dir}" in err and "<run dir>" not in err
    assert "Traceback" not in err


def test_a_signal_ends_a_hanging_request_and_the_run_resumes(tmp_path: Path) -> None:
    hanging = FakeLLMServer(
        default=Reply(text="Thought: x\nAction: turn left", delay_s=300.0), model_name="fake-model"
    ).start()
    run_dir = tmp_path / "run"
    try:
        launched = Launched(
            train_cmd(
                "babyai",
                "react-gpt-seq.yaml",
                run_dir,
                hanging.base_url,
                "--set",
                "model.timeout_s=600",
            )
        )
        launched.wait_for(
            lambda: any(r.path.endswith("/chat/completions") for r in hanging.requests)
        )
        rc, took = launched.signal_and_wait(signal.SIGTERM)
    finally:
        hanging.stop()
    assert rc == 143, launched.stderr[-3000:]
    assert took < PROMPT_EXIT_S, f"took {took:.1f}s to stop"
    assert f"--resume {run_dir}" in launched.stderr
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["status"] == "interrupted" and summary["status_reason"] == "SIGTERM"

    server = start_server(policy_reply)
    try:
        resumed = run(
            [
                *train_cmd("babyai", "react-gpt-seq.yaml", run_dir, server.base_url)[:3],
                "--resume",
                str(run_dir),
                "--set",
                f"model.base_url={server.base_url}",
            ]
        )
    finally:
        server.stop()
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert json.loads((run_dir / "summary.json").read_text())["status"] == "finished"


def test_a_server_answering_503_is_interrupted_in_back_off(tmp_path: Path) -> None:
    down = FakeLLMServer(default=Reply.error(503), model_name="fake-model").start()
    try:
        launched = Launched(
            train_cmd(
                "babyai",
                "react-gpt-seq.yaml",
                tmp_path / "run",
                down.base_url,
                "--set",
                "model.max_attempts=20",
            )
        )
        launched.wait_for(lambda: retrying(launched))
        rc, took = launched.signal_and_wait(signal.SIGINT)
    finally:
        down.stop()
    assert rc == 130 and took < PROMPT_EXIT_S, launched.stderr[-3000:]
    assert f"--resume {tmp_path / 'run'}" in launched.stderr


def test_a_signal_ends_a_sleep_phase_request_in_the_main_thread(tmp_path: Path) -> None:
    guide_asked = threading.Event()

    def reply(body: dict) -> Reply:
        if "strategy guide" in body["messages"][0]["content"]:
            guide_asked.set()
            return Reply(text="<guide>late</guide>", delay_s=300.0)
        return policy_reply(body)

    server = start_server(reply)
    run_dir = tmp_path / "run"
    try:
        launched = Launched(
            train_cmd(
                "babyai",
                "opo-gpt-seq.yaml",
                run_dir,
                server.base_url,
                "--set",
                "model.timeout_s=600",
            )
        )
        launched.wait_for(guide_asked.is_set)
        rc, took = launched.signal_and_wait(signal.SIGINT)
    finally:
        server.stop()
    assert rc == 130 and took < PROMPT_EXIT_S, launched.stderr[-3000:]
    assert f"--resume {run_dir}" in launched.stderr and "Traceback" not in launched.stderr
