"""SpeedRunner on Crafter and ScienceWorld: the quick-test run through the real train entry
point and a fake server. Smaller claims than on BabyAI (tests/e2e/test_speedrunner.py): the
inducer ran code over the experience, edited the codebook (an add, a make-private and a
delete), the actor called the new skill in the next batch, and generations, sleep records
and metrics were written."""

from __future__ import annotations

import json

import pytest

from speedrunner.testing.fake_llm_server import Reply

from .harness import policy_reply, run, start_server, train_cmd
from .speedrunner_fakes import INDUCER, tool

pytestmark = pytest.mark.slow


def skill(name: str, doc: str, body: str) -> str:
    return f'''def {name}(env) -> str:
    """{doc}

    Returns:
        The observation text after the last action.
    """
{body}'''


CASES = {
    "crafter": (
        "speedrunner-gpt-crafter.yaml",
        {
            "main": skill(
                "do_twice",
                "Interact with what you face, twice.",
                '    env.act("Do")\n    return env.act("Do")\n',
            ),
            "extra": skill("wait_once", "Do nothing for one turn.", '    return env.act("Noop")\n'),
            "helper": skill(
                "wait_twice",
                "Do nothing for two turns.",
                '    env.act("Noop")\n    return env.act("Noop")\n',
            ),
        },
    ),
    "scienceworld": (
        "speedrunner-gpt-t4.yaml",
        {
            "main": skill("survey", "Look around the room.", '    return env.act("look around")\n'),
            "extra": skill(
                "check_inventory", "Show what you carry.", '    return env.act("inventory")\n'
            ),
            "helper": skill(
                "glance", "Look around the room once.", '    return env.act("look around")\n'
            ),
        },
    ),
}
ANALYSIS = (
    "eps = episodes()\n"
    'print("episodes", [t.index for t in eps], "llm calls", [t.llm_calls for t in eps])\n'
    'print("actions", sorted({a for t in eps for a in t.primitive_actions()})[:5])\n'
)


def name(source: str) -> str:
    return source.split("(", 1)[0].removeprefix("def ")


class Fake:
    """The harness's policy actor, which calls the main skill first whenever it is offered; and a
    scripted inducer: sleep 0 runs code, adds two skills; sleep 1 runs code, adds a helper, makes
    it private and deletes the extra skill."""

    def __init__(self, skills: dict[str, str]) -> None:
        self.skills = skills
        self.main = name(skills["main"])

    def __call__(self, body: dict) -> Reply:
        messages = body["messages"]
        if INDUCER in messages[0]["content"]:
            second = f"def {self.main}(" in messages[1]["content"]
            turns = (
                [
                    tool("run_python", ANALYSIS),
                    tool("add_function", self.skills["helper"]),
                    f"Tool: make_private {name(self.skills['helper'])}",
                    f"Tool: delete_function {name(self.skills['extra'])}",
                    "Tool: submit\nrefactored",
                ]
                if second
                else [
                    tool("run_python", ANALYSIS),
                    tool("add_function", self.skills["main"]),
                    tool("add_function", self.skills["extra"]),
                    "Tool: submit\nadded two skills",
                ]
            )
            t = sum(m["role"] == "assistant" for m in messages)
            return Reply(
                text=turns[t] if t < len(turns) else "Tool: submit",
                prompt_tokens=900,
                completion_tokens=90,
            )
        if f"{self.main}()" in messages[1]["content"] and not any(
            m["role"] == "assistant" for m in messages
        ):
            return Reply(
                text=f"Thought: use the skill.\nAction: {self.main}()",
                prompt_tokens=100,
                completion_tokens=12,
            )
        return policy_reply(body)


@pytest.mark.parametrize("bench", sorted(CASES))
def test_speedrunner_runs_code_edits_the_codebook_and_the_actor_calls_the_skill(tmp_path, bench):
    config, skills = CASES[bench]
    server = start_server(Fake(skills))
    try:
        proc = run(
            train_cmd(
                bench,
                config,
                tmp_path / "run",
                server.base_url,
                "--set",
                "method.max_inducer_turns=6",
            ),
            timeout=900,
        )
    finally:
        server.stop()
    assert proc.returncode == 0, proc.stderr[-3000:]
    run_dir = tmp_path / "run"
    main, extra, helper = (name(skills[k]) for k in ("main", "extra", "helper"))

    first = json.loads((run_dir / "sleep" / "batch_0000" / "sleep.json").read_text())
    assert first["ended_by"] == "submit" and first["run_python_calls"] == 1
    analysis = json.loads((run_dir / "sleep" / "batch_0000" / "turn_0000.json").read_text())[
        "result"
    ]
    assert analysis.startswith("episodes [0, 1] llm calls [")
    assert first["edits"] == [f"add_function {main}", f"add_function {extra}"]
    second = json.loads((run_dir / "sleep" / "batch_0001" / "sleep.json").read_text())
    assert second["edits"] == [
        f"add_function {helper}",
        f"make_private {helper}",
        f"delete_function {extra}",
    ]
    gen2 = (run_dir / "codebook" / "gen_2.py").read_text()
    assert (
        f"def _{helper}(env)" in gen2 and f"def {extra}" not in gen2 and second["public"] == [main]
    )

    for index in (2, 3):  # the next batch played generation 1 and called the skill first
        ep = json.loads((run_dir / "episodes" / "train" / f"{index:04d}.json").read_text())
        assert ep["knowledge_version"] == 1
        assert ep["steps"][0]["skill_call"]["name"] == main and ep["steps"][0]["executed"]
    metrics = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [m["knowledge_version"] for m in metrics] == [0, 0, 1, 1]
    assert all(m["cost_sleep_share_usd"] > 0 for m in metrics)  # the inducer's calls, amortised
