"""ASI's sleep phase in-process: append-only, validated, optionally replay-verified, and
restored byte-exact. The sandbox and the env are replaced by fakes here (the end-to-end
tests in tests/e2e/test_asi.py use the real ones)."""

from __future__ import annotations

import json

import pytest

from speedrunner.core.method import MethodContext, SkillSupport
from speedrunner.core.trajectory import ReplayResult, Trajectory
from speedrunner.methods.wake_sleep.asi import ASIMethod
from speedrunner.methods.wake_sleep.configs import ASIConfig
from tests.runtime.fakes import PolicyModel

API = "speedrunner.benchmarks.babyai.skill_api"
TURN_AROUND = '''def turn_around(env) -> str:
    """Face the other way.

    Returns:
        The observation text after turning.
    """
    env.act("turn left")
    return env.act("turn left")
'''
STEP_BACK = TURN_AROUND.replace("turn_around", "step_back").replace(
    "Face the other way.", "Step back one cell."
)


def answer(functions: str, script: str = "turn_around()") -> str:
    return f"<functions>\n```python\n{functions}```\n</functions>\n<script>\n{script}\n</script>"


def episode(index: int, success: bool = True, version: int = 0) -> Trajectory:
    t = Trajectory(
        split="train",
        index=index,
        task="goto",
        seed=100 + index,
        knowledge_version=version,
        instruction="go to the red ball",
        eval_point=None,
    )
    t.success = success
    return t


def method(
    tmp_path, answers: dict[int, str], *, replay=None, **config
) -> tuple[ASIMethod, PolicyModel]:
    model = PolicyModel(lambda messages, purpose, call_id: answers[int(call_id.rsplit("/", 1)[1])])
    support = SkillSupport(
        api_module=API,
        api_names=(),
        primitives=("turn left", "turn right", "go forward", "pick up", "drop", "toggle"),
        open_skills=lambda skills: None,
        smoke_test=lambda source: None,
        replay=replay or (lambda *a: ReplayResult(success=True)),
        sandbox_tier="fake",
    )
    asi = ASIMethod(
        ASIConfig(**config),
        MethodContext(run_dir=tmp_path, inducer=model, benchmark="babyai", skills=support),
    )
    asi.restore(0)
    return asi, model


def test_successful_episodes_are_induced_in_index_order_and_names_are_never_replaced(tmp_path):
    asi, model = method(
        tmp_path,
        {1: answer(TURN_AROUND), 3: answer(TURN_AROUND.replace("turn left", "turn right"))},
    )
    result = asi.sleep([episode(3), episode(2, success=False), episode(1)], batch_index=0)
    assert [call_id for _, call_id, _ in model.calls] == [
        "sleep/0000/asi/0001",
        "sleep/0000/asi/0003",
    ]
    assert result.knowledge.version == 1 and "turn_around()" in result.knowledge.text
    assert result.knowledge.skills.signatures == {"turn_around": "turn_around() -> str"}
    source = (tmp_path / "codebook" / "gen_1.py").read_text()
    assert (
        source.count("def turn_around") == 1 and "turn right" not in source
    )  # the first one stays
    notes = json.loads((tmp_path / "sleep" / "asi_0000.json").read_text())["inductions"]
    assert notes[0]["added"] == ["turn_around"] and "exists" in notes[1]["skipped"][0]
    # The second induction saw the first one's function in the codebook it was shown.
    assert "def turn_around" in model.calls[1][2][1].content


def test_a_rejected_function_is_reported_and_the_codebook_stays(tmp_path):
    bad = TURN_AROUND.replace('    env.act("turn left")\n', '    eval("1")\n', 1)
    asi, _ = method(tmp_path, {0: answer(bad), 1: answer("def broken(:\n")})
    asi.sleep([episode(0), episode(1)], batch_index=0)
    notes = json.loads((tmp_path / "sleep" / "asi_0000.json").read_text())["inductions"]
    assert "forbidden-name" in notes[0]["rejected"] and "turn_around" in notes[0]["rejected"]
    assert "do not parse" in notes[1]["rejected"]
    assert (
        asi.knowledge().skills is None
        and "def " not in (tmp_path / "codebook" / "gen_1.py").read_text()
    )


@pytest.mark.parametrize(
    ("replayed", "kept"),
    [
        (ReplayResult(success=True, called={"turn_around"}), True),
        (ReplayResult(success=False, called={"turn_around"}), False),
        (ReplayResult(success=True, called=set()), False),
    ],
)
def test_replay_verification_keeps_functions_only_from_a_successful_replay_that_calls_them(
    tmp_path, replayed, kept
):
    seen = []

    def replay(task, seed, skills, lines):
        seen.append((task, seed, sorted(skills.signatures), lines))
        return replayed

    asi, _ = method(
        tmp_path,
        {0: answer(TURN_AROUND, "turn_around()\ngo forward")},
        replay=replay,
        replay_verify=True,
    )
    asi.sleep([episode(0)], batch_index=0)
    assert seen == [("goto", 100, ["turn_around"], ["turn_around()", "go forward"])]
    assert ("turn_around" in asi.knowledge().text) is kept


def test_restore_loads_each_generation_byte_exact(tmp_path):
    asi, _ = method(tmp_path, {0: answer(TURN_AROUND), 1: answer(STEP_BACK)})
    asi.sleep([episode(0)], batch_index=0)
    asi.sleep([episode(1, version=1)], batch_index=1)
    text = asi.knowledge().text
    again, _ = method(tmp_path, {})
    again.restore(2)
    assert again.knowledge().text == text and sorted(again.knowledge().skills.signatures) == [
        "step_back",
        "turn_around",
    ]
    again.restore(1)
    assert sorted(again.knowledge().skills.signatures) == ["turn_around"]


def test_the_sleep_record_counts_how_each_induction_was_read(tmp_path):
    answers = {
        0: answer(TURN_AROUND),  # the exact form
        1: "<think>a step back helps</think>\n" + answer(STEP_BACK, "step_back()"),  # repaired
        2: "I found nothing reusable.",
    }  # lost
    asi, _ = method(tmp_path, answers)
    asi.sleep([episode(0), episode(1), episode(2)], batch_index=0)
    record = json.loads((tmp_path / "sleep" / "asi_0000.json").read_text())
    assert [n["format"] for n in record["inductions"]] == ["ok", "repaired", "lost"]
    assert record["format"] == {
        "inducer": {"turns": 3, "repaired": 1, "lost": 1, "truncated": 0, "dropped_calls": 0}
    }
    assert record["truncated_turns"] == 0
