"""Write the recorded inducer and actor for the offline SpeedRunner demo on BabyAI.

``configs/babyai/speedrunner-scripted-seq.yaml`` runs SpeedRunner with the *scripted*
provider and the file this writes (``configs/babyai/recorded/speedrunner-babyai-seq.yaml``). The
scripted model cannot write code, so the inducer's answers were written here by hand —
a recorded inducer, not an LLM:

- sleep 0: analyse batch 0 with ``run_python``; add ``go_to`` (a navigation skill) and
  ``pick_up_then_go_to``; submit.
- sleep 1: analyse batch 1's skill calls with ``run_python``; make ``go_to`` private (it
  becomes ``_go_to``, a helper the actor no longer sees); submit.
- every later sleep: submit unchanged.

The actor is recorded too: before the first sleep it only turns left (every episode spends
its 30 LLM calls); afterwards its first answer in each episode calls
``pick_up_then_go_to`` with the two objects of that episode's mission (read here from the
level, which the run's seed fixes), and if the skill fails it turns left again. So
``metrics.jsonl`` shows LLM calls per episode falling after the first sleep: the machinery
working end to end, never a result about LLMs.

    python scripts/record_speedrunner_babyai.py     # rewrites the file; the run's seed is 0
"""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from speedrunner.benchmarks.babyai.levels import make_level
from speedrunner.core.seeding import episode_seed

OUT = Path(__file__).resolve().parents[1] / "src" / "speedrunner" / "configs" / "babyai" / "recorded" / "speedrunner-babyai-seq.yaml"
KIND = "pick_up_seq_go_to"
RUN_SEED, ROLLOUTS, SLEEP_EVERY, EVAL_POINTS, EVAL_EPISODES = 0, 200, 10, (50, 100, 150, 200), 30
MISSIONS = [re.compile(r"^pick up (?:the|a) (\w+ \w+), then go to (?:the|a) (\w+ \w+)$"),
            re.compile(r"^go to (?:the|a) (\w+ \w+) after you pick up (?:the|a) (\w+ \w+)$")]

GO_TO = '''from speedrunner.benchmarks.babyai.skill_api import find


def go_to(env, name: str) -> str:
    """Walk to the nearest visible object called `name` and face it, turning to look for it.

    Args:
        name: the object as the mission names it, e.g. "red ball".

    Returns:
        "arrived" when the object is directly in front, else why the walk stopped.
    """
    turns = 0
    for _ in range(40):
        if env.done:
            return "the episode ended"
        obj = find(env.state, name)
        if obj is None:
            if turns >= 4:
                return f"no {name} in view"
            turns += 1
            env.act("turn left")
            continue
        if obj.dx == 0 and obj.dy == 1:
            return "arrived"
        if obj.dy == 0:
            env.act("turn left" if obj.dx < 0 else "turn right")
            continue
        before = env.text
        env.act("go forward")
        if env.text == before:  # something is in the way: step around it
            env.act("turn right")
            env.act("go forward")
            env.act("turn left")
    return "gave up after 40 moves"
'''
PICK_UP_THEN_GO_TO = '''def pick_up_then_go_to(env, first: str, second: str) -> str:
    """Pick up `first`, then walk to `second` (the pick_up_seq_go_to missions).

    Args:
        first: the object to pick up, e.g. "blue key".
        second: the object to go to afterwards, e.g. "grey box".

    Returns:
        "done" when both parts succeeded, else which part stopped and why.
    """
    reached = go_to(env, first)
    if reached != "arrived":
        return f"pick up {first}: {reached}"
    env.act("pick up")
    if env.done:
        return "done"
    reached = go_to(env, second)
    return "done" if reached == "arrived" or env.done else f"go to {second}: {reached}"
'''
ANALYSE_BATCH = '''import collections
import re
eps = episodes(batch=0)
print(len(eps), "episodes,", sum(t.success for t in eps), "successes; LLM calls:", [t.llm_calls for t in eps])
print("actions taken:", collections.Counter(a for t in eps for a in t.primitive_actions()).most_common())
shapes = collections.Counter(re.sub(r"(the|a) [a-z]+ [a-z]+", "X", t.instruction) for t in eps)
print("mission shapes:", shapes.most_common())
'''
ANALYSE_CALLS = '''import collections
eps = episodes(batch=1)
calls = [c for t in eps for c in t.skill_calls()]
print(len(calls), "skill calls in", len(eps), "episodes;", sum(t.success for t in eps), "successes")
print("returned:", collections.Counter(str(c["tree"]["returned"]) for c in calls).most_common())
print("nested calls:", collections.Counter(n["name"] for c in calls for n in c["tree"]["calls"]).most_common())
print("LLM calls per episode:", [t.llm_calls for t in eps])
'''
NOTE = "(recorded inducer, not an LLM) "


