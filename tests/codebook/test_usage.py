"""Call counts from episodes' call trees reach the next generation's metadata."""

from __future__ import annotations

from pathlib import Path

import pytest

from speedrunner.core.codebook import (
    AddFunction,
    CallStats,
    Codebook,
    MakePrivate,
    RenameFunction,
    count_calls,
)
from speedrunner.core.trajectory import ActorStep, Trajectory

from .helpers import GO_TO, IMPORT_FIND, STEP, build


def tree(name: str, *calls: dict, error: str | None = None, **extra) -> dict:
    return {
        "name": name,
        "args": [],
        "kwargs": {},
        "calls": list(calls),
        "actions": [],
        "returned": None,
        "error": error,
        **extra,
    }


def episode(version: int, *trees: dict, index: int = 0) -> Trajectory:
    steps = [
        ActorStep(i, f"c{i}", "obs", "raw", None, "", f"{t['name']}()", skill_call=t)
        for i, t in enumerate(trees)
    ]
    steps.append(
        ActorStep(len(trees), "c", "obs", "raw", None, "", "go forward", executed=["go forward"])
    )
    return Trajectory("train", index, "task", 0, version, "instruction", steps=steps)


def test_count_calls_counts_nested_calls_errors_and_interruptions() -> None:
    trees = [
        tree("go_to", tree("_step"), tree("_step", error="ValueError: no target")),
        tree("go_to", tree("_step", tree("_step")), error="ValueError: no target"),
        tree("go_to", tree("_step"), stopped_by="timeout"),
    ]
    assert count_calls(trees) == {
        "_step": CallStats(calls=5, successes=4, errors=1),
        "go_to": CallStats(calls=3, successes=1, errors=1),  # the third was cut off: neither
    }


def test_a_call_stopped_at_a_cap_is_not_an_error() -> None:
    """As the sandbox records them: a stop marks every call it unwound, a timeout says why."""
    capped = tree(
        "go_to",
        tree("_step", error="stopped (max_actions)"),
        error="stopped (max_actions)",
        stopped_by="max_actions",
    )
    timed_out = tree(
        "go_to", error="timed out after 10 s: the sandbox process was killed", stopped_by="timeout"
    )
    raised = tree("go_to", error="ValueError: no target", stopped_by="error")
    assert count_calls([capped, timed_out, raised]) == {
        "_step": CallStats(calls=1),
        "go_to": CallStats(calls=3, successes=0, errors=1),
    }


def test_record_usage_counts_the_episodes_of_this_generation(tmp_path: Path) -> None:
    Codebook.start(tmp_path)
    gen1 = build(AddFunction(IMPORT_FIND + "\n" + STEP), AddFunction(GO_TO)).commit(tmp_path)
    batch = [
        episode(1, tree("go_to", tree("_step")), tree("go_to", error="boom")),
        episode(1, index=1),
    ]
    counted = gen1.record_usage(batch).record_usage(
        [episode(1, tree("go_to", tree("_step")), index=2)]
    )
    assert counted.function("go_to").stats == CallStats(calls=3, successes=2, errors=1)
    assert counted.function("_step").stats == CallStats(calls=2, successes=2)
    assert counted.source == gen1.source and gen1.function("go_to").stats == CallStats()  # a copy
    with pytest.raises(
        ValueError, match="episode train/0 played knowledge version 0, not codebook generation 1"
    ):
        gen1.record_usage([episode(0, tree("go_to"))])


def test_counts_follow_renames_into_the_next_stored_generation(tmp_path: Path) -> None:
    Codebook.start(tmp_path)
    gen1 = build(AddFunction(IMPORT_FIND + "\n" + STEP), AddFunction(GO_TO)).commit(tmp_path)
    counted = gen1.record_usage(
        [episode(1, tree("go_to", tree("_step"), tree("unknown_api_helper")))]
    )
    gen2 = build(RenameFunction("go_to", "walk_to"), MakePrivate("walk_to"), base=counted).commit(
        tmp_path
    )
    assert Codebook.load(tmp_path, 2).function("_walk_to").stats == CallStats(calls=1, successes=1)
    assert gen2.function("_step").stats == CallStats(calls=1, successes=1)
    assert "unknown_api_helper" not in {f.name for f in gen2.functions}
