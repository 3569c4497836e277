"""ReAct: the actor plays with no learned knowledge, and sleep changes nothing.

The baseline every other method is measured against; its sleep phase makes no LLM call.
"""

from __future__ import annotations

from speedrunner.core.method import Knowledge, Method, MethodContext, SleepResult
from speedrunner.core.trajectory import Trajectory
from speedrunner.methods.wake_sleep.configs import ReactConfig


class ReactMethod(Method):
    name = "react"

    def __init__(self, config: ReactConfig, ctx: MethodContext) -> None:
        self.config = config

    def knowledge(self) -> Knowledge:
        return Knowledge(version=0)

    def sleep(self, batch: list[Trajectory], *, batch_index: int) -> SleepResult:
        return SleepResult(self.knowledge())

    def restore(self, version: int) -> None:
        """Nothing to restore: ReAct's knowledge never changes."""