def turn(text: str, tool: str, code: str | None = None) -> str:
    block = f"\n```python\n{code}```" if code is not None else ""
    return f"{NOTE}{text}\nTool: {tool}{block}"


def objects(kind: str, seed: int) -> tuple[str, str]:
    """(object to pick up, object to go to) of one level's mission."""
    mission = make_level(kind, seed).mission
    first = MISSIONS[0].match(mission)
    if first:
        return first.group(1), first.group(2)
    second = MISSIONS[1].match(mission)
    if second is None:
        raise ValueError(f"unexpected mission {mission!r}")
    return second.group(2), second.group(1)


def call(kind: str, seed: int) -> str:
    first, second = objects(kind, seed)
    return (f"Thought: (recorded actor, not an LLM) the codebook has pick_up_then_go_to; "
            f"call it with the mission's objects.\nAction: pick_up_then_go_to({first!r}, {second!r})")


def script() -> dict[str, object]:
    entries: dict[str, object] = {
        "actor": ["Thought: (recorded actor, not an LLM) no skill for this yet; look around.\nAction: turn left"],
        "inducer": [f"{NOTE}Nothing to change after this batch.\nTool: submit\nno change (recorded inducer)"],
        "sleep/0000/inducer/0000": turn("First, what happened in batch 0.", "run_python", ANALYSE_BATCH),
        "sleep/0000/inducer/0001": turn("Every mission is pick up X then go to Y; a navigation skill first.",
                                        "add_function", GO_TO),
        "sleep/0000/inducer/0002": turn("Then the whole mission as one call.", "add_function", PICK_UP_THEN_GO_TO),
        "sleep/0000/inducer/0003": f"{NOTE}\nTool: submit\nadded go_to and pick_up_then_go_to",
        "sleep/0001/inducer/0000": turn("How did the new skills do in batch 1?", "run_python", ANALYSE_CALLS),
        "sleep/0001/inducer/0001": turn("The actor only needs the mission skill; go_to becomes a helper.",
                                        "make_private go_to"),
        "sleep/0001/inducer/0002": f"{NOTE}\nTool: submit\ngo_to is now the private helper _go_to",
    }
    for i in range(SLEEP_EVERY, ROLLOUTS):
        entries[f"train/{i:04d}/actor/0000"] = call(KIND, episode_seed(RUN_SEED, "train", i))
    for point in EVAL_POINTS:
        for i in range(EVAL_EPISODES):
            entries[f"eval/at{point:04d}/{i:04d}/actor/0000"] = call(KIND, episode_seed(RUN_SEED, "eval", i))
    return entries


def _block(dumper: yaml.SafeDumper, text: str) -> yaml.ScalarNode:
    """Multi-line answers as YAML block scalars, so the file reads like the turns themselves."""
    return dumper.represent_scalar("tag:yaml.org,2002:str", text, style="|" if "\n" in text else None)


def main() -> None:
    header = ("# Written by scripts/record_speedrunner_babyai.py: a RECORDED inducer and actor for the\n"
              "# scripted provider (model.script). Not an LLM's answers; see that script's docstring.\n"
              "# Protocol (docs/protocol.md): the demo config that reads this file says which parts it keeps.\n")
    OUT.parent.mkdir(parents=True, exist_ok=True)
    dumper = type("Dumper", (yaml.SafeDumper,), {})
    dumper.add_representer(str, _block)
    text = yaml.dump(script(), Dumper=dumper, sort_keys=True, width=120, allow_unicode=True)
    OUT.write_text(header + text, "utf-8")
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
