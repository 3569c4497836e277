"""The JSONL files of a killed run are mended from their end and read line by line (issue #33:
a resume of a long run must not read its whole ``llm_calls.jsonl`` into memory to cut one
torn line)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from speedrunner.core.atomic import iter_jsonl, repair_jsonl


def _rows(n: int) -> bytes:
    return b"".join(json.dumps({"i": i, "pad": "x" * 500}).encode() + b"\n" for i in range(n))


@pytest.mark.parametrize(
    "torn", [b'{"i": 9', b'{"pad": "' + b"y" * 200_000]
)  # shorter and longer than a read chunk
def test_repair_cuts_only_the_torn_line(tmp_path: Path, torn: bytes) -> None:
    path = tmp_path / "llm_calls.jsonl"
    whole = _rows(300)
    path.write_bytes(whole + torn)
    assert repair_jsonl(path) == len(torn)
    assert path.read_bytes() == whole
    assert repair_jsonl(path) == 0  # already whole: nothing cut


def test_repair_of_a_single_torn_line_empties_the_file(tmp_path: Path) -> None:
    path = tmp_path / "llm_calls.jsonl"
    path.write_bytes(b'{"i": ' + b"1" * 100_000)
    assert repair_jsonl(path) == 100_006
    assert path.read_bytes() == b""
    assert repair_jsonl(tmp_path / "missing.jsonl") == 0


def test_iter_skips_a_torn_tail_and_refuses_a_corrupt_middle(tmp_path: Path) -> None:
    path = tmp_path / "metrics.jsonl"
    path.write_bytes(_rows(3) + b"\n" + b'{"i": 3, "pa')
    assert [r["i"] for r in iter_jsonl(path)] == [0, 1, 2]
    path.write_bytes(_rows(2) + b"not json\n" + _rows(1))
    with pytest.raises(json.JSONDecodeError):
        list(iter_jsonl(path))
