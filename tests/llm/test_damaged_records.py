"""The call log is the source of truth: a damaged log or cache is repaired on resume, with a
line saying so; nothing logged is paid again and no spend is lost.

A run's model makes paid calls against the fake server; its run directory is damaged; the
resume path of ``train_cli`` (``journal.reconcile``, then ``spend_cap``, then the model)
replays every call.
"""

from __future__ import annotations

import os
import random
import sqlite3
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace

import pytest

from speedrunner.core.config.schema import ModelConfig
from speedrunner.core.llm.build import build_model
from speedrunner.core.llm.journal import reconcile
from speedrunner.core.llm.spend_cap import spend_cap
from speedrunner.core.llm.spent import CallLogTotals
from speedrunner.core.llm.types import Message
from speedrunner.testing.fake_llm_server import FakeLLMServer, Reply

from .billing_fakes import PRICES
from .conftest import TINY

CALLS = 6
CACHE, LOG = "llm_cache.sqlite", "llm_calls.jsonl"


def _calls(run_dir: Path, url: str) -> list[str]:
    """The run's calls, in order (paid, or replayed when the cache has them)."""
    config = SimpleNamespace(run=SimpleNamespace(max_cost_usd=1.0))
    cap = spend_cap(config, "run", run_dir / CACHE, run_dir / LOG)  # type: ignore[arg-type]
    model = build_model(
        ModelConfig(
            provider="vllm",
            name="fake-model",
            base_url=url,
            prices=PRICES,
            sampling={"max_tokens": 100},
            max_attempts=1,
        ),
        namespace="run",
        cache_path=run_dir / CACHE,
        calls_log_path=run_dir / LOG,
        spend_cap=cap,
        backoff=TINY,
    )
    try:
        return [
            model.complete(
                [Message("user", f"question {i} " + "x" * 2000)],
                purpose="actor",
                call_id=f"train/{i:06d}/actor/0000",
            ).text
            for i in range(CALLS)
        ]
    finally:
        model.close()


def _tear_last_line(run_dir: Path) -> None:
    data = (run_dir / LOG).read_bytes()
    start = data.rstrip(b"\n").rfind(b"\n") + 1
    (run_dir / LOG).write_bytes(data[: start + (len(data) - start) // 2])


def _flip_a_byte(run_dir: Path) -> None:
    data = bytearray((run_dir / LOG).read_bytes())
    second = data.index(b"\n") + 1
    data[second] ^= 0x01  # the second row's opening brace
    (run_dir / LOG).write_bytes(bytes(data))


def _garble_cache(run_dir: Path) -> None:
    path = run_dir / CACHE
    with sqlite3.connect(path) as conn:  # every page in the file itself, none only in the WAL
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    middle = path.stat().st_size // 2 // 4096 * 4096
    with open(path, "r+b") as f:
        f.seek(middle)
        f.write(random.Random(0).randbytes(4096))


def _delete_cache(run_dir: Path) -> None:
    for suffix in ("", "-wal", "-shm"):
        (run_dir / (CACHE + suffix)).unlink(missing_ok=True)


DAMAGE: dict[str, tuple[Callable[[Path], None], str]] = {
    "torn last line": (_tear_last_line, "damaged line(s)"),
    "flipped byte": (_flip_a_byte, "damaged line(s)"),
    "garbled cache": (_garble_cache, "was unreadable"),
    "deleted cache": (_delete_cache, "was missing"),
}


@pytest.mark.parametrize("damage", list(DAMAGE))
def test_a_damaged_run_resumes_without_paying_again_or_losing_spend(
    tmp_path: Path, damage: str
) -> None:
    damage_fn, said = DAMAGE[damage]
    with FakeLLMServer(
        default=Reply(text="the answer", prompt_tokens=500, completion_tokens=50),
        model_name="fake-model",
    ) as server:
        run_dir = tmp_path / "run"
        answers = _calls(run_dir, server.base_url)
        paid = len(server.chat_requests())
        spent = CallLogTotals(run_dir / LOG).read().spent_usd
        damage_fn(run_dir)

        reconciled = reconcile(
            run_dir / CACHE, run_dir / LOG, "run"
        )  # the resume, as train_cli runs it
        resumed = _calls(run_dir, server.base_url)
        assert len(server.chat_requests()) == paid == CALLS  # nothing logged was paid again
    assert resumed == answers
    assert spent and CallLogTotals(run_dir / LOG).read().spent_usd == pytest.approx(
        spent
    )  # spend kept
    message = reconciled.message() or ""
    assert said in message and "\n" not in message.strip()  # one line says what was repaired
    kept = [p.name for p in run_dir.iterdir() if ".damaged" in p.name]  # moved aside, never deleted
    assert kept if damage != "deleted cache" else not kept
    # A second resume finds nothing more to repair.
    assert reconcile(run_dir / CACHE, run_dir / LOG, "run").message() is None


def test_a_damaged_line_is_kept_beside_the_log_as_it_was(tmp_path: Path) -> None:
    with FakeLLMServer(
        default=Reply(text="the answer", prompt_tokens=500, completion_tokens=50),
        model_name="fake-model",
    ) as server:
        run_dir = tmp_path / "run"
        _calls(run_dir, server.base_url)
        lines = (run_dir / LOG).read_bytes().splitlines(keepends=True)
        _flip_a_byte(run_dir)
        damaged = (run_dir / LOG).read_bytes().splitlines(keepends=True)[1]
        reconcile(run_dir / CACHE, run_dir / LOG, "run")
    assert (run_dir / (LOG + ".damaged")).read_bytes() == damaged
    rows = (run_dir / LOG).read_bytes().splitlines(keepends=True)
    assert rows[0] == lines[0] and rows[1 : CALLS - 1] == lines[2:]  # the rest as it was, in order
    assert (
        len(rows) == CALLS and b'"restored"' in rows[-1]
    )  # the answer's row is back, from the cache
    assert os.path.getsize(run_dir / LOG) > 0
