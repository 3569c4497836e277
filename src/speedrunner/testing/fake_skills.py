"""The skills the realistic fake's SpeedRunner inducer writes: useful ones where it knows the
benchmark from the prompt's skill API, a small generic one elsewhere.

BabyAI: ``go_to(target)`` walks up to the named object (turning to look for it, stepping
around what blocks the way) until it is right in front, and ``pick_up_object(target)`` does
that and picks it up; both read only the observation (``env.state``, through the skill API's
``find``/``in_front``), so a mission's steps take one actor call each. ScienceWorld:
``solve_task()``, the task-4 player's plan (``scienceworld_player.CODEBOOK``). Other
benchmarks: a skill that plays the first primitive action the API view lists twice.
"""

from __future__ import annotations

from speedrunner.testing.scienceworld_player import CODEBOOK as SCIENCEWORLD_CODEBOOK

__all__ = ["BABYAI_SKILLS", "BABYAI_SKILL_NAMES", "skills_for"]

BABYAI_API = "speedrunner.benchmarks.babyai.skill_api"
SCIENCEWORLD_API = "speedrunner.benchmarks.scienceworld.skill_api"
BABYAI_SKILL_NAMES = ("go_to", "pick_up_object")

BABYAI_SKILLS = f'''from {BABYAI_API} import find, in_front


def _blocked(env) -> bool:
    return in_front(env.state) is not None or env.state.get("walls", {{}}).get("forward") == 1


def go_to(env, target: str) -> str:
    """Go to the nearest object named `target` until it is right in front (turns to look for it).

    Args:
        target: The object as the mission names it, colour and type, e.g. "red ball".

    Returns:
        The observation text when it stops: facing the object, or the episode over.
    """
    text = env.text
    unseen = 0
    for _ in range(60):
        if env.done:
            return text
        obj = find(env.state, target)
        if obj is None:
            unseen += 1
            text = env.act("go forward" if unseen % 4 == 0 and not _blocked(env) else "turn right")
        elif obj.dx == 0 and obj.dy == 1:
            return text
        elif obj.dy == 0:
            text = env.act("turn left" if obj.dx < 0 else "turn right")
        elif not _blocked(env):
            text = env.act("go forward")
        elif obj.dx != 0:
            text = env.act("turn left" if obj.dx < 0 else "turn right")
        else:
            for action in ("turn right", "go forward", "turn left"):
                if not env.done:
                    text = env.act(action)
        if obj is not None:
            unseen = 0
    return text


def pick_up_object(env, target: str) -> str:
    """Go to the nearest object named `target` and pick it up.

    Args:
        target: The object as the mission names it, colour and type, e.g. "grey key".

    Returns:
        The observation text after picking it up (or where it stopped).
    """
    text = go_to(env, target)
    front = in_front(env.state)
    wanted = front is not None and all(w in (front.type, front.color) for w in target.split())
    if wanted and not env.done:
        text = env.act("pick up")
    return text
'''


def _repeat(name: str, primitive: str) -> str:
    return (
        f"def {name}(env) -> str:\n"
        f'    """Play `{primitive}` up to twice, stopping when the episode ends.\n\n'
        f'    Returns:\n        The observation text after the last action.\n    """\n'
        f"    text = env.text\n    for _ in range(2):\n        if env.done:\n            break\n"
        f"        text = env.act({primitive!r})\n    return text\n"
    )


def skills_for(prompt: str, name: str, primitive: str) -> tuple[str, tuple[str, ...]]:
    """(source to add, its public names) for the inducer prompt ``prompt``; ``name`` and
    ``primitive`` make the generic skill where no useful one is known."""
    if f"from {BABYAI_API} import" in prompt:
        return BABYAI_SKILLS, BABYAI_SKILL_NAMES
    if f"from {SCIENCEWORLD_API} import" in prompt:
        return SCIENCEWORLD_CODEBOOK, ("solve_task",)
    return _repeat(name, primitive), (name,)
