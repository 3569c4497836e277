"""Voyager on Crafter end to end, through its own entry point and the fake LLM server.

The fake (``voyager_fakes.py``) drives curriculum -> action agent -> sandboxed skill ->
critic -> library -> retrieval over 8 iterations in 2 worlds (one world per rollout, tasks
continuing in it; a batch of one world each); the run directory must hold
the same files as every method's (metrics, eval, summary, speedrun, calls, codebook
generations, episodes) plus Voyager's state and per-iteration records.
"""

from __future__ import annotations

import collections
import json
import os
import shutil
import signal
import sys
import threading
from pathlib import Path

import pytest

from speedrunner.core.reporting import build_report
from speedrunner.testing.fake_llm_server import FakeLLMServer, Reply

from . import prewarmed
from .harness import REPO, body_key, clean_env, rows, run, start_server
from .voyager_fakes import DESCRIPTION, CappedVoyagerFakeLLM, VoyagerFakeLLM

pytestmark = pytest.mark.slow
ROLLOUTS = 2  # worlds
PER_WORLD = 4  # iterations in each
ITERATIONS = ROLLOUTS * PER_WORLD
EMBEDDING_KEY = "FAKE_EMBEDDING_KEY"


def voyager_cmd(run_dir: Path, url: str, *extra: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "speedrunner.benchmarks.crafter.train_voyager",
        "--config_file",
        str(REPO / "configs" / "crafter" / "voyager_crafter.yaml"),
        "--run_dir",
        str(run_dir),
        "--set",
        "model.provider=vllm",
        "--set",
        f"model.base_url={url}",
        "--set",
        "model.name=fake-model",
        "--set",
        "model.prices={input: 1.0, cached_input: 0.1, output: 2.0}",
        "--set",
        f"run.rollouts={ROLLOUTS}",
        "--set",
        "run.sleep_every=1",
        "--set",
        "run.eval_every=1",
        "--set",
        "run.eval_episodes=2",
        "--set",
        "run.parallel_episodes=2",
        "--set",
        "benchmark.max_env_actions=160",
        "--set",
        "benchmark.max_llm_calls=12",
        "--set",
        "benchmark.area=[24, 24]",  # a small world: generating one takes 0.3 s, not 2 s
        "--set",
        "method.max_task_attempts=2",
        "--set",
        "method.max_skill_actions=40",
        "--set",
        f"method.max_iterations_per_world={PER_WORLD}",
        "--set",
        f"method.embedding={{name: fake-embedding, base_url: '{url}', api_key_env: "
        f"{EMBEDDING_KEY}, prices: {{input: 500.0, cached_input: 0.0, output: 0.0}}}}",
        *extra,
    ]


def env() -> dict[str, str]:
    return {**clean_env(), EMBEDDING_KEY: "x"}


def play(run_dir: Path, fake, *extra: str) -> tuple[Path, FakeLLMServer]:
    server = start_server(fake)
    try:
        proc = run(voyager_cmd(run_dir, server.base_url, *extra), timeout=600, env=env())
    finally:
        server.stop()
    assert proc.returncode == 0, proc.stderr[-3000:]
    return run_dir, server


def iteration(run_dir: Path, i: int) -> dict:
    """The record of run-wide iteration ``i``
    (iteration ``i % PER_WORLD`` of world ``i // PER_WORLD``)."""
    world, k = divmod(i, PER_WORLD)
    return json.loads(
        (run_dir / "voyager" / "iterations" / f"{world:04d}" / f"{k:04d}.json").read_text()
    )


def asked(server: FakeLLMServer, marker: str) -> list[dict]:
    return [
        b
        for b in server.chat_requests()
        if "messages" in b and marker in b["messages"][0]["content"]
    ]


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> tuple[Path, FakeLLMServer]:
    """One uninterrupted run, shared: the behaviour test reads it,
    the kill test compares with it."""
    return play(tmp_path_factory.mktemp("voyager") / "run", VoyagerFakeLLM())


