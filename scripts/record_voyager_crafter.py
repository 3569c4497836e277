"""Write the recorded curriculum, action agent, critic and actor for the offline Voyager demo.

``configs/crafter/voyager-scripted-crafter.yaml`` runs Voyager on Crafter with the *scripted*
provider and the file this writes (``configs/crafter/recorded/voyager-crafter.yaml``). The
scripted model cannot write code, so every answer here was written by hand — a recorded
transcript, not an LLM — and says so in its text. Answers are keyed by call id
(``train/<world>/<iteration in world>/<agent>/<ask>``), so the run's seed fixes what happens.
Two worlds of four iterations; tasks continue in each world:

====== ===== ======================= ==================================================
world  iter  task                    the recorded skill
====== ===== ======================= ==================================================
0      0     collect wood (fixed)    ``collect_wood`` (+ helpers ``_step_towards``, ``_face``)
0      1     place table             tries ``Place Table`` with one wood: fails, the
                                     critic's critique reaches the next attempt
0      2     place table (attempt 2) calls ``collect_wood`` until 2 wood are held
0      3     make wood pickaxe       calls ``build_table`` only if no table is in view
                                     (the world continues: the table is still there)
1      4     collect sapling         a new world; ``collect_sapling``
1      5     place plant             calls ``collect_sapling``
1      6     make wood sword         calls ``build_table`` (-> ``collect_wood``): skills
                                     learned in world 0, from the stored generation
1      7     collect stone           calls ``craft_wood_pickaxe``
====== ===== ======================= ==================================================

The state decides every verdict here (each task names an achievement), so the recorded
critic is only a labelled fallback; the descriptions are what retrieval ranks (BM25). The
recorded evaluation actor calls ``craft_wood_sword()`` once, then waits. So the run shows the
machinery end to end (curriculum, sandboxed skills, critique, library, retrieval, reuse
across tasks and worlds), never a result about LLMs.

    python scripts/record_voyager_crafter.py     # rewrites the file
"""

from __future__ import annotations

from pathlib import Path

import yaml

OUT = Path(__file__).resolve().parents[1] / "src" / "speedrunner" / "configs" / "crafter" / "recorded" / "voyager-crafter.yaml"
EVAL_EPISODES = 2  # run.eval_episodes of the demo config
AGENT = "(recorded action agent, not an LLM)"
CURRICULUM = "(recorded curriculum, not an LLM)"
DESCRIBER = "(recorded description, not an LLM)"

