"""``check_text_env``: does an env honour the ``TextEnv`` contract? (cf. gymnasium's check_env)

Run it on every benchmark's env in the test suite, and on a new benchmark before its
first run: it catches the mistakes that otherwise surface hours into an experiment
(observations that cannot be stored as JSON, a progress metric outside [0, 1], a seed
that does not reproduce the episode, a ``step`` that accepts more or less than
``accepts_free_text`` declares). It plays one reset, one step, a reset and one step with text
that is no listed action, and a last reset, and raises ``EnvError`` naming the first broken rule.
"""

from __future__ import annotations

import json
import math
from numbers import Real
from typing import Any

from speedrunner.core.env import Observation, StepResult, TextEnv
from speedrunner.errors import EnvError, InvalidActionError

_NOT_AN_ACTION = "xyzzy plugh"
"""A command no benchmark lists: a free-text env must take it, a closed one refuse it."""


def _fail(env: Any, problem: str) -> EnvError:
    return EnvError(f"check_text_env({type(env).__name__}): {problem}")


def _check_json(env: Any, value: Any, what: str) -> None:
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError) as e:
        raise _fail(
            env,
            f"{what} is not JSON-serializable ({e}); use str/int/float/bool/None, "
            f"lists and str-keyed dicts only, so trajectories can be stored",
        ) from e


def _check_observation(env: Any, obs: Any, where: str) -> None:
    if not isinstance(obs, Observation):
        raise _fail(
            env,
            f"{where} returned {type(obs).__name__}, expected "
            f"speedrunner.core.env.Observation(text, structured)",
        )
    if not isinstance(obs.text, str) or not obs.text.strip():
        raise _fail(env, f"{where}: Observation.text must be a non-empty str, got {obs.text!r:.80}")
    if not isinstance(obs.structured, dict):
        raise _fail(
            env,
            f"{where}: Observation.structured must be a dict, got {type(obs.structured).__name__}",
        )
    _check_json(env, obs.structured, f"{where}: Observation.structured")


def _check_state(env: Any, where: str) -> None:
    actions = env.actions
    if not isinstance(actions, list) or not actions or not all(isinstance(a, str) for a in actions):
        raise _fail(env, f"{where}: actions must be a non-empty list of str, got {actions!r:.120}")
    if not isinstance(env.instruction, str):
        raise _fail(
            env, f"{where}: instruction must be a str, got {type(env.instruction).__name__}"
        )
    progress = env.progress()
    if isinstance(progress, bool) or not isinstance(progress, Real) or not 0.0 <= progress <= 1.0:
        raise _fail(env, f"{where}: progress() must be a number in [0, 1], got {progress!r}")
    if not isinstance(env.success, bool):
        raise _fail(env, f"{where}: success must be a bool, got {type(env.success).__name__}")


def check_text_env(env: Any, task: str, seed: int, *, action: str | None = None) -> None:
    """Raise ``EnvError`` unless ``env`` behaves as a ``TextEnv`` on ``(task, seed)``.

    Steps once with ``action`` (default: the first of ``env.actions``), then once with text that
    is no listed action. Leaves the env reset to ``(task, seed)``; does not close it.
    """
    if not isinstance(env, TextEnv):
        raise _fail(
            env,
            "not a TextEnv: subclass speedrunner.core.env.TextEnv and implement its abstract "
            "members (instruction, actions, success, reset, step, progress)",
        )
    first = env.reset(task, seed)
    _check_observation(env, first, f"reset({task!r}, {seed})")
    _check_state(env, "after reset")
    chosen = env.actions[0] if action is None else action
    result = env.step(chosen)
    where = f"step({chosen!r})"
    if not isinstance(result, StepResult):
        raise _fail(env, f"{where} returned {type(result).__name__}, expected StepResult")
    _check_observation(env, result.observation, where)
    reward = result.reward
    if isinstance(reward, bool) or not isinstance(reward, Real) or not math.isfinite(reward):
        raise _fail(env, f"{where}: reward must be a finite number, got {reward!r}")
    if not isinstance(result.done, bool):
        raise _fail(env, f"{where}: done must be a bool, got {type(result.done).__name__}")
    if not isinstance(result.info, dict):
        raise _fail(env, f"{where}: info must be a dict, got {type(result.info).__name__}")
    _check_json(env, result.info, f"{where}: StepResult.info")
    if not result.done:
        _check_state(env, f"after {where}")
    _check_free_text(env, task, seed)
    again = env.reset(task, seed)
    _check_observation(env, again, f"second reset({task!r}, {seed})")
    if again.text != first.text:
        raise _fail(
            env,
            f"reset({task!r}, {seed}) is not reproducible: the second reset's "
            f"observation text differs from the first; derive all randomness "
            f"from the seed and build a fresh episode on every reset",
        )
    if again.structured != first.structured:
        raise _fail(
            env,
            f"reset({task!r}, {seed}) is not reproducible: same text but "
            f"different structured observation",
        )


def _check_free_text(env: Any, task: str, seed: int) -> None:
    """``step`` accepts what ``accepts_free_text`` says: the actor types by that declaration."""
    try:
        declared = type(env).accepts_free_text
    except AttributeError:  # TextEnv only annotates it: every subclass must say
        declared = None
    if not isinstance(declared, bool):
        raise _fail(
            env,
            f"accepts_free_text must be a bool class attribute, got {declared!r}; declare "
            "True if step() sends any text to the simulator, False if it raises "
            "InvalidActionError for anything not in actions",
        )
    env.reset(task, seed)
    if _NOT_AN_ACTION in env.actions:
        return
    where = f"step({_NOT_AN_ACTION!r}) (no listed action)"
    try:
        result = env.step(_NOT_AN_ACTION)
    except InvalidActionError as e:
        if declared:
            raise _fail(
                env,
                f"{where} raised InvalidActionError ({e}) but accepts_free_text is True: "
                "the actor would type commands the env refuses; declare it False",
            ) from e
        return
    if not declared:
        raise _fail(
            env,
            f"{where} was taken but accepts_free_text is False: the actor would be refused "
            "commands the env (and any skill) can send; declare it True, or raise "
            "InvalidActionError for text not in actions",
        )
    if not isinstance(result, StepResult):
        raise _fail(env, f"{where} returned {type(result).__name__}, expected StepResult")
    _check_observation(env, result.observation, where)
