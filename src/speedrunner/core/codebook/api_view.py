"""What a skill inducer is told about the skill API, rendered from the code it describes.

Every method that writes skills (``speedrunner``, ``speedrunner_no_cl``, ``asi``) shows its
inducer the same text for one batch: the codebook rules it will be held to (from ``rules``:
its caps and the run's ``Rules``), the primitive actions, the ``env`` handle's public members (from
the ``SkillEnv`` class), each public name of the benchmark's skill API module with its
signature and docstring (from the module's ``__all__``), the ``env.state`` layout and
coordinate conventions (the module's ``STATE_LAYOUT`` and ``COORDINATES``), and one real
state from the batch. Nothing is written here by hand that the code already says, so a
member or helper added elsewhere shows up without touching this file; so the ablation
``speedrunner`` vs ``speedrunner_no_cl`` differs only in code execution, not in what the
inducer can know about the API.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import importlib
import inspect
import json
import sys
import textwrap
import types
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from speedrunner.core import pyast
from speedrunner.core.codebook.parse import render_signature
from speedrunner.core.codebook.rules import FORBIDDEN_MEMBERS, FORBIDDEN_NAMES, Rules
from speedrunner.core.skill import (
    MAX_ACTION_CHARS,
    MAX_RETURN_BYTES,
    MAX_RETURN_VALUES,
    MAX_SCRATCH_CHARS,
    MAX_SCRATCH_VALUES,
    SKILL_TIMEOUT_BASE_S,
    SKILL_TIMEOUT_PER_ACTION_S,
    SkillEnv,
)
from speedrunner.core.trajectory import ActorStep, Trajectory

if TYPE_CHECKING:
    from speedrunner.core.config.schema import MethodConfig
    from speedrunner.core.env import Observation

__all__ = [
    "ANALYSIS_MODULE",
    "StateExample",
    "add_function_rule",
    "analysis_helper_names",
    "api_names",
    "caps_lines",
    "inducer_caps",
    "render_analysis_helpers",
    "render_api_view",
    "state_example",
]

ANALYSIS_MODULE = "speedrunner.core.experience"
"""What SpeedRunner's analysis code imports its helpers from."""
_SETUP_ONLY = frozenset({"configure"})
"""Public names of ``ANALYSIS_MODULE`` that the method calls, not the inducer."""
_ENV_TYPE = "SkillEnv"
"""Re-exported by every skill API module for annotations; shown as the ``env`` object instead."""
MAX_EXAMPLE_TEXT = 1500
"""Characters of the example observation text shown; the rest is cut with a note."""
MAX_EXAMPLE_ITEMS = 8
"""Items of one list in the example state shown (ScienceWorld lists hundreds of valid actions)."""
MAX_EXAMPLE_STRING = 400
MAX_VALUE_REPR = 400

Observe = Callable[[str, int], "Observation"]
"""``observe(task, seed)``: the first observation of a fresh env reset on that task and seed."""


@dataclass(frozen=True)
class StateExample:
    """One observation as a skill sees it (``env.text`` and ``env.state``), and where it came
    from."""

    text: str
    structured: dict[str, Any] | None
    """``None`` when no env was at hand to recover it (the text is still the stored one)."""
    where: str


# ---------------------------------------------------------------------- the view
def render_api_view(
    api_module: str, rules: Rules, method_config: MethodConfig, *, example: StateExample | None
) -> str:
    """The inducer's view of the skill API and the codebook rules for one batch.

    ``method_config`` supplies the skill-call caps (``max_skill_actions``, ``skill_timeout_s``:
    ``None`` = the episode's remaining budget, a limit scaled to it); the library and
    per-function caps are the ones ``rules`` enforces. Deterministic: the same inputs give
    the same text, so a resumed sleep phase asks its model the same question.
    """
    api = importlib.import_module(api_module)
    sections = [
        "## Codebook rules (every edit is checked against these)\n"
        + _rules(api_module, rules, method_config),
        "## Primitive actions\n" + _primitives(rules),
        f"## The `env` object (a skill's first parameter, a `{_ENV_TYPE}`)\n"
        + _class_members(getattr(api, _ENV_TYPE, SkillEnv), prefix="env."),
        f"## The skill API: `from {api_module} import ...`\n" + _api(api),
        "## `env.state`\n" + _state(api, example),
    ]
    return "\n\n".join(sections)