def test_voyager_learns_a_library_on_crafter_with_the_runs_usual_files(reference):
    run_dir, server = reference
    its = [iteration(run_dir, i) for i in range(ITERATIONS)]

    # One world per rollout; its iterations continue in it, numbered run-wide and in the world.
    assert [(i["iteration"], i["world"], i["in_world"]) for i in its] == [
        (n, n // PER_WORLD, n % PER_WORLD) for n in range(ITERATIONS)
    ]
    seeds = [
        json.loads((run_dir / "episodes" / "train" / f"{w:04d}.json").read_text())["seed"]
        for w in range(2)
    ]
    assert [i["world_seed"] for i in its] == [seeds[0]] * PER_WORLD + [
        seeds[1]
    ] * PER_WORLD and seeds[0] != seeds[1]
    # The world continues: each iteration starts with what the last one left (wood held,
    # env actions used), and a new world starts with nothing.
    assert its[2]["actions_left"] == 160 - its[0]["env_actions"] - its[1]["env_actions"] < 160
    assert its[4]["actions_left"] == 160

    # Curriculum: the first task is fixed; a malformed proposal is asked again; task lists.
    assert its[0]["curriculum"] == {"fixed": True} and its[0]["task"] == "collect wood"
    assert len(its[2]["curriculum"]["answers"]) == 2 and its[2]["task"] == "explore the area"
    assert [(i["task"], i["attempt"]) for i in its] == [
        ("collect wood", 1),
        ("collect wood", 2),
        ("explore the area", 1),
        ("explore the area", 2),
        ("collect wood", 1),
        ("explore the area", 1),
        ("make iron sword", 1),
        ("make iron sword", 2),
    ]
    assert its[3]["failed"] == ["explore the area"]
    assert (
        its[5]["completed"] == ["collect wood", "explore the area"] and its[5]["failed"] == []
    )  # left failed
    assert its[7]["completed"] == ["collect wood", "explore the area"] and its[7]["failed"] == [
        "make iron sword"
    ]
    curricula = asked(server, "next immediate task")
    assert "- status:" not in curricula[0]["messages"][1]["content"]  # warm-up: 1 task completed
    assert "- status:" in curricula[-1]["messages"][1]["content"]  # 2 completed: status shown

    # How the agents' answers were read, per role, in each iteration record and in summary.json:
    # the curriculum's and the critic's first answers in iteration 2 could not be read.
    summary = json.loads((run_dir / "summary.json").read_text())
    counts = summary["format"]
    assert counts["action_agent"] == {
        "turns": ITERATIONS,
        "ok": ITERATIONS,
        "repaired": 0,
        "lost": 0,
        "truncated": 0,
        "dropped_calls": 0,
    }
    assert (counts["curriculum"]["turns"], counts["curriculum"]["lost"]) == (
        len(asked(server, "next immediate task")),
        1,
    )
    assert (counts["critic"]["turns"], counts["critic"]["lost"]) == (
        len(asked(server, "assesses my progress")),
        1,
    )
    assert its[2]["format"]["curriculum"] == {
        "turns": 2,
        "repaired": 0,
        "lost": 1,
        "truncated": 0,
        "dropped_calls": 0,
    }
    reask = [b for b in asked(server, "next immediate task") if len(b["messages"]) > 2][0][
        "messages"
    ][-1]["content"]
    assert reask.startswith(
        "Your answer could not be used: the answer has no line 'Task: <the next task>'."
    )

    # Critic: an error fails without a call; achievements decide without a call; otherwise JSON.
    verdicts = [(i["verdict"]["success"], i["verdict"]["decided_by"]) for i in its]
    assert verdicts == [
        (False, "execution_error"),
        (True, "achievement"),
        (False, "llm"),
        (False, "llm"),
        (True, "achievement"),
        (True, "llm"),
        (False, "achievement"),
        (False, "achievement"),
    ]
    assert "no tree in reach" in its[0]["error"]
    critics = asked(server, "assesses my progress")
    assert len(critics) == 4  # iteration 2 asked twice (bad JSON), 3 and 5 once, none elsewhere
    # The next attempt sees the previous code, its error and the critique.
    actions = asked(server, "writes Python skills for Crafter")
    assert "no tree in reach" in actions[1]["messages"][1]["content"]
    assert "Collect wood first, then walk further." in actions[3]["messages"][1]["content"]

    # Skill manager: versions, descriptions, and the codebook generations.
    state = json.loads((run_dir / "voyager" / "state_2.json").read_text())
    assert set(state["skills"]) == {"collect_wood", "collect_woodV2", "explore_the_area"}
    assert state["skills"]["collect_woodV2"]["superseded_by"] == "collect_wood"
    assert (
        state["skills"]["collect_wood"]["iteration"] == 4
        and state["skills"]["collect_wood"]["world"] == 1
    )
    assert state["skills"]["explore_the_area"]["description"] == DESCRIPTION
    gen1, gen2 = (
        (run_dir / "codebook" / "gen_1.py").read_text(),
        (run_dir / "codebook" / "gen_2.py").read_text(),
    )
    assert "def collect_wood(env)" in gen1 and "def _step_towards" in gen1 and "V2" not in gen1
    assert (
        "def collect_woodV2(env)" in gen2
        and "(Version 2)" in gen2
        and "def explore_the_area(env)" in gen2
    )
    assert (run_dir / "codebook" / "gen_2.json").is_file()

    # Retrieval: the action agent saw the library's newest skills (code), never a retired one.
    assert its[6]["retrieved"] == ["collect_wood", "explore_the_area"]
    assert "def collect_wood(env)" in actions[6]["messages"][1]["content"]
    assert "collect_woodV2" not in actions[6]["messages"][1]["content"]

    # Retrieval ranked by the embedding endpoint; each vector paid once, charged to its rollout.
    embedded = rows(run_dir / "voyager" / "embeddings.jsonl")
    assert len({e["key"] for e in embedded}) == len(embedded) > 0
    assert any(r.path.endswith("/embeddings") for r in server.requests if r.method == "POST")

    # The run's usual files: one metrics row per iteration with the usual fields.
    metrics = rows(run_dir / "metrics.jsonl")
    assert [m["rollout"] for m in metrics] == list(range(1, ROLLOUTS + 1))
    assert [m["knowledge_version"] for m in metrics] == [0, 1]
    calls = [json.loads(line) for line in (run_dir / "llm_calls.jsonl").read_text().splitlines()]
    per_world = collections.Counter(
        c["call_id"].split("/")[1] for c in calls if c["call_id"].startswith("train/")
    )
    assert [m["llm_calls"] for m in metrics] == [per_world[f"{w:04d}"] for w in range(ROLLOUTS)]
    # world 0: action | action, description | 2 curriculum, action, 2 critic | action, critic
    assert metrics[0]["llm_calls"] == 1 + 2 + 5 + 2
    assert [m["env_actions"] for m in metrics] == [
        sum(i["env_actions"] for i in its[w * PER_WORLD : (w + 1) * PER_WORLD])
        for w in range(ROLLOUTS)
    ]
    assert all(
        m["stop_reason"] == "iteration_end" for m in metrics
    )  # 4 iterations, before 160 actions
    assert all(m["cost_usd"] > 0 and m["tokens"]["output"] > 0 for m in metrics)
    for i, m in enumerate(metrics):  # LLM calls plus the embeddings this rollout paid for
        llm = sum(c["cost_usd"] for c in calls if c["call_id"].startswith(f"train/{i:04d}/"))
        vectors = sum(e["cost_usd"] for e in embedded if e["charged_to"] == f"train/{i:04d}")
        assert m["cost_episode_usd"] == pytest.approx(llm + vectors)
    assert sum(e["cost_usd"] for e in embedded if e["charged_to"] == "train/0000") > 0
    assert {c["purpose"] for c in calls} == {
        "curriculum",
        "inducer",
        "critic",
        "description",
        "actor",
        "embedding",
    }
    # Every paid embedding request is in llm_calls.jsonl too: money spent sums over that one file.
    logged = [c for c in calls if c["purpose"] == "embedding"]
    assert sum(c["spent_usd"] for c in logged) == pytest.approx(
        sum(e["cost_usd"] for e in embedded)
    )
    assert len(logged) == sum(1 for e in embedded if e["tokens"] > 0) > 0  # one row per request
    assert len({c["call_id"] for c in logged}) == len(logged)
    assert {c["call_id"].split("/")[1] for c in logged} <= {"train", "eval", "knowledge"}
    # The world's trajectory: one step per iteration, and which task each one was.
    train0 = json.loads((run_dir / "episodes" / "train" / "0000.json").read_text())
    assert [s["call_id"] for s in train0["steps"]] == [
        f"train/0000/{k:04d}/action/0000" for k in range(PER_WORLD)
    ]
    assert (
        train0["steps"][1]["skill_call"]["name"] == "collect_wood"
        and "collect_wood" in train0["final_info"]["achievements"]
    )
    assert [
        (i["iteration"], i["in_world"], i["task"], i["attempt"])
        for i in train0["method_info"]["iterations"]
    ] == [
        (0, 0, "collect wood", 1),
        (1, 1, "collect wood", 2),
        (2, 2, "explore the area", 1),
        (3, 3, "explore the area", 2),
    ]
    assert train0["method_info"]["iterations"][1]["skill_added"] == "collect_wood"
    assert train0["instruction"] == "Voyager tasks in this world: collect wood; explore the area"
    assert metrics[0]["progress"] == pytest.approx(1 / 22)

    # Evaluation on the fixed held-out worlds, with the retrieved skills callable by the actor.
    evals = rows(run_dir / "eval.jsonl")
    assert [e["rollout"] for e in evals] == [0, 1, 2] and all(e["episodes"] == 2 for e in evals)
    assert evals[0]["progress_mean"] == 0.0 and evals[1]["progress_mean"] > 0
    eval_ep = json.loads((run_dir / "episodes" / "eval" / "at0001" / "0000.json").read_text())
    assert eval_ep["steps"][0]["skill_call"]["name"] == "collect_wood"
    summary = json.loads((run_dir / "summary.json").read_text())
    assert (
        summary["status"] == "finished"
        and summary["method"] == "voyager"
        and summary["knowledge_version"] == 2
    )
    assert summary["training"]["episodes"] == ROLLOUTS
    assert json.loads((run_dir / "speedrun.json").read_text())["metric"] == "progress"


class Killer:
    """Wraps the fake; SIGKILLs the run once, when the chosen request arrives (unanswered),
    so the kill lands mid-iteration."""

    def __init__(self, fake: VoyagerFakeLLM, marker: str) -> None:
        self.fake, self.marker, self.pid, self.killed = fake, marker, None, False
        self.answered: list[str] = []
        self.after: list[str] = []
        self._lock = threading.Lock()

    def __call__(self, body: dict) -> Reply:
        with self._lock:
            if (
                not self.killed
                and self.pid is not None
                and self.marker in body["messages"][1]["content"]
            ):
                self.killed = True
                os.kill(self.pid, signal.SIGKILL)
                return Reply.error(500)
            (self.after if self.killed else self.answered).append(body_key(body))
            return self.fake(body)


@pytest.mark.parametrize("protocol", ["text", "native"])
def test_sigkill_mid_iteration_then_resume_equals_an_uninterrupted_run(
    tmp_path, reference, protocol
):
    """Under native tool calls (the action agent calls ``submit_skill``) the killed and
    resumed run learns what the uninterrupted text-protocol run learned, and its calls were
    native and replayed as native calls."""
    reference, _ = reference
    # Killed at iteration 5's critic call: after its skill ran, mid-batch, with a skill added
    # earlier in the same batch (iteration 4) that the resumed run must rebuild.
    killer = Killer(VoyagerFakeLLM(), "explored after collecting wood")
    server = start_server(killer)
    run_dir = tmp_path / "killed" / "run"
    try:
        proc = prewarmed.popen(
            voyager_cmd(run_dir, server.base_url, "--set", f"model.tool_protocol={protocol}"),
            cwd=REPO,
            env=env(),
        )
        killer.pid = proc.pid
        proc.communicate(timeout=600)
        assert killer.killed and proc.returncode == -signal.SIGKILL
        resumed = run(
            [
                sys.executable,
                "-m",
                "speedrunner.benchmarks.crafter.train_voyager",
                "--resume",
                str(run_dir),
            ],
            timeout=600,
            env=env(),
        )
    finally:
        server.stop()
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert rows(run_dir / "metrics.jsonl") == rows(reference / "metrics.jsonl")
    assert rows(run_dir / "eval.jsonl") == rows(reference / "eval.jsonl")
    for g in (1, 2):
        assert (run_dir / "codebook" / f"gen_{g}.py").read_bytes() == (
            reference / "codebook" / f"gen_{g}.py"
        ).read_bytes()
        assert (run_dir / "voyager" / f"state_{g}.json").read_bytes() == (
            reference / "voyager" / f"state_{g}.json"
        ).read_bytes()
    # Native answers end with finish_reason "tool_calls" and carry no text; all else is the same.
    differ = ("tool_protocol", "finish_reason") if protocol == "native" else ("tool_protocol",)
    for i in range(ITERATIONS):
        mine = iteration(run_dir, i)
        assert mine["tool_protocol"] == protocol
        assert {k: v for k, v in mine.items() if k not in differ} == {
            k: v for k, v in iteration(reference, i).items() if k not in differ
        }
    for w in range(ROLLOUTS):  # the worlds' trajectories too (wall time aside)
        resumed_w, reference_w = (
            json.loads((d / "episodes" / "train" / f"{w:04d}.json").read_text())
            for d in (run_dir, reference)
        )
        for t in (resumed_w, reference_w):
            t.pop("wall_time_s")
            for step in t["steps"]:
                step.pop("latency_s"), step.pop("cached")
                if (
                    protocol == "native" and "/action/" in step["call_id"]
                ):  # the code came as a call
                    (
                        step.pop("raw_text"),
                        step.pop("finish_reason"),
                        step.pop("thought"),
                    )  # plan: its argument
        assert resumed_w == reference_w
    # No answered call was asked again, and every call id was paid once.
    assert not set(killer.after) & set(killer.answered)
    calls = [json.loads(line) for line in (run_dir / "llm_calls.jsonl").read_text().splitlines()]
    paid = collections.Counter(
        c["call_id"] for c in calls if not c["cache_hit"] and c["error"] is None
    )
    assert all(n == 1 for n in paid.values())
    embedded = rows(run_dir / "voyager" / "embeddings.jsonl")
    assert len({e["key"] for e in embedded}) == len(embedded)  # no vector paid twice
    logged = [c for c in calls if c["purpose"] == "embedding"]
    assert sum(c["spent_usd"] for c in logged) == pytest.approx(
        sum(e["cost_usd"] for e in embedded)
    )
    action = [c for c in calls if c["purpose"] == "inducer"]
    if protocol == "native":  # the skills came as submit_skill calls, and were replayed as calls
        assert all(c["tools_offered"] == ["submit_skill"] and c["tool_calls"] for c in action)
        assert any(c["cache_hit"] for c in action)
    else:
        assert not any("tool_calls" in c or "tools_offered" in c for c in action)


def test_a_run_from_when_every_iteration_had_a_fresh_world_is_refused_on_resume(
    tmp_path, reference
):
    """Such a run stored ``voyager/iterations/<i>.json``; continuing it would mix two protocols."""
    run_dir = tmp_path / "old"
    shutil.copytree(reference[0], run_dir)
    iterations = run_dir / "voyager" / "iterations"
    shutil.rmtree(iterations)
    iterations.mkdir()
    (iterations / "0000.json").write_text(json.dumps({"iteration": 0, "task": "collect wood"}))

    def stored() -> dict:  # provenance.json logs the attempt; everything the run learned stays
        return {
            p: p.read_bytes()
            for p in run_dir.rglob("*")
            if p.is_file() and p.name != "provenance.json"
        }

    before = stored()
    proc = run(
        [
            sys.executable,
            "-m",
            "speedrunner.benchmarks.crafter.train_voyager",
            "--resume",
            str(run_dir),
            "--skip_preflight",
        ],
        timeout=300,
        env=env(),
    )
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert (
        "from before tasks continued in one world" in proc.stderr
        and "Start a new run" in proc.stderr
    )
    assert stored() == before


def test_voyager_skills_stopped_by_a_cap_and_a_world_ended_by_the_iteration_cap_are_counted(
    tmp_path,
):
    """A skill at ``max_skill_actions`` (40 of the world's 160 actions), one killed by
    ``skill_timeout_s``, and the world ended by ``max_iterations_per_world`` reach the world's
    trajectory, its metrics.jsonl row, summary.json and the report's caps table; the action
    agent was told both skill caps."""
    from speedrunner.core.reporting import build_report

    run_dir, server = play(
        tmp_path / "run",
        CappedVoyagerFakeLLM(),
        "--set",
        "run.rollouts=1",
        "--set",
        "run.eval_episodes=0",
        "--set",
        "method.skill_timeout_s=2",
        "--set",
        "method.max_iterations_per_world=2",
    )
    its = [
        json.loads((run_dir / "voyager" / "iterations" / "0000" / f"{k:04d}.json").read_text())
        for k in (0, 1)
    ]
    assert [(i["cap_hit"], i["env_actions"]) for i in its] == [
        ("max_skill_actions", 40),
        ("skill_timeout", 0),
    ]
    world = json.loads((run_dir / "episodes" / "train" / "0000.json").read_text())
    assert [s["skill_call"]["stopped_by"] for s in world["steps"]] == ["max_actions", "timeout"]
    assert (
        world["stop_reason"] == "iteration_end" and world["env_actions"] == 40
    )  # 120 actions were left
    hits = {"max_skill_actions": 1, "skill_timeout": 1, "max_iterations_per_world": 1}
    assert world["cap_hits"] == hits
    assert rows(run_dir / "metrics.jsonl")[0]["cap_hits"] == hits
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["cap_hits"] == {
        **hits,
        "max_functions": 0,
        "max_codebook_chars": 0,
        "max_functions_per_episode": 0,
        "max_inducer_turns": 0,
    }
    [row] = table_rows(build_report([run_dir], tmp_path / "report").out, "caps")
    assert (
        row["caps_in_force"]
        == "max_skill_actions=40; skill_timeout_s=2.0; max_iterations_per_world=2"
    )
    assert (
        row["train_max_skill_actions"],
        row["train_skill_timeout"],
        row["train_max_iterations_per_world"],
    ) == ("1", "1", "1")
    assert (
        row["train_max_functions"] == row["train_max_inducer_turns"] == "n/a"
    )  # Voyager has no such cap

    system = asked(server, "writes Python skills for Crafter")[0]["messages"][0]["content"]
    assert (
        "- One skill call takes at most 40 primitive actions; at the cap it stops cleanly and the "
        "critic judges what it did; it is stopped after 2 s of wall-clock time."
    ) in system
    assert "a few hundred actions" not in system


def table_rows(out: Path, name: str) -> list[dict]:
    import csv

    with open(out / "tables" / f"{name}.csv", newline="") as f:
        return list(csv.DictReader(f))


class CutFirstAttempt(VoyagerFakeLLM):
    """The action agent's first answer (whole code, fence closed) arrives cut at max_tokens."""

    def __call__(self, body: dict) -> Reply:
        reply = super().__call__(body)
        messages = body["messages"]
        if (
            "writes Python skills for Crafter" in messages[0]["content"]
            and "Context: attempt 1" in messages[1]["content"]
        ):
            reply.finish_reason = "length"
        return reply


def test_a_cut_skill_never_runs_the_agent_is_told_and_every_role_is_counted(tmp_path):
    run_dir, server = play(
        tmp_path / "run",
        CutFirstAttempt(),
        "--set",
        "run.rollouts=1",
        "--set",
        "run.eval_episodes=0",
        "--set",
        "method.max_iterations_per_world=2",
        "--set",
        "model.sampling.max_tokens=512",
    )
    first, second = (
        json.loads((run_dir / "voyager" / "iterations" / "0000" / f"{k:04d}.json").read_text())
        for k in (0, 1)
    )
    cut = (
        "your answer was cut off at max_tokens=512 (finish_reason 'length'); that is all the room "
        "an answer has, so answer shorter: less reasoning, smaller code; the code was not run (an "
        "incomplete skill never runs)"
    )
    # Its code parsed (the fence had closed), but a cut answer's skill is not run: no action taken.
    assert (first["error"], first["env_actions"], first["finish_reason"]) == (cut, 0, "length")
    assert first["format"]["action_agent"] == {
        "turns": 1,
        "repaired": 0,
        "lost": 1,
        "truncated": 1,
        "dropped_calls": 0,
    }
    actions = asked(server, "writes Python skills for Crafter")
    assert f"Execution error: {cut}" in actions[1]["messages"][1]["content"]  # the agent was told
    assert second["skill_added"] == "collect_wood" and second["finish_reason"] == "stop"
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["format"]["action_agent"] == {
        "turns": 2,
        "ok": 1,
        "repaired": 0,
        "lost": 1,
        "truncated": 1,
        "dropped_calls": 0,
    }
    build_report([run_dir], tmp_path / "report")
    table = (tmp_path / "report" / "tables" / "answers.csv").read_text().splitlines()
    assert table[0].endswith(
        ",role,turns,ok,repaired,lost,truncated,dropped_calls,acted,refused,skill_calls"
    )
    assert any(
        r.endswith(",action_agent,2,1,0,1,1,0,,,") for r in table
    )  # effects: the actor's only
