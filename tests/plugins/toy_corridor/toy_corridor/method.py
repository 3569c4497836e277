"""The tally method: each sleep appends one line of the batch's statistics to the actor's notes."""

from pathlib import Path

from speedrunner.core.atomic import atomic_write_text
from speedrunner.core.method import Knowledge, Method, MethodContext, SleepResult
from speedrunner.core.trajectory import Trajectory
from toy_corridor.config import TallyConfig

TITLE = "Tally of earlier batches"


class TallyMethod(Method):
    name = "tally"

    def __init__(self, config: TallyConfig, ctx: MethodContext) -> None:
        self.dir = Path(ctx.run_dir) / "tally"
        self.version, self.text = 0, ""

    def knowledge(self) -> Knowledge:
        return Knowledge(self.version, TITLE, self.text)

    def sleep(self, batch: list[Trajectory], *, batch_index: int) -> SleepResult:
        wins = sum(t.success for t in batch)
        line = f"batch {batch_index}: {wins} of {len(batch)} episodes opened the door"
        self.version, self.text = self.version + 1, f"{self.text}{line}\n"
        self.dir.mkdir(parents=True, exist_ok=True)
        atomic_write_text(self.dir / f"gen_{self.version}.md", self.text)
        return SleepResult(self.knowledge())

    def restore(self, version: int) -> None:
        self.version = version
        path = self.dir / f"gen_{version}.md"
        self.text = path.read_text("utf-8") if version else ""
