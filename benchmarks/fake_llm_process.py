"""The fake LLM server in a process of its own, as a real endpoint would be.

    python benchmarks/fake_llm_process.py --benchmark babyai --latency 0.2

In the measuring process, the server's threads (parsing each request's growing history,
answering) would share the GIL with the episodes being timed and inflate their wall time;
a real LLM server never does. Prints its base URL on the first line, then serves until its
standard input closes (the parent exited or closed it).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path
from types import TracebackType

from perf_common import ACTIONS, REPO, clean_env, fake_actor

from speedrunner.testing.fake_llm_server import FakeLLMServer


class FakeLLMProcess:
    """Starts ``fake_llm_process.py`` as a child; ``base_url`` once entered."""

    def __init__(self, benchmark: str, latency_s: float) -> None:
        self.benchmark, self.latency_s = benchmark, latency_s
        self.base_url = ""
        self._child: subprocess.Popen[str] | None = None

    def __enter__(self) -> FakeLLMProcess:
        self._child = subprocess.Popen(
            [
                sys.executable,
                str(Path(__file__)),
                "--benchmark",
                self.benchmark,
                "--latency",
                str(self.latency_s),
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            cwd=REPO,
            env=clean_env(),
        )
        assert self._child.stdout is not None
        self.base_url = self._child.stdout.readline().strip()
        if not self.base_url.startswith("http://"):
            self._child.kill()
            raise RuntimeError(
                f"the fake LLM server process did not start (said {self.base_url!r})"
            )
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._child is not None:
            assert self._child.stdin is not None
            self._child.stdin.close()
            try:
                self._child.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._child.kill()
                self._child.wait()


def main() -> None:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.splitlines()[0])
    parser.add_argument("--benchmark", choices=list(ACTIONS), required=True)
    parser.add_argument("--latency", type=float, default=0.0, help="seconds before each answer")
    args = parser.parse_args()
    with FakeLLMServer(callback=fake_actor(args.benchmark), latency_s=args.latency) as server:
        print(server.base_url, flush=True)
        sys.stdin.read()  # until the parent closes it or dies


if __name__ == "__main__":
    main()
