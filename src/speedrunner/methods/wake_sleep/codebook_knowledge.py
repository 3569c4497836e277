"""What every codebook method (asi, speedrunner, speedrunner_no_cl) shares: the run's skill
support, the validation rules, the knowledge the actor sees, and restoring a generation.
Only the sleep phase differs between them."""

from __future__ import annotations

from pathlib import Path

from speedrunner.core.codebook import Codebook, Rules
from speedrunner.core.method import Knowledge, MethodContext, SkillSupport
from speedrunner.core.runtime.caps import codebook_limits
from speedrunner.errors import ConfigError

__all__ = ["TITLE", "codebook_knowledge", "codebook_rules", "load_generation", "skill_support"]

TITLE = "Skills you can call (learned from earlier episodes; call one as your Action, e.g. name(args))"


def skill_support(method: str, ctx: MethodContext) -> SkillSupport:
    if ctx.skills is None:
        raise ConfigError(f"method {method!r} needs the run's skill support (sandbox and skill API); "
                          "start it through a train entry point")
    return ctx.skills


def codebook_rules(support: SkillSupport, method: object = None) -> Rules:
    """The benchmark's validation rules, with the sandbox's import check as the smoke test and
    the method config's library caps (``max_functions``, ``max_codebook_chars``; absent: none)."""
    return Rules.for_api(support.api_module, support.primitives, support.smoke_test, limits=codebook_limits(method))


def codebook_knowledge(codebook: Codebook, support: SkillSupport) -> Knowledge:
    """The public API in the actor's prompt, and the skills it may call (none: no section)."""
    if not codebook.signatures():
        return Knowledge(codebook.generation)
    return Knowledge(codebook.generation, TITLE, codebook.render_api(), skills=codebook.to_skills(support.api_module))


def load_generation(run_dir: Path, version: int) -> Codebook:
    """Generation ``version`` byte-exact; generation 0 is stored first if it is not yet."""
    return Codebook.start(run_dir) if version == 0 else Codebook.load(run_dir, version)
