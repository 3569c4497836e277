"""Endpoint concurrency limits hold across processes (a sweep's runs), and a killed run frees
its slot."""

from __future__ import annotations

import hashlib
import os
import signal
import stat
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from speedrunner.core.llm.slots import (
    SLOTS_DIR_ENV,
    SharedSlots,
    UnsafeSlotsDirError,
    endpoint_limit,
)

HOLDER = textwrap.dedent("""
    import sys, threading, time
    from pathlib import Path
    from speedrunner.core.llm.slots import SharedSlots
    directory, log, limit = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
    slots = SharedSlots(directory, "vllm http://127.0.0.1:5012/v1", limit)
    def call():
        for _ in range(3):
            with slots:
                with open(log, "a") as f:
                    f.write(f"+ {time.monotonic()}\\n")
                time.sleep(0.03)
                with open(log, "a") as f:
                    f.write(f"- {time.monotonic()}\\n")
    threads = [threading.Thread(target=call) for _ in range(3)]
    [t.start() for t in threads]
    [t.join() for t in threads]
""")


def test_processes_sharing_a_slot_directory_never_exceed_the_limit(tmp_path):
    log = tmp_path / "events.log"
    procs = [
        subprocess.Popen([sys.executable, "-c", HOLDER, str(tmp_path / "slots"), str(log), "2"])
        for _ in range(3)
    ]
    assert [p.wait(timeout=60) for p in procs] == [0, 0, 0]
    events = sorted(
        (float(t), +1 if sign == "+" else -1)
        for sign, t in (line.split() for line in log.read_text().splitlines())
    )
    assert len(events) == 2 * 3 * 3 * 3
    in_flight, peak = 0, 0
    for _, delta in sorted(events, key=lambda e: (e[0], e[1])):  # an exit before an entry at a tie
        in_flight += delta
        peak = max(peak, in_flight)
    # 9 threads in 3 processes, each process allowed 2 by itself: together still at most 2 —
    # and the limit is used, not serialised down to 1.
    assert peak == 2


def test_a_killed_holder_frees_its_slot_at_once(tmp_path):
    hold = (
        "import sys, time\nfrom pathlib import Path\n"
        "from speedrunner.core.llm.slots import SharedSlots\n"
        "s = SharedSlots(Path(sys.argv[1]), 'openai https://api.openai.com/v1', 1)\n"
        "s.__enter__(); print('held', flush=True); time.sleep(60)\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", hold, str(tmp_path)], stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout.readline().strip() == "held"
    slots = SharedSlots(tmp_path, "openai https://api.openai.com/v1", 1)
    assert slots._try_once() is None  # taken by the other process
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    started = time.monotonic()
    with slots:
        assert time.monotonic() - started < 1.0


def test_the_shared_limit_is_used_only_under_a_sweep(tmp_path, monkeypatch):
    monkeypatch.delenv(SLOTS_DIR_ENV, raising=False)
    assert not isinstance(endpoint_limit("openai", "https://api.openai.com/v1", 4), SharedSlots)
    monkeypatch.setenv(SLOTS_DIR_ENV, str(tmp_path))
    limit = endpoint_limit("openai", "https://api.openai.com/v1", 4)
    assert isinstance(limit, SharedSlots) and limit.limit == 4
    assert (
        Path(limit.dir) / "endpoint.txt"
    ).read_text().strip() == "openai https://api.openai.com/v1"
    assert not isinstance(endpoint_limit("scripted", "scripted://local", 4), SharedSlots)


def test_a_pre_created_symlink_does_not_redirect_the_slot_files(tmp_path):
    """Attack (issue 22): a symlink pre-created at the predictable
    ``$TMPDIR/speedrunner-llm-slots-0/<hash>`` redirected a later sweep's slot files (written as
    root) into a directory of the attacker's choice."""
    victim = tmp_path / "victim"
    victim.mkdir()
    slots_dir = tmp_path / "slots"
    slots_dir.mkdir(mode=0o700)
    key = "openai https://api.openai.com/v1"
    (slots_dir / hashlib.sha256(key.encode()).hexdigest()[:16]).symlink_to(
        victim
    )  # the endpoint's directory
    with pytest.raises(UnsafeSlotsDirError, match="not a plain directory"):
        SharedSlots(slots_dir, key, 2)
    os.symlink(victim, tmp_path / "link")
    with pytest.raises(UnsafeSlotsDirError, match="not a plain directory"):
        SharedSlots(tmp_path / "link", key, 2)
    assert list(victim.iterdir()) == []


def test_a_symlink_planted_at_a_slot_file_is_refused_not_followed(tmp_path):
    """A slot file is opened (and created) as the running user: a symlink in its place would create
    or lock a file of the planter's choice. It is refused with a message, never followed."""
    slots_dir = tmp_path / "slots"
    slots_dir.mkdir(mode=0o700)
    slots = SharedSlots(slots_dir, "vllm http://127.0.0.1:8000/v1", 2)
    target = tmp_path / "elsewhere" / "victim"
    target.parent.mkdir()
    for i in range(2):
        (slots.dir / f"slot{i}").symlink_to(target)
    with (
        pytest.raises(
            UnsafeSlotsDirError, match=r"slot file .*slot[01] is a symlink \(not followed\)"
        ),
        slots,
    ):
        pass
    assert not target.exists()


def test_a_slot_directory_open_to_others_is_refused(tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o1777)
    with pytest.raises(UnsafeSlotsDirError, match=r"mode 1777.*must be yours .* with mode 0700"):
        SharedSlots(shared, "vllm http://127.0.0.1:8000/v1", 2)


def test_a_sweep_makes_a_private_unpredictable_slot_directory(monkeypatch):
    from speedrunner.sweep.services import slots_env

    monkeypatch.delenv(SLOTS_DIR_ENV, raising=False)
    first, second = Path(slots_env()[SLOTS_DIR_ENV]), Path(slots_env()[SLOTS_DIR_ENV])
    assert first != second and first.name.startswith("speedrunner-llm-slots-")
    st = first.lstat()
    assert stat.S_ISDIR(st.st_mode) and st.st_mode & 0o777 == 0o700 and st.st_uid == os.geteuid()
    with SharedSlots(first, "openai https://api.openai.com/v1", 1):
        pass  # usable by the sweep's runs
