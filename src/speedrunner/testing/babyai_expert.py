"""An actor policy for the realistic fake that wins BabyAI levels: minigrid's bot's next move.

A fake that picks listed actions at random almost never finishes a BabyAI level, so ASI (which
induces skills only from successful episodes) would never be asked to induce. Given the
levels a run may play (task kind and seed), this policy recognises an episode from its first
message (the mission and the first observation, as the actor prompt shows them) and answers
with the bot's next primitive action, counting the actions the conversation shows as
executed — an answer the run could not read (its feedback says "not executed") took none.
It reads only the request, as the fake does; :class:`~speedrunner.testing.realistic.RealisticFake`
dresses its answers like any other (``RealisticFake(actor=BabyAIExpert(levels))``).
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import cache

__all__ = ["BabyAIExpert", "bot_actions"]


@cache
def bot_actions(kind: str, seed: int) -> tuple[str, ...]:
    """The bot's whole solution of one level (primitive action names)."""
    from minigrid.utils.baby_ai_bot import BabyAIBot

    from speedrunner.benchmarks.babyai.levels import make_level
    from speedrunner.benchmarks.babyai.text import ACTIONS

    level = make_level(kind, seed)
    bot, actions = BabyAIBot(level), []
    for _ in range(200):
        action = int(bot.replan())
        actions.append(ACTIONS[action])
        _, _, terminated, truncated, _ = level.step(action)
        if terminated or truncated:
            break
    return tuple(actions)


class BabyAIExpert:
    """``levels``: the (task kind, seed) pairs the run may play; other episodes get ``None``
    (the fake then answers as it would without this policy)."""

    def __init__(self, levels: Iterable[tuple[str, int]]) -> None:
        from speedrunner.benchmarks.babyai.levels import make_level
        from speedrunner.benchmarks.babyai.text import observe

        self.by_start: dict[tuple[str, str], tuple[str, int]] = {}
        for kind, seed in levels:
            level = make_level(kind, seed)
            self.by_start[(level.mission, observe(level)[0])] = (kind, seed)

    @classmethod
    def for_run(cls, run_seed: int, task_set: str, episodes: int) -> BabyAIExpert:
        """The expert for the first ``episodes`` training and evaluation episodes of a run."""
        from speedrunner.benchmarks.babyai.kinds import TASK_SETS, kind_for_seed
        from speedrunner.core.seeding import episode_seed

        seeds = [
            episode_seed(run_seed, split, i) for split in ("train", "eval") for i in range(episodes)
        ]
        return cls((kind_for_seed(s, TASK_SETS[task_set]), s) for s in seeds)

    def __call__(self, messages: list[tuple[str, str]]) -> str | None:
        first = next((c for r, c in messages if r == "user"), "")
        key = next((k for k in self.by_start if k[0] in first and k[1] in first), None)
        if key is None:
            return None
        solution = bot_actions(*self.by_start[key])
        users = [c for r, c in messages if r == "user"][1:]  # the message after each assistant turn
        done = sum("Your last answer was not executed" not in c for c in users)
        action = solution[done] if done < len(solution) else solution[-1]
        return f"Thought: the next move towards the goal.\nAction: {action}"
