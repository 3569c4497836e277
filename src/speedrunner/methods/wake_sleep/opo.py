"""OPO: each sleep phase an LLM rewrites a prose strategy guide from the batch.

No code, no gate: the new guide replaces the old one. Generation ``g`` is stored as
``guide/gen_<g>.md`` (generation 0 is the empty guide), and the actor sees the latest.

To write a new method, copy this file: change ``knowledge`` (what the actor sees) and
``sleep`` (how experience becomes knowledge); the runner needs nothing else.
"""

from __future__ import annotations

import re
from pathlib import Path

from speedrunner.core.atomic import atomic_write_text
from speedrunner.core.llm.types import Message
from speedrunner.core.method import Knowledge, MethodContext, SleepResult
from speedrunner.core.prompts import load_prompts
from speedrunner.core.runtime.trajectory import Trajectory
from speedrunner.errors import CheckpointError
from speedrunner.methods.wake_sleep.configs import OPOConfig

PROMPTS = load_prompts("speedrunner.methods.wake_sleep", "opo_prompts.yaml")
_GUIDE = re.compile(r"<guide>\s*(.*?)\s*(?:</guide>|$)", re.DOTALL)


class OPOMethod:
    name = "opo"

    def __init__(self, config: OPOConfig, ctx: MethodContext) -> None:
        self.config = config
        self.model = ctx.inducer
        self.dir = Path(ctx.run_dir) / "guide"
        self.version = 0
        self.guide = ""

    # ----------------------------------------------------------- ALGO LOGIC
    def knowledge(self) -> Knowledge:
        return Knowledge(self.version, "Strategy guide (learned from earlier episodes)", self.guide)

    def sleep(self, batch: list[Trajectory], *, batch_index: int) -> SleepResult:
        per_episode = min(self.config.max_trajectory_chars, self.config.max_batch_chars // max(1, len(batch)))
        trajectories = "\n\n".join(f"--- Episode {t.index} ---\n{t.summary(per_episode)}" for t in batch)
        prompt = PROMPTS.render(
            "rewrite", guide=self.guide or "(empty: this is the first guide)", trajectories=trajectories,
            max_chars=self.config.guide_max_chars, n=len(batch), successes=sum(t.success for t in batch),
        )
        completion = self.model.complete(
            [Message("system", PROMPTS.render("system")), Message("user", prompt)],
            purpose="guide", call_id=f"sleep/{batch_index:04d}/guide/0000",
        )
        new_guide = extract_guide(completion.text)[: self.config.guide_max_chars]
        if new_guide:
            self.guide = new_guide
        self.version += 1
        self._store(self.version, self.guide, scripted=completion.scripted)
        return SleepResult(self.knowledge(), [completion])

    # ------------------------------------------------- TRY NOT TO MODIFY
    def restore(self, version: int) -> None:
        if version == 0:
            self.version, self.guide = 0, ""
            if not (self.dir / "gen_0.md").exists():
                self._store(0, "", scripted=False)  # the empty first guide, so every generation is on disk
            return
        path = self.dir / f"gen_{version}.md"
        if not path.is_file():
            raise CheckpointError(f"guide generation {version} is missing: {path}")
        # read_bytes: read_text would turn "\r\n" into "\n" and change the restored guide.
        self.version, self.guide = version, _strip_label(path.read_bytes().decode("utf-8"))

    def _store(self, version: int, guide: str, *, scripted: bool) -> None:
        label = _SCRIPTED_LABEL if scripted else ""
        atomic_write_text(self.dir / f"gen_{version}.md", label + guide + "\n")


_SCRIPTED_LABEL = "<!-- written by the SCRIPTED model, not an LLM -->\n"


def _strip_label(text: str) -> str:
    return text.removeprefix(_SCRIPTED_LABEL).removesuffix("\n")


def extract_guide(text: str) -> str:
    """The guide between ``<guide>`` tags, or the whole answer when the tags are missing."""
    match = _GUIDE.search(text)
    return (match.group(1) if match else text).strip()
