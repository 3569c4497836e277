"""``speedrunner estimate``: what a run will call and cost, before anything is spent.

Everything comes from the config (no key, no network): the schedule (rollouts, batches,
evaluation points), the budgets (``max_llm_calls``, ``max_env_actions``, the sleep phase's
turn limits), ``max_tokens``, each model's context window (``model.context_tokens``, else the
table ``speedrunner/data/context_windows.yaml``) and the prices of the same table the run uses
(``core.llm.prices``).

The worst case is a bound under stated assumptions, counted the way the spending cap counts
a call in flight: every input byte a token, every call uncached, all of ``max_tokens`` as
output, the actor's full history resent on every turn (each earlier turn adds at most
``max_tokens`` of answer and one observation) up to the model's context window. What the
config cannot tell is an assumption printed with the table. The typical case comes from
earlier runs (``--from RUN_DIR``, ``estimate.pilot``), checked against the config and scaled
to its budgets.
"""

from speedrunner.core.estimate.forecast import estimate
from speedrunner.core.estimate.model import ContextUse, Estimate, PilotUse, RoleEstimate
from speedrunner.core.estimate.pilot import PilotMismatchError, role_of
from speedrunner.core.estimate.text import (
    add_estimate_flags,
    estimate_json,
    format_estimate,
    print_estimate,
)

__all__ = [
    "ContextUse",
    "Estimate",
    "PilotMismatchError",
    "PilotUse",
    "RoleEstimate",
    "add_estimate_flags",
    "estimate",
    "estimate_json",
    "format_estimate",
    "print_estimate",
    "role_of",
]
