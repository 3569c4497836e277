"""The fake's actor reads the skills a prompt offers (every heading form the project renders),
calls one that fits the task's next step, its inducer writes BabyAI skills that do a
mission's steps, and ``--policy expert`` plays BabyAI's bot and ScienceWorld's player."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import openai

from speedrunner.benchmarks.babyai.levels import make_level
from speedrunner.benchmarks.babyai.text import ACTION_INDEX, ACTIONS, instruction, observe
from speedrunner.core.codebook import Codebook, Rules
from speedrunner.core.codebook.api_view import render_api_view
from speedrunner.core.codebook.edits import AddFunction, Candidate, apply_edits
from speedrunner.core.codebook.model import Author
from speedrunner.core.runtime.actor import first_user_message, parse_answer, render_actions
from speedrunner.core.runtime.skill_call import SkillCall, parse_skill_call
from speedrunner.core.seeding import episode_seed
from speedrunner.methods.wake_sleep.codebook_knowledge import TITLE
from speedrunner.methods.wake_sleep.configs import SpeedRunnerConfig
from speedrunner.methods.wake_sleep.speedrunner_tools import TOOLS, parse_tool_call
from speedrunner.testing.babyai_expert import bot_actions
from speedrunner.testing.babyai_levels import LevelIndex, bot_moves_from, locate
from speedrunner.testing.expert import ExpertActor
from speedrunner.testing.fake_skills import BABYAI_SKILLS
from speedrunner.testing.prompt_reading import offered_skills, primitive_actions
from speedrunner.testing.realistic import RealisticFake
from speedrunner.testing.skill_choice import Step, choose_skill_call, steps_of

from .test_realistic_fake import ACTOR_SYSTEM, INDUCER_SYSTEM, _free_port

BABYAI_API = "speedrunner.benchmarks.babyai.skill_api"
KIND = "pick_up_seq_go_to"
SEED = episode_seed(0, "train", 3)  # "go to the red box after you pick up the grey key"


def babyai_rules() -> Rules:
    return Rules.for_api(BABYAI_API, ACTIONS, None)


def babyai_codebook(source: str = BABYAI_SKILLS) -> Codebook:
    candidate = apply_edits(
        Codebook.empty(), [AddFunction(source)], Author(method="test"), rules=babyai_rules()
    )
    assert isinstance(candidate, Candidate), candidate
    return Codebook(candidate.source, candidate.meta)


def actor_messages(
    codebook: Codebook | None, kind: str = KIND, seed: int = SEED
) -> list[tuple[str, str]]:
    """The real first actor message of a BabyAI episode, with the codebook's skills section."""
    level = make_level(kind, seed)
    knowledge = None if codebook is None else (TITLE, codebook.render_api())
    first = first_user_message(
        instruction(level.mission), render_actions(list(ACTIONS)), knowledge, observe(level)[0]
    )
    return [("system", ACTOR_SYSTEM), ("user", first)]


def inducer_start(api_module: str, primitives: tuple[str, ...]) -> str:
    view = render_api_view(
        api_module, Rules.for_api(api_module, primitives, None), SpeedRunnerConfig(), example=None
    )
    return f"Sleep phase after batch 0.\n\n{view}\n"


def body(messages: list[tuple[str, str]]) -> dict:
    return {
        "model": "m",
        "max_tokens": 256,
        "messages": [{"role": r, "content": c} for r, c in messages],
    }


# -- reading the prompt ----------------------------------------------------------------------------
def test_primitive_actions_are_read_under_every_heading_the_prompts_render():
    crafter = ("Noop", "Move Left", "Do")
    view = inducer_start("speedrunner.benchmarks.crafter.skill_api", crafter)
    assert "## Primitive actions\n" in view and primitive_actions(view) == list(crafter)
    actor = actor_messages(None)[1][1]
    assert primitive_actions(actor) == list(ACTIONS)
    voyager = "Primitive actions (the strings `env.act` takes):\nNoop, Move Left, Do\n\nHow a skill"
    assert primitive_actions(voyager) == list(crafter)
    assert primitive_actions("Primitive actions: turn left, go forward") == [
        "turn left",
        "go forward",
    ]
    assert (
        primitive_actions(
            "## Primitive actions\nFree-text commands: `env.act(text)` sends any command"
        )
        == []
    )


def test_the_skills_an_actor_prompt_offers_are_read_with_their_parameters_and_docstrings():
    skills = offered_skills(actor_messages(babyai_codebook())[1][1])
    assert [(s.name, s.params) for s in skills] == [
        ("go_to", ("target",)),
        ("pick_up_object", ("target",)),
    ]
    assert skills[1].doc.startswith("Go to the nearest object named `target` and pick it up.")
    shown_as_source = (
        "Skills that already exist (you may call them):\n```python\n" + BABYAI_SKILLS + "```\n"
    )
    assert [s.name for s in offered_skills(shown_as_source)] == [
        "go_to",
        "pick_up_object",
    ]  # _blocked hidden
    feedback = (
        "Your last answer was not executed: 'fly' is not a valid action. Answer with one line "
        '"Action: <action>" using one of: turn left, go forward\nor call a skill: '
        "go_to(target: str) -> str, solve(a: int, b: dict[str, int] = {}) -> str"
    )
    assert [(s.name, s.params) for s in offered_skills(feedback)] == [
        ("go_to", ("target",)),
        ("solve", ("a", "b")),
    ]


