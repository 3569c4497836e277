"""Voyager's parts in-process: the critic's state rules (no LLM), the critic's JSON, skill
retrieval with both rankers (embeddings through the fake server), the task lists and
``nameV2`` versioning, and the config. The whole loop runs in tests/e2e/test_voyager.py."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from speedrunner.benchmarks.crafter.text import ACHIEVEMENT_ORDER
from speedrunner.errors import CheckpointError, ConfigError
from speedrunner.methods.voyager.config import VoyagerConfig
from speedrunner.methods.voyager.critic import (
    Verdict,
    achievement_for,
    clean_task,
    decide_from_state,
    parse_critic_answer,
)
from speedrunner.methods.voyager.retrieval import BM25Ranker, EmbeddingRanker, top_k
from speedrunner.methods.voyager.state import (
    SkillEntry,
    VoyagerState,
    load_state,
    refuse_world_per_iteration_runs,
    retired_name,
    save_state,
)
from speedrunner.testing.fake_llm_server import FakeLLMServer


def state(inventory=None, achievements=()) -> dict:
    return {"inventory": dict(inventory or {}), "achievements": list(achievements)}


# ------------------------------------------------------------------ critic (no LLM)
def test_an_achievement_task_is_decided_by_the_achievement_delta():
    start = state()
    won = decide_from_state(
        "Make a Wood Pickaxe.",
        start,
        state({"wood_pickaxe": 1}, ["make_wood_pickaxe"]),
        ACHIEVEMENT_ORDER,
    )
    assert won == Verdict(True, "", "achievement", "the achievement make_wood_pickaxe was unlocked")
    lost = decide_from_state(
        "make wood pickaxe", start, state({"wood": 2}, ["collect_wood"]), ACHIEVEMENT_ORDER
    )
    assert not lost.success and lost.decided_by == "achievement"
    assert "make_wood_pickaxe was not unlocked" in lost.critique and "wood +2" in lost.critique
    # Unlocked before the skill ran does not count.
    before = state({}, ["collect_wood"])
    assert not decide_from_state("collect wood", before, before, ACHIEVEMENT_ORDER).success


def test_an_achievement_unlocked_earlier_in_the_same_world_does_not_decide_a_later_task():
    """Tasks continue in one world: the achievement list already holds earlier tasks' unlocks."""
    before = state({"wood": 1}, ["collect_wood", "place_table"])
    again = decide_from_state(
        "collect wood",
        before,
        state({"wood": 2}, ["collect_wood", "place_table"]),
        ACHIEVEMENT_ORDER,
    )
    assert again is not None and again.success and again.decided_by == "inventory"
    assert not decide_from_state("collect wood", before, before, ACHIEVEMENT_ORDER).success
    # Nothing in the inventory shows a second table: the LLM critic judges.
    assert decide_from_state("place table", before, before, ACHIEVEMENT_ORDER) is None


def test_a_run_dir_from_when_every_iteration_had_a_fresh_world_is_refused(tmp_path):
    refuse_world_per_iteration_runs(tmp_path)  # a new run: nothing to refuse
    (tmp_path / "voyager" / "iterations" / "0000").mkdir(parents=True)
    (tmp_path / "voyager" / "iterations" / "0000" / "0000.json").write_text("{}")
    refuse_world_per_iteration_runs(tmp_path)  # today's layout: <world>/<k>.json
    (tmp_path / "voyager" / "iterations" / "0003.json").write_text("{}")
    with pytest.raises(
        CheckpointError, match="from before tasks continued in one world.*Start a new run"
    ):
        refuse_world_per_iteration_runs(tmp_path)


def test_an_item_count_task_is_decided_by_the_inventory_delta_and_a_partial_one_goes_to_the_llm():
    start = state({"wood": 1})
    assert decide_from_state("collect 3 wood", start, state({"wood": 4}), ACHIEVEMENT_ORDER).success
    assert (
        decide_from_state(
            "gather stones", state(), state({"stone": 2}), ACHIEVEMENT_ORDER
        ).decided_by
        == "inventory"
    )
    failed = decide_from_state("collect 3 wood", start, state({"wood": 1}), ACHIEVEMENT_ORDER)
    assert failed is not None and not failed.success and "No wood was gained" in failed.critique
    assert decide_from_state("collect 3 wood", start, state({"wood": 2}), ACHIEVEMENT_ORDER) is None
    assert (
        decide_from_state("explore the area", start, state({"wood": 9}), ACHIEVEMENT_ORDER) is None
    )


def test_task_phrasing_maps_to_achievements():
    assert achievement_for("Collect the wood!", ACHIEVEMENT_ORDER) == "collect_wood"
    assert achievement_for("defeat a zombie", ACHIEVEMENT_ORDER) == "defeat_zombie"
    assert achievement_for("find water", ACHIEVEMENT_ORDER) is None
    assert clean_task("  Make an Iron_Sword. ") == "make an iron sword"


