"""SpeedRunner's inducer loop in-process: tools, validation at once, turn records, the turn
budget, and speedrunner_no_cl's missing interpreter. The model is a fake that answers by
turn; ``run_python`` runs in the real analysis sandbox over episodes stored on disk (the
end-to-end tests in tests/e2e/test_speedrunner.py use the real train entry point)."""

from __future__ import annotations

import dataclasses
import functools
import json

import pytest

from speedrunner.core.episode_files import save_trajectory
from speedrunner.core.method import MethodContext, SkillSupport
from speedrunner.core.sandbox import open_analysis_session
from speedrunner.core.trajectory import ActorStep, ReplayResult, Trajectory
from speedrunner.methods.wake_sleep import speedrunner as sr
from speedrunner.methods.wake_sleep.configs import SpeedRunnerConfig, SpeedRunnerNoCLConfig
from speedrunner.methods.wake_sleep.speedrunner_tools import parse_tool_call
from tests.runtime.fakes import PolicyModel

API = "speedrunner.benchmarks.babyai.skill_api"
PRIMITIVES = ("turn left", "turn right", "go forward", "pick up", "drop", "toggle")
TURN_AROUND = '''def turn_around(env) -> str:
    """Face the other way.

    Returns:
        The observation text after turning.
    """
    env.act("turn left")
    return env.act("turn left")
'''
STEP = '''def step(env) -> str:
    """One step forward.

    Returns:
        The observation text after the step.
    """
    return env.act("go forward")
'''


def tool(name: str, code: str | None = None) -> str:
    block = f"\n```python\n{code}```" if code is not None else ""
    return f"Thinking about it.\nTool: {name}{block}"


def episode(
    index: int, *, success: bool = True, version: int = 0, skill: str | None = None
) -> Trajectory:
    t = Trajectory(
        split="train",
        index=index,
        task="goto",
        seed=100 + index,
        knowledge_version=version,
        instruction="go to the red ball",
        eval_point=None,
        llm_calls=3,
        env_actions=4,
    )
    t.success = success
    tree = (
        {
            "name": skill,
            "args": [],
            "kwargs": {},
            "calls": [],
            "actions": ["turn left"] * 2,
            "returned": "ok",
            "error": "boom" if not success else None,
        }
        if skill
        else None
    )
    t.steps = [
        ActorStep(
            index=0,
            call_id="a",
            observation="a wall 1 step forward",
            raw_text="",
            reasoning=None,
            thought="t",
            parsed_action=f"{skill}()" if skill else "go forward",
            executed=["turn left", "turn left"] if skill else ["go forward"],
            skill_call=tree,
        )
    ]
    return t


AUTO_ANALYSIS = functools.partial(open_analysis_session, tier="auto")


def method(
    tmp_path,
    turns: list[str] | dict[int, list[str]],
    cls=sr.SpeedRunnerMethod,
    replay=None,
    open_analysis=AUTO_ANALYSIS,
    **config,
):
    def policy(messages, purpose, call_id):
        _, b, _, t = call_id.split("/")
        answers = turns[int(b)] if isinstance(turns, dict) else turns
        return answers[int(t)]

    model = PolicyModel(policy)
    support = SkillSupport(
        api_module=API,
        api_names=(),
        primitives=PRIMITIVES,
        open_skills=lambda skills: None,
        smoke_test=lambda source: None,
        replay=replay or (lambda *a: ReplayResult(success=True)),
        sandbox_tier="auto",
        open_analysis=open_analysis,
    )
    config_cls = SpeedRunnerConfig if cls is sr.SpeedRunnerMethod else SpeedRunnerNoCLConfig
    m = cls(
        config_cls(**config),
        MethodContext(run_dir=tmp_path, inducer=model, benchmark="babyai", skills=support),
    )
    m.restore(0)
    return m, model


def stored(tmp_path, batch: list[Trajectory]) -> list[Trajectory]:
    for t in batch:
        save_trajectory(tmp_path, t)
    return batch


def turn_record(tmp_path, b: int, t: int) -> dict:
    return json.loads((tmp_path / "sleep" / f"batch_{b:04d}" / f"turn_{t:04d}.json").read_text())


