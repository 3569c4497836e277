"""Play a written-down script of actions (primitives and skill calls) on one task and seed.

ASI's replay verification: the inducer rewrites a successful episode as a script that uses
its new functions; the script is played on the same task and seed, in the sandbox, with no
LLM. The new functions are kept only if the replay succeeds and really calls them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from speedrunner.core.env import TextEnv
from speedrunner.core.runtime.actor import parse_answer
from speedrunner.core.runtime.caps import episode_actions_left, resolve_call_caps
from speedrunner.core.runtime.skill_call import SkillRunner, Skills
from speedrunner.core.trajectory import ReplayResult
from speedrunner.errors import InvalidActionError

__all__ = ["called_names", "replay_script"]


def called_names(tree: dict[str, Any]) -> set[str]:
    """Names of the skill in ``tree`` and of every skill it called, at any depth."""
    names = {tree["name"]} if tree.get("name") else set()
    for child in tree.get("calls", []):
        names |= called_names(child)
    return names


def replay_script(
    env: TextEnv,
    task: str,
    seed: int,
    lines: Iterable[str],
    *,
    skills: Skills,
    open_skills: Callable[[Skills], SkillRunner],
    max_skill_actions: int | None,
    timeout_s: float | None,
    max_env_actions: int | None,
) -> ReplayResult:
    """Reset ``env`` to (task, seed) and play ``lines``, one actor action each, until the
    episode ends, the lines run out, or a line cannot be played."""
    observation = env.reset(task, seed)
    state: dict[str, Any] = {
        "text": observation.text,
        "structured": observation.structured,
        "done": False,
    }
    result = ReplayResult(success=False)
    runner: SkillRunner | None = None
    free_text = env.accepts_free_text  # the actor's rule: what env.step accepts may be typed

    def act(action: str) -> dict[str, Any]:
        if state["done"]:
            return {"error": f"the episode is over; {action!r} was not taken"}
        if max_env_actions is not None and result.env_actions >= max_env_actions:
            return {"error": "the episode's action budget is spent"}
        try:
            step = env.step(action)
        except InvalidActionError as e:
            return {"error": str(e)}
        result.env_actions += 1
        state.update(
            text=step.observation.text, structured=step.observation.structured, done=step.done
        )
        return dict(state)

    try:
        for number, line in enumerate((line.strip() for line in lines), start=1):
            if not line or line.startswith("#"):
                continue
            if state["done"]:
                break
            parsed = parse_answer(
                f"Action: {line}", list(env.actions), free_text=free_text, skills=skills.signatures
            )
            if parsed.action is None:
                result.error = f"line {number}: {parsed.error}"
                break
            if parsed.skill_call is None:
                reply = act(parsed.action)
                if "error" in reply:
                    result.error = f"line {number}: {reply['error']}"
                    break
                continue
            if runner is None:
                runner = open_skills(skills)
            caps = resolve_call_caps(
                max_skill_actions,
                timeout_s,
                episode_actions_left(env, max_env_actions, result.env_actions),
            )
            outcome = runner.call(
                parsed.skill_call,
                step=act,
                observation=dict(state),
                max_actions=caps.max_actions,
                timeout_s=caps.timeout_s,
            )
            result.called |= called_names(outcome.tree)
            result.returned = outcome.tree.get("returned")
            if outcome.error is not None:
                result.error = (
                    f"line {number}: {parsed.skill_call.text} raised "
                    f"{outcome.error.strip().splitlines()[-1]}"
                )
                break
    finally:
        if runner is not None:
            runner.close()
    result.success = bool(env.success)
    result.final_text = str(state["text"])
    return result
