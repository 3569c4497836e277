"""ScienceWorld text env against the real simulator (two JVMs shared by the whole module)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from speedrunner.benchmarks.scienceworld import skill_api
from speedrunner.benchmarks.scienceworld.config import TASK_IDS, TASK_SETS
from speedrunner.benchmarks.scienceworld.env import (
    DETERMINISM_FLAGS,
    QUIET_STDOUT_FLAGS,
    ScienceWorldTextEnv,
    _AckingReader,
    launch_simulator,
    stop_simulator,
)
from speedrunner.benchmarks.scienceworld.tasks import parse_task, variations
from speedrunner.core.env import TextEnv
from speedrunner.core.skill import local_transport
from speedrunner.errors import EnvError

pytestmark = pytest.mark.slow
JVM_OPTIONS = "-Xmx384m -XX:+UseSerialGC"


@pytest.fixture(scope="module")
def env() -> Iterator[ScienceWorldTextEnv]:
    env = ScienceWorldTextEnv(jvm_options=JVM_OPTIONS)
    yield env
    env.close()


@pytest.fixture(scope="module")
def raw() -> Iterator[Any]:
    """The package's own env, for gold paths and split lists."""
    sim = launch_simulator(10000, JVM_OPTIONS)
    yield sim
    stop_simulator(sim)


def test_split_sizes_match_package(raw: Any) -> None:
    for task_id, name in TASK_IDS.items():
        raw.load(name, 0, "easy")
        for split, listed in (
            ("train", raw.get_variations_train()),
            ("dev", raw.get_variations_dev()),
            ("test", raw.get_variations_test()),
        ):
            assert list(variations(task_id, split)) == list(listed), (task_id, split)


@pytest.mark.parametrize("task_id", [*TASK_SETS["t3"], *TASK_SETS["t4"]])
def test_gold_path_through_our_interface_succeeds(
    env: ScienceWorldTextEnv, raw: Any, task_id: str
) -> None:
    ref = parse_task(f"{task_id}/test", 0)
    raw.load(ref.task_name, ref.variation, "easy", generateGoldPath=True)
    gold = raw.get_gold_action_sequence()
    assert _valid_commands_match_the_packages_list(raw, gold[:3]) >= 1, task_id
    env.reset(str(ref), 0)
    assert env.progress() == env.score / 100 >= 0
    for action in gold:  # some gold paths end with spare "wait"/"look" moves
        result = env.step(action)
        if result.done:
            break
    assert result.done and env.success and env.progress() == 1.0, (task_id, env.score)
    assert result.info["success"] and result.info["score"] == 100


def test_py4j_answers_over_8_kb_arrive_whole_on_acking_connections(raw: Any) -> None:
    """Every connection reads through ``_AckingReader`` (an answer over py4j's 8 KB buffer
    otherwise waits 40 ms for a delayed ACK: benchmarks/scienceworld_step_overhead.py), and a
    long answer with multi-byte characters split across reads comes back intact."""
    text = "é-∑-" * 6000
    assert raw._gateway.jvm.java.lang.StringBuilder(text).toString() == text
    connections = list(raw._gateway._gateway_client.deque)
    assert connections and all(isinstance(c.stream.raw, _AckingReader) for c in connections)


def _valid_commands_match_the_packages_list(raw: Any, actions: list[str]) -> int:
    """Replay ``actions`` from the start, comparing at every state our valid commands (one JSON
    answer, sorted) with the package's list (one py4j call per command); return how many
    states were compared. The simulator renames some objects on every listing (cups of paint:
    "blue paint in wood cup", then "blue paint on cup"), so a state is compared only where two
    package listings in a row agree."""
    from scienceworld import ScienceWorldEnv

    package = ScienceWorldEnv.get_valid_action_object_combinations
    compared = 0
    raw.reset()
    for action in actions:
        listed = package(raw)
        if listed == package(raw):
            assert raw.get_valid_action_object_combinations() == listed, action
            compared += 1
        raw.step(action)
    return compared


def test_unknown_and_ambiguous_input_are_observations(env: ScienceWorldTextEnv) -> None:
    assert isinstance(env, TextEnv)
    obs = env.reset("4-4/train#0", 0)
    assert "called the hallway" in obs.text and env.instruction.startswith("Your task is")
    result = env.step("dance with the moon")
    assert result.observation.text == "No known action matches that input."
    assert not result.done
    result = env.step("look at door")  # the hallway has several doors
    assert result.observation.text.startswith("Ambiguous request")
    answered = env.step("0")
    assert "door" in answered.observation.text and not answered.done


def test_structured_view_and_skill_api(env: ScienceWorldTextEnv) -> None:
    obs = env.reset("4-1/train#3", 0)
    state = json.loads(json.dumps(obs.structured))
    assert set(state) == {"look", "inventory", "task", "valid_actions"}
    assert env.actions == skill_api.valid_actions(state) and "look around" in env.actions
    assert skill_api.task(state) == env.instruction
    handle = skill_api.SkillEnv(local_transport(env), obs.text, state)
    reply = handle.act("inventory")
    assert reply == handle.text and "inventory" in reply
    assert f"called the {skill_api.room(handle.state)}." in skill_api.look(handle.state)
    assert any("door" in thing.lower() for thing in skill_api.visible(handle.state))
    assert skill_api.inventory(handle.state).startswith("In your inventory")


def test_reuses_one_jvm_and_reproduces_episodes(env: ScienceWorldTextEnv) -> None:
    first = env.reset("4-2/test#250", 5)
    jvm = env._sim
    env.step("open door to kitchen")
    again = env.reset("4-2/test#250", 5)
    assert env._sim is jvm and again == first
    assert env.reset("4-2/test", 25 + 75).text == first.text  # seed picks test[25] == 250


