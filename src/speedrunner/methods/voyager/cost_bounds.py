"""What Voyager adds to ``speedrunner estimate``'s worst case (``MethodSpec.cost_bounds``)."""

from __future__ import annotations

from speedrunner.core.config.schema import RunConfig
from speedrunner.core.estimate.forecast import knowledge_bound
from speedrunner.core.estimate.model import PROMPT_TEMPLATE_BYTES, Calls, MethodBounds
from speedrunner.methods.voyager.config import VoyagerConfig

UTF8_MAX = 4
"""Bytes a character takes at most."""


def voyager(config: RunConfig, batches: int) -> MethodBounds:
    """Its own training phase: per training world at most ``max_iterations_per_world``
    iterations."""
    method = config.method
    assert isinstance(method, VoyagerConfig)
    notes: list[str] = []
    knowledge = knowledge_bound(config, notes)
    model, units, iters = config.inducer_model, config.run.rollouts, method.max_iterations_per_world
    shown = knowledge + PROMPT_TEMPLATE_BYTES + 2 * method.max_observation_chars * UTF8_MAX
    notes.append(
        "Voyager: per training world at most max_iterations_per_world iterations, each a "
        "curriculum proposal (max_curriculum_asks), one action-agent answer, a critic "
        "(max_critic_asks) and one skill description; embeddings are not counted"
    )
    calls = [
        Calls(
            "curriculum",
            model,
            0,
            iters * method.max_curriculum_asks,
            units,
            "training world",
            shown,
            0,
        ),
        Calls("action agent", model, 1, iters, units, "training world", shown, 0),
        Calls(
            "critic", model, 0, iters * method.max_critic_asks, units, "training world", shown, 0
        ),
        Calls(
            "description",
            model,
            0,
            iters,
            units,
            "training world",
            knowledge + PROMPT_TEMPLATE_BYTES,
            0,
        ),
    ]
    return MethodBounds(
        knowledge, calls, actor_plays_training=False, episodes_end_early=True, notes=notes
    )