def api_names(api_module: str) -> list[str]:
    """The skill API names the inducer is offered: ``__all__`` without the ``env`` type."""
    module = importlib.import_module(api_module)
    return [n for n in getattr(module, "__all__", ()) if n != _ENV_TYPE]


def _rules(api_module: str, rules: Rules, cfg: MethodConfig) -> str:
    reserved = sorted(rules.reserved_actions())
    forbidden = ", ".join(f"`{n}`" for n in sorted(FORBIDDEN_NAMES))
    members = ", ".join(f"`typing.{n}`" for n in sorted(FORBIDDEN_MEMBERS))
    api = importlib.import_module(api_module)
    example = [n for n in api_names(api_module) if inspect.isfunction(getattr(api, n, None))][
        :2
    ] or ["..."]
    lines = [
        "- The codebook is one Python module: imports at the top, then functions and UPPER_CASE "
        "constants assigned literals. No classes, `global`/`nonlocal`, `async`, decorators or "
        "other top-level statements.",
        "- Imports (at the top only): "
        f"{', '.join(f'`{m}`' for m in sorted(rules.allowed_imports))}, and names from "
        f"the skill API: `from {api_module} import {', '.join(example)}`. Nothing else, "
        "no `import *`, no private (`_name`) members.",
        f"- Forbidden: {forbidden}; {members}; any name or attribute starting with `__`; "
        "`getattr`/`setattr`/`delattr`/`hasattr` except called with a literal, non-private "
        "attribute name.",
        "- Reserved names (no function may be named so): "
        + (
            "the primitive actions as identifiers "
            f"({', '.join(f'`{n}`' for n in reserved)}: the actor takes those directly), "
            if reserved
            else ""
        )
        + "the skill API's names, and Python builtins (`max`, `list`, ...).",
        "- Public functions (no leading underscore) are what the actor sees and calls: the first "
        f"parameter must be `{rules.env_param or 'env'}` (the actor's call leaves it out and "
        'passes literal arguments only, e.g. `name("red", 2)`), and a docstring is required. '
        "`_private` helpers are hidden from the actor; any function may call any other.",
        "- How an edit is checked: at once, on the whole module as it would be after the edit. "
        "It must parse, follow these rules, use only names the module defines (its functions, "
        "imports and constants) or builtins, and then import cleanly in the sandbox. So a "
        "function that calls a new helper is accepted only with or after that helper (callees "
        "before callers). A rejected edit changes nothing; the reply lists every problem with "
        "a fix.",
        *caps_lines(rules, cfg),
        f"- `env.scratch` keeps at most {MAX_SCRATCH_CHARS} characters of JSON between the skill "
        f"calls of one episode, with at most {MAX_SCRATCH_VALUES} JSON values (counted as the "
        "commas, brackets and braces of its JSON, in strings too); a call that leaves more keeps "
        "the scratch of the call before (and says so). It is the only state that lasts from one "
        "call to the next: each call starts from a fresh copy of the module.",
        f"- A skill's returned value may be at most {MAX_RETURN_BYTES} characters of JSON with at "
        f"most {MAX_RETURN_VALUES} JSON values (counted the same way); a larger one ends the call "
        f"with an error. An action string (`env.act`) has at most {MAX_ACTION_CHARS} characters.",
    ]
    return "\n".join(lines)


def caps_lines(
    rules: Rules,
    cfg: MethodConfig,
    *,
    at_cap: str = "the actor's turn ends",
    episode: str = "episode",
) -> list[str]:
    """The caps a skill is held to, as rule lines: the validator's per-function and library
    caps (from ``rules``) and one call's action and time caps (from the method config
    ``cfg``: ``max_skill_actions``, ``skill_timeout_s``; ``None`` = the episode's remaining
    budget, a limit scaled to it). Every skill writer is shown these (the codebook
    inducers in the API view, Voyager's action agent in its system prompt); ``at_cap`` says
    what follows a call stopped at the action cap, ``episode`` what the budget belongs to."""
    limits = rules.limits
    return [
        f"- Caps in force: each function at most {limits.max_function_lines} lines and "
        f"{limits.max_function_chars} characters, a public docstring at most "
        f"{limits.max_docstring_chars} characters; the whole library: "
        f"{_cap(limits.max_functions, 'functions')}, {_cap(limits.max_total_chars, 'characters')}.",
        "- One skill call " + _skill_call_caps(cfg, at_cap, episode),
    ]


def _cap(value: int | None, what: str) -> str:
    return f"no cap on {what}" if value is None else f"at most {value} {what}"


