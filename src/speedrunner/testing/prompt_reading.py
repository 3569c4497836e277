"""What a fake model reads from a prompt: the primitive actions and the skills it is offered.

The project's prompts name these under several headings (the actor's ``Available actions:``
line and its skills section, the skill API view's ``## Primitive actions`` section, Voyager's
``Primitive actions (the strings `env.act` takes):``, a codebook shown as Python source, the
refused-answer feedback's ``or call a skill: ...``); every form is read here, from the text
alone, so the fakes see what a model sees.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

from speedrunner.core import pyast

__all__ = ["OfferedSkill", "offered_skills", "primitive_actions"]

_ACTIONS_LINE = re.compile(r"^\s*(?:Available|Primitive) actions:[ \t]*(\S.*?)\s*$", re.MULTILINE)
_ACT_LIST = re.compile(r"^`env\.act\(\.\.\.\)` takes exactly one of: (.+?)\s*$", re.MULTILINE)
_VOYAGER = re.compile(
    r"^Primitive actions \(the strings `env\.act` takes\):\s*\n(.+?)\s*$", re.MULTILINE
)
_SKILLS_HEADING = re.compile(r"^[^\n]*\b[Ss]kills?\b[^\n]*:[ \t]*$", re.MULTILINE)
_SIGNATURE = re.compile(r"^(?P<name>[A-Za-z]\w*)\((?P<params>[^()]*)\)(?:\s*->\s*[^\n]+)?$")
_CALL_A_SKILL = re.compile(r"or call a skill: (.+?)\s*$", re.MULTILINE)
_FENCED = re.compile(r"```python\n(.*?)```", re.DOTALL)


@dataclass(frozen=True)
class OfferedSkill:
    """One skill as a prompt offers it: its name, the parameters the caller passes (``env``
    left out) and its docstring (may be empty)."""

    name: str
    params: tuple[str, ...]
    doc: str = ""


def primitive_actions(text: str) -> list[str]:
    """The primitive actions ``text`` lists, under whichever heading (the last list wins, as
    the latest message is the freshest); [] when it lists none (free-text commands)."""
    found: list[tuple[int, str]] = []
    for pattern in (_ACTIONS_LINE, _ACT_LIST, _VOYAGER):
        found += [(m.start(), m.group(1)) for m in pattern.finditer(text)]
    if not found:
        return []
    listed = max(found)[1]
    if listed.startswith("("):  # "(and N more ...)" or another note, not a list
        return []
    return [a.strip().strip("`").strip() for a in listed.split(",") if a.strip().strip("`").strip()]


def offered_skills(text: str) -> list[OfferedSkill]:
    """Every public skill ``text`` offers, in order, each once: signature blocks under a
    heading that names skills (the actor's section: a signature line, its docstring indented
    below), ``def`` functions in fenced Python blocks (a codebook shown as source), and the
    feedback line ``or call a skill: sig, sig``."""
    skills: dict[str, OfferedSkill] = {}
    for skill in [*_signature_blocks(text), *_python_blocks(text), *_feedback_lists(text)]:
        if not skill.name.startswith("_"):
            skills.setdefault(skill.name, skill)
    return list(skills.values())


def _params(listed: str) -> tuple[str, ...]:
    """Parameter names of a rendered signature's inside, ``env`` and ``*``/``/`` left out."""
    names = []
    for part in _split_params(listed):
        name = part.split(":", 1)[0].split("=", 1)[0].strip().lstrip("*")
        if name and name not in ("env", "/") and name.isidentifier():
            names.append(name)
    return tuple(names)


def _split_params(listed: str) -> list[str]:
    """Split on top-level commas only (``x: dict[str, int] = {}`` stays one part)."""
    parts, depth, current = [], 0, ""
    for ch in listed:
        depth += ch in "([{"
        depth -= ch in ")]}"
        if ch == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += ch
    return [p for p in (*parts, current) if p.strip()]


def _signature_blocks(text: str) -> list[OfferedSkill]:
    out = []
    for heading in _SKILLS_HEADING.finditer(text):
        lines = text[heading.end() :].lstrip("\n").splitlines()
        current: tuple[str, tuple[str, ...]] | None = None
        doc: list[str] = []
        for line in lines:
            sig = _SIGNATURE.match(line)
            if sig is not None:
                if current is not None:
                    out.append(OfferedSkill(current[0], current[1], "\n".join(doc).strip()))
                current, doc = (sig["name"], _params(sig["params"])), []
            elif current is not None and (line.startswith((" ", "\t")) or not line.strip()):
                doc.append(line.strip())
            else:
                break
        if current is not None:
            out.append(OfferedSkill(current[0], current[1], "\n".join(doc).strip()))
    return out


def _python_blocks(text: str) -> list[OfferedSkill]:
    out = []
    for block in _FENCED.findall(text):
        try:
            tree = pyast.parse(block)
        except SyntaxError:
            continue
        for node in tree.body:
            if isinstance(node, ast.FunctionDef):
                params = tuple(a.arg for a in node.args.args if a.arg != "env")
                out.append(OfferedSkill(node.name, params, ast.get_docstring(node) or ""))
    return out


def _feedback_lists(text: str) -> list[OfferedSkill]:
    out = []
    for listed in _CALL_A_SKILL.findall(text):
        for sig in re.finditer(
            r"([A-Za-z]\w*)\(([^()]*)\)(?:\s*->\s*[\w\[\], |.]+?)?(?=, [A-Za-z]\w*\(|$)", listed
        ):
            out.append(OfferedSkill(sig.group(1), _params(sig.group(2))))
    return out
