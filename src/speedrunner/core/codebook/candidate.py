"""The outcome of a batch of edits: a validated ``Candidate``, or ``EditRejected``.

Only a candidate can become a generation, and ``commit`` checks the static rules again
before writing, so a generation that fails validation cannot reach disk even through a
hand-built ``Candidate``. A rejection changes nothing: the parent stays current.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from speedrunner.core.codebook import store
from speedrunner.core.codebook.codebook import Codebook
from speedrunner.core.codebook.model import Author, GenerationMeta
from speedrunner.core.codebook.rules import Rules
from speedrunner.core.codebook.validate import Problem, validate_source
from speedrunner.errors import InvalidCodebookError


@dataclass(frozen=True)
class Candidate:
    """A validated next generation, not yet stored."""

    parent: Codebook
    source: str
    meta: GenerationMeta
    rules: Rules

    @property
    def generation(self) -> int:
        return self.meta.generation

    def commit(self, run_dir: Path) -> Codebook:
        """Store this generation (atomically, never over another) and return it as loaded."""
        problems = validate_source(self.source, self.rules, smoke=False)
        if problems:
            raise InvalidCodebookError(
                f"codebook generation {self.generation} fails validation and is not "
                "written:\n" + "\n".join(f"  - {p}" for p in problems)
            )
        store.write_generation(run_dir, self.source, self.meta)
        return Codebook.load(run_dir, self.generation)


@dataclass(frozen=True)
class EditRejected:
    """Why a batch of edits did not produce a candidate; ``message`` is for the author."""

    parent: Codebook
    author: Author
    problems: tuple[Problem, ...]
    source: str | None = None
    """The rejected module when the edits applied but it failed validation."""

    @property
    def message(self) -> str:
        head = (
            f"The codebook edits were rejected ({len(self.problems)} "
            f"problem{'s' if len(self.problems) != 1 else ''}); generation "
            f"{self.parent.generation} stays current."
        )
        return head + "\n" + "\n".join(f"- {p}" for p in self.problems)