def _skill_call_caps(cfg: MethodConfig, at_cap: str, episode: str) -> str:
    caps = cfg.skill_caps()
    actions, timeout = caps.max_skill_actions, caps.skill_timeout_s
    text = (
        f"may take up to the {episode}'s remaining budget of env actions"
        if actions is None
        else f"takes at most {actions} primitive actions; at the cap it stops cleanly and {at_cap}"
    )
    if timeout is None:
        text += (
            f"; it is stopped after {SKILL_TIMEOUT_BASE_S:g} s plus "
            f"{SKILL_TIMEOUT_PER_ACTION_S:g} s per action it may take (wall-clock time)."
        )
    else:
        text += f"; it is stopped after {timeout:g} s of wall-clock time."
    return text


def inducer_caps(cfg: MethodConfig) -> str:
    """The caps on the inducer's own work in one sleep phase, from its method config
    (``MethodConfig.own_work_caps``: SpeedRunner's turns, tool output and analysis time; ASI's
    new functions per answer). Rendered next to the API view, which stays one text for every
    codebook method; "" for a config with none."""
    parts = cfg.own_work_caps()
    return "Caps on your own work: " + "; ".join(parts) + "." if parts else ""


@functools.cache
def add_function_rule() -> str:
    """What one ``add_function`` tool call may hold (SpeedRunner's inducers), decided by trying
    the edit machinery itself, so the sentence stays true when ``core/codebook/edits.py``
    changes: several functions in one block, or one."""
    from speedrunner.core.codebook.codebook import Codebook
    from speedrunner.core.codebook.edits import AddFunction, EditRejected, apply_edits
    from speedrunner.core.codebook.model import Author

    probe = AddFunction("def _callee():\n    return 1\n\n\ndef _caller():\n    return _callee()\n")
    result = apply_edits(
        Codebook.empty(),
        [probe],
        Author(method="probe"),
        rules=Rules("probe_api", frozenset(), (), None),
    )
    if isinstance(result, EditRejected):
        return (
            "One function per `add_function` (imports it needs may precede it): add a helper with "
            "its own `add_function` before the function that calls it."
        )
    return (
        "One `add_function` may hold several functions (e.g. helpers with their caller), checked "
        "together as one edit."
    )


def _primitives(rules: Rules) -> str:
    if not rules.primitive_actions:
        return (
            "Free-text commands: `env.act(text)` sends any command to the simulator; "
            '`env.state["valid_actions"]` lists the ones it accepts right now.'
        )
    return "`env.act(...)` takes exactly one of: " + ", ".join(
        f"`{a}`" for a in rules.primitive_actions
    )


# -------------------------------------------------------------- API and classes
def _api(api: Any) -> str:
    blocks = []
    for name in api_names(api.__name__):
        obj = getattr(api, name)
        if inspect.isclass(obj):
            head = f"- `class {name}" + (
                f"({_fields(obj)})`" if dataclasses.is_dataclass(obj) else "`"
            )
            members = _class_members(obj, prefix=".", skip_fields=True)
            blocks.append(
                head + _doc(obj) + ("\n" + textwrap.indent(members, "  ") if members else "")
            )
        elif inspect.isfunction(obj):
            blocks.append(f"- `{_signature(obj, name)}`" + _doc(obj))
        else:
            blocks.append(f"- `{name} = {_short_repr(obj)}`")
    aliases = _aliases(api, "\n".join(blocks))
    return "\n".join(blocks) + (
        f"\n(`State` is `{aliases}`, the type of `env.state`.)" if aliases else ""
    )


def _aliases(api: Any, text: str) -> str | None:
    state = getattr(api, "State", None)
    return str(state).replace("typing.", "") if state is not None and "State" in text else None


def _signature(func: Callable[..., Any], name: str, hide_first: str | None = None) -> str:
    """The signature as written in the source (string annotations stay readable)."""
    try:
        node = pyast.parse(textwrap.dedent(inspect.getsource(func))).body[0]
    except (OSError, TypeError, SyntaxError, IndexError):
        return f"{name}{inspect.signature(func)}"
    if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
        return f"{name}{inspect.signature(func)}"
    return render_signature(node, name, hide_first=hide_first)


def _doc(obj: Any, *, first_paragraph: bool = False) -> str:
    doc = inspect.getdoc(obj)
    if not doc:
        return ""
    doc = _markdown(doc)
    if first_paragraph:
        doc = doc.split("\n\n", 1)[0]
    lines = doc.splitlines()
    return ": " + lines[0] if len(lines) == 1 else "\n" + textwrap.indent(doc, "    ")