def test_the_llm_critics_json_is_parsed_strictly():
    ok = parse_critic_answer('Sure: {"reasoning": "r", "success": true, "critique": ""} done')
    assert ok == Verdict(True, "", "llm", "r")
    assert parse_critic_answer("it worked") == "no JSON object in the answer"
    assert "true or false" in parse_critic_answer(
        '{"reasoning": "r", "success": "yes", "critique": ""}'
    )
    assert "does not parse" in parse_critic_answer('{"success": tru}')


# ------------------------------------------------------------------ retrieval
SKILLS = {
    "collect_wood": (
        "Walks to the nearest tree and strikes it until a piece of wood is in the inventory."
    ),
    "drink_water": "Finds the nearest water and drinks until the thirst is gone.",
    "place_table": "Collects enough wood, then puts a crafting table down in front of the player.",
    "defeat_zombie": "Faces a zombie and strikes it until it dies, keeping health up.",
    "sleep_at_night": "Goes to sleep when energy is low and wakes up when it is full.",
    "eat_cow": "Walks to a cow and hits it to eat it, restoring food.",
}


def test_bm25_returns_the_relevant_skill_and_k_is_capped_by_the_library():
    ranker = BM25Ranker()
    assert top_k(ranker, "drink water", SKILLS, 5)[0] == "drink_water"
    assert top_k(ranker, "put a crafting table down", SKILLS, 1) == ["place_table"]
    assert len(top_k(ranker, "anything", SKILLS, 5)) == 5
    assert top_k(ranker, "drink water", {"eat_cow": SKILLS["eat_cow"]}, 5) == [
        "eat_cow"
    ]  # k = min(#skills, 5)
    assert top_k(ranker, "drink water", {}, 5) == []


def test_embeddings_return_the_relevant_skill_and_are_paid_once(tmp_path, monkeypatch):
    monkeypatch.setenv("FAKE_EMBEDDING_KEY", "x")
    with FakeLLMServer() as server:

        def ranker() -> EmbeddingRanker:
            return EmbeddingRanker(
                model="fake-embedding",
                base_url=server.base_url,
                api_key_env="FAKE_EMBEDDING_KEY",
                timeout_s=10,
                price_per_million=0.02,
                store_dir=tmp_path,
            )

        first = ranker()
        assert top_k(first, "drink water", SKILLS, 5, charge_to="train/0003")[0] == "drink_water"
        assert top_k(first, "strike a zombie", SKILLS, 1, charge_to="train/0004") == [
            "defeat_zombie"
        ]
        paid = first.cost_for("train/0003")
        assert paid > 0 and first.cost_for("train/0004") < paid  # only the new query was paid for
        posts = [r for r in server.requests if r.method == "POST"]
        assert all(r.path.endswith("/embeddings") for r in posts)
        # The descriptions were embedded once; a resumed run reads every vector back.
        again = ranker()
        assert top_k(again, "drink water", SKILLS, 5, charge_to="train/0005")[0] == "drink_water"
        assert [r for r in server.requests if r.method == "POST"] == posts
        assert again.cost_for("train/0003") == paid and again.cost_for("train/0005") == 0
    rows = (tmp_path / "embeddings.jsonl").read_text().splitlines()
    assert len(rows) == len(SKILLS) + 2  # six descriptions and two queries


def test_embeddings_without_a_key_say_which_variable_to_set(tmp_path, monkeypatch):
    monkeypatch.delenv("NO_SUCH_KEY", raising=False)
    with pytest.raises(ConfigError, match=r"\$NO_SUCH_KEY"):
        EmbeddingRanker(
            model="m",
            base_url=None,
            api_key_env="NO_SUCH_KEY",
            timeout_s=1,
            price_per_million=None,
            store_dir=tmp_path,
        )


# ------------------------------------------------------------------ task lists and versions
def test_a_completed_task_leaves_the_failed_list_and_is_listed_once():
    s = VoyagerState(task="place table", attempts=4)
    s.fail("place table")
    s.fail("place table")
    assert s.failed == ["place table"] and s.task is None and s.attempts == 0
    s.complete("place table")
    s.complete("place table")
    assert s.completed == ["place table"] and s.failed == []
    s.fail("place table")  # a completed task is not failed later
    assert s.failed == []


def test_re_adding_a_name_keeps_the_old_versions_as_v2_v3(tmp_path):
    s = VoyagerState()
    s.add_skill(
        "collect_wood", SkillEntry(description="first", task="collect wood", iteration=1), None
    )
    taken = {"collect_wood"}
    v2 = retired_name("collect_wood", taken)
    s.add_skill(
        "collect_wood", SkillEntry(description="second", task="collect wood", iteration=5), v2
    )
    v3 = retired_name("collect_wood", taken | {v2})
    s.add_skill(
        "collect_wood", SkillEntry(description="third", task="collect wood", iteration=9), v3
    )
    assert (v2, v3) == ("collect_woodV2", "collect_woodV3")
    assert {n: e.description for n, e in s.skills.items()} == {
        "collect_woodV2": "first",
        "collect_woodV3": "second",
        "collect_wood": "third",
    }
    assert s.active() == {"collect_wood": "third"}  # retrieval sees only the newest
    save_state(tmp_path, 3, s)
    assert load_state(tmp_path, 3) == s