def test_the_protocol_reads_one_tool_line_and_its_block():
    offered = {"run_python", "rename_function", "submit", "view_codebook"}
    call = parse_tool_call("Let me look.\nTool: run_python\n```python\nprint(1)\n```\n", offered)
    assert (call.tool, call.block, call.problem) == ("run_python", "print(1)\n", None)
    assert parse_tool_call("Tool: rename_function go_to walk_to", offered).args == (
        "go_to",
        "walk_to",
    )
    assert parse_tool_call("Tool: submit\nadded a skill", offered).block == "added a skill"
    assert "no `Tool:` line" in parse_tool_call("I am done.", offered).problem
    assert (
        "unknown tool" in parse_tool_call("Tool: add_function\n```python\nx\n```", offered).problem
    )
    assert "two names" in parse_tool_call("Tool: rename_function go_to", offered).problem
    assert (
        "only the first (`Tool: view_codebook`) ran, not `Tool: submit`"
        in parse_tool_call("Tool: view_codebook\nTool: submit", offered).note
    )


def test_the_inducer_runs_code_over_the_experience_edits_the_draft_and_submits(tmp_path):
    batch = stored(tmp_path, [episode(0), episode(1, success=False)])
    code = (
        "eps = episodes()\n"
        "print([(t.index, t.success, t.primitive_actions()) for t in eps])\n"
        "print(len(episodes(success=False)), generations())\n"
    )
    m, model = method(
        tmp_path,
        [
            tool("run_python", code),
            tool("add_function", TURN_AROUND),
            tool("add_function", STEP.replace("return env.act", 'eval("1")\n    return env.act')),
            tool("view_codebook"),
            "Tool: submit\nAdded turn_around.",
        ],
    )
    result = m.sleep(batch, batch_index=0)

    assert [c for _, c, _ in model.calls] == [f"sleep/0000/inducer/{t:04d}" for t in range(5)]
    ran = turn_record(tmp_path, 0, 0)
    assert ran["tool"] == "run_python"
    assert ran["result"].splitlines() == [
        "[(0, True, ['go forward']), (1, False, ['go forward'])]",
        "1 [0]",
    ]
    # The model saw that result in its next prompt, and the rejection right after the bad edit.
    assert "[(0, True, ['go forward'])" in model.calls[1][2][-1].content
    assert (
        "rejected" in model.calls[3][2][-1].content
        and "forbidden-name" in model.calls[3][2][-1].content
    )
    assert "def turn_around" in turn_record(tmp_path, 0, 3)["result"]
    assert result.knowledge.version == 1 and result.knowledge.skills.signatures == {
        "turn_around": "turn_around() -> str"
    }
    record = json.loads((tmp_path / "sleep" / "batch_0000" / "sleep.json").read_text())
    assert record["ended_by"] == "submit" and record["note"] == "Added turn_around."
    assert record["edits"] == ["add_function turn_around"] and record["run_python_calls"] == 1
    assert (
        record["system_prompt"] == model.calls[0][2][0].content
    )  # a reader can replay the whole conversation
    # The first message showed the batch in brief and the (empty) codebook.
    first = model.calls[0][2][1].content
    assert (
        "episode 1 (goto): FAILURE" in first
        and "3 LLM calls" in first
        and "(no functions yet)" in first
    )


def test_delete_make_private_and_stats_in_a_later_sleep(tmp_path):
    m, model = method(
        tmp_path,
        {
            0: [tool("add_function", TURN_AROUND), tool("add_function", STEP), "Tool: submit"],
            1: [
                tool("view_function turn_around"),
                "Tool: delete_function turn_around",
                "Tool: make_private step",
                "Tool: submit",
            ],
        },
    )
    m.sleep(stored(tmp_path, [episode(0)]), batch_index=0)
    m.sleep(
        stored(
            tmp_path,
            [
                episode(1, version=1, skill="turn_around"),
                episode(2, version=1, success=False, skill="turn_around"),
            ],
        ),
        batch_index=1,
    )
    assert (
        "- turn_around (public): 2 / 1 / 1" in model.calls[4][2][1].content
    )  # aggregate statistics shown
    assert "calls 2, successes 1, errors 1" in turn_record(tmp_path, 1, 0)["result"]
    assert "1 skill calls (1 failed): turn_around x1" in model.calls[4][2][1].content
    source = (tmp_path / "codebook" / "gen_2.py").read_text()
    assert "def turn_around" not in source and "def _step(env)" in source
    assert m.knowledge().skills is None  # nothing public is left for the actor


