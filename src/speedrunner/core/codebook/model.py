"""The metadata stored next to each codebook generation (``codebook/gen_<g>.json``).

Pydantic models, so a hand-edited or truncated file fails loudly on load instead of
feeding wrong counts to the next sleep phase. The source itself lives only in the ``.py``
file; ``source_sha256`` ties the two together.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, NonNegativeInt

FORMAT = "speedrunner-codebook/1"


class Author(BaseModel):
    """Who wrote a function or a generation: the method, the sleep phase's batch, and
    whether the model was the scripted stand-in rather than an LLM."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    method: str
    batch_index: int | None = None
    scripted: bool = False


class CallStats(BaseModel):
    """How often a function ran in episodes (nested calls included).

    ``successes`` ended without raising (and were not cut off by a cap, timeout or episode
    end when the call tree records that as ``stopped_by``); ``errors`` raised; the rest of
    ``calls`` were interrupted.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    calls: NonNegativeInt = 0
    successes: NonNegativeInt = 0
    errors: NonNegativeInt = 0

    def __add__(self, other: CallStats) -> CallStats:
        return CallStats(
            calls=self.calls + other.calls,
            successes=self.successes + other.successes,
            errors=self.errors + other.errors,
        )


class FunctionMeta(BaseModel):
    """One function of a generation.

    ``signature`` is the full ``def`` signature; ``call_signature`` is what the actor sees
    and calls (public functions only: without the env parameter). ``first_generation`` is
    where the function (under any of its names) appeared; ``revised_generation`` where its
    current code was written by an add or an edit (renames and reference updates keep it).
    ``stats`` count calls of the current code only: an edit starts them again at zero.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    public: bool
    signature: str
    call_signature: str | None
    docstring: str | None
    author: Author
    first_generation: NonNegativeInt
    revised_generation: NonNegativeInt
    stats: CallStats = CallStats()


class GenerationMeta(BaseModel):
    """``gen_<g>.json``: the generation's functions in source order, and who made it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    format: str = FORMAT
    generation: NonNegativeInt
    parent: NonNegativeInt | None
    author: Author | None
    source_sha256: str
    functions: tuple[FunctionMeta, ...] = ()
