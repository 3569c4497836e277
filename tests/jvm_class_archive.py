"""One class-data archive (CDS) for the suite's ScienceWorld JVMs, made once per session.

About seventy ScienceWorld JVMs start during the suite, and each spends ~1.4 CPU-s loading,
parsing and verifying the same Scala and ScienceWorld classes before its first episode. A
dynamic CDS archive of those classes (``-XX:ArchiveClassesAtExit``), mapped read-only by every
later JVM, takes ~0.4 CPU-s off each start (measured side by side: 1.47 -> 1.08 CPU-s to the
first observation, median of six). It changes where a JVM's classes come from, not what runs.

``start`` is called by the controller before any worker exists: it points ``JDK_JAVA_OPTIONS``
(read by the ``java`` launcher, after the product's own ``JAVA_TOOL_OPTIONS``) at the archive's
path and makes the archive in the background, with one JVM that plays two short episodes and
writes it as it exits; the file is renamed into place whole. A JVM started before it is there,
or one whose build or class path it does not match, runs without it (HotSpot checks both).
``SPEEDRUNNER_TEST_CLASS_ARCHIVE=0`` turns it off.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

SWITCH = "SPEEDRUNNER_TEST_CLASS_ARCHIVE"
OPTIONS = "JDK_JAVA_OPTIONS"
ARCHIVE_NAME = "scienceworld.jsa"


def _make(folder: Path) -> None:
    """Run in a process of its own: play two short episodes in one JVM that writes the archive as
    it exits, then rename it into place."""
    from speedrunner.benchmarks.scienceworld.env import ScienceWorldTextEnv

    partial = folder / (ARCHIVE_NAME + ".partial")
    env = ScienceWorldTextEnv(
        jvm_options=f"-Xmx512m -XX:+UseSerialGC -XX:ArchiveClassesAtExit={partial}"
    )
    try:
        for task in ("4-1/train", "3-1/train"):
            env.reset(task, 0)
            for action in env.actions[:3]:
                if env.step(action).done:
                    break
    finally:
        env.close()  # waits for the JVM, which writes the archive on its way out
    if partial.is_file():
        partial.rename(folder / ARCHIVE_NAME)


class ClassArchive:
    """The archive's folder and the process making it; ``stop`` waits for that and removes both."""

    def __init__(self) -> None:
        self.folder = Path(tempfile.mkdtemp(prefix="speedrunner-cds-"))
        self.previous = os.environ.get(OPTIONS)
        os.environ[OPTIONS] = (
            f"{self.previous or ''} -XX:SharedArchiveFile={self.folder / ARCHIVE_NAME}".strip()
        )
        env = dict(os.environ)
        if self.previous is None:  # the maker's own JVM must not read the archive it writes
            env.pop(OPTIONS)
        else:
            env[OPTIONS] = self.previous
        self.maker = subprocess.Popen(
            [sys.executable, __file__, str(self.folder)],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )

    def stop(self) -> None:
        try:
            self.maker.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.maker.kill()
            self.maker.wait()
        if self.previous is None:
            os.environ.pop(OPTIONS, None)
        else:
            os.environ[OPTIONS] = self.previous
        shutil.rmtree(self.folder, ignore_errors=True)


def start() -> ClassArchive | None:
    """Start making the archive if this machine runs ScienceWorld and the switch allows it."""
    if os.environ.get(SWITCH, "1") == "0" or shutil.which("java") is None:
        return None
    try:
        import scienceworld  # noqa: F401
    except ImportError:
        return None
    return ClassArchive()


if __name__ == "__main__":
    _make(Path(sys.argv[1]))
