"""What each wake/sleep method adds to ``speedrunner estimate``'s worst case
(``MethodSpec.cost_bounds``)."""

from __future__ import annotations

from speedrunner.core.config.schema import RunConfig
from speedrunner.core.estimate.forecast import knowledge_bound
from speedrunner.core.estimate.model import PROMPT_TEMPLATE_BYTES, Calls, MethodBounds
from speedrunner.methods.wake_sleep.configs import ASIConfig, InducerConfig, OPOConfig

UTF8_MAX = 4
"""Bytes a character takes at most: a character cap bounds the bytes (= tokens at most)."""


def react(config: RunConfig, batches: int) -> MethodBounds:
    """No knowledge, no sleep-phase call."""
    return MethodBounds(0)


def opo(config: RunConfig, batches: int) -> MethodBounds:
    """One guide-writing call a sleep phase, over the batch's trajectories and the old guide."""
    method = config.method
    assert isinstance(method, OPOConfig)
    knowledge = method.guide_max_chars * UTF8_MAX
    shown = method.max_batch_chars * UTF8_MAX + knowledge + PROMPT_TEMPLATE_BYTES
    return MethodBounds(
        knowledge, [Calls("guide", config.inducer_model, 1, 1, batches, "sleep phase", shown, 0)]
    )


def inducer(config: RunConfig, batches: int) -> MethodBounds:
    """A multi-turn inducer session a sleep phase, at most ``max_inducer_turns`` turns."""
    method = config.method
    assert isinstance(method, InducerConfig)
    notes: list[str] = []
    knowledge = knowledge_bound(config, notes)
    model = config.inducer_model
    tool = method.max_tool_output_chars * UTF8_MAX
    shown = method.max_trajectory_chars * UTF8_MAX
    calls = Calls(
        "inducer",
        model,
        1,
        method.max_inducer_turns,
        batches,
        "sleep phase",
        knowledge + PROMPT_TEMPLATE_BYTES + shown,
        model.sampling.max_tokens + max(tool, shown),
    )
    return MethodBounds(knowledge, [calls], episodes_end_early=True, notes=notes)


def asi(config: RunConfig, batches: int) -> MethodBounds:
    """At most one induction call per training episode of the batch."""
    method = config.method
    assert isinstance(method, ASIConfig)
    notes: list[str] = []
    knowledge = knowledge_bound(config, notes)
    shown = method.max_trajectory_chars * UTF8_MAX + knowledge + PROMPT_TEMPLATE_BYTES
    calls = Calls(
        "inducer", config.inducer_model, 0, config.run.sleep_every, batches, "sleep phase", shown, 0
    )
    return MethodBounds(knowledge, [calls], episodes_end_early=True, notes=notes)
