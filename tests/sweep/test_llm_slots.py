"""Endpoint concurrency limits hold across processes (a sweep's runs), and a killed run frees its slot."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from speedrunner.core.llm.slots import SLOTS_DIR_ENV, SharedSlots, endpoint_limit

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
    procs = [subprocess.Popen([sys.executable, "-c", HOLDER, str(tmp_path / "slots"), str(log), "2"])
             for _ in range(3)]
    assert [p.wait(timeout=60) for p in procs] == [0, 0, 0]
    events = sorted((float(t), +1 if sign == "+" else -1)
                    for sign, t in (line.split() for line in log.read_text().splitlines()))
    assert len(events) == 2 * 3 * 3 * 3
    in_flight, peak = 0, 0
    for _, delta in sorted(events, key=lambda e: (e[0], e[1])):  # an exit before an entry at a tie
        in_flight += delta
        peak = max(peak, in_flight)
    # 9 threads in 3 processes, each process allowed 2 by itself: together still at most 2 —
    # and the limit is used, not serialised down to 1.
    assert peak == 2


def test_a_killed_holder_frees_its_slot_at_once(tmp_path):
    hold = ("import sys, time\nfrom pathlib import Path\nfrom speedrunner.core.llm.slots import SharedSlots\n"
            "s = SharedSlots(Path(sys.argv[1]), 'openai https://api.openai.com/v1', 1)\n"
            "s.__enter__(); print('held', flush=True); time.sleep(60)\n")
    proc = subprocess.Popen([sys.executable, "-c", hold, str(tmp_path)], stdout=subprocess.PIPE, text=True)
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
    assert (Path(limit.dir) / "endpoint.txt").read_text().strip() == "openai https://api.openai.com/v1"
    assert not isinstance(endpoint_limit("scripted", "scripted://local", 4), SharedSlots)
