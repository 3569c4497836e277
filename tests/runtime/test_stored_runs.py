"""A run that was written can always be continued: no stored trajectory makes writing or
``--resume`` crash, and a corrupt episode file is moved aside and the episode played again."""

from __future__ import annotations

import json

import pytest

from speedrunner.core.atomic import read_jsonl
from speedrunner.core.episode_files import load_or_quarantine, load_trajectory, save_trajectory
from speedrunner.core.trajectory import ActorStep, CorruptTrajectory, Trajectory

from .fakes import PolicyModel
from .test_loop import Crash, make_config, make_runner, noisy_policy, strip_wall


def deep_tree(levels: int) -> dict:
    tree: dict = {"name": "leaf", "calls": [], "actions": []}
    for _ in range(levels):
        tree = {"name": "nest", "calls": [tree], "actions": []}
    return tree


def trajectory_with(tree: dict) -> Trajectory:
    traj = Trajectory(
        split="train", index=0, task="t", seed=1, knowledge_version=0, instruction="i"
    )
    traj.steps.append(
        ActorStep(
            index=0,
            call_id="c",
            observation="o",
            raw_text="r",
            reasoning=None,
            thought="",
            parsed_action="go()",
            skill_call=tree,
        )
    )
    return traj


def test_a_tree_nested_5000_levels_is_written_cut_and_read_back(tmp_path) -> None:
    """``dataclasses.asdict`` raised RecursionError from about 380 levels: the run could never go
    on."""
    path = save_trajectory(tmp_path, trajectory_with(deep_tree(5000)))
    loaded = load_trajectory(path).steps[0].skill_call
    depth = 0
    while isinstance(loaded, dict):
        loaded, depth = (
            loaded["calls"][0] if isinstance(loaded["calls"], list) else loaded["calls"],
            depth + 1,
        )
    assert loaded.startswith("[cut: nested deeper than") and 90 < depth < 210


def test_writing_keeps_every_field_as_asdict_did() -> None:
    import dataclasses

    traj = trajectory_with(
        {"name": "go", "calls": [], "actions": [{"action": "a", "text": "t", "done": False}]}
    )
    assert traj.to_json() == dataclasses.asdict(traj)


@pytest.mark.parametrize(
    "content",
    [
        b'{"split": "train", "ind',
        b"\xff\xfe not utf-8",
        b"[" * 100_000 + b"]" * 100_000,
        b'{"split": "train"}',
        b'{"steps": 3}',
        b"[]",
    ],
)
def test_every_kind_of_broken_file_is_a_corrupt_trajectory(tmp_path, content) -> None:
    path = tmp_path / "0000.json"
    path.write_bytes(content)
    with pytest.raises(CorruptTrajectory, match="0000.json"):
        load_trajectory(path)
    assert load_or_quarantine(path) is None
    assert not path.exists() and (tmp_path / "0000.json.corrupt").read_bytes() == content


def test_a_newer_files_extra_keys_are_ignored(tmp_path) -> None:
    path = save_trajectory(tmp_path, trajectory_with({"name": "go", "calls": [], "actions": []}))
    data = json.loads(path.read_text())
    data["from_a_newer_version"] = 1
    data["steps"][0]["also_new"] = 2
    path.write_text(json.dumps(data))
    assert load_trajectory(path).steps[0].parsed_action == "go()"


def test_resume_quarantines_a_corrupt_episode_and_replays_it(tmp_path, capsys) -> None:
    reference = tmp_path / "reference"
    reference.mkdir()
    make_runner(reference, PolicyModel(noisy_policy), make_config(parallel_episodes=1))[0].run()

    run_dir = tmp_path / "crashed"
    run_dir.mkdir()

    def crash_in_episode_5(messages, purpose, call_id):
        if call_id.startswith("train/0005/"):
            raise Crash(call_id)
        return noisy_policy(messages, purpose, call_id)

    # killed in the middle of the third batch: episode 4 is stored, 5 is not
    with pytest.raises(Crash):
        make_runner(run_dir, PolicyModel(crash_in_episode_5), make_config(parallel_episodes=1))[
            0
        ].run()
    stored = run_dir / "episodes" / "train" / "0004.json"
    assert stored.exists()
    stored.write_text('{"split": "train", "index": 4, "steps": [[[[')  # a disk fault tore it
    resumed = PolicyModel(noisy_policy)
    make_runner(run_dir, resumed, make_config(parallel_episodes=1))[0].run()

    assert (
        "0004.json" in capsys.readouterr().err
        and (run_dir / "episodes" / "train" / "0004.json.corrupt").exists()
    )
    for name in ("metrics.jsonl", "eval.jsonl"):  # no episode lost or counted twice
        assert strip_wall(read_jsonl(run_dir / name)) == strip_wall(read_jsonl(reference / name))
    assert any(c.startswith("train/0004/") for _, c, _ in resumed.calls)  # played again
    assert load_trajectory(stored).index == 4


def test_an_episode_file_beyond_the_size_bound_is_quarantined_unread(tmp_path, monkeypatch) -> None:
    """A huge file (a runaway writer, a planted file) was read whole, and JSON costs several times
    its size in memory. Past ``MAX_TRAJECTORY_BYTES`` it is a corrupt episode: moved aside, never
    parsed."""
    from speedrunner.core import episode_files

    path = save_trajectory(tmp_path, trajectory_with({"name": "go", "calls": [], "actions": []}))
    monkeypatch.setattr(episode_files, "MAX_TRAJECTORY_BYTES", path.stat().st_size - 1)
    monkeypatch.setattr(
        episode_files.json, "loads", lambda *a, **k: pytest.fail("the file was parsed")
    )
    with pytest.raises(
        CorruptTrajectory, match=r"0000\.json: \d+ bytes, more than an episode file may have"
    ):
        load_trajectory(path)
    assert load_or_quarantine(path) is None and (path.parent / "0000.json.corrupt").exists()


@pytest.mark.parametrize(
    "content",
    ["[" * 100_000 + "]" * 100_000, '{"format": ' * 50_000, "\x00" * 2_000_000],
    ids=["nested-array", "nested-object", "2-MB"],
)
def test_a_checkpoint_nested_too_deep_or_too_large_is_a_clear_error_not_a_traceback(
    tmp_path, content
) -> None:
    """``json`` raised RecursionError for a checkpoint nested thousands deep, which escaped as a
    traceback. Now every unreadable checkpoint is a ``CheckpointError`` naming the file and what
    to do."""
    from speedrunner.core.runtime.checkpoint import load_checkpoint
    from speedrunner.errors import CheckpointError

    (tmp_path / "checkpoint.json").write_text(content)
    with pytest.raises(CheckpointError) as caught:
        load_checkpoint(tmp_path, run_id="r0001", results_config_sha256="abc")
    message = str(caught.value)
    assert str(tmp_path / "checkpoint.json") in message and "is corrupt" in message
    assert "Start a new run, or restore the file from a backup" in message
