"""The codebook: LLM-written Python skills, stored as immutable generations.

- ``validate_source`` (``validate.py``) against ``Rules`` (``rules.py``) and ``limits.py``.
"""

from speedrunner.core.codebook.limits import Limits
from speedrunner.core.codebook.rules import Rules, SmokeTest, normalise_action
from speedrunner.core.codebook.validate import Problem, validate_source

__all__ = ["Limits", "Problem", "Rules", "SmokeTest", "normalise_action", "validate_source"]