def test_running_out_of_turns_submits_the_last_valid_draft_and_says_so(tmp_path):
    m, _ = method(
        tmp_path,
        [tool("add_function", TURN_AROUND), "no tool here", "Tool: view_codebook"],
        max_inducer_turns=3,
    )
    m.sleep(stored(tmp_path, [episode(0)]), batch_index=0)
    record = json.loads((tmp_path / "sleep" / "batch_0000" / "sleep.json").read_text())
    assert record["ended_by"] == "out_of_turns" and "ran out of turns (3)" in record["note"]
    assert "turn_around" in m.knowledge().skills.signatures
    assert "Not run: no `Tool:` line" in turn_record(tmp_path, 0, 1)["result"]


def test_long_output_is_truncated_with_a_note_and_errors_come_back_as_tracebacks(tmp_path):
    m, _ = method(
        tmp_path,
        [tool("run_python", "print('x' * 5000)\n"), tool("run_python", "1 / 0\n"), "Tool: submit"],
        max_tool_output_chars=300,
    )
    m.sleep(stored(tmp_path, [episode(0)]), batch_index=0)
    long = turn_record(tmp_path, 0, 0)["result"]
    assert (
        long.startswith("x" * 300)
        and "[output truncated: showing the first 300 of 5000 characters]" in long
    )
    assert "ZeroDivisionError" in turn_record(tmp_path, 0, 1)["result"]


def test_no_cl_offers_no_interpreter_and_never_starts_the_analysis_sandbox(tmp_path):
    def refuse(**kwargs):
        raise AssertionError("speedrunner_no_cl started an analysis session")

    m, model = method(
        tmp_path,
        [
            tool("run_python", "print(1)\n"),
            "Tool: view_episode 0",
            tool("add_function", TURN_AROUND),
            "Tool: submit",
        ],
        cls=sr.SpeedRunnerNoCLMethod,
        open_analysis=refuse,
    )
    m.sleep(stored(tmp_path, [episode(0)]), batch_index=0)
    system = model.calls[0][2][0].content
    assert "run_python" not in system and "view_episode" in system
    assert "unknown tool 'run_python'" in turn_record(tmp_path, 0, 0)["result"]
    assert "[0] obs: a wall 1 step forward" in turn_record(tmp_path, 0, 1)["result"]
    assert "turn_around" in m.knowledge().skills.signatures
    # The prompts differ only by the interpreter's tool.
    with_cl, _ = method(tmp_path / "cl", [])
    code_tools = [sr.PROMPTS.render(f"tool_{t}") + "\n" for t in ("run_python", "test_skill")]
    assert all(t in with_cl.system_prompt() and t not in system for t in code_tools)
    assert with_cl.system_prompt().replace(code_tools[0], "").replace(code_tools[1], "") == system


def test_a_sleep_sees_only_episodes_up_to_its_batch_so_a_rerun_after_a_kill_is_identical(tmp_path):
    turns = [
        tool("run_python", "print([t.index for t in episodes()])\n"),
        tool("add_function", TURN_AROUND),
        "Tool: submit",
    ]
    first, _ = method(tmp_path / "a", turns)
    first.sleep(stored(tmp_path / "a", [episode(0)]), batch_index=0)
    again, _ = method(tmp_path / "b", turns)
    stored(tmp_path / "b", [episode(0)])
    save_trajectory(
        tmp_path / "b", episode(1, version=1)
    )  # a later episode already on disk is not visible
    again.sleep([episode(0)], batch_index=0)
    assert (
        turn_record(tmp_path / "b", 0, 0)["result"]
        == turn_record(tmp_path / "a", 0, 0)["result"]
        == "[0]"
    )
    assert (tmp_path / "a" / "codebook" / "gen_1.py").read_bytes() == (
        tmp_path / "b" / "codebook" / "gen_1.py"
    ).read_bytes()


