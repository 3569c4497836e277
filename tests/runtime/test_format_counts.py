"""summary.json's answer counts, rewritten after every checkpoint, read each stored record once."""

from __future__ import annotations

import json
from pathlib import Path

from speedrunner.core import answer_counts
from speedrunner.core.answer_counts import FormatCounter


def _write(path: Path, data: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))


def _episode(index: int, forms: list[str]) -> dict:
    return {
        "steps": [
            {
                "call_id": f"train/{index:04d}/actor/{t}",
                "answer_format": form,
                "executed": form == "ok",
                "finish_reason": "length" if form == "lost" else "stop",
            }
            for t, form in enumerate(forms)
        ]
    }


def test_the_counts_sum_every_record_and_each_record_is_read_once(
    tmp_path: Path, monkeypatch
) -> None:
    _write(tmp_path / "episodes/train/0.json", _episode(0, ["ok", "lost", "repaired"]))
    _write(tmp_path / "episodes/eval/at0/0.json", _episode(0, ["ok"]))
    _write(
        tmp_path / "sleep/batch_0/sleep.json",
        {"format": {"inducer": {"turns": 3, "repaired": 1, "truncated": 1, "dropped_calls": 2}}},
    )
    _write(
        tmp_path / "voyager/iterations/w0/0.json", {"format": {"critic": {"turns": 2, "lost": 1}}}
    )
    counter = FormatCounter(tmp_path)
    first = counter.counts()
    assert (
        first["actor"]["turns"] == 4
        and first["actor"]["lost"] == 1
        and first["actor"]["repaired"] == 1
    )
    assert first["critic"] == {
        "turns": 2,
        "ok": 1,
        "repaired": 0,
        "lost": 1,
        "truncated": 0,
        "dropped_calls": 0,
    }

    read: list[Path] = []
    real_read = answer_counts._read
    monkeypatch.setattr(answer_counts, "_read", lambda p: read.append(p) or real_read(p))
    _write(tmp_path / "episodes/train/1.json", _episode(1, ["ok", "ok"]))
    _write(tmp_path / "sleep/batch_1/sleep.json", {"format": {"inducer": {"turns": 1}}})
    (tmp_path / "episodes/eval/at0/0.json").unlink()  # a quarantined episode no longer counts
    counts = counter.counts()
    assert sorted(p.relative_to(tmp_path).as_posix() for p in read) == [
        "episodes/train/1.json",
        "sleep/batch_1/sleep.json",
    ]
    assert counts["actor"]["turns"] == 5
    assert counts["inducer"] == {
        "turns": 4,
        "ok": 3,
        "repaired": 1,
        "lost": 0,
        "truncated": 1,
        "dropped_calls": 2,
    }
    monkeypatch.undo()
    assert counts == FormatCounter(tmp_path).counts()  # what a fresh count of the same files gives