class _CountingServer:
    """The JVM's interface object, counting the ``reset`` calls made through it."""

    def __init__(self, server: Any) -> None:
        self.server, self.resets = server, 0

    def __getattr__(self, name: str) -> Any:
        self.resets += name == "reset"
        return getattr(self.server, name)


@pytest.mark.parametrize("task_id", ["4-2", "3-1", "3-3"])
def test_an_episode_starts_from_one_world_build_exactly_as_the_packages_reset(
    env: ScienceWorldTextEnv, raw: Any, task_id: str
) -> None:
    """The JVM's ``reset`` is ``load`` again: the env builds the world once and takes the
    package's first move itself. The observations (and the valid commands) then match the
    package's ``load`` + ``reset`` move for move."""
    for split, seed in (("test", 0), ("train", 7)):
        ref = parse_task(f"{task_id}/{split}", seed)
        env.reset(str(ref), seed)  # a JVM to count on
        counting = env._sim.server = _CountingServer(env._sim.server)
        try:
            ours = env.reset(str(ref), seed)
        finally:
            env._sim.server = counting.server
        assert counting.resets == 0
        raw.load(ref.task_name, ref.variation, "easy")
        text, info = raw.reset()
        assert ours.text == text and ours.structured["valid_actions"] == info["valid"]
        assert (ours.structured["look"], ours.structured["inventory"]) == (
            info["look"],
            info["inv"],
        )
        for action in (
            "look around",
            info["valid"][len(info["valid"]) // 2],
            "inventory",
            "open door",
        ):
            mine, theirs = env.step(action), raw.step(action)
            assert (
                mine.observation.text == theirs[0]
                and mine.observation.structured["valid_actions"] == theirs[3]["valid"]
            )
            assert mine.info["score"] == theirs[3]["score"] and mine.done == theirs[2]
            if mine.done:
                break


def test_failure_counts_as_zero_progress(env: ScienceWorldTextEnv) -> None:
    env.reset("4-1/test#225", 0)
    result = env.step("focus on agent")  # wrong focus ends the episode as a failure
    assert result.done and env.score == -100 and env.progress() == 0.0 and not env.success
    with pytest.raises(EnvError, match="reset"):
        env.step("look around")


def test_jvm_options_reach_the_jvm_and_close_stops_it() -> None:
    """Also: an option that makes HotSpot log a warning at start-up (``UseLargePages`` on a
    machine without large pages) no longer takes the place of the port py4j reads on stdout."""
    options = "-Xmx256m -XX:+UseSerialGC -XX:+UseLargePages"
    bare = subprocess.run(
        ["java", "-XX:+UseLargePages", "-version"], capture_output=True, text=True, timeout=60
    )
    warns_on_stdout = "[warning]" in bare.stdout  # false only where large pages are configured
    env = ScienceWorldTextEnv(jvm_options=options)
    assert env._sim is None  # lazy: nothing started yet
    env.reset("3-1/train#0", 0)
    proc = env._sim._gateway.java_process
    with open(f"/proc/{proc.pid}/environ", "rb") as f:
        environ = f.read().split(b"\0")
    assert (
        f"JAVA_TOOL_OPTIONS={QUIET_STDOUT_FLAGS} {options} {DETERMINISM_FLAGS}".encode() in environ
    )
    assert os.environ.get("JAVA_TOOL_OPTIONS") != options
    env.close()
    assert proc.poll() is not None
    print(f"HotSpot warned on stdout without {QUIET_STDOUT_FLAGS!r}: {warns_on_stdout}")


def test_a_jvm_option_that_logs_to_stdout_is_named_with_the_fix() -> None:
    env = ScienceWorldTextEnv(jvm_options="-Xmx256m -XX:+UseSerialGC -Xlog:gc")
    with pytest.raises(EnvError, match=r"wrote to stdout before its port.*-Xlog:gc:stderr"):
        env.reset("4-1/test", 0)
    assert env._sim is None


FIRST_OBS = """
from speedrunner.benchmarks.scienceworld.env import ScienceWorldTextEnv
env = ScienceWorldTextEnv(jvm_options="-Xmx256m -XX:+UseSerialGC")
print(env.reset("4-3/test", 1234).text)
print(env.step("look around").observation.text)
"""


def test_same_seed_same_first_observation_across_processes(env: ScienceWorldTextEnv) -> None:
    outs = [
        subprocess.run(
            [sys.executable, "-c", FIRST_OBS],
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
            env={**os.environ, "PYTHONHASHSEED": s},
        ).stdout
        for s in ("1", "2")
    ]
    assert outs[0] == outs[1] and "This room is called" in outs[0]
    here = env.reset("4-3/test", 1234).text
    assert outs[0].startswith(here)


def test_two_envs_in_threads_match_one_env_alone(env: ScienceWorldTextEnv) -> None:
    """Concurrent launches (JAVA_TOOL_OPTIONS is process-wide) and play stay independent."""
    from concurrent.futures import ThreadPoolExecutor

    def play(task: str) -> list[str]:
        own = ScienceWorldTextEnv(jvm_options=JVM_OPTIONS)
        try:
            texts = [own.reset(task, 0).text]
            texts += [own.step(a).observation.text for a in ("look around", "inventory")]
            return texts
        finally:
            own.close()

    tasks = ["3-3/test#700", "4-4/test#260"]
    with ThreadPoolExecutor(2) as pool:
        together = list(pool.map(play, tasks))
    for task, texts in zip(tasks, together, strict=True):
        alone = [env.reset(task, 0).text]
        alone += [env.step(a).observation.text for a in ("look around", "inventory")]
        assert texts == alone