def test_test_skill_replays_the_episode_prefix_then_calls_the_draft_s_skill(tmp_path):
    seen = []

    def replay(task, seed, skills, lines):
        seen.append((task, seed, sorted(skills.signatures), lines))
        return ReplayResult(
            success=False,
            called={"turn_around"},
            env_actions=3,
            final_text="a wall 2 steps left",
            returned="ok",
        )

    t0 = episode(0)
    t0.steps.append(
        ActorStep(
            index=1,
            call_id="b",
            observation="o",
            raw_text="",
            reasoning=None,
            thought="",
            parsed_action="turn right",
            executed=["turn right"],
        )
    )
    m, _ = method(
        tmp_path,
        [
            tool("add_function", TURN_AROUND),
            tool("test_skill 0 1", "turn_around()\n"),
            tool("test_skill 0 9", "turn_around()\n"),
            "Tool: submit",
        ],
        replay=replay,
    )
    m.sleep(stored(tmp_path, [t0]), batch_index=0)
    assert seen == [("goto", 100, ["turn_around"], ["go forward", "turn_around()"])]
    result = turn_record(tmp_path, 0, 1)["result"]
    assert "up to step 1 (1 primitive actions), then `turn_around()`" in result
    assert (
        "success: False; skills that ran: turn_around; env actions in all: 3; returned: 'ok'"
        in result
    )
    assert result.endswith("a wall 2 steps left")
    assert "No step '9'" in turn_record(tmp_path, 0, 2)["result"]


def test_rejections_name_the_inducer_s_tools_not_the_edit_classes(tmp_path):
    m, model = method(
        tmp_path,
        [tool("add_function", TURN_AROUND), tool("add_function", TURN_AROUND), "Tool: submit"],
    )
    m.sleep(stored(tmp_path, [episode(0)]), batch_index=0)
    rejected = turn_record(tmp_path, 0, 1)["result"]
    assert "exists already" in rejected and "`Tool: edit_function turn_around`" in rejected
    assert "EditFunction" not in rejected


@pytest.mark.parametrize("bad", ["Tool: delete_function nope", "Tool: make_public nope"])
def test_a_rejected_edit_leaves_the_draft_and_the_next_turn_sees_why(tmp_path, bad):
    m, model = method(tmp_path, [bad, "Tool: submit"])
    m.sleep(stored(tmp_path, [episode(0)]), batch_index=0)
    assert (
        "rejected" in model.calls[1][2][-1].content
        and "the draft is unchanged" in model.calls[1][2][-1].content
    )


class _CutOnce(PolicyModel):
    """Turn 1 is cut at max_tokens inside its block, as a provider with max_tokens=64 would."""

    def complete(self, messages, *, purpose, call_id, **sampling):
        c = super().complete(messages, purpose=purpose, call_id=call_id)
        if call_id.endswith("/0001"):
            return dataclasses.replace(c, finish_reason="length", sampling={"max_tokens": 64})
        return c


def test_repaired_lost_and_cut_turns_are_recorded_per_turn_and_per_phase(tmp_path):
    batch = stored(tmp_path, [episode(0)])
    answers = [
        "<think>helpers first</think>\n**Tool:** add_function\n```python\n"
        + STEP
        + "\n\n"
        + TURN_AROUND.replace("turn_around", "spin")
        + "```",
        # cut by max_tokens:
        "Tool: add_function\n```python\ndef cut(env):\n    env.act('go forward')\n",
        "I am done.",  # no tool line
        "Tool: view_codebook\nTool: view_function step\nTool: submit",  # three calls, one runs
        "Tool: submit",
    ]
    turns = list(answers)
    m, model = method(tmp_path, turns)
    m.model = _CutOnce(model.policy)
    m.sleep(batch, batch_index=0)
    first, cut, lost = (turn_record(tmp_path, 0, t) for t in range(3))
    assert first["format"] == "repaired" and first["result"].startswith(
        "Accepted. Draft: public step, spin; private (none)"
    )
    assert "think block" in first["repairs"] and "marked-up Tool label" in first["repairs"]
    assert (cut["finish_reason"], cut["format"]) == ("length", "lost")
    assert cut["result"].startswith(
        "Not run: the ```python block of `add_function` was cut off before its closing "
        "fence (your answer was cut off at max_tokens=64"
    )
    assert lost["format"] == "lost" and lost["finish_reason"] is None
    three = turn_record(tmp_path, 0, 3)
    assert (three["tool"], three["format"], three["dropped_calls"]) == (
        "view_codebook",
        "repaired",
        2,
    )
    record = json.loads((tmp_path / "sleep" / "batch_0000" / "sleep.json").read_text())
    assert record["format"] == {
        "inducer": {"turns": 5, "repaired": 2, "lost": 2, "truncated": 1, "dropped_calls": 2}
    }
    assert record["truncated_turns"] == 1
    assert record["edits"] == ["add_function spin, step"]


