"""A corridor with a key and a door at its end: a TextEnv of four actions."""

from speedrunner.core.env import Observation, StepResult, TextEnv
from speedrunner.errors import InvalidActionError

ACTIONS = ("forward", "back", "pick up key", "open door")
LENGTHS = {"short": 4, "long": 8}


class CorridorEnv(TextEnv):
    accepts_free_text = False

    def __init__(self) -> None:
        self.length, self.key_at, self.pos, self.has_key, self.opened = 4, 1, 0, False, False

    @property
    def instruction(self) -> str:
        return "Open the door at the end of the corridor (it needs the key)."

    @property
    def actions(self) -> list[str]:
        return list(ACTIONS)

    @property
    def success(self) -> bool:
        return self.opened

    def _observe(self, note: str = "") -> Observation:
        here = (
            "the door"
            if self.pos == self.length - 1
            else ("the key" if self.pos == self.key_at and not self.has_key else "nothing")
        )
        text = f"{note}You are at cell {self.pos} of {self.length}; here is {here}."
        return Observation(
            text,
            {
                "position": self.pos,
                "length": self.length,
                "key_at": self.key_at,
                "has_key": self.has_key,
            },
        )

    def reset(self, task: str, seed: int) -> Observation:
        self.length = LENGTHS[task]
        self.key_at = 1 + seed % (self.length - 2)
        self.pos, self.has_key, self.opened = 0, False, False
        return self._observe()

    def step(self, action: str) -> StepResult:
        if action not in ACTIONS:
            raise InvalidActionError(f"{action!r} is not one of {', '.join(ACTIONS)}")
        note = ""
        if action == "forward":
            self.pos = min(self.length - 1, self.pos + 1)
        elif action == "back":
            self.pos = max(0, self.pos - 1)
        elif action == "pick up key" and self.pos == self.key_at and not self.has_key:
            self.has_key, note = True, "You pick up the key. "
        elif action == "open door" and self.pos == self.length - 1 and self.has_key:
            self.opened, note = True, "The door opens. "
        else:
            note = "Nothing happens. "
        return StepResult(self._observe(note), float(self.opened), self.opened, {})

    def progress(self) -> float:
        return 1.0 if self.opened else 0.5 if self.has_key else 0.0