# -- choosing a skill ------------------------------------------------------------------------------
def test_an_instruction_is_split_into_its_steps_in_the_order_they_are_done():
    assert steps_of("Your goal is to go to the red box after you pick up the grey key") == [
        Step("pick up", ("grey key",)),
        Step("go to", ("red box",)),
    ]
    assert steps_of("Your goal is to pick up a ball, then go to the purple door") == [
        Step("pick up", ("ball",)),
        Step("go to", ("purple door",)),
    ]
    assert steps_of("Your goal is to put the red ball next to the blue key") == [
        Step("put next to", ("red ball", "blue key"))
    ]
    assert steps_of("Your task is to boil water.") == []


def test_the_actor_calls_the_skill_that_fits_the_next_step_with_literal_arguments():
    messages = actor_messages(babyai_codebook())
    assert choose_skill_call(messages) == 'pick_up_object("grey key")'
    after = [
        *messages,
        ("assistant", 'Action: pick_up_object("grey key")'),
        (
            "user",
            "Observation:\nYou carry a grey key\na red box 2 steps forward\n[skill pick_up_object]",
        ),
    ]
    assert choose_skill_call(after) == 'go_to("red box")'
    # a call made already is not made again (the skill did not finish that step)
    failed = [
        *messages,
        ("assistant", 'Action: pick_up_object("grey key")'),
        ("user", "Observation:\na wall"),
    ]
    assert choose_skill_call(failed) is None
    # a skill that does none of the steps is not called
    generic = babyai_codebook(
        'def repeat_turn(env) -> str:\n    """Turn left twice.\n\n    Returns:\n'
        '        The text.\n    """\n    return env.act("turn left")\n'
    )
    assert choose_skill_call(actor_messages(generic)) is None
    # "a ball" is done once the observation shows a ball carried, whatever its colour
    some_ball = [
        ("system", ACTOR_SYSTEM),
        (
            "user",
            f"{TITLE}:\n{babyai_codebook().render_api()}\n\nAvailable actions: turn left\n\n"
            "Your goal is to pick up a ball, then go to the purple door\n\n"
            "Observation:\nYou carry a red ball\na wall 2 steps forward",
        ),
    ]
    assert choose_skill_call(some_ball) == 'go_to("purple door")'


def test_a_skill_without_parameters_fits_when_its_docstring_describes_the_whole_task():
    task = (
        "Your task is to find a(n) animal. First, focus on the thing. "
        "Then, move it to the red box in the kitchen."
    )
    offered = (
        f"{TITLE}:\n"
        "solve_task() -> str\n    Solve a find-and-move task (find a(n) animal ... "
        "move it to the red box in the kitchen).\n\n"
        "Available actions: look around, go to kitchen\n\n"
    )
    messages = [
        ("system", ACTOR_SYSTEM),
        ("user", offered + task + "\n\nObservation:\nYou are in the hallway."),
    ]
    assert choose_skill_call(messages) == "solve_task()"
    other = [
        ("system", ACTOR_SYSTEM),
        ("user", offered + "Your task is to boil water.\n\nObservation:\nhall"),
    ]
    assert choose_skill_call(other) is None


def test_the_fakes_actor_answers_the_call_and_the_run_reads_it_as_a_skill_call():
    codebook = babyai_codebook()
    reply = RealisticFake(variants=0.0)(body(actor_messages(codebook)))
    parsed = parse_answer(reply.text, list(ACTIONS), skills=codebook.signatures())
    assert parsed.error is None, parsed
    call = parse_skill_call(parsed.action, codebook.signatures())
    assert isinstance(call, SkillCall) and (call.name, call.args) == (
        "pick_up_object",
        ["grey key"],
    )


# -- the inducer -----------------------------------------------------------------------------------
def _inducer(first: str, results: list[str]) -> str:
    messages = [("system", INDUCER_SYSTEM), ("user", first)]
    for result in results:
        messages += [("assistant", "..."), ("user", result)]
    return RealisticFake(variants=0.0)(body(messages)).text


def test_the_inducer_writes_babyai_skills_the_validator_accepts_and_skips_them_once_there():
    first = inducer_start(BABYAI_API, ACTIONS)
    add = parse_tool_call(_inducer(first, ["Result of `view_codebook`: (empty)"]), set(TOOLS))
    assert add.tool == "add_function" and "def go_to(env, target: str)" in add.block
    assert babyai_codebook(add.block).signatures().keys() == {"go_to", "pick_up_object"}
    again = parse_tool_call(
        _inducer(first, ["Result of `view_codebook`:\n" + BABYAI_SKILLS]), set(TOOLS)
    )
    assert again.tool == "submit"


