"""The codebook: LLM-written Python skills, stored as immutable generations.

- ``Codebook`` (``codebook.py``): one generation; ``render_api`` / ``signatures`` /
  ``to_skills`` are what the actor and the sandbox get; ``load`` restores a stored one.
- ``apply_edits`` (``edits.py``): add / edit / delete / rename / make private / make public,
  validated together into a ``Candidate`` (``commit`` stores it) or ``EditRejected``.
- ``validate_source`` (``validate.py``) against ``Rules`` (``rules.py``) and ``limits.py``.
- ``store.py``: ``codebook/gen_<g>.py`` + ``gen_<g>.json`` under the run directory.
- ``usage.py``: per-function call counts from trajectories' call trees.
"""

from speedrunner.core.codebook.candidate import Candidate, EditRejected
from speedrunner.core.codebook.codebook import EMPTY_SOURCE, Codebook
from speedrunner.core.codebook.edits import (
    AddFunction,
    DeleteFunction,
    Edit,
    EditFunction,
    MakePrivate,
    MakePublic,
    RenameFunction,
    apply_edits,
)
from speedrunner.core.codebook.limits import CodebookSizeLimits
from speedrunner.core.codebook.model import Author, CallStats, FunctionMeta, GenerationMeta
from speedrunner.core.codebook.rules import Rules, SmokeTest, normalise_action
from speedrunner.core.codebook.usage import count_calls, usage_from_trajectories
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
