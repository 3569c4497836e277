"""Tier discovery and choice, the child's command line and environment, and the source
tree the child imports ``speedrunner`` from."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from speedrunner.core.sandbox import (
    ProcessLimits,
    available_tiers,
    open_analysis_session,
    resolve_tier,
)
from speedrunner.core.sandbox import tiers as tiers_module
from speedrunner.core.sandbox.commands import TIERS, package_root, wrap
from speedrunner.core.sandbox.process import child_env
from speedrunner.errors import SandboxUnavailableError

from .conftest import open_runner


def test_tiers_are_probed_and_listed_strongest_first() -> None:
    found = available_tiers()
    assert found == [t for t in TIERS if t in found] and "rlimits" in found
    assert resolve_tier("auto") == found[0]
    assert available_tiers() == found  # cached


def test_a_forced_tier_is_the_one_that_runs(tier) -> None:
    with open_runner(tier, "def forward(env, n):\n    return n\n") as runner:
        assert runner.tier == tier
    with pytest.raises(SandboxUnavailableError, match="unknown sandbox tier 'docker'"):
        resolve_tier("docker")


def test_the_rlimits_tier_warns_once(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tiers_module, "_warned", type(tiers_module._warned)())
    with caplog.at_level(logging.WARNING, logger="speedrunner.core.sandbox.tiers"):
        resolve_tier("rlimits")
        resolve_tier("rlimits")
    warnings = [r.getMessage() for r in caplog.records]
    assert len(warnings) == 1 and "can reach the network" in warnings[0]


def test_the_child_environment_is_an_allow_list(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-x")
    monkeypatch.setenv("http_proxy", "http://p.invalid")
    monkeypatch.setenv("PYTHONPATH", "/somewhere")
    env = child_env(Path("/scratch/x"))
    assert set(env) <= {
        "PATH",
        "HOME",
        "TMPDIR",
        "LANG",
        "LC_ALL",
        "OPENBLAS_NUM_THREADS",
        "OMP_NUM_THREADS",
        "MKL_NUM_THREADS",
    }
    assert env["HOME"] == env["TMPDIR"] == "/scratch/x"


def test_bwrap_mounts_only_what_the_child_needs(tmp_path: Path) -> None:
    if "bwrap" not in available_tiers():
        pytest.skip(
            "the bubblewrap tier is not tested: bwrap does not work on this machine "
            "(apt-get install bubblewrap, see the README's Set-up)"
        )
    experience = tmp_path / "experience"
    experience.mkdir()
    argv = wrap("bwrap", ["python"], scratch=tmp_path / "scratch", read_only=[experience])
    binds = [(argv[i + 1], argv[i + 2]) for i, a in enumerate(argv) if a in ("--ro-bind", "--bind")]
    assert ("/", "/") not in binds and all(a == b for a, b in binds)
    assert (str(experience), str(experience)) in binds and (
        "--bind" not in argv
    )  # nothing writable
    assert "--unshare-net" in argv and "--die-with-parent" in argv and argv[-2:] == ["--", "python"]
    assert str(package_root()) in [b for b, _ in binds] or any(
        package_root().is_relative_to(b) for b, _ in binds
    )


def test_the_child_imports_speedrunner_from_the_parents_source_tree(tier) -> None:
    with open_analysis_session(tier=tier) as session:
        result = session.run(
            "import speedrunner, sys\nprint(speedrunner.__file__)\nprint(sys.flags.isolated)", 10
        )
    path, isolated = result.stdout.split()
    assert Path(path).resolve().is_relative_to(package_root()) and isolated == "1"


def test_limits_are_validated() -> None:
    with pytest.raises(ValueError, match="memory_mb"):
        ProcessLimits(memory_mb=0)
    assert ProcessLimits().memory_mb == 1024