def test_elsewhere_the_inducers_skill_plays_a_primitive_the_api_view_lists():
    first = inducer_start("speedrunner.benchmarks.crafter.skill_api", ("Noop", "Move Left", "Do"))
    add = parse_tool_call(_inducer(first, ["Result of `view_codebook`: (empty)"]), set(TOOLS))
    assert add.tool == "add_function" and "env.act('Noop')" in add.block


# -- the expert ------------------------------------------------------------------------------------
def _play(kind: str, seed: int, moves: tuple[str, ...] | list[str]):
    level = make_level(kind, seed)
    terminated, reward = False, 0.0
    for move in moves:
        _, reward, terminated, _, _ = level.step(ACTION_INDEX[move])
        if terminated:
            break
    return level, terminated and reward > 0


def test_the_expert_plays_the_bots_moves_for_a_level_it_recognises_from_the_first_message():
    expert = ExpertActor(LevelIndex(run_seeds=1, first_episodes=8, max_episodes=8))
    messages = actor_messages(None)
    solution = bot_actions(KIND, SEED)
    for move in solution[:3]:
        assert expert(messages) == f"Thought: the next move towards the goal.\nAction: {move}"
        messages += [("assistant", f"Action: {move}"), ("user", "Observation:\n...")]
    refused = [
        *messages,
        ("assistant", "Action: fly"),
        ("user", "Your last answer was not executed: no.\nObservation:"),
    ]
    assert expert(refused).endswith(solution[3])
    unknown = actor_messages(None, seed=episode_seed(5, "train", 3))
    assert expert(unknown) is None  # not among the levels searched: the fake's own answer


def test_after_a_skill_call_the_expert_finds_the_state_and_finishes_the_level():
    solution = bot_actions(KIND, SEED)
    carried_at = next(
        i for i in range(len(solution)) if _play(KIND, SEED, solution[:i])[0].carrying is not None
    )
    before, _ = _play(KIND, SEED, solution[:carried_at])
    shown = observe(before)[0]
    assert shown.startswith("You carry a grey key")
    found = locate(KIND, SEED, shown)
    assert found is not None and observe(found)[0] == shown
    moves = bot_moves_from(found)
    assert _play(KIND, SEED, [*solution[:carried_at], *moves])[1]  # the rest of the mission, done
    # as the expert sees it: the skill's note after the observation, then its own moves
    expert = ExpertActor(LevelIndex(run_seeds=1, first_episodes=8, max_episodes=8))
    messages = [
        *actor_messages(None),
        ("assistant", 'Action: pick_up_object("grey key")'),
        (
            "user",
            f'Observation:\n{shown}\n[skill pick_up_object("grey key") took {carried_at} actions]',
        ),
    ]
    assert expert(messages).endswith(moves[0])


def test_the_expert_plays_scienceworld_task_4_and_leaves_other_benchmarks_to_the_fake():
    task = (
        "Your task is to find a(n) animal. First, focus on the thing. "
        "Then, move it to the red box in the kitchen."
    )
    sw = [
        ("system", ACTOR_SYSTEM),
        (
            "user",
            f"Available actions: look around\n\n{task}\n\nObservation:\n"
            "This room is called the hallway. In it, you see:\n\tthe agent\n"
            "You also see:\n\tA door to the kitchen (that is open)\n",
        ),
    ]
    assert ExpertActor()(sw) == "Thought: the next move towards the goal.\nAction: go to kitchen"
    crafter = [
        ("system", ACTOR_SYSTEM),
        ("user", "Available actions: Noop, Move Left, Do\n\nSurvive.\n\nObservation:\ngrass"),
    ]
    assert ExpertActor()(crafter) is None


def test_the_fake_llm_command_serves_the_expert_as_fake_expert():
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "speedrunner.cli",
            "fake-llm",
            "--port",
            str(port),
            "--variants",
            "0",
            "--policy",
            "expert",
        ],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        banner = proc.stdout.readline()
        assert "policy expert" in banner and "model.name: fake-expert" in banner
        client = openai.OpenAI(
            base_url=f"http://127.0.0.1:{port}/v1", api_key="EMPTY", max_retries=0
        )
        assert [m.id for m in client.models.list()] == ["fake-expert"]
        messages = actor_messages(None)
        answer = client.chat.completions.create(
            model="fake-expert",
            max_tokens=64,
            messages=[{"role": r, "content": c} for r, c in messages],
        )
        assert answer.choices[0].message.content.endswith(f"Action: {bot_actions(KIND, SEED)[0]}")
    finally:
        proc.send_signal(signal.SIGINT)
        deadline = time.monotonic() + 10
        while proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
    assert proc.returncode == 130


def test_an_unknown_policy_is_refused_with_the_choices():
    proc = subprocess.run(
        [sys.executable, "-m", "speedrunner.cli", "fake-llm", "--policy", "genius"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2 and "choose from 'random', 'expert'" in proc.stderr
