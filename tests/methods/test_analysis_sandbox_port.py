"""SpeedRunner's analysis code runs in the session its skill support opens
(``SkillSupport.open_analysis``): the method names the sandbox only by that interface, the run's
skill support supplies it under the run's tier, and what the session reports (tier,
weak-isolation note) lands in the sleep record."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from speedrunner.core.episode_files import save_trajectory
from speedrunner.core.method import MethodContext, SkillSupport
from speedrunner.core.trajectory import ActorStep, ReplayResult, Trajectory
from speedrunner.errors import ConfigError
from speedrunner.methods.wake_sleep.configs import SpeedRunnerConfig
from speedrunner.methods.wake_sleep.speedrunner import SpeedRunnerMethod
from tests.runtime.fakes import PolicyModel

API = "speedrunner.benchmarks.babyai.skill_api"
NOTE = "WEAK ISOLATION: a note from the session"


@dataclass(frozen=True)
class _Output:
    stdout: str
    error: str | None = None
    timed_out: bool = False
    violation: str | None = None


@dataclass
class _Session:
    """A stand-in session that records the code it was given (no process)."""

    tier: str = "rlimits"
    isolation: str | None = NOTE
    ran: list[str] = field(default_factory=list)
    closed: bool = False

    def run(self, code: str, timeout_s: float) -> _Output:
        self.ran.append(code)
        return _Output(f"ran {len(self.ran)}\n")

    def restart(self) -> None:
        raise AssertionError("nothing broke the session")

    def close(self) -> None:
        self.closed = True


def _method(tmp_path: Path, open_analysis) -> SpeedRunnerMethod:
    turns = ["Tool: run_python\n```python\nprint(len(episodes()))\n```", "Tool: submit"]
    model = PolicyModel(lambda messages, purpose, call_id: turns[int(call_id.rsplit("/", 1)[1])])
    support = SkillSupport(
        api_module=API,
        api_names=(),
        primitives=("turn left", "go forward"),
        open_skills=lambda skills: None,
        smoke_test=lambda source: None,
        replay=lambda *a: ReplayResult(success=True),
        sandbox_tier="bwrap",
        open_analysis=open_analysis,
    )
    ctx = MethodContext(run_dir=tmp_path, inducer=model, benchmark="babyai", skills=support)
    m = SpeedRunnerMethod(SpeedRunnerConfig(), ctx)
    m.restore(0)
    return m


def _batch(tmp_path: Path) -> list[Trajectory]:
    t = Trajectory(
        split="train", index=0, task="goto", seed=1, knowledge_version=0, instruction="go"
    )
    t.steps = [
        ActorStep(
            index=0,
            call_id="a",
            observation="o",
            raw_text="",
            reasoning=None,
            thought="t",
            parsed_action="go forward",
            executed=["go forward"],
        )
    ]
    save_trajectory(tmp_path, t)
    return [t]


def test_run_python_runs_in_the_session_the_skill_support_opens(tmp_path: Path) -> None:
    opened: list[dict] = []
    session = _Session()

    def open_analysis(*, mounts, preload):
        opened.append({"mounts": list(mounts), "preload": tuple(preload)})
        return session

    m = _method(tmp_path, open_analysis)
    m.sleep(_batch(tmp_path), batch_index=0)

    # Only this run's training episodes are mounted (the codebook folder too, once it exists).
    assert opened == [
        {
            "mounts": [tmp_path / "episodes" / "train", tmp_path / "codebook"],
            "preload": ("speedrunner.core.experience",),
        }
    ]
    assert session.ran[-1] == "print(len(episodes()))\n" and session.closed
    turn = json.loads((tmp_path / "sleep" / "batch_0000" / "turn_0000.json").read_text())
    assert turn["result"] == "ran 2"  # the setup ran first, then the inducer's code
    record = json.loads((tmp_path / "sleep" / "batch_0000" / "sleep.json").read_text())
    assert (record["analysis_tier"], record["isolation"]) == ("rlimits", NOTE)
    assert record["run_python_calls"] == 1


def test_without_an_analysis_sandbox_run_python_says_what_to_pass(tmp_path: Path) -> None:
    m = _method(tmp_path, None)
    with pytest.raises(ConfigError, match=r"SkillSupport\.open_analysis"):
        m.sleep(_batch(tmp_path), batch_index=0)


def test_the_runs_skill_support_opens_analysis_under_its_tier(tmp_path: Path) -> None:
    """``build_skill_support`` hands the method a session opener bound to the run's tier and to what
    ``run.sandbox`` asked for; a named ``rlimits`` session carries the weak-isolation note."""
    from speedrunner.catalog import config_loader
    from speedrunner.core.runtime.skill_support import build_skill_support

    repo = Path(__file__).resolve().parents[2]
    config = (
        config_loader()
        .load(
            repo / "configs" / "babyai" / "speedrunner-scripted-seq.yaml",
            overrides=["run.sandbox=rlimits"],
        )
        .config
    )
    support = build_skill_support(config, lambda: None)  # type: ignore[arg-type, return-value]
    try:
        assert support.open_analysis is not None
        (tmp_path / "episodes").mkdir()
        session = support.open_analysis(mounts=[tmp_path / "episodes"], preload=())
        try:
            assert session.tier == support.sandbox_tier == "rlimits"
            assert session.isolation is not None and session.isolation.startswith("WEAK ISOLATION")
            assert session.run("print(6 * 7)", 20).stdout == "42\n"
        finally:
            session.close()
    finally:
        support.close()
