"""Generations on disk: byte-exact round trips, never rewritten, never half visible."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from speedrunner.core.codebook import (
    EMPTY_SOURCE,
    AddFunction,
    CallStats,
    Candidate,
    Codebook,
    EditFunction,
    GenerationMeta,
    store,
    validate_source,
)
from speedrunner.core.runtime.skill_call import SkillCall, Skills, parse_skill_call
from speedrunner.errors import CheckpointError, InvalidCodebookError, WouldOverwriteError

from .helpers import API, GO_TO, IMPORT_FIND, RULES, STEP, build

UNICODE_GO_TO = GO_TO.replace("True when next to it.", "True when next to it → «arrivé»;  ")


def first(run_dir: Path) -> Codebook:
    Codebook.start(run_dir)
    return build(AddFunction(IMPORT_FIND + "\n" + STEP), AddFunction(UNICODE_GO_TO)).commit(run_dir)


def test_generation_zero_is_an_empty_valid_module_stored_on_start(tmp_path: Path) -> None:
    cb = Codebook.start(tmp_path)
    assert (
        cb.source == EMPTY_SOURCE and cb.functions == () and validate_source(cb.source, RULES) == []
    )
    assert (tmp_path / "codebook" / "gen_0.py").read_bytes() == EMPTY_SOURCE.encode()
    assert cb.render_api() == "" and cb.signatures() == {}
    assert Codebook.start(tmp_path) == cb  # a resumed run starts again: nothing changes


def test_a_generation_loads_byte_exact(tmp_path: Path) -> None:
    stored = first(tmp_path)
    loaded = Codebook.load(tmp_path, 1)
    assert (
        loaded == stored
        and loaded.source.encode() == (tmp_path / "codebook" / "gen_1.py").read_bytes()
    )
    assert "«arrivé»;  " in loaded.source  # non-ASCII and trailing spaces survive
    assert loaded.meta.functions[1].docstring.endswith("→ «arrivé»;")
    on_disk = json.loads((tmp_path / "codebook" / "gen_1.json").read_text("utf-8"))
    assert on_disk["source_sha256"] == store.sha256(loaded.source)
    assert [f["name"] for f in on_disk["functions"]] == ["_step", "go_to"]
    assert on_disk["functions"][1]["author"] == {
        "method": "speedrunner",
        "batch_index": 3,
        "scripted": False,
    }
    assert store.generations(tmp_path) == [0, 1]


def test_an_existing_generation_is_never_rewritten(tmp_path: Path) -> None:
    stored = first(tmp_path)
    before = {p.name: p.read_bytes() for p in (tmp_path / "codebook").iterdir()}
    other = build(
        AddFunction(IMPORT_FIND + "\n" + STEP.replace("_step", "_other"))
    )  # generation 1 too
    with pytest.raises(
        WouldOverwriteError,
        match="codebook generation 1 already exists .* never rewritten: write "
        "generation 2 from the current one instead",
    ):
        other.commit(tmp_path)
    assert {p.name: p.read_bytes() for p in (tmp_path / "codebook").iterdir()} == before
    again = build(AddFunction(IMPORT_FIND + "\n" + STEP), AddFunction(UNICODE_GO_TO))
    assert again.commit(tmp_path) == stored  # the same generation again (a re-run sleep) is a no-op


def test_a_source_without_its_metadata_is_not_a_generation(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    Codebook.start(tmp_path)
    candidate = build(AddFunction(IMPORT_FIND + "\n" + STEP))
    real_write = store.atomic_write_bytes

    def killed_before_json(path, data):
        if str(path).endswith(".json"):
            raise KeyboardInterrupt  # the process dies between the two files
        real_write(path, data)

    monkeypatch.setattr(store, "atomic_write_bytes", killed_before_json)
    with pytest.raises(KeyboardInterrupt):
        candidate.commit(tmp_path)
    assert (tmp_path / "codebook" / "gen_1.py").exists() and not (
        tmp_path / "codebook" / "gen_1.json"
    ).exists()
    assert not store.generation_exists(tmp_path, 1) and store.generations(tmp_path) == [0]
    with pytest.raises(
        CheckpointError, match="generation 1 is incomplete: .*gen_1.py has no gen_1.json"
    ):
        Codebook.load(tmp_path, 1)
    monkeypatch.setattr(store, "atomic_write_bytes", real_write)
    different = build(AddFunction(IMPORT_FIND + "\n" + STEP.replace("go forward", "turn left")))
    assert different.commit(tmp_path).source == different.source  # the orphan is replaced, not kept
    assert store.generations(tmp_path) == [0, 1]


def test_a_generation_changed_by_hand_is_refused_on_load(tmp_path: Path) -> None:
    first(tmp_path)
    path = tmp_path / "codebook" / "gen_1.py"
    path.write_bytes(path.read_bytes().replace(b"go forward", b"turn right"))
    with pytest.raises(CheckpointError, match="gen_1.py does not match its metadata gen_1.json"):
        Codebook.load(tmp_path, 1)
    (tmp_path / "codebook" / "gen_0.json").write_text("{not json", "utf-8")
    with pytest.raises(CheckpointError, match="codebook metadata .*gen_0.json is corrupt"):
        Codebook.load(tmp_path, 0)
    with pytest.raises(CheckpointError, match="codebook generation 5 is missing"):
        Codebook.load(tmp_path, 5)


def test_a_candidate_needs_its_parent_on_disk(tmp_path: Path) -> None:
    with pytest.raises(CheckpointError, match="based on generation 0, which is not stored"):
        build(AddFunction(IMPORT_FIND + "\n" + STEP)).commit(tmp_path)
    assert store.generations(tmp_path) == []


def test_code_that_fails_validation_can_never_be_written(tmp_path: Path) -> None:
    parent = Codebook.start(tmp_path)
    source = EMPTY_SOURCE + "\nimport os\n"
    meta = GenerationMeta(generation=1, parent=0, author=None, source_sha256=store.sha256(source))
    with pytest.raises(
        InvalidCodebookError,
        match=r"generation 1 fails validation and is not written:\n"
        r"  - module line 3 \[import\]: module 'os' may not be imported",
    ):
        Candidate(parent, source, meta, RULES).commit(tmp_path)
    assert not (tmp_path / "codebook" / "gen_1.py").exists()


def test_the_actor_and_the_sandbox_get_skills(tmp_path: Path) -> None:
    stored = first(tmp_path)
    skills = Codebook.load(tmp_path, 1).to_skills(API)
    assert skills == Skills(
        1, stored.source, {"go_to": "go_to(name: str, steps: int = 10) -> bool"}, API
    )
    assert parse_skill_call('go_to("red ball", steps=3)', skills.signatures) == SkillCall(
        "go_to", ["red ball"], {"steps": 3}
    )
    assert (
        parse_skill_call('_step("red ball")', skills.signatures)
        == "'_step' is not a skill (skills: go_to)"
    )


def test_render_api_is_sorted_public_and_the_same_after_a_reload(tmp_path: Path) -> None:
    Codebook.start(tmp_path)
    zig = (
        'def zigzag(env, times: int = 2):\n    """Zig, then zag.\n\n'
        '    Repeats ``times`` times.\n    """\n    return times'
    )
    stored = build(
        AddFunction(zig), AddFunction(IMPORT_FIND + "\n" + STEP), AddFunction(GO_TO)
    ).commit(tmp_path)
    expected = (
        "go_to(name: str, steps: int = 10) -> bool\n"
        "    Walk to the nearest visible ``name``; True when next to it.\n\n"
        "zigzag(times: int = 2)\n"
        "    Zig, then zag.\n\n"
        "    Repeats ``times`` times."
    )
    assert stored.render_api() == expected == Codebook.load(tmp_path, 1).render_api()
    assert list(stored.signatures()) == ["go_to", "zigzag"]


def test_metadata_carries_across_stored_generations(tmp_path: Path) -> None:
    gen1 = first(tmp_path).with_usage({"go_to": CallStats(calls=2, successes=1, errors=1)})
    gen2 = build(EditFunction("_step", STEP.replace("go forward", "turn left")), base=gen1).commit(
        tmp_path
    )
    go_to, step = gen2.function("go_to"), gen2.function("_step")
    assert (
        go_to.stats == CallStats(calls=2, successes=1, errors=1) and go_to.revised_generation == 1
    )
    assert step.revised_generation == 2 and step.first_generation == 1
    assert (
        Codebook.load(tmp_path, 1).function("go_to").stats == CallStats()
    )  # generation 1 is unchanged on disk
