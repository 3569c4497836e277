"""The paper's skill metrics, as fields of ``metrics.jsonl`` and ``eval.jsonl`` rows.

Per episode (every training row, every evaluation ``per_episode`` entry):

- ``skill_calls``: the actor's actions that called a skill (top-level calls);
- ``skill_actions``: primitive actions those calls took;
- ``dynamic_call_depth``: the deepest recorded nesting of codebook calls (0: no skill call);
- ``within_2_llm_calls``: the episode ended by itself (``success`` or ``env_done``) after at
  most two actor LLM calls — the paper's "one or two high-level calls".

Per knowledge version (the generation the episodes played; ``None`` for methods without
skills): ``library_public_functions``, ``library_private_functions``, ``static_call_depth``
and ``call_graph_density`` (``core.codebook.callgraph``), and ``skill_api_tokens`` /
``skill_api_chars``: the size of the skills section exactly as the actor's first message
renders it (``actor.PROMPTS`` "knowledge"), which every actor prompt of that generation pays.

Tokens are estimated, the same way for every model: the count of pre-tokens under the
splitting rule of OpenAI's ``cl100k_base`` tokenizer (which Qwen's tokenizers share): a word
with at most one leading symbol (``_to``, `` int``), up to three digits, a run of symbols with
its leading space and trailing newlines, and runs of whitespace. A BPE tokenizer never merges
across these pieces, so the figure is a lower bound for tokenizers that split this way and
close for English and code (most common words are one token); exact counts would need each
model's tokenizer files, which a run does not have offline.

An evaluation row adds the means: ``skill_calls_mean``, ``actions_per_skill_call`` (skill
actions over skill calls; ``None`` without calls), ``dynamic_call_depth_max`` and
``within_2_llm_calls_share``.
"""

from __future__ import annotations

import re
from typing import Any

from speedrunner.core.codebook import callgraph
from speedrunner.core.method import Knowledge
from speedrunner.core.runtime.actor import PROMPTS
from speedrunner.core.trajectory import Trajectory

__all__ = ["ENDED_BY_ITSELF", "episode_fields", "estimate_tokens", "eval_fields", "library_fields"]

ENDED_BY_ITSELF = ("success", "env_done")
"""Stop reasons of an episode that finished rather than ran out of a budget."""

_LETTERS = r"[^\W\d_]+"
_SYMBOL = r"(?:[^\w\s]|_)"
_PRETOKEN = re.compile(  # cl100k_base's pattern, with \p{L} / \p{N} spelled for Python's re
    rf"(?i:'s|'t|'re|'ve|'m|'ll|'d)|(?:[^\w\r\n]|_)?{_LETTERS}|\d{{1,3}}"
    rf"| ?{_SYMBOL}+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)


def estimate_tokens(text: str) -> int:
    """``cl100k_base``-style pre-tokens in ``text`` (a lower bound of its BPE tokens; see the
    module doc)."""
    return sum(1 for _ in _PRETOKEN.finditer(text))


def episode_fields(t: Trajectory) -> dict[str, Any]:
    """The per-episode skill fields of one trajectory (see the module doc)."""
    calls = t.skill_calls()
    return {
        "skill_calls": len(calls),
        "skill_actions": sum(len(c["actions"]) for c in calls),
        "dynamic_call_depth": callgraph.tree_depth(c["tree"] for c in calls),
        "within_2_llm_calls": t.llm_calls <= 2 and t.stop_reason in ENDED_BY_ITSELF,
    }


def library_fields(knowledge: Knowledge, skill_method: bool) -> dict[str, Any]:
    """The per-generation fields of the knowledge the actor played (all ``None`` without skills)."""
    names = (
        "library_public_functions",
        "library_private_functions",
        "static_call_depth",
        "call_graph_density",
        "skill_api_tokens",
        "skill_api_chars",
    )
    if not skill_method:
        return dict.fromkeys(names)
    skills = knowledge.skills
    graph = callgraph.static_call_graph(skills.source) if skills is not None else {}
    public = sum(1 for name in graph if skills is not None and name in skills.signatures)
    section = knowledge.prompt_section()
    rendered = (
        "" if section is None else PROMPTS.render("knowledge", title=section[0], text=section[1])
    )
    return dict(
        zip(
            names,
            (
                public,
                len(graph) - public,
                callgraph.max_depth(graph),
                callgraph.density(graph),
                estimate_tokens(rendered),
                len(rendered),
            ),
            strict=True,
        )
    )


def eval_fields(
    trajectories: list[Trajectory], knowledge: Knowledge, skill_method: bool
) -> dict[str, Any]:
    """The evaluation row's skill fields: means over its episodes and the evaluated generation's
    library."""
    per = [episode_fields(t) for t in trajectories]
    n = len(per) or 1
    calls = sum(p["skill_calls"] for p in per)
    return {
        "skill_calls_mean": calls / n,
        "actions_per_skill_call": sum(p["skill_actions"] for p in per) / calls if calls else None,
        "dynamic_call_depth_max": max((p["dynamic_call_depth"] for p in per), default=0),
        "within_2_llm_calls_share": sum(p["within_2_llm_calls"] for p in per) / n,
        **library_fields(knowledge, skill_method),
    }
