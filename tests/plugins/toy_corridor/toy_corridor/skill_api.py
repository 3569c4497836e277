"""What skills written for the corridor may call: pure views over ``env.state``."""

from typing import Any

from speedrunner.core.skill import SkillEnv
from toy_corridor.env import ACTIONS

__all__ = ["SkillEnv", "cells_to_door", "cells_to_key", "has_key"]

PRIMITIVE_ACTIONS: tuple[str, ...] = ACTIONS

STATE_LAYOUT = """\
{"position": int, "length": int, "key_at": int, "has_key": bool}"""

COORDINATES = """\
Cells are numbered from 0 (the start) to length - 1 (the door); forward adds one."""


def has_key(state: dict[str, Any]) -> bool:
    """Whether the key has been picked up."""
    return bool(state["has_key"])


def cells_to_key(state: dict[str, Any]) -> int:
    """Steps forward to the key (negative: back)."""
    return int(state["key_at"]) - int(state["position"])


def cells_to_door(state: dict[str, Any]) -> int:
    """Steps forward to the door."""
    return int(state["length"]) - 1 - int(state["position"])
