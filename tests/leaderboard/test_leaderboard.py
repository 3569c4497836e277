"""`speedrunner leaderboard append | remove | show`: rows from speedrun results, refusals that
leave the board untouched, a hand-broken file reported by line and never rewritten."""

import json
import os
import random
from pathlib import Path

import pytest

from speedrunner.cli import main
from speedrunner.core.rundir import RUN_FORMAT
from speedrunner.leaderboard.board import COLUMNS, parse_board

REPO = Path(__file__).resolve().parents[2]


def result(
    results: Path,
    result_id: str,
    *,
    rollout: int | None = 40,
    cost: float | None = 0.5,
    benchmark: str = "babyai",
    scripted: bool = False,
    status: str = "finished",
    final_progress: float | None = 0.9,
    mtime: int | None = None,
    provider: str | None = None,
    model: str = "gpt-5.4-mini",
) -> Path:
    """A speedrun result as the tracker writes it (fields as in core/runtime/speedrun.py)."""
    record = {
        "format": "speedrunner-speedrun/2",
        "run_format": RUN_FORMAT,
        "result_id": result_id,
        "run_id": "r0001",
        "status": status,
        "benchmark": benchmark,
        "task_set": "seq",
        "method": "opo",
        "model": model,
        "inducer_model": "gpt-5.4-mini",
        "seed": 0,
        "scripted": scripted,
        "metric": "success",
        "target": 0.9,
        "window": None,
        "reached": rollout is not None,
        "rollout": rollout,
        "value": 0.93 if rollout else None,
        "train_cost_usd": cost if rollout else None,
        "train_output_tokens": 12345 if rollout else None,
        "train_llm_calls": 678 if rollout else None,
        "elapsed_s": 321.06 if rollout else None,
        "train_episode_and_sleep_time_s": 900.0 if rollout else None,
        "final_eval_rollout": 200,
        "final_success": 0.95,
        "final_progress": final_progress,
        "results_config_sha256": "ab" * 32,
        "config_file_sha256": "cd" * 32,
        "git_commit": "0" * 40,
        "git_dirty": False,
        "started_at": "2026-12-01T10:00:00+00:00",
        "written_at": "2026-12-02T11:00:00+00:00",
    }
    if provider is not None:  # records written before the provider was kept have none
        record["provider"] = provider
    results.mkdir(parents=True, exist_ok=True)
    path = results / f"{result_id}.json"
    path.write_text(json.dumps(record))
    if mtime is not None:
        os.utime(path, (mtime, mtime))
    return path


def lb(*args: str) -> int:
    return main(["leaderboard", *args])


def table(board: Path) -> list[dict[str, str]]:
    """The board's rows as column -> cell, read independently of the module's parser."""
    lines = [ln for ln in board.read_text().splitlines() if ln.startswith("|")]
    assert [c.strip() for c in lines[0].strip("|").split("|")] == list(COLUMNS)
    return [
        dict(zip(COLUMNS, (c.strip() for c in ln.strip("|").split("|")), strict=True))
        for ln in lines[2:]
    ]


@pytest.fixture
def board(tmp_path):
    return tmp_path / "LEADERBOARD.md"


def test_append_with_no_argument_takes_the_newest_result(tmp_path, board, capsys):
    results = tmp_path / "results"
    result(results, "older", rollout=30, mtime=1_000)
    result(results, "newest", rollout=50, mtime=2_000)
    assert lb("append", "--results", str(results), "--board", str(board)) == 0
    (row,) = table(board)
    assert row == {
        "benchmark": "babyai",
        "task set": "seq",
        "method": "opo",
        "model": "gpt-5.4-mini",
        "seed": "0",
        "target": "success >= 0.9",
        "rollouts to target": "50",
        "cost to target": "$0.5000",
        "tokens to target": "12345",
        "LLM calls to target": "678",
        "wall time to target": "321.1 s",
        "final progress": "0.900",
        "run id": "newest",
        "date": "2026-12-02",
    }
    assert "added newest" in capsys.readouterr().out
    assert board.read_text().startswith("# Leaderboard\n\n> **Experimental.**")


def test_no_results_yet_is_a_clear_error_and_writes_nothing(tmp_path, board, capsys):
    assert lb("append", "--results", str(tmp_path / "none"), "--board", str(board)) == 2
    assert "no results in" in capsys.readouterr().err and not board.exists()
    (tmp_path / "empty").mkdir()
    assert lb("append", "--results", str(tmp_path / "empty"), "--board", str(board)) == 2
    assert not board.exists()


