"""The suite's shared class-data archive for ScienceWorld JVMs (``tests/jvm_class_archive.py``):
the JVMs the suite starts really map it, and a JVM plays the same with it as without it."""

from __future__ import annotations

import os
import re
import shutil
import time
from pathlib import Path

import pytest

from speedrunner.benchmarks.scienceworld.env import ScienceWorldTextEnv
from tests.jvm_class_archive import OPTIONS, SWITCH

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        shutil.which("java") is None, reason="no JVM (apt-get install openjdk-17-jre-headless)"
    ),
]


def archive_path() -> Path:
    found = re.search(r"-XX:SharedArchiveFile=(\S+)", os.environ.get(OPTIONS, ""))
    if found is None:
        pytest.skip(f"{SWITCH}=0: the suite runs its JVMs without a shared class archive")
    path = Path(found.group(1))
    deadline = time.monotonic() + 120  # made in the background from the session's start
    while not path.is_file():
        assert time.monotonic() < deadline, f"the class archive was never made at {path}"
        time.sleep(0.5)
    return path


def play() -> tuple[tuple[list[str], list[str]], str]:
    """A few steps in a new JVM: what it showed, and its memory map."""
    env = ScienceWorldTextEnv(jvm_options="-Xmx256m -XX:+UseSerialGC")
    try:
        texts = [env.reset("4-2/test", 7).text]
        for action in ("look around", "open door to kitchen", "go to kitchen", "inventory"):
            texts.append(env.step(action).observation.text)
        return (texts, env.actions), Path(
            f"/proc/{env._sim._gateway.java_process.pid}/maps"
        ).read_text()
    finally:
        env.close()


def test_a_jvm_maps_the_archive_and_plays_as_one_without_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    path = archive_path()
    with_archive, maps = play()
    assert str(path) in maps, "the JVM did not map the suite's class archive"
    monkeypatch.delenv(OPTIONS)
    without, maps = play()
    assert str(path) not in maps
    assert with_archive == without