COLLECT_WOOD = '''from speedrunner.benchmarks.crafter.skill_api import facing, inventory, nearest


def _step_towards(env, dx: int, dy: int, around: bool = False) -> str:
    """One step that brings the player closer to the offset (dx, dy); `around`: along the other
    axis instead (past whatever blocked the last step)."""
    if (abs(dx) >= abs(dy)) != around:
        return env.act("Move East" if dx > 0 else "Move West")
    return env.act("Move South" if dy > 0 else "Move North")


def _face(env, name: str, steps: int = 40) -> bool:
    """Walk until a `name` in view is on the cell in front, stepping around what blocks the way."""
    last = None
    for _ in range(steps):
        if env.done:
            return False
        if facing(env.state) == name:
            return True
        target = nearest(env.state, name)
        if target is None:
            return False
        offset = (target["dx"], target["dy"])
        _step_towards(env, offset[0], offset[1], around=offset == last)
        last = offset
    return facing(env.state) == name


def collect_wood(env) -> str:
    """Walk to the nearest tree in view and hit it until one more piece of wood is held.

    Returns:
        What happened.
    """
    start = inventory(env.state).get("wood", 0)
    for i in range(150):
        if env.done:
            return "the episode ended"
        if inventory(env.state).get("wood", 0) > start:
            return "collected wood"
        if facing(env.state) == "tree":
            env.act("Do")
        elif not _face(env, "tree"):
            env.act("Move West" if (i // 8) % 2 == 0 else "Move North")
    return "no wood collected"
'''
PLACE_TABLE_FIRST_TRY = '''from speedrunner.benchmarks.crafter.skill_api import achievements


def build_table(env) -> str:
    """Place a crafting table on the cell in front.

    Returns:
        What happened.
    """
    env.act("Place Table")
    return "placed a table" if "place_table" in achievements(env.state) else "no table placed"
'''
PLACE_TABLE = '''from speedrunner.benchmarks.crafter.skill_api import facing, inventory, nearest


def _face_free_cell(env) -> bool:
    """Turn (stepping where the way is free) until grass, sand or path is in front."""
    for move in ("Move West", "Move North", "Move East", "Move South") * 2:
        if facing(env.state) in ("grass", "sand", "path"):
            return True
        env.act(move)
    return facing(env.state) in ("grass", "sand", "path")


def build_table(env) -> str:
    """Collect the 2 wood a table needs (with collect_wood), then place it on a free cell in front.

    Returns:
        What happened.
    """
    for _ in range(4):
        if inventory(env.state).get("wood", 0) >= 2 or env.done:
            break
        collect_wood(env)
    if inventory(env.state).get("wood", 0) < 2:
        return "not enough wood for a table"
    if not _face_free_cell(env):
        return "no free cell to place a table on"
    env.act("Place Table")
    return "placed a table" if nearest(env.state, "table") is not None else "the table was not placed"
'''
MAKE_WOOD_PICKAXE = '''from speedrunner.benchmarks.crafter.skill_api import inventory, nearest


def craft_wood_pickaxe(env) -> str:
    """Make a wood pickaxe at a table: uses the table in view, or places one (build_table); collects
    the wood it needs (collect_wood).

    Returns:
        What happened.
    """
    if nearest(env.state, "table") is None:
        placed = build_table(env)
        if nearest(env.state, "table") is None:
            return f"no table: {placed}"
    if inventory(env.state).get("wood", 0) < 1:
        collect_wood(env)
    if not _face(env, "table"):
        return "could not get to the table"
    env.act("Make Wood Pickaxe")
    return "made a wood pickaxe" if inventory(env.state).get("wood_pickaxe", 0) else "no pickaxe made"
'''
COLLECT_SAPLING = '''from speedrunner.benchmarks.crafter.skill_api import facing, inventory


def collect_sapling(env) -> str:
    """Search the grass for a sapling: use Do on the grass in front (a sapling turns up about one
    time in ten), and step on when the cell in front is not grass.

    Returns:
        What happened.
    """
    start = inventory(env.state).get("sapling", 0)
    moves = ("Move West", "Move South", "Move East", "Move North")
    for i in range(150):
        if env.done:
            return "the episode ended"
        if inventory(env.state).get("sapling", 0) > start:
            return "collected a sapling"
        if facing(env.state) == "grass":
            env.act("Do")
        else:
            env.act(moves[(i // 5) % 4])
    return "no sapling found"
'''
PLACE_PLANT = '''from speedrunner.benchmarks.crafter.skill_api import achievements, facing, inventory


def plant_sapling(env) -> str:
    """Plant a sapling on the grass in front; collects one first if none is held (collect_sapling).

    Returns:
        What happened.
    """
    if inventory(env.state).get("sapling", 0) < 1:
        collect_sapling(env)
    if inventory(env.state).get("sapling", 0) < 1:
        return "no sapling to plant"
    for move in ("Move West", "Move North", "Move East", "Move South") * 2:
        if facing(env.state) == "grass":
            break
        env.act(move)
    env.act("Place Plant")
    return "planted a sapling" if "place_plant" in achievements(env.state) else "nothing was planted"
'''
MAKE_WOOD_SWORD = '''from speedrunner.benchmarks.crafter.skill_api import inventory, nearest


def craft_wood_sword(env) -> str:
    """Make a wood sword at a table: uses the table in view, or places one (build_table); collects
    the wood it needs (collect_wood).

    Returns:
        What happened.
    """
    if nearest(env.state, "table") is None:
        placed = build_table(env)
        if nearest(env.state, "table") is None:
            return f"no table: {placed}"
    if inventory(env.state).get("wood", 0) < 1:
        collect_wood(env)
    if not _face(env, "table"):
        return "could not get to the table"
    env.act("Make Wood Sword")
    return "made a wood sword" if inventory(env.state).get("wood_sword", 0) else "no sword made"
'''
COLLECT_STONE = '''from speedrunner.benchmarks.crafter.skill_api import facing, inventory


def collect_stone(env) -> str:
    """Mine one stone: makes a wood pickaxe first if none is held (craft_wood_pickaxe), then walks
    to the nearest stone in view (searching east and south) and uses Do on it.

    Returns:
        What happened.
    """
    if not inventory(env.state).get("wood_pickaxe"):
        made = craft_wood_pickaxe(env)
        if not inventory(env.state).get("wood_pickaxe"):
            return f"no pickaxe: {made}"
    start = inventory(env.state).get("stone", 0)
    for i in range(120):
        if env.done:
            return "the episode ended"
        if inventory(env.state).get("stone", 0) > start:
            return "collected stone"
        if facing(env.state) == "stone":
            env.act("Do")
        elif not _face(env, "stone"):
            env.act("Move East" if (i // 10) % 2 == 0 else "Move South")
    return "no stone collected"
'''