def test_the_default_results_folder_is_the_one_the_tracker_writes(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("SPEEDRUNNER_RESULTS_DIR", raising=False)
    monkeypatch.chdir(tmp_path)
    result(tmp_path / "runs" / "speedrun", "mine")
    assert lb("append") == 0
    assert [r["run id"] for r in table(tmp_path / "LEADERBOARD.md")] == ["mine"]


def test_a_duplicate_is_refused_and_the_board_is_unchanged(tmp_path, board, capsys):
    path = result(tmp_path / "results", "dup")
    assert lb("append", str(path), "--board", str(board)) == 0
    before = board.read_bytes()
    assert lb("append", str(path), "--board", str(board)) == 2
    err = capsys.readouterr().err
    assert "dup is already on" in err and "line 14" in err and "leaderboard remove dup" in err
    assert board.read_bytes() == before
    other = result(tmp_path / "results", "new-one")  # one refusal refuses the whole command
    assert lb("append", str(other), str(path), "--board", str(board)) == 2
    assert board.read_bytes() == before


def test_the_same_model_name_on_another_provider_is_shown_as_such(tmp_path, board):
    """gpt-5.4-mini served by vLLM is not OpenAI's gpt-5.4-mini: its row says "via vllm", the
    OpenAI one and an older record without a provider show the name alone, and the board
    parses back."""
    results = tmp_path / "results"
    for rid, provider in (("on-openai", "openai"), ("on-vllm", "vllm"), ("older", None)):
        result(results, rid, provider=provider)
        assert lb("append", str(results / f"{rid}.json"), "--board", str(board)) == 0
    models = {r["run id"]: r["model"] for r in table(board)}
    assert models == {
        "on-openai": "gpt-5.4-mini",
        "on-vllm": "gpt-5.4-mini via vllm",
        "older": "gpt-5.4-mini",
    }
    assert {r.model for r in parse_board(board.read_text(), board).rows} == {
        "gpt-5.4-mini",
        "gpt-5.4-mini via vllm",
    }


def test_a_scripted_result_needs_allow_scripted_and_is_marked(tmp_path, board, capsys):
    path = result(tmp_path / "results", "fake", scripted=True)
    assert lb("append", str(path), "--board", str(board)) == 2
    assert "--allow-scripted" in capsys.readouterr().err and not board.exists()
    assert lb("append", str(path), "--allow-scripted", "--board", str(board)) == 0
    assert table(board)[0]["model"] == "gpt-5.4-mini (SCRIPTED)"


@pytest.mark.parametrize("policy", ["random", "expert"])
def test_a_result_of_the_fake_llm_needs_allow_fake(tmp_path, board, capsys, policy):
    from speedrunner.testing.realistic import POLICIES

    fake_name = POLICIES[policy]  # the model name `speedrunner fake-llm --policy POLICY` serves
    path = result(tmp_path / "results", "faked", model=fake_name, provider="vllm")
    assert lb("append", str(path), "--board", str(board)) == 2
    err = capsys.readouterr().err
    assert "fake LLM" in err and "--allow-fake" in err and not board.exists()
    assert lb("append", str(path), "--allow-fake", "--board", str(board)) == 0
    assert table(board)[0]["model"].startswith(fake_name)


def test_remove_takes_the_board_column_or_the_short_run_id_and_says_which_it_wants(
    tmp_path, board, capsys
):
    ids = [
        "babyai-opo-gpt-seq-seed0-r0001-one",
        "babyai-opo-gpt-seq-seed1-r0002-two",
        "babyai-react-gpt-seq-seed1-r0002-three",
    ]
    lb("append", *(str(result(tmp_path / "results", i)) for i in ids), "--board", str(board))
    capsys.readouterr()
    assert lb("remove", "r0002", "--board", str(board)) == 2  # two rows have it: refused, named
    err = capsys.readouterr().err
    assert ids[1] in err and ids[2] in err and "full id" in err
    assert lb("remove", "r0009", "--board", str(board)) == 2
    err = capsys.readouterr().err
    assert "'r0009' is not on" in err and "`run id` column" in err and "r0001" in err
    assert lb("remove", "r0001", ids[2], "--board", str(board)) == 0
    assert [r["run id"] for r in table(board)] == [ids[1]]


def test_results_still_running_unreadable_or_from_an_older_version_are_refused(
    tmp_path, board, capsys
):
    results = tmp_path / "results"
    cases = {
        result(results, "running", status="running"): "still in progress",
        results / "garbage.json": "not readable JSON",
        results / "old.json": "no result_id",
        results / "draft.json": "no run-directory format version (an unreleased draft)",
        tmp_path / "missing.json": "does not exist",
        tmp_path: "has no speedrun.json",
    }
    (results / "garbage.json").write_text("{not json")
    (results / "old.json").write_text(
        json.dumps({"metric": "success", "target": 0.9, "reached": False})
    )
    draft = json.loads(result(results, "draft").read_text())
    (results / "draft.json").write_text(
        json.dumps({k: v for k, v in draft.items() if k != "run_format"})
    )
    for path, message in cases.items():
        assert lb("append", str(path), "--board", str(board)) == 2
        assert message in capsys.readouterr().err
    assert not board.exists()


def test_a_run_directory_is_read_through_its_speedrun_json(tmp_path, board):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    result(tmp_path / "results", "from-dir").rename(run_dir / "speedrun.json")
    assert lb("append", str(run_dir), "--board", str(board)) == 0
    assert table(board)[0]["run id"] == "from-dir"


def test_rows_are_ranked_and_not_reached_rows_come_last(tmp_path, board):
    results = tmp_path / "results"
    paths = [
        result(results, "slow", rollout=150),
        result(results, "fast-dear", rollout=20, cost=2.0),
        result(results, "never", rollout=None, final_progress=0.4),
        result(results, "fast-cheap", rollout=20, cost=0.1),
        result(results, "never-but-close", rollout=None, final_progress=0.8),
        result(results, "crafter-run", rollout=90, benchmark="crafter"),
    ]
    assert lb("append", *map(str, paths), "--board", str(board)) == 0
    rows = table(board)
    assert [r["run id"] for r in rows] == [
        "fast-cheap",
        "fast-dear",
        "slow",
        "crafter-run",
        "never-but-close",
        "never",
    ]
    assert [r["rollouts to target"] for r in rows[-2:]] == ["not reached"] * 2
    assert rows[-1]["cost to target"] == "-" and rows[-1]["final progress"] == "0.400"


def test_any_sequence_of_edits_leaves_the_same_sorted_parseable_board(tmp_path):
    results = tmp_path / "results"
    ids = [f"run{i}" for i in range(6)]
    paths = {
        i: result(results, i, rollout=None if n % 3 == 0 else 10 * (6 - n), cost=0.01 * n)
        for n, i in enumerate(ids)
    }
    reference = tmp_path / "reference.md"
    assert lb("append", *map(str, paths.values()), "--board", str(reference)) == 0
    for seed in range(3):
        board = tmp_path / f"b{seed}.md"
        rng = random.Random(seed)
        order = rng.sample(ids, len(ids))
        for i in order:  # one at a time, in a random order
            assert lb("append", str(paths[i]), "--board", str(board)) == 0
        gone = rng.sample(ids, 2)
        assert lb("remove", *gone, "--board", str(board)) == 0
        for i in gone:  # and back again
            assert lb("append", str(paths[i]), "--board", str(board)) == 0
        assert board.read_text() == reference.read_text()
    parsed = parse_board(reference.read_text(), reference)
    assert {r.run_id for r in parsed.rows} == set(ids)


def test_remove_dry_run_shows_and_changes_nothing_then_remove_removes(tmp_path, board, capsys):
    paths = [result(tmp_path / "results", i) for i in ("keep", "drop")]
    lb("append", *map(str, paths), "--board", str(board))
    before = board.read_bytes()
    capsys.readouterr()
    assert lb("remove", "drop", "--dry-run", "--board", str(board)) == 0
    out = capsys.readouterr().out
    assert "would remove 1 row" in out and "| drop |" in out and "| keep |" not in out
    assert board.read_bytes() == before
    assert lb("remove", "drop", "nope", "--board", str(board)) == 2  # all or nothing
    assert "'nope'" in capsys.readouterr().err and board.read_bytes() == before
    assert lb("remove", "drop", "--board", str(board)) == 0
    assert [r["run id"] for r in table(board)] == ["keep"]


def test_show_sorts_by_a_column_and_filters_by_benchmark(tmp_path, board, capsys):
    results = tmp_path / "results"
    paths = [
        result(results, "a", rollout=20, cost=0.9),
        result(results, "b", rollout=40, cost=0.2),
        result(results, "c", rollout=None),
        result(results, "d", rollout=30, benchmark="crafter"),
    ]
    lb("append", *map(str, paths), "--board", str(board))
    capsys.readouterr()

    def shown(*args):
        assert lb("show", "--board", str(board), *args) == 0
        return [
            ln.split("|")[13].strip()
            for ln in capsys.readouterr().out.splitlines()[2:]
            if ln.startswith("|")
        ]

    assert shown() == ["a", "b", "d", "c"]
    assert shown("--sort", "cost") == ["b", "d", "a", "c"]  # not-reached rows stay below
    assert shown("--sort", "rollouts_to_target", "--benchmark", "babyai") == ["a", "b", "c"]
    assert lb("show", "--board", str(board), "--sort", "cost to targt") == 2
    assert "did you mean 'cost to target'" in capsys.readouterr().err


def test_show_says_when_the_board_is_empty(tmp_path, board, capsys):
    board.write_text((REPO / "LEADERBOARD.md").read_text())
    assert lb("show", "--board", str(board)) == 0
    assert "has no results yet" in capsys.readouterr().out
    assert lb("show", "--board", str(tmp_path / "nowhere.md")) == 2


BREAKS = {
    "a cell too few": (lambda ln: ln.replace(" | 2026-12-02 |", " |"), "13 cells, expected 14"),
    "a word for a number": (
        lambda ln: ln.replace("| 12345 |", "| lots |"),
        "'tokens to target' holds 'lots'",
    ),
    "a bad date": (lambda ln: ln.replace("2026-12-02", "yesterday"), "'date' holds 'yesterday'"),
}


@pytest.mark.parametrize("how", sorted(BREAKS))
def test_a_hand_broken_row_is_reported_by_line_and_never_rewritten(tmp_path, board, capsys, how):
    paths = [
        result(tmp_path / "results", i, rollout=10 * n) for n, i in enumerate(("x", "y", "z"), 1)
    ]
    lb("append", *map(str, paths[:2]), "--board", str(board))
    lines = board.read_text().splitlines()
    break_line, message = BREAKS[how]
    lines[14] = break_line(lines[14])  # the second row, line 15
    board.write_text("\n".join(lines) + "\n")
    broken = board.read_bytes()
    capsys.readouterr()
    for args in (["append", str(paths[2])], ["remove", "x"], ["show"]):
        assert lb(*args, "--board", str(board)) == 2
        err = capsys.readouterr().err
        assert f"{board} line 15" in err and message in err, err
        assert board.read_bytes() == broken


def test_a_split_table_or_a_changed_header_is_reported_and_never_rewritten(tmp_path, board, capsys):
    paths = [result(tmp_path / "results", i) for i in ("x", "y", "z")]
    lb("append", *map(str, paths[:2]), "--board", str(board))
    good = board.read_text().splitlines()
    for lines, where in (
        (good[:14] + [""] + good[14:], "line 16"),  # a blank line inside
        ([*good[:11], good[11].replace("| seed |", "| seeds |"), *good[12:]], "line 12"),
    ):
        board.write_text("\n".join(lines) + "\n")
        broken = board.read_bytes()
        assert lb("append", str(paths[2]), "--board", str(board)) == 2
        assert where in capsys.readouterr().err
        assert board.read_bytes() == broken


def test_hand_written_text_around_the_table_is_kept(tmp_path, board):
    paths = [result(tmp_path / "results", i) for i in ("x", "y")]
    lb("append", str(paths[0]), "--board", str(board))
    text = (
        board.read_text().replace("# Leaderboard\n", "# Leaderboard\n\nOur lab's note.\n")
        + "\nFootnote.\n"
    )
    board.write_text(text)
    assert lb("append", str(paths[1]), "--board", str(board)) == 0
    after = board.read_text()
    assert "Our lab's note." in after and after.endswith("\nFootnote.\n")
    assert [r["run id"] for r in table(board)] == ["x", "y"]


def test_the_committed_board_is_empty_parseable_and_says_it_is_experimental():
    text = (REPO / "LEADERBOARD.md").read_text()
    assert text.startswith("# Leaderboard\n\n> **Experimental.**")
    assert parse_board(text, REPO / "LEADERBOARD.md").rows == []
    assert "| " + " | ".join(COLUMNS) + " |" in text.splitlines()


def test_an_append_waits_for_another_edit_and_keeps_its_row(tmp_path, board):
    """Two edits at once: the second reads the board only after the first wrote it."""
    import threading

    from speedrunner.leaderboard.board import Row, editing, read_board, write_board
    from speedrunner.leaderboard.commands import load_result

    first, second = result(tmp_path / "results", "first"), result(tmp_path / "results", "second")
    codes = []
    with editing(board):
        waiting = threading.Thread(
            target=lambda: codes.append(lb("append", str(second), "--board", str(board)))
        )
        waiting.start()
        waiting.join(0.3)
        assert waiting.is_alive() and not board.exists()  # it waits for the lock
        edited = read_board(board)  # meanwhile this edit adds a row
        edited.rows.append(Row.from_record(load_result(first).record))
        write_board(edited)
    waiting.join(10)
    assert codes == [0]
    assert [r["run id"] for r in table(board)] == ["first", "second"]
