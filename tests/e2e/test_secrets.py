"""Secrets never leave the process: keys echoed back by a gateway, keys in base_url (userinfo
or query) and keys given with --set are absent from every run file and both output streams."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from speedrunner.testing.fake_llm_server import FakeLLMServer, Reply

from .harness import REPO, clean_env, run

pytestmark = pytest.mark.slow

OPENAI_KEY = "sk-plantedOPENAI0123456789"
GEMINI_KEY = "plantedGEMINIkey0123456789"
VLLM_KEY = "plantedVLLMkey0123456789"
USERINFO = "USERINFOSECRET42"
QUERY = "QUERYSECRET42"
PLANTED = (OPENAI_KEY, GEMINI_KEY, VLLM_KEY, USERINFO, QUERY)


def run_train(
    tmp_path: Path, config: str, *sets: str, env: dict[str, str], preflight: bool
) -> subprocess.CompletedProcess:
    cmd = [
        sys.executable,
        "-m",
        "speedrunner.benchmarks.babyai.train",
        "--config_file",
        str(REPO / "configs" / "babyai" / config),
        "--quick_test",
        "--run_dir",
        str(tmp_path / "run"),
    ]
    if not preflight:
        cmd.append("--skip_preflight")
    for s in sets:
        cmd += ["--set", s]
    return run(cmd, timeout=300, env={**clean_env(), **env})


def with_userinfo(url: str) -> str:
    return url.replace("http://", f"http://user:{USERINFO}@")


CASES = {
    # provider, config, --set values, environment, the key a gateway echoes
    "openai-echoed-key-and-userinfo": (
        "react-gpt-seq.yaml",
        lambda u: [f"model.base_url={with_userinfo(u)}", "model.name=fake-model"],
        {"OPENAI_API_KEY": OPENAI_KEY},
        OPENAI_KEY,
    ),
    "openai-key-in-query": (
        "react-gpt-seq.yaml",
        lambda u: [f"model.base_url={u}?key={QUERY}", "model.name=fake-model"],
        {"OPENAI_API_KEY": OPENAI_KEY},
        OPENAI_KEY,
    ),
    "vllm-echoed-key": (
        "react-qwen-seq.yaml",
        lambda u: [f"model.base_url={u}", "model.name=fake-model", "model.sampling.seed=1"],
        {"VLLM_API_KEY": VLLM_KEY},
        VLLM_KEY,
    ),
    "gemini-echoed-key": (
        "react-gemini-seq.yaml",
        lambda u: [
            f"model.base_url={u.removesuffix('/v1')}?token={QUERY}",
            "model.name=fake-model",
        ],
        {"GEMINI_API_KEY": GEMINI_KEY},
        GEMINI_KEY,
    ),
}


@pytest.mark.parametrize("preflight", [False, True], ids=["run", "preflight"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_planted_secrets_reach_no_file_and_no_stream(
    tmp_path: Path, case: str, preflight: bool
) -> None:
    config, sets, env, echoed = CASES[case]
    server = FakeLLMServer(
        default=Reply(status=401, error_message=f"Incorrect API key provided: {echoed}"),
        model_name="fake-model",
    ).start()
    url = server.base_url
    if preflight:  # the endpoint is down: the pre-flight error names it, without its secrets
        server.stop()
    try:
        proc = run_train(tmp_path, config, *sets(url), env=env, preflight=preflight)
    finally:
        server.stop()
    assert proc.returncode in (1, 2), proc.stderr[-3000:]
    assert "error" in proc.stderr
    texts = {"stdout": proc.stdout, "stderr": proc.stderr}
    run_dir = tmp_path / "run"
    if run_dir.exists():
        texts |= {
            str(p): p.read_bytes().decode("utf-8", "replace")
            for p in run_dir.rglob("*")
            if p.is_file()
        }
    for where, text in texts.items():
        for secret in PLANTED:
            assert secret not in text, f"{secret} leaked into {where}"
    if not preflight:
        assert (run_dir / "llm_calls.jsonl").exists() and "<redacted>" in (
            run_dir / "llm_calls.jsonl"
        ).read_text()


def test_a_resume_asks_again_for_a_base_url_whose_credentials_were_not_stored(
    tmp_path: Path,
) -> None:
    from .harness import policy_reply, run

    server = FakeLLMServer(callback=policy_reply, model_name="fake-model").start()
    url = with_userinfo(server.base_url)
    try:
        first = run_train(
            tmp_path,
            "react-qwen-seq.yaml",
            f"model.base_url={url}",
            "model.name=fake-model",
            env={},
            preflight=True,
        )
        assert first.returncode == 0, first.stderr[-3000:]
        resume = [
            sys.executable,
            "-m",
            "speedrunner.benchmarks.babyai.train",
            "--resume",
            str(tmp_path / "run"),
        ]
        refused = run(resume)
        assert refused.returncode == 2
        assert (
            "model.base_url held credentials" in refused.stderr
            and "--set model.base_url=URL" in refused.stderr
        )
        again = run([*resume, "--set", f"model.base_url={url}"])
        assert again.returncode == 0, again.stderr[-3000:]
    finally:
        server.stop()
    for path in (tmp_path / "run").rglob("*"):
        if path.is_file():
            assert USERINFO not in path.read_bytes().decode("utf-8", "replace"), path