def _markdown(doc: str) -> str:
    """reST literals (double backticks) as the Markdown code (single backticks) a prompt reader
    expects."""
    return doc.replace("``", "`")


def _fields(cls: type) -> str:
    parts = []
    for f in dataclasses.fields(cls):
        default = "" if f.default is dataclasses.MISSING else f" = {f.default!r}"
        parts.append(f"{f.name}: {_annotation(f.type)}{default}")
    return ", ".join(parts)


def _annotation(value: Any) -> str:
    return (
        value
        if isinstance(value, str)
        else getattr(value, "__name__", str(value)).replace("typing.", "")
    )


def _class_members(cls: type, *, prefix: str, skip_fields: bool = False) -> str:
    """Public members of ``cls``: annotated and ``__init__``-assigned attributes, properties,
    methods, each with its docstring (an attribute's is the string literal under it)."""
    attributes = _attributes(cls)
    fields = {f.name for f in dataclasses.fields(cls)} if dataclasses.is_dataclass(cls) else set()
    lines = []
    for name, (annotation, doc) in attributes.items():
        if name.startswith("_") or (skip_fields and name in fields):
            continue
        annotation = _resolve_alias(cls, annotation)
        lines.append(
            f"- `{prefix}{name}"
            + (f": {annotation}`" if annotation else "`")
            + (f": {doc}" if doc else "")
        )
    own: dict[str, Any] = {}
    for klass in reversed(cls.__mro__[:-1]):  # a subclass's override wins
        own.update(vars(klass))
    for name, member in sorted(own.items()):
        if name.startswith("_") or name in attributes:
            continue
        if isinstance(member, property) and member.fget is not None:
            returns = _signature(member.fget, name, hide_first="self").split(") -> ", 1)
            shown = f"{name} -> {returns[1]}" if len(returns) == 2 else name
            lines.append(f"- `{prefix}{shown}`" + _doc(member, first_paragraph=True))
        elif inspect.isfunction(member):
            lines.append(
                f"- `{prefix}{_signature(member, name, hide_first='self')}`" + _doc(member)
            )
    return "\n".join(lines)


def _resolve_alias(cls: type, annotation: str | None) -> str | None:
    """A module-level type alias (``State``) spelled out, so the reader needs no other file."""
    for klass in cls.__mro__[:-1]:
        alias = getattr(sys.modules.get(klass.__module__), annotation or "", None)
        if isinstance(alias, types.GenericAlias):
            return str(alias).replace("typing.", "")
    return annotation


def _attributes(cls: type) -> dict[str, tuple[str | None, str | None]]:
    """``name -> (annotation, docstring)`` of instance attributes, base classes first."""
    found: dict[str, tuple[str | None, str | None]] = {}
    for klass in reversed(cls.__mro__[:-1]):
        try:
            tree = pyast.parse(textwrap.dedent(inspect.getsource(klass)))
        except (OSError, TypeError, SyntaxError):
            continue
        node = tree.body[0]
        if not isinstance(node, ast.ClassDef):
            continue
        _collect(node.body, found, lambda t: t.id if isinstance(t, ast.Name) else None)
        init = next(
            (n for n in node.body if isinstance(n, ast.FunctionDef) and n.name == "__init__"), None
        )
        if init is not None:
            _collect(
                init.body,
                found,
                lambda t: (
                    t.attr
                    if isinstance(t, ast.Attribute)
                    and isinstance(t.value, ast.Name)
                    and t.value.id == "self"
                    else None
                ),
            )
    return found


def _collect(
    body: list[ast.stmt],
    found: dict[str, tuple[str | None, str | None]],
    target_name: Callable[[ast.expr], str | None],
) -> None:
    for i, stmt in enumerate(body):
        if isinstance(stmt, ast.AnnAssign):
            name, annotation = target_name(stmt.target), ast.unparse(stmt.annotation)
        elif isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
            name, annotation = target_name(stmt.targets[0]), None
        else:
            continue
        if name is None:
            continue
        following = body[i + 1] if i + 1 < len(body) else None
        doc = (
            _markdown(inspect.cleandoc(following.value.value))
            if isinstance(following, ast.Expr)
            and isinstance(following.value, ast.Constant)
            and isinstance(following.value.value, str)
            else None
        )
        old = found.get(name, (None, None))
        found[name] = (annotation or old[0], doc or old[1])


