"""``python tests/e2e/hostile_train.py SCENARIO MODULE ARGS...``: run a train entry point with
every skill sandbox replaced by a hostile child (``tests/sandbox/hostile.py``), i.e. as if
every skill had left the restricted layer and took over its process. The run must still go
to the end, recording each violation."""

from __future__ import annotations

import runpy
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from speedrunner.core.runtime.skill_support import SkillSandboxes  # noqa: E402
from speedrunner.core.sandbox.skills import SandboxSkillRunner  # noqa: E402
from tests.sandbox.hostile import start_hostile  # noqa: E402

if __name__ == "__main__":
    scenario, module = sys.argv[1], sys.argv[2]
    SandboxSkillRunner._start_process = lambda self: start_hostile(self.tier, self.limits, scenario)  # type: ignore[method-assign]
    SkillSandboxes.prepare = lambda self, n: None  # type: ignore[method-assign]  # none booted ahead: each is the runner's
    sys.argv = [module, *sys.argv[3:]]
    runpy.run_module(module, run_name="__main__", alter_sys=True)
