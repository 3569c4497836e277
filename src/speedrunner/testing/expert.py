"""The actor policy of ``speedrunner fake-llm --policy expert``: the project's competent players.

- BabyAI: minigrid's BabyAI bot. The level is recognised from the conversation's first
  message (``babyai_levels.LevelIndex``: run seeds 0-9, the first 512 episodes of each split);
  its next move counts the primitive actions the conversation shows as executed, and after
  a skill call it plans again from the state the call left (found from the observation).
- ScienceWorld: the task-4 player (``scienceworld_player``): find a thing of a kind and move
  it to a box, typed as free text from the conversation alone.
- Anything else (Crafter, ScienceWorld's other tasks, an unrecognised level): no answer
  here, so the fake answers as it does without a policy (a listed action at random).

The fake's skill choice comes first (a fitting offered skill is called), then this policy.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from speedrunner.testing.babyai_expert import bot_actions
from speedrunner.testing.babyai_levels import LevelIndex, moves_after_skill
from speedrunner.testing.prompt_reading import primitive_actions
from speedrunner.testing.scienceworld_player import next_action, parse_goal
from speedrunner.testing.skill_choice import instruction_of

__all__ = ["BABYAI_ACTIONS", "ExpertActor"]

BABYAI_ACTIONS = ("turn left", "turn right", "go forward", "pick up", "drop", "toggle")
_GOAL = "Your goal is to "
_REFUSED = "Your last answer was not executed"
_SKILL_NOTE = "\n[skill "


@dataclass
class ExpertActor:
    """``ExpertActor()(messages)`` -> the expert's answer, or None where it has no policy."""

    levels: LevelIndex = field(default_factory=LevelIndex)

    def __call__(self, messages: list[tuple[str, str]]) -> str | None:
        first = next((c for r, c in messages if r == "user"), "")
        babyai = primitive_actions(first) == list(BABYAI_ACTIONS)
        if babyai and instruction_of(messages).startswith(_GOAL):
            action = self._babyai(messages, first)
        elif parse_goal(first) is not None:
            action = next_action([{"role": r, "content": c} for r, c in messages])
        else:
            return None
        if action is None:
            return None
        return f"Thought: the next move towards the goal.\nAction: {action}"

    def _babyai(self, messages: list[tuple[str, str]], first: str) -> str | None:
        mission = instruction_of(messages).removeprefix(_GOAL)
        level = self.levels.find(mission, first.split("\n\nObservation:\n", 1)[-1])
        if level is None:
            return None
        later = messages[messages.index(("user", first)) + 1 :]
        executed = [c for r, c in later if r == "user" and _REFUSED not in c]
        skill_at = max((i for i, c in enumerate(executed) if _SKILL_NOTE in c), default=None)
        if skill_at is None:
            moves: tuple[str, ...] | None = bot_actions(*level)
            done = len(executed)
        else:
            shown = executed[skill_at].rsplit("Observation:\n", 1)[-1].rsplit(_SKILL_NOTE, 1)[0]
            moves = moves_after_skill(*level, shown)
            done = len(executed) - skill_at - 1
        if not moves:
            return None
        return moves[min(done, len(moves) - 1)]