# (world, iteration in world) -> (curriculum task or None for no call, explanation, plan, code, description)
ITERATIONS: dict[tuple[int, int], tuple[str | None, str, str, str, str | None]] = {
    (0, 0): (None, "first attempt.", "find a tree, walk to it, hit it until wood is held.", COLLECT_WOOD,
             "Walks to the nearest tree in view, wandering west and north when none is in view, and uses Do "
             "on it until one more piece of wood is held."),
    (0, 1): ("place table", "first attempt.", "place the table right here.", PLACE_TABLE_FIRST_TRY, None),
    (0, 2): (None, "the table was not placed: a table takes 2 wood and a free cell in front.",
             "collect wood until 2 are held, turn to a free cell, place the table.", PLACE_TABLE,
             "Collects the two pieces of wood a crafting table needs by calling the wood collecting skill, "
             "turns to a free grass, sand or path cell and places a crafting table there."),
    (0, 3): ("make wood pickaxe", "first attempt.",
             "the table placed before is still in this world; walk next to it and make the pickaxe.",
             MAKE_WOOD_PICKAXE,
             "Makes a wood pickaxe next to a crafting table, placing a table first when none is in view and "
             "collecting the wood it needs; a pickaxe is what mining stone needs."),
    (1, 0): ("collect sapling", "first attempt.", "use Do on grass until a sapling turns up.", COLLECT_SAPLING,
             "Searches the grass for a sapling by using Do on the grass in front and moving on, until a "
             "sapling is held."),
    (1, 1): ("place plant", "first attempt.", "get a sapling with the library's skill, then plant it.",
             PLACE_PLANT,
             "Plants a sapling on a grass cell in front, collecting a sapling first with the sapling skill."),
    (1, 2): ("make wood sword", "first attempt.",
             "a new world has no table yet: the library's build_table collects the wood and places one.",
             MAKE_WOOD_SWORD,
             "Makes a wood sword next to a crafting table, placing a table first when none is in view and "
             "collecting the wood it needs; a sword helps to defeat zombies."),
    (1, 3): ("collect stone", "first attempt.", "make a pickaxe with the library's skill, then mine stone.",
             COLLECT_STONE,
             "Mines a stone with a wood pickaxe, making the pickaxe first with the pickaxe skill, and walks "
             "to the nearest stone in view to use Do on it."),
}
CURRICULUM_REASONS = {
    "place table": "wood is held now; a table is what every tool needs.",
    "make wood pickaxe": "a table stands in this world; a pickaxe opens up stone.",
    "collect sapling": "a new world; saplings need no tools.",
    "place plant": "a sapling is held; planting it is the next step.",
    "make wood sword": "tools from the library work in any world; a sword protects me.",
    "collect stone": "with a pickaxe, stone is next.",
}


def action_answer(explain: str, plan: str, code: str) -> str:
    return f"Explain: {AGENT} {explain}\nPlan: {plan}\nCode:\n```python\n{code}```\n"


def script() -> dict[str, object]:
    entries: dict[str, object] = {
        # Fallbacks, for any call outside the recording (e.g. a longer schedule).
        "curriculum": [f"Reasoning: {CURRICULUM} the recording has no more tasks; practise the first one.\n"
                       "Task: collect wood"],
        "inducer": [action_answer("the recording has no more skills; the first one again.",
                                  "collect wood.", COLLECT_WOOD)],
        "critic": ['{"reasoning": "(recorded critic, not an LLM) the recording has no judgement here.", '
                   '"success": false, "critique": "(recorded critic) no advice recorded."}'],
        "description": [f"{DESCRIBER} A skill from the recorded transcript."],
        "actor": ["Thought: (recorded actor, not an LLM) the library makes a sword; call it.\n"
                  "Action: craft_wood_sword()",
                  "Thought: (recorded actor, not an LLM) nothing more is recorded; wait.\nAction: Noop"],
    }
    for episode in range(EVAL_EPISODES):  # before any skill is learned: nothing to call
        entries[f"eval/at0000/{episode:04d}/actor/0000"] = ("Thought: (recorded actor, not an LLM) no skill "
                                                            "learned yet; wait.\nAction: Noop")
    for (world, k), (task, explain, plan, code, description) in ITERATIONS.items():
        prefix = f"train/{world:04d}/{k:04d}"
        if task is not None:
            entries[f"{prefix}/curriculum/0000"] = f"Reasoning: {CURRICULUM} {CURRICULUM_REASONS[task]}\nTask: {task}"
        entries[f"{prefix}/action/0000"] = action_answer(explain, plan, code)
        if description is not None:
            entries[f"{prefix}/description/0000"] = f"{DESCRIBER} {description}"
    return entries


def _block(dumper: yaml.SafeDumper, text: str) -> yaml.ScalarNode:
    """Multi-line answers as YAML block scalars, so the file reads like the answers themselves."""
    return dumper.represent_scalar("tag:yaml.org,2002:str", text, style="|" if "\n" in text else None)


def main() -> None:
    header = ("# Written by scripts/record_voyager_crafter.py: a RECORDED curriculum, action agent, critic\n"
              "# and actor for the scripted provider (model.script). Hand-written, not an LLM's answers;\n"
              "# see that script's docstring.\n"
              "# Protocol (docs/protocol.md): the demo config that reads this file says which parts it keeps.\n")
    OUT.parent.mkdir(parents=True, exist_ok=True)
    dumper = type("Dumper", (yaml.SafeDumper,), {})
    dumper.add_representer(str, _block)
    OUT.write_text(header + yaml.dump(script(), Dumper=dumper, sort_keys=True, width=120, allow_unicode=True), "utf-8")
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
