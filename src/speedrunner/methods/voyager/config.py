"""The ``method`` section of Voyager (Crafter only)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from speedrunner.core.config.schema import MethodConfig


class VoyagerConfig(MethodConfig):
    name: Literal["voyager"] = "voyager"
    """Voyager: curriculum + action agent + critic + skill retrieval (Crafter only)."""
    max_task_attempts: int = Field(4, ge=1)
    """Attempts per proposed task before the curriculum moves on."""
    retrieval_top_k: int = Field(5, ge=0)
    """Skills retrieved (by description similarity) into the action agent's prompt."""
    max_skill_actions: int = Field(200, ge=1)
    """Cap on primitive actions one skill execution may take."""
    skill_timeout_s: float = Field(60.0, gt=0)
    """Wall-clock cap of one skill execution in the sandbox."""
