"""Prompt templates kept as YAML data next to the code that uses them.

Rendering is strict, in the manner of smolagents' ``StrictUndefined``: each template
declares its keys, and rendering with a missing or an extra key raises. Templates use
``string.Template`` syntax (``$name`` / ``${name}``), so braces in prompts need no escaping.
"""

from __future__ import annotations

import string
from dataclasses import dataclass
from importlib import resources

import yaml


@dataclass(frozen=True)
class PromptTemplates:
    """Named templates from one YAML file: ``{name: {keys: [...], template: "..."}}``."""

    source: str
    templates: dict[str, tuple[frozenset[str], string.Template]]

    def render(self, name: str, **values: object) -> str:
        keys, template = self.templates[name]
        given = set(values)
        if given != keys:
            missing, extra = sorted(keys - given), sorted(given - keys)
            raise KeyError(
                f"prompt {self.source}:{name}: missing keys {missing}, unexpected keys {extra}"
            )
        return template.substitute({k: str(v) for k, v in values.items()})


def load_prompts(package: str, filename: str) -> PromptTemplates:
    """Load ``filename`` shipped in ``package``; checks each template uses exactly its keys."""
    text = (resources.files(package) / filename).read_text("utf-8")
    return parse_prompts(text, source=f"{package}/{filename}")


def parse_prompts(text: str, *, source: str) -> PromptTemplates:
    data = yaml.safe_load(text) or {}
    templates: dict[str, tuple[frozenset[str], string.Template]] = {}
    for name, entry in data.items():
        keys = frozenset(entry.get("keys", []))
        template = string.Template(entry["template"])
        used = {
            m.group("named") or m.group("braced")
            for m in template.pattern.finditer(template.template)
        } - {None}
        if used != keys:
            raise ValueError(
                f"prompt {source}:{name}: declares keys {sorted(keys)} but uses {sorted(used)}"
            )
        templates[name] = (keys, template)
    return PromptTemplates(source, templates)
