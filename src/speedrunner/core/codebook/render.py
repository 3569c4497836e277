"""The codebook as the actor sees it: public signatures and docstrings, nothing else.

Sorted by name, so the text depends only on the generation's functions (not on the order
edits added them), and it is rendered once per generation: every prompt of that
generation starts with the same bytes and the provider's prefix cache holds.
"""

from __future__ import annotations

import textwrap
from collections.abc import Iterable

from speedrunner.core.codebook.model import FunctionMeta


def render_api(functions: Iterable[FunctionMeta]) -> str:
    """One block per public function: its call signature, then its docstring indented.

    Empty when there is no public function (the actor's prompt then has no skills section).
    """
    blocks = []
    for meta in sorted((f for f in functions if f.public), key=lambda f: f.name):
        doc = textwrap.indent(meta.docstring or "", "    ")
        blocks.append(f"{meta.call_signature}\n{doc}".rstrip())
    return "\n\n".join(blocks)


def public_signatures(functions: Iterable[FunctionMeta]) -> dict[str, str]:
    """Public name -> the signature the actor calls, sorted by name."""
    return {
        f.name: f.call_signature or f.signature
        for f in sorted((f for f in functions if f.public), key=lambda f: f.name)
    }
