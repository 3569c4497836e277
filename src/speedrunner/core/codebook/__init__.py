"""The codebook: LLM-written Python skills, stored as immutable generations.

- ``Codebook`` (``codebook.py``): one generation; ``render_api`` / ``signatures`` /
  ``to_skills`` are what the actor and the sandbox get; ``load`` restores a stored one;
  ``record_usage`` adds per-function call counts from trajectories' call trees.
- ``apply_edits`` (``edits.py``): add / edit / delete / rename / make private / make public,
  validated together into a ``Candidate`` (``commit`` stores it) or ``EditRejected``.
- ``validate_source`` (``validate.py``) against the caps and ``Rules`` of ``rules.py``.
- ``store.py``: ``codebook/gen_<g>.py`` + ``gen_<g>.json`` under the run directory.
"""

from speedrunner.core.codebook.codebook import (
    EMPTY_SOURCE,
    Codebook,
    count_calls,
    usage_from_trajectories,
)
from speedrunner.core.codebook.edits import (
    AddFunction,
    Candidate,
    DeleteFunction,
    Edit,
    EditFunction,
    EditRejected,
    MakePrivate,
    MakePublic,
    RenameFunction,
    apply_edits,
)
from speedrunner.core.codebook.model import Author, CallStats, FunctionMeta, GenerationMeta
from speedrunner.core.codebook.rules import CodebookSizeLimits, Rules, SmokeTest, normalise_action
from speedrunner.core.codebook.validate import Problem, validate_source

__all__ = [
    "EMPTY_SOURCE",
    "AddFunction",
    "Author",
    "CallStats",
    "Candidate",
    "Codebook",
    "DeleteFunction",
    "Edit",
    "EditFunction",
    "EditRejected",
    "FunctionMeta",
    "GenerationMeta",
    "CodebookSizeLimits",
    "MakePrivate",
    "MakePublic",
    "Problem",
    "RenameFunction",
    "Rules",
    "SmokeTest",
    "apply_edits",
    "count_calls",
    "normalise_action",
    "usage_from_trajectories",
    "validate_source",
]
