"""A child of the pre-imported interpreter (``prewarmed``) is the process the e2e tests take it
for: what ``python -m module`` would be, given its arguments, environment, working directory and
session, with its output captured and its exit status reported as ``subprocess`` reports it."""

from __future__ import annotations

import os
import signal
import sys
import time

import pytest

from . import prewarmed

MODULE = """
import atexit, json, os, sys, threading, time

def report():
    print(json.dumps({"argv": sys.argv[1:], "cwd": os.getcwd(), "name": __name__,
                      "pid": os.getpid(), "pgid": os.getpgid(0),
                      "env": os.environ.get("PREWARMED_TEST"),
                      "secret": os.environ.get("OPENAI_API_KEY"), "stdin": sys.stdin.read()}),
          flush=True)

mode = sys.argv[1]
if mode == "report":
    report()
elif mode == "exit":
    print("to stderr", file=sys.stderr)
    sys.exit(int(sys.argv[2]))
elif mode == "raise":
    raise ValueError("boom")
elif mode == "atexit":
    atexit.register(lambda: print("atexit ran", flush=True))
    threading.Thread(target=lambda: (time.sleep(0.3), print("thread finished", flush=True))).start()
elif mode == "sleep":
    print("sleeping", flush=True)
    time.sleep(60)
"""


@pytest.fixture
def module(tmp_path):
    (tmp_path / "prewarmed_probe.py").write_text(MODULE)
    return tmp_path


def spawn(cwd, *args, env=None, new_session=False):
    env = {"PATH": os.environ["PATH"], **(env or {})}
    return prewarmed.Server.get().spawn(
        "prewarmed_probe", list(args), cwd=cwd, env=env, new_session=new_session
    )


def finish(proc, timeout=60):
    out, err = proc.communicate(timeout)
    return proc.returncode, out, err


def test_the_child_gets_its_own_arguments_environment_cwd_and_session(module):
    import json

    code, out, err = finish(
        spawn(module, "report", "x y", env={"PREWARMED_TEST": "mine"}, new_session=True)
    )
    assert code == 0, err
    seen = json.loads(out)
    assert seen["argv"] == ["report", "x y"] and seen["name"] == "__main__"
    assert seen["cwd"] == str(module) and seen["env"] == "mine"
    assert seen["secret"] is None  # the server's own environment never reaches a child
    assert seen["pid"] != os.getpid() and seen["pgid"] == seen["pid"]
    assert seen["stdin"] == ""  # stdin is /dev/null, as in CI


def test_exit_codes_and_uncaught_exceptions_are_reported_as_python_reports_them(module):
    code, _, err = finish(spawn(module, "exit", "3"))
    assert code == 3 and "to stderr" in err
    code, _, err = finish(spawn(module, "raise"))
    assert code == 1 and "ValueError: boom" in err and "Traceback" in err


def test_the_child_exits_through_the_interpreters_exit_path(module):
    code, out, _ = finish(spawn(module, "atexit"))
    assert code == 0
    assert out.splitlines() == [
        "thread finished",
        "atexit ran",
    ]  # non-daemon threads joined, then atexit


def test_a_signal_kills_the_child_and_its_session_can_be_signalled(module):
    proc = spawn(module, "sleep", new_session=True)
    assert proc.stdout.readline() == "sleeping\n"
    assert proc.poll() is None
    os.killpg(proc.pid, signal.SIGKILL)
    code, _, _ = finish(proc)
    assert code == -signal.SIGKILL


def test_a_wait_past_its_timeout_raises_like_subprocess(module):
    import subprocess

    proc = spawn(module, "sleep")
    started = time.monotonic()
    with pytest.raises(subprocess.TimeoutExpired):
        proc.wait(0.5)
    assert time.monotonic() - started < 5
    proc.kill()
    assert finish(proc)[0] == -signal.SIGKILL


def test_only_the_train_entry_points_are_run_this_way():
    train = [sys.executable, "-m", "speedrunner.benchmarks.babyai.train", "--help"]
    assert prewarmed.entry_module(train) == (
        "speedrunner.benchmarks.babyai.train" if prewarmed.ENABLED else None
    )
    assert prewarmed.entry_module([sys.executable, "-m", "speedrunner.cli", "report"]) is None
    assert prewarmed.entry_module(["python3", "-m", "speedrunner.benchmarks.babyai.train"]) is None


@pytest.mark.skipif(not prewarmed.ENABLED, reason="SPEEDRUNNER_TEST_PREWARMED=0")
@pytest.mark.parametrize("bench", ["babyai", "crafter", "scienceworld"])
def test_an_entry_point_from_the_server_prints_what_python_m_prints(bench, tmp_path):
    """Byte for byte, and nothing more on stderr
    (no runpy warning about a module imported twice)."""
    import subprocess

    cmd = [sys.executable, "-m", f"speedrunner.benchmarks.{bench}.train", "--help"]
    env = {**os.environ, "COLUMNS": "100"}
    real = subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=tmp_path, env=env)
    served = prewarmed.run(cmd, cwd=tmp_path, env=env, timeout=120)
    assert (
        (served.returncode, served.stdout, served.stderr)
        == (real.returncode, real.stdout, real.stderr)
        == (0, real.stdout, "")
    )