BREAK_THE_SESSION = "import sys\nsys.modules['speedrunner.core.experience'] = None\n"
FORGE_A_REPLY = (
    "import json, os, sys\n"
    "os.write(int(sys.argv[3]), "
    "(json.dumps({'id': -1, 'stdout': '', 'error': 'forged'}) + '\\n').encode())\n"
)


def test_code_that_breaks_its_session_or_forges_a_reply_costs_one_turn_not_the_sleep(tmp_path):
    """Before, either ended the run: the next run_python's setup failed, or read the forged
    reply, and raised. Now the session is restarted, the turn says so, the sleep goes on."""
    m, _ = method(
        tmp_path,
        [
            tool("run_python", BREAK_THE_SESSION),
            tool("run_python", "print(len(episodes()))\n"),
            tool("run_python", FORGE_A_REPLY),
            tool("run_python", "print(len(episodes()))\n"),
            tool("add_function", STEP),
            "Tool: submit",
        ],
    )
    m.sleep(stored(tmp_path, [episode(0), episode(1)]), batch_index=0)
    assert turn_record(tmp_path, 0, 1)["result"] == (
        "(earlier code left the session broken; it was restarted and variables are lost)\n2"
    )
    assert "broke the protocol" in turn_record(tmp_path, 0, 2)["result"]
    assert turn_record(tmp_path, 0, 3)["result"] == "2"
    record = json.loads((tmp_path / "sleep" / "batch_0000" / "sleep.json").read_text())
    assert record["sandbox_violations"] == 1 and record["edits"] == ["add_function step"]


FORGE_THE_NEXT_SETUP = """import inspect, json, os, sys, threading, time
import speedrunner.core.experience as experience
rid = next(
    f.frame.f_locals["request"]["id"] for f in inspect.stack() if "request" in f.frame.f_locals
)
real = experience.configure
def slow(*args, **kwargs):  # the next setup's real reply comes a second late
    time.sleep(1)
    return real(*args, **kwargs)
experience.configure = slow
def forge():
    time.sleep(0.3)  # after this run's real reply: an error "reply" for the next request, the setup
    guess = rid + 1 if isinstance(rid, int) else "0" * 32
    reply = json.dumps({"id": guess, "stdout": "", "error": "forged"}) + "\\n"
    os.write(int(sys.argv[3]), reply.encode())
threading.Thread(target=forge, daemon=True).start()
print("ok")
"""


def test_a_forged_reply_to_the_next_setup_is_a_counted_violation(tmp_path):
    """Attack: a thread left by one run_python answered the next turn's setup with an error of its
    own ahead of the real reply; the session was restarted as if earlier code had broken it, and no
    violation was counted. Now the forged reply is a violation, counted in sleep.json."""
    m, _ = method(
        tmp_path,
        [
            tool("run_python", FORGE_THE_NEXT_SETUP),
            tool("run_python", "print(len(episodes()))\n"),
            "Tool: submit",
        ],
    )
    m.sleep(stored(tmp_path, [episode(0), episode(1)]), batch_index=0)
    assert turn_record(tmp_path, 0, 0)["result"] == "ok"
    assert turn_record(tmp_path, 0, 1)["result"] == (
        "(earlier code left the session broken; it was restarted and variables are lost)\n2"
    )
    record = json.loads((tmp_path / "sleep" / "batch_0000" / "sleep.json").read_text())
    assert record["sandbox_violations"] == 1
