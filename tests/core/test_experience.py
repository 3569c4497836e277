"""The inducer's analysis helpers (``core.experience``) over a small hand-written run: in this
process, and in the real analysis sandbox through the same setup code SpeedRunner runs."""

from __future__ import annotations

import ast
import dataclasses
import json
import re
import textwrap

import pytest

from speedrunner.core import experience
from speedrunner.core.codebook.api_view import analysis_helper_names, render_analysis_helpers
from speedrunner.core.codebook.callgraph import SkillStats
from speedrunner.core.episode_files import save_trajectory
from speedrunner.core.sandbox import open_analysis_session
from speedrunner.core.trajectory import ActorStep, Trajectory
from speedrunner.methods.wake_sleep.speedrunner import SETUP

GEN_1 = textwrap.dedent('''\
    """Generation 1."""


    def go_to(env, name):
        """Walk to name."""
        for _ in range(3):
            if _step(env):
                return True
        return False


    def _step(env):
        return env.act("go forward") == "ok"
    ''')
GEN_2 = GEN_1 + textwrap.dedent('''\


    def fetch(env, name):
        """Go to name and pick it up."""
        if go_to(env, name) and name:
            env.act("pick up")
    ''')


def tree(name: str, *calls: dict, actions: int = 0, **extra) -> dict:
    return {
        "name": name,
        "args": [],
        "kwargs": {},
        "calls": list(calls),
        "actions": ["go forward"] * actions,
        "returned": None,
        "error": None,
        "prints": "",
        **extra,
    }


def episode(index: int, version: int, trees: list[dict], *, success: bool = True) -> Trajectory:
    t = Trajectory(
        split="train",
        index=index,
        task="goto",
        seed=index,
        knowledge_version=version,
        instruction="go to the ball",
        success=success,
        llm_calls=len(trees) or 1,
    )
    for i, call in enumerate(trees):
        n = sum(len(node["actions"]) for node in _nodes(call))
        t.steps.append(
            ActorStep(
                index=i,
                call_id=f"c{i}",
                observation="o",
                raw_text="",
                reasoning=None,
                thought="",
                parsed_action=f"{call['name']}('ball')",
                executed=["go forward"] * n,
                skill_call=call,
            )
        )
    return t


def _nodes(call: dict) -> list[dict]:
    out, stack = [], [call]
    while stack:
        node = stack.pop()
        out.append(node)
        stack.extend(node["calls"])
    return out


@pytest.fixture
def run_dir(tmp_path):
    (tmp_path / "codebook").mkdir()
    (tmp_path / "codebook" / "gen_1.py").write_text(GEN_1)
    (tmp_path / "codebook" / "gen_2.py").write_text(GEN_2)
    capped = tree(
        "go_to",
        tree("_step", actions=1),
        tree("_step", actions=1),
        actions=0,
        error="stopped (max_actions)",
        stopped_by="max_actions",
    )
    for t in [
        episode(0, 1, [tree("go_to", tree("_step", actions=1), stopped_by="returned")]),
        episode(1, 1, [capped], success=False),
        episode(
            2,
            2,
            [
                tree(
                    "fetch",
                    tree("go_to", tree("_step", actions=2)),
                    actions=1,
                    stopped_by="returned",
                )
            ],
        ),
        episode(3, 2, []),
        episode(4, 2, [tree("fetch", stopped_by="returned")]),  # after ``upto``: never visible
    ]:
        save_trajectory(tmp_path, t)
    return tmp_path


@pytest.fixture
def configured(run_dir):
    experience.configure(run_dir / "episodes" / "train", run_dir / "codebook", upto=3)
    yield run_dir
    experience._where = None


def test_call_graphs_static_and_recorded(configured):
    assert experience.static_call_graph(1) == {"go_to": {"_step"}, "_step": set()}
    assert experience.static_call_graph(2) == {
        "go_to": {"_step"},
        "_step": set(),
        "fetch": {"go_to"},
    }
    assert experience.dynamic_call_graph(generation=1) == {"go_to": {"_step"}, "_step": set()}
    assert experience.dynamic_call_graph() == {
        "go_to": {"_step"},
        "_step": set(),
        "fetch": {"go_to"},
    }
    assert experience.call_graph_density(experience.static_call_graph(2)) == 2 / 6


def test_call_depths_static_and_recorded(configured):
    assert experience.static_call_depth(1) == 2 and experience.static_call_depth(2) == 3
    assert experience.dynamic_call_depth(generation=1) == 2 and experience.dynamic_call_depth() == 3
    assert experience.dynamic_call_depth(success=False) == 2
    assert experience.dynamic_call_depth(generation=7) == 0


def test_skill_stats_count_cap_hits_and_actions_per_call(configured):
    stats = experience.skill_stats(generation=1)
    assert stats["go_to"] == SkillStats(
        calls=2, successes=1, errors=0, cap_hits=1, interrupted=0, actions=3
    )
    assert stats["go_to"].actions_per_call == 1.5
    assert stats["_step"] == SkillStats(
        calls=3, successes=3, errors=0, cap_hits=0, interrupted=0, actions=3
    )
    assert experience.skill_stats(generation=2)["fetch"].actions == 3  # episode 4 is past ``upto``


def test_ast_and_complexity_of_any_generation(configured):
    module = experience.codebook_ast(2)
    assert [n.name for n in module.body if isinstance(n, ast.FunctionDef)] == [
        "go_to",
        "_step",
        "fetch",
    ]
    assert experience.complexity(1) == {"go_to": 3, "_step": 1}
    assert experience.complexity(2)["fetch"] == 3  # if, and


def test_every_helper_says_what_it_returns():
    """The inducer sees only each helper's signature and first docstring paragraph: each shows
    its return type, and the records it returns have their fields in that text."""
    text = render_analysis_helpers()
    lines = {
        name: next(line for line in text.splitlines() if line.startswith(f"- `{name}("))
        for name in analysis_helper_names()
    }
    for name, line in lines.items():
        assert re.search(r"\) -> [^`]+`", line), name
    stats = text[text.index("- `skill_stats(") : text.index("- `static_call_depth(")]
    for field in [f.name for f in dataclasses.fields(SkillStats)] + ["actions_per_call"]:
        assert re.search(rf"\b{field}\b", stats), field
    listed = text.split("- `Trajectory` fields: ", 1)[1].split(";", 1)[0].split(", ")
    assert listed == [f.name for f in dataclasses.fields(Trajectory)]


def test_the_helpers_run_in_the_analysis_sandbox(run_dir):
    """The inducer's ``run_python`` path: the setup SpeedRunner runs, then the helpers."""
    mounts = [run_dir / "episodes" / "train", run_dir / "codebook"]
    with open_analysis_session(mounts=mounts) as session:
        setup = SETUP.format(
            episodes=str(mounts[0]),
            codebook=str(mounts[1]),
            upto=3,
            helpers=", ".join(analysis_helper_names()),
        )
        assert session.run(setup, 30).error is None
        code = (
            "import json\ns = "
            "skill_stats(generation=1)['go_to']\nprint(json.dumps([sorted(static_call_graph(2)), "
            "static_call_depth(2), dynamic_call_depth(),\n                  s.cap_hits, "
            "s.actions_per_call, complexity(1),\n                  "
            "sorted(dynamic_call_graph(generation=2)['fetch'])]))\n"
        )
        result = session.run(code, 30)
    assert result.error is None, result.error
    assert json.loads(result.stdout) == [
        ["_step", "fetch", "go_to"],
        3,
        3,
        1,
        1.5,
        {"go_to": 3, "_step": 1},
        ["go_to"],
    ]
