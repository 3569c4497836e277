"""The rlimits tier never runs analysis code over a run directory unless the user named it.

Attack (issue 22): under the weaker tiers, analysis code read its own run's
``llm_calls.jsonl``, config, cache and provenance, and another run's held-out evaluation
episode, and what it printed went to the LLM. Under ``auto`` on a machine where only
``rlimits`` works, that used to happen silently."""

from __future__ import annotations

from pathlib import Path

import pytest

from speedrunner.catalog import config_loader
from speedrunner.core.runtime.skill_support import build_skill_support
from speedrunner.core.sandbox import open_analysis_session, tiers
from speedrunner.errors import ConfigError, SandboxUnavailableError

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def only_rlimits(monkeypatch: pytest.MonkeyPatch) -> None:
    """A machine where bubblewrap and unshare do not work."""
    real = tiers._probe
    monkeypatch.setattr(
        tiers,
        "_probe",
        lambda tier: (
            None
            if tier == "rlimits"
            else f"{tier}: not on this machine"
            if tier in ("bwrap", "unshare")
            else real(tier)
        ),
    )


def test_auto_does_not_run_analysis_over_a_run_directory_under_rlimits(
    only_rlimits, tmp_path: Path
) -> None:
    (tmp_path / "episodes").mkdir()
    with pytest.raises(SandboxUnavailableError, match=r"run\.sandbox=rlimits"):
        open_analysis_session(tier="auto", mounts=[tmp_path / "episodes"])
    with pytest.raises(
        SandboxUnavailableError, match="analysis code under it could read the whole run"
    ):
        open_analysis_session(tier="rlimits", requested="auto", mounts=[tmp_path / "episodes"])
    with open_analysis_session(
        tier="auto"
    ) as session:  # no run directory in it: a plain smoke test is fine
        assert session.tier == "rlimits"
    with open_analysis_session(
        tier="rlimits", mounts=[tmp_path / "episodes"]
    ) as session:  # named: allowed
        assert session.run("print(1)", 10).stdout == "1\n"


def test_a_speedrunner_run_under_auto_with_only_rlimits_fails_before_it_starts(
    only_rlimits, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-used")
    loader = config_loader()
    config = loader.load(REPO / "configs" / "babyai" / "speedrunner-gpt-seq.yaml").config
    with pytest.raises(
        ConfigError, match=r"(?s)run\.sandbox:.*naming the tier: run\.sandbox=rlimits"
    ):
        build_skill_support(config, lambda: None)  # type: ignore[arg-type, return-value]
    named = loader.load(
        REPO / "configs" / "babyai" / "speedrunner-gpt-seq.yaml", overrides=["run.sandbox=rlimits"]
    ).config
    support = build_skill_support(named, lambda: None)  # type: ignore[arg-type, return-value]
    assert (support.sandbox_tier, support.sandbox_requested) == ("rlimits", "rlimits")
    asi = loader.load(
        REPO / "configs" / "babyai" / "asi-gpt-seq.yaml"
    ).config  # skills only, no analysis
    assert build_skill_support(asi, lambda: None).sandbox_tier == "rlimits"  # type: ignore[arg-type, return-value]


def test_the_weak_tier_is_named_in_the_summary_fields() -> None:
    class Support:
        sandbox_tier = "rlimits"
        sandbox_requested = None

    fields = tiers.sandbox_summary(Support())
    assert fields["sandbox_tier"] == "rlimits" and fields["isolation"].startswith("WEAK ISOLATION")
    assert tiers.sandbox_summary(None) == {"sandbox_tier": None, "isolation": None}


def test_the_note_says_how_the_weak_tier_was_reached() -> None:
    """Under run.sandbox=auto the skills of ASI and Voyager run under rlimits when nothing stronger
    works; the note said "chosen by name, run.sandbox=rlimits" there too, which the user never
    did."""

    class Support:
        sandbox_tier = "rlimits"
        sandbox_requested = "auto"

    auto = tiers.sandbox_summary(Support())["isolation"]
    assert auto.startswith("WEAK ISOLATION") and "chosen by name" not in auto
    assert (
        "run.sandbox=auto, and no stronger tier worked on this machine" in auto
        and "bubblewrap" in auto
    )
    Support.sandbox_requested = "rlimits"
    assert "(chosen by name, run.sandbox=rlimits)" in tiers.sandbox_summary(Support())["isolation"]
    assert tiers.isolation_note("bwrap", "auto") is None