def test_a_missing_embedding_key_stops_the_run_before_anything_is_written(
    tmp_path, monkeypatch, capsys
):
    from speedrunner.train_cli import main

    monkeypatch.delenv("NO_SUCH_KEY", raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", "x")
    config = tmp_path / "v.yaml"
    config.write_text(
        "method: {name: voyager, embedding: {name: e, api_key_env: NO_SUCH_KEY}}\n"
        "benchmark: {name: crafter}\nrun: {output_root: " + str(tmp_path / "runs") + "}\n"
    )
    code = main(
        "crafter",
        "speedrunner.benchmarks.crafter.train_voyager",
        ["--config_file", str(config), "--skip_preflight"],
    )
    assert code == 2 and "$NO_SUCH_KEY" in capsys.readouterr().err
    assert not (tmp_path / "runs").exists()


def test_config_refuses_unknown_warmup_parts():
    assert VoyagerConfig().curriculum_warmup["status"] == 2
    with pytest.raises(ValidationError, match="unknown curriculum_warmup parts"):
        VoyagerConfig(curriculum_warmup={"biome": 1})


def test_the_action_agent_is_told_the_caps_in_force_not_a_guess(tmp_path):
    """Voyager's skill writer reads the per-function, library and skill-call caps, in the
    codebook inducers' words; the default action cap is the world's remaining budget."""
    from speedrunner.benchmarks.crafter.text import ACTION_NAMES
    from speedrunner.core.method import MethodContext, SkillSupport
    from speedrunner.core.trajectory import ReplayResult
    from speedrunner.methods.voyager.voyager import VoyagerMethod, VoyagerWorld

    support = SkillSupport(
        api_module="speedrunner.benchmarks.crafter.skill_api",
        api_names=(),
        primitives=tuple(ACTION_NAMES),
        open_skills=lambda skills: None,
        smoke_test=lambda source: None,
        replay=lambda *a: ReplayResult(success=True),
        sandbox_tier="test-double",
    )

    def system(tmp_path, **config) -> str:
        voyager = VoyagerMethod(
            VoyagerConfig(**config),
            MethodContext(run_dir=tmp_path, inducer=None, benchmark="crafter", skills=support),
            VoyagerWorld(ACHIEVEMENT_ORDER, "collect wood", "play"),
        )
        return voyager._action_system()

    default = system(tmp_path / "default")
    assert (
        "- Caps in force: each function at most 60 lines and 3000 characters, a public docstring "
        "at most 800 characters; the whole library: no cap on functions, no cap on characters."
    ) in default
    assert (
        "- One skill call may take up to the world's remaining budget of env actions; it is "
        "stopped after 60 s plus 0.25 s per action it may take (wall-clock time)."
    ) in default
    assert "a few hundred actions" not in default
    capped = system(tmp_path / "capped", max_skill_actions=300, skill_timeout_s=90.0)
    assert (
        "- One skill call takes at most 300 primitive actions; at the cap it stops cleanly and the "
        "critic judges what it did; it is stopped after 90 s of wall-clock time."
    ) in capped


def test_embedding_requests_are_charged_to_the_runs_spending_cap(tmp_path, monkeypatch):
    """The ranker's paid embedding calls go through the cap and cache namespace of the model
    the run built, never around them."""
    from speedrunner.core.config.schema import ModelConfig, Prices
    from speedrunner.core.llm.build import build_model
    from speedrunner.core.llm.spend_cap import SpendCap
    from speedrunner.core.method import MethodContext
    from speedrunner.methods.voyager.voyager import VoyagerMethod, VoyagerWorld

    monkeypatch.setenv("FAKE_EMBEDDING_KEY", "x")
    cap = SpendCap(1.0)
    model = build_model(
        ModelConfig(
            provider="vllm",
            name="m",
            base_url="http://127.0.0.1:9/v1",
            prices=Prices(input=1.0, cached_input=0.1, output=2.0),
        ),
        namespace="run-7",
        cache_path=tmp_path / "cache.sqlite",
        calls_log_path=tmp_path / "calls.jsonl",
        spend_cap=cap,
    )
    config = VoyagerConfig(embedding={"name": "e", "api_key_env": "FAKE_EMBEDDING_KEY"})
    from speedrunner.benchmarks.crafter.text import ACTION_NAMES
    from speedrunner.core.method import SkillSupport
    from speedrunner.core.trajectory import ReplayResult

    support = SkillSupport(
        api_module="speedrunner.benchmarks.crafter.skill_api",
        api_names=(),
        primitives=tuple(ACTION_NAMES),
        open_skills=lambda skills: None,
        smoke_test=lambda source: None,
        replay=lambda *a: ReplayResult(success=True),
        sandbox_tier="test-double",
    )
    context = MethodContext(run_dir=tmp_path, inducer=model, benchmark="crafter", skills=support)
    voyager = VoyagerMethod(
        config, context, VoyagerWorld(ACHIEVEMENT_ORDER, "collect wood", "play")
    )
    ranker = voyager._ranker()
    assert isinstance(ranker, EmbeddingRanker)
    assert ranker.spend_cap is cap and ranker.namespace == "run-7"