def _short_repr(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= MAX_VALUE_REPR else text[:MAX_VALUE_REPR] + " ...(cut)"


# ------------------------------------------------------------------------ state
def _state(api: Any, example: StateExample | None) -> str:
    parts = []
    if (layout := getattr(api, "STATE_LAYOUT", None)) is not None:
        parts.append("Layout:\n" + layout)
    if (coordinates := getattr(api, "COORDINATES", None)) is not None:
        parts.append("Conventions:\n" + coordinates)
    if example is None:
        parts.append("(No episode of this batch has an observation to show as an example.)")
        return "\n\n".join(parts)
    text = example.text
    if len(text) > MAX_EXAMPLE_TEXT:
        text = text[:MAX_EXAMPLE_TEXT] + f"\n... (cut: {len(example.text)} characters in all)"
    parts.append(f"Example, {example.where}.\n`env.text`:\n```\n{text}\n```")
    if example.structured is None:
        parts.append("(`env.state` for it is not available here; see the layout above.)")
    else:
        shown = json.dumps(_shorten(example.structured), ensure_ascii=False, sort_keys=False)
        parts.append(f"`env.state`:\n```json\n{shown}\n```")
    return "\n\n".join(parts)


def _shorten(value: Any) -> Any:
    """``value`` with long lists and strings cut, saying how much was left out."""
    if isinstance(value, dict):
        return {k: _shorten(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        items = [_shorten(v) for v in value[:MAX_EXAMPLE_ITEMS]]
        if len(value) > MAX_EXAMPLE_ITEMS:
            items.append(f"... ({len(value) - MAX_EXAMPLE_ITEMS} more)")
        return items
    if isinstance(value, str) and len(value) > MAX_EXAMPLE_STRING:
        return value[:MAX_EXAMPLE_STRING] + f"... ({len(value)} characters in all)"
    return value


def state_example(batch: Sequence[Trajectory], observe: Observe | None) -> StateExample | None:
    """A first observation from the batch: the one that says most (most lines; ties: lowest
    episode index), with its ``env.state`` recovered by resetting a fresh env on the same task
    and seed (episodes store only the text). If that reset shows another text, the reset's
    observation is shown and said to be one (still a real state of that task); ``observe``
    ``None``: the text alone. Only the chosen episode is reset."""
    firsts = [(t, t.steps[0].observation) for t in batch if t.steps and t.steps[0].observation]
    if not firsts:
        return None
    t, stored = min(firsts, key=lambda pair: (-len(pair[1].splitlines()), pair[0].index))
    where = f"the first observation of episode {t.index} (task {t.task}, seed {t.seed})"
    if observe is None:
        return StateExample(stored, None, where)
    fresh = observe(t.task, t.seed)
    if fresh.text == stored:
        return StateExample(stored, dict(fresh.structured), where)
    return StateExample(
        fresh.text,
        dict(fresh.structured),
        f"a fresh reset of episode {t.index}'s task {t.task} and seed {t.seed}",
    )


# --------------------------------------------------------------- analysis helpers
def analysis_helper_names(module: str = ANALYSIS_MODULE) -> list[str]:
    """The helpers analysis code gets: the module's public functions the method does not keep."""
    mod = importlib.import_module(module)
    names: Iterable[str] = vars(mod).get("__all__") or [
        n for n in vars(mod) if not n.startswith("_")
    ]
    return [n for n in names if n not in _SETUP_ONLY and inspect.isfunction(getattr(mod, n, None))]


def render_analysis_helpers(module: str = ANALYSIS_MODULE) -> str:
    """Each helper's signature and the first paragraph of its docstring, and the fields of
    the records they return, for the start message of a method that can run code."""
    mod = importlib.import_module(module)
    names = analysis_helper_names(module)
    lines = [
        "Analysis helpers for `run_python` (already imported: "
        f"`from {module} import {', '.join(names)}`):"
    ]
    lines += [
        f"- `{_signature(getattr(mod, n), n)}`" + _doc(getattr(mod, n), first_paragraph=True)
        for n in names
    ]
    for cls in (Trajectory, ActorStep):
        fields = ", ".join(f.name for f in dataclasses.fields(cls))
        methods = ", ".join(
            _signature(m, n, hide_first="self")
            for n, m in sorted(vars(cls).items())
            if inspect.isfunction(m) and not n.startswith("_") and n not in {"to_json", "from_json"}
        )
        lines.append(
            f"- `{cls.__name__}` fields: {fields}" + (f"; methods: {methods}" if methods else "")
        )
    return "\n".join(lines)
