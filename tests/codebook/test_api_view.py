"""What the skill inducers are told about the API (``core/codebook/api_view``).

For each benchmark, ``speedrunner``, ``speedrunner_no_cl`` and ``asi`` sleep on the same
stored batch with a recording model; the view in their first prompts must be one text,
rendered from the skill API module itself: every public name with its signature and
docstring, no internal name, the rules with every reserved primitive and the caps in force,
and an ``env.state`` example taken from the batch's stored first observation. The stated
coordinate conventions are checked against the benchmarks' own envs.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import json
import re
import sys
import types

import pytest

from speedrunner.benchmarks.babyai.levels import make_level
from speedrunner.benchmarks.babyai.text import ACTION_INDEX
from speedrunner.benchmarks.babyai.text import observe as babyai_observe
from speedrunner.core import experience
from speedrunner.core.codebook import (
    AddFunction,
    Author,
    Codebook,
    EditRejected,
    Rules,
    apply_edits,
)
from speedrunner.core.codebook.api_view import (
    StateExample,
    add_function_rule,
    analysis_helper_names,
    api_names,
    inducer_caps,
    render_analysis_helpers,
    render_api_view,
)
from speedrunner.core.codebook.rules import ALLOWED_IMPORTS, FORBIDDEN_NAMES
from speedrunner.core.config.schema import MethodConfig
from speedrunner.core.env import Observation
from speedrunner.core.episode_files import save_trajectory
from speedrunner.core.method import MethodContext, SkillSupport
from speedrunner.core.runtime.skill_support import first_observation, fresh_envs
from speedrunner.core.skill import SkillEnv
from speedrunner.core.trajectory import ActorStep, ReplayResult, Trajectory
from speedrunner.methods.wake_sleep import speedrunner as sr
from speedrunner.methods.wake_sleep.asi import ASIMethod
from speedrunner.methods.wake_sleep.codebook_knowledge import codebook_rules, inducer_api_view
from speedrunner.methods.wake_sleep.configs import (
    ASIConfig,
    SpeedRunnerConfig,
    SpeedRunnerNoCLConfig,
)
from tests.runtime.fakes import PolicyModel

INTERNAL = (
    "local_transport",
    "Transport",
    "_send",
    "STATE_LAYOUT",
    "COORDINATES",
    "configure",
    "_where",
)
"""Names that are not part of what a skill or analysis code may use."""
CAPS = {"max_skill_actions": 37, "skill_timeout_s": 12.5}
JVM_OPTIONS = "-Xmx384m -XX:+UseSerialGC"


def _babyai(task: str, seed: int) -> Observation:
    text, structured = babyai_observe(make_level(task, seed))
    return Observation(text, structured)


def _crafter_env():
    from speedrunner.benchmarks.crafter.env import CrafterTextEnv

    return CrafterTextEnv(area=(64, 64), length=10000)


def _scienceworld_env():
    from speedrunner.benchmarks.scienceworld.env import ScienceWorldTextEnv

    return ScienceWorldTextEnv(jvm_options=JVM_OPTIONS)


BENCHMARKS = {
    # name: (primitives attribute, observe(task, seed), the batch's (task, seed) pairs)
    "babyai": ("ACTIONS", _babyai, [("goto", 11), ("pick_up_seq_go_to", 12)]),
    "crafter": (
        "ACTION_NAMES",
        functools.partial(first_observation, fresh_envs(_crafter_env)),
        [("crafter", 5), ("crafter", 6)],
    ),
    "scienceworld": (
        None,
        functools.partial(first_observation, fresh_envs(_scienceworld_env)),
        [("4-4/train#0", 0)],
    ),
}


def api_module(bench: str) -> str:
    return f"speedrunner.benchmarks.{bench}.skill_api"


def support_for(bench: str, observe) -> SkillSupport:
    attr, _, _ = BENCHMARKS[bench]
    api = importlib.import_module(api_module(bench))
    return SkillSupport(
        api_module=api_module(bench),
        api_names=tuple(api.__all__),
        primitives=tuple(getattr(api, attr)) if attr else (),
        open_skills=lambda skills: None,
        smoke_test=lambda source: None,
        replay=lambda *a: ReplayResult(success=True),
        sandbox_tier="fake",
        observe=observe,
    )


def stored_batch(run_dir, pairs, observe) -> list[Trajectory]:
    """Episodes as the runner stores them: the first step's observation is the reset's text."""
    batch = []
    for i, (task, seed) in enumerate(pairs):
        t = Trajectory(
            split="train",
            index=i,
            task=task,
            seed=seed,
            knowledge_version=0,
            instruction="the task",
            success=True,
            llm_calls=1,
            env_actions=1,
        )
        t.steps = [
            ActorStep(
                index=0,
                call_id=f"train/{i:04d}/actor/0000",
                observation=observe(task, seed).text,
                raw_text="Action: x",
                reasoning=None,
                thought="",
                parsed_action="x",
            )
        ]
        save_trajectory(run_dir, t)
        batch.append(t)
    return batch


def first_prompts(tmp_path, bench: str) -> tuple[dict[str, str], list[Trajectory], SkillSupport]:
    """The first inducer prompt of each skill-writing method, all sleeping on one batch."""
    _, observe, pairs = BENCHMARKS[bench]
    observe = functools.cache(observe)  # one JVM / world per (task, seed), not one per method
    support = support_for(bench, observe)
    batch = stored_batch(tmp_path, pairs, observe)
    prompts = {}
    for name, cls, config in (
        ("speedrunner", sr.SpeedRunnerMethod, SpeedRunnerConfig(**CAPS)),
        ("speedrunner_no_cl", sr.SpeedRunnerNoCLMethod, SpeedRunnerNoCLConfig(**CAPS)),
        ("asi", ASIMethod, ASIConfig(**CAPS)),
    ):
        model = PolicyModel(
            lambda m, p, c: (
                "Tool: submit\nnothing yet" if "inducer" in c else "<functions>\n</functions>"
            )
        )
        run_dir = tmp_path / name
        run_dir.mkdir()
        method = cls(
            config, MethodContext(run_dir=run_dir, inducer=model, benchmark=bench, skills=support)
        )
        method.restore(0)
        method.sleep(batch, batch_index=0)
        prompts[name] = model.calls[0][2][1].content
    return prompts, batch, support


def view_in(prompt: str) -> str:
    start = prompt.index("## Codebook rules")
    end = (
        prompt.index("```", prompt.index("`env.state`:\n```json") + len("`env.state`:\n```json"))
        + 3
    )
    return prompt[start:end]


def section(view: str, title: str) -> str:
    start = view.index(title)
    end = view.find("\n## ", start + 1)
    return view[start : end if end >= 0 else len(view)]


def _case(bench: str):
    marks = [pytest.mark.slow] if bench == "scienceworld" else []
    return pytest.param(bench, marks=marks, id=bench)


@pytest.mark.parametrize("bench", [_case(b) for b in BENCHMARKS])
def test_the_three_skill_methods_show_one_view_rendered_from_the_skill_api(tmp_path, bench):
    if bench == "scienceworld":
        pytest.importorskip("scienceworld", reason="the scienceworld package is not installed")
        import shutil

        if shutil.which("java") is None:
            pytest.skip("ScienceWorld needs a Java runtime (no `java` on PATH)")
    prompts, batch, support = first_prompts(tmp_path, bench)
    views = {name: view_in(p) for name, p in prompts.items()}
    assert views["speedrunner"] == views["speedrunner_no_cl"] == views["asi"]
    view = views["asi"]
    rules = Rules.for_api(support.api_module, support.primitives, None)
    assert view == inducer_api_view(support, rules, ASIConfig(**CAPS), batch)

    # Every public name, with its signature and docstring; exactly those names.
    api = importlib.import_module(support.api_module)
    shown = section(view, "## The skill API")
    listed = re.findall(r"^- `(?:class )?(\w+)", shown, re.MULTILINE)
    assert listed == api_names(support.api_module) == [n for n in api.__all__ if n != "SkillEnv"]
    for name in listed:
        obj = getattr(api, name)
        if inspect.isfunction(obj):
            params = list(inspect.signature(obj).parameters)
            assert re.search(rf"`{name}\({params[0]}: [^`]*\) -> [^`]+`", shown), name
            first_line = inspect.getdoc(obj).splitlines()[0].replace("``", "`")
            assert first_line in shown, name
    # The env object's members, from the class.
    members = section(view, "## The `env` object")
    for member in ("env.text", "env.state", "env.done", "env.act(action: str) -> str"):
        assert f"`{member}" in members
    assert inspect.getdoc(SkillEnv.act).replace("``", "`") in members
    # No internal name, and SkillEnv is never offered as an import.
    for name in INTERNAL:
        assert name not in view, name
    assert not re.search(r"import [^`]*SkillEnv", view)

    # The rules: imports, forbidden and reserved names, validation, the caps in force.
    rules_text = section(view, "## Codebook rules")
    for module in ALLOWED_IMPORTS:
        assert f"`{module}`" in rules_text
    for name in FORBIDDEN_NAMES:
        assert f"`{name}`" in rules_text
    for reserved in rules.reserved_actions():
        assert f"`{reserved}`" in rules_text
    if bench == "babyai":
        assert "`pick_up`" in rules_text and "`go_forward`" in rules_text
    assert "callees before callers" in rules_text and "import cleanly in the sandbox" in rules_text
    limits = rules.limits
    assert (
        f"at most {limits.max_function_lines} lines and {limits.max_function_chars} characters"
        in rules_text
    )
    assert f"at most {limits.max_docstring_chars} characters" in rules_text
    assert "at most 37 primitive actions" in rules_text and "12.5 s" in rules_text

    # The state example is the batch's stored first observation that says most, with its state.
    state = section(view, "## `env.state`")
    assert api.STATE_LAYOUT in state and api.COORDINATES in state
    first = min(batch, key=lambda t: (-len(t.steps[0].observation.splitlines()), t.index))
    assert f"episode {first.index} (task {first.task}, seed {first.seed})" in state
    stored = first.steps[0].observation
    assert f"`env.text`:\n```\n{stored[:1500]}" in state
    shown_state = json.loads(state.split("```json\n", 1)[1].split("\n```", 1)[0])
    real = support.observe(first.task, first.seed).structured
    assert set(shown_state) == set(real)
    for key, value in real.items():
        if len(json.dumps(value)) < 200:
            assert shown_state[key] == value, key

    # Only speedrunner (which can run code) gets the analysis helpers; both inducers get the edit
    # rule.
    assert render_analysis_helpers() in prompts["speedrunner"]
    assert (
        "Analysis helpers" not in prompts["speedrunner_no_cl"]
        and "Analysis helpers" not in prompts["asi"]
    )
    assert (
        add_function_rule() in prompts["speedrunner"]
        and add_function_rule() in prompts["speedrunner_no_cl"]
    )
    size = len(view) / 4
    print(f"{bench}: view {len(view)} chars, ~{size:.0f} tokens (chars/4)")
    assert size < 3000  # in every inducer prompt: keep it a page, not a manual


def test_the_caps_line_states_each_cap_in_force_in_plain_numbers():
    """What the inducer reads: no cap reads as the episode's budget and the derived time limit;
    a configured cap (the library's through ``codebook_rules``) as its number; env.scratch's
    size."""
    api = api_module("babyai")
    support = support_for("babyai", None)
    free = render_api_view(api, codebook_rules(support, ASIConfig()), ASIConfig(), example=None)
    assert (
        "- One skill call may take up to the episode's remaining budget of env actions; it is "
        "stopped after 60 s plus 0.25 s per action it may take (wall-clock time)."
    ) in free
    assert (
        "each function at most 60 lines and 3000 characters, a public docstring at most 800 "
        "characters; the whole library: no cap on functions, no cap on characters."
    ) in free
    assert (
        "`env.scratch` keeps at most 8000 characters of JSON between the skill calls of one episode"
        in free
    )
    assert (
        "It is the only state that lasts from one call to the next: each call starts from a "
        "fresh copy" in free
    )
    assert "A skill's returned value may be at most 8000 characters of JSON" in free
    assert "No episode of this batch has an observation" in free

    config = ASIConfig(
        max_skill_actions=50, skill_timeout_s=60.0, max_functions=40, max_codebook_chars=60000
    )
    capped = render_api_view(api, codebook_rules(support, config), config, example=None)
    assert (
        "- One skill call takes at most 50 primitive actions; at the cap it stops cleanly and the "
        "actor's turn ends; it is stopped after 60 s of wall-clock time."
    ) in capped
    assert "the whole library: at most 40 functions, at most 60000 characters." in capped


def test_each_inducer_is_told_the_caps_on_its_own_work(tmp_path):
    """Next to the shared view: SpeedRunner's turns, tool output, episode view and analysis time;
    ASI's functions per answer and episode length. From the config, in the first prompt."""
    prompts, _, _ = first_prompts(tmp_path, "babyai")
    assert (
        "Caps on your own work: at most 20 turns (then the last valid draft is submitted); each "
        "tool result is cut at 4000 characters (a note says so); `view_episode` shows at most "
        "6000 characters of an episode; `run_python` code is stopped after 60 s."
    ) in prompts["speedrunner"]
    assert (
        "each tool result is cut at 4000 characters" in prompts["speedrunner_no_cl"]
        and "run_python" not in prompts["speedrunner_no_cl"]
    )
    assert (
        "Caps on your own work: at most 5 new functions are read from one answer (later ones are "
        "ignored); the episode is shown in at most 12000 characters."
    ) in prompts["asi"]
    assert inducer_caps(
        SpeedRunnerConfig(max_inducer_turns=7, max_tool_output_chars=900)
    ).startswith(
        "Caps on your own work: at most 7 turns (then the last valid draft is submitted); each "
        "tool result is cut at 900 characters"
    )


def test_env_members_added_to_the_class_appear_and_private_ones_do_not(monkeypatch):
    class GrownEnv(SkillEnv):
        notes: dict
        """Per-episode notes that survive between skill calls."""

        def __init__(self, *args, **kwargs) -> None:
            super().__init__(*args, **kwargs)
            self._secret = 1

        @property
        def steps_taken(self) -> int:
            """Env actions this call has taken."""
            return 3

        def _internal(self) -> None:
            """Not for skills."""

    module = types.ModuleType("fake_skill_api")
    module.__all__ = ["SkillEnv", "helper"]
    module.SkillEnv = GrownEnv

    def helper(state: dict) -> int:
        """A pure view."""
        return 0

    module.helper = helper
    monkeypatch.setitem(sys.modules, "fake_skill_api", module)
    view = render_api_view(
        "fake_skill_api",
        Rules("fake_skill_api", frozenset(module.__all__), (), None),
        MethodConfig(name="any"),
        example=StateExample("text", {"k": list(range(20))}, "a test"),
    )
    env = section(view, "## The `env` object")
    assert "`env.steps_taken -> int`: Env actions this call has taken." in env
    assert "`env.notes: dict`: Per-episode notes that survive between skill calls." in env
    # The real members skills rely on (the sandbox's budget and scratch) are shown too.
    assert "`env.actions_left: int | None`" in env and "`env.scratch: dict[str, Any]`" in env
    assert (
        "`env.act(action: str) -> str`" in env and "_secret" not in view and "_internal" not in view
    )
    assert "`helper(state: dict) -> int`: A pure view." in view
    assert '"... (12 more)"' in view  # long lists in the example are cut, saying so


def test_analysis_helpers_are_the_experience_modules_public_functions(monkeypatch):
    names = analysis_helper_names()
    assert names == [
        n
        for n in experience.__all__
        if n != "configure" and inspect.isfunction(getattr(experience, n))
    ]
    text = render_analysis_helpers()
    for name in names:
        doc = inspect.getdoc(getattr(experience, name)).split("\n\n")[0].splitlines()[0]
        assert f"`{name}(" in text and doc.replace("``", "`") in text
    assert "configure" not in text
    assert "`Trajectory` fields:" in text and "skill_calls() -> list[dict[str, Any]]" in text

    def call_depth(generation: int) -> int:
        """Deepest static call chain of one generation.

        More detail that stays out of the prompt."""
        return 0

    monkeypatch.setattr(experience, "call_depth", call_depth, raising=False)
    monkeypatch.setattr(experience, "__all__", [*experience.__all__, "call_depth"])
    grown = render_analysis_helpers()
    assert (
        "`call_depth(generation: int) -> int`: Deepest static call chain of one generation."
        in grown
    )
    assert "More detail" not in grown and "call_depth" in sr.SETUP.format(
        episodes="e", codebook="c", upto=0, helpers=", ".join(analysis_helper_names())
    )


def test_one_add_function_may_hold_a_helper_with_its_caller_as_the_inducer_is_told():
    """The rule in the start prompt, the tool's description and the edit machinery agree: a
    caller and its new helper in one block are accepted as one edit."""
    assert add_function_rule() == (
        "One `add_function` may hold several functions (e.g. helpers with their caller), "
        "checked together as one edit."
    )
    assert "one or more new functions" in sr.PROMPTS.render("tool_add_function")
    two = AddFunction("def _b():\n    return 1\n\n\ndef _a():\n    return _b()\n")
    result = apply_edits(
        Codebook.empty(), [two], Author(method="test"), rules=Rules("m", frozenset(), (), None)
    )
    assert not isinstance(result, EditRejected)
    assert [f.name for f in Codebook(result.source, result.meta).functions] == ["_b", "_a"]


def test_babyai_coordinates_are_what_the_level_does():
    """dx right, dy forward; turn left maps (dx, dy) to (dy, -dx), turn right to (-dy, dx)."""
    checked = 0
    for seed in range(40):
        for turn, mapped in (
            ("turn left", lambda dx, dy: (dy, -dx)),
            ("turn right", lambda dx, dy: (-dy, dx)),
        ):
            level = make_level("goto", seed)
            before = babyai_observe(level)[1]["objects"]
            level.step(ACTION_INDEX[turn])
            after = {
                (o["type"], o["color"]): (o["dx"], o["dy"])
                for o in babyai_observe(level)[1]["objects"]
            }
            for o in before:
                key, expected = (o["type"], o["color"]), mapped(o["dx"], o["dy"])
                if key in after and list(after).count(key) == 1:
                    assert after[key] == expected, (seed, turn, o)
                    checked += 1
    assert checked >= 5
    level = make_level("goto", 0)
    for o in babyai_observe(level)[1]["objects"]:
        assert -3 <= o["dx"] <= 3 and 0 <= o["dy"] <= 6


def test_crafter_coordinates_are_what_the_world_does():
    """dx > 0 east, dy > 0 south; a move turns the player to face that way."""
    env = _crafter_env()
    env.reset("crafter", 3)
    for action, (dx, dy), word in (
        ("Move East", (1, 0), "east"),
        ("Move North", (0, -1), "north"),
        ("Move West", (-1, 0), "west"),
        ("Move South", (0, 1), "south"),
    ):
        facing = env.step(action).observation.structured["facing"]
        assert (facing["dx"], facing["dy"], facing["direction"]) == (dx, dy, word)
    for thing in env.step("Noop").observation.structured["nearby"]:
        assert ("east" in thing["direction"]) == (thing["dx"] > 0) and (
            "south" in thing["direction"]
        ) == (thing["dy"] > 0)
        assert (
            thing["distance"] == abs(thing["dx"]) + abs(thing["dy"])
            and abs(thing["dx"]) <= 4
            and abs(thing["dy"]) <= 3
        )
    env.close()
