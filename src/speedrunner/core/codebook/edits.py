"""Edits an author (an LLM, a script) makes to a codebook, applied all at once.

``apply_edits`` applies a batch in order to the parts of the current generation, then
validates the whole resulting module. Either every edit applies and the module passes
(a ``Candidate``), or nothing changes (``EditRejected``, every problem listed).

Renames rewrite references through Python's name resolution (``scopes``): a call site
``go_to(...)`` or a reference ``f = go_to`` in another function changes; a local variable
or parameter of that name, an attribute ``obj.go_to``, a keyword ``go_to=`` and the
string ``"go_to"`` do not. Only the names' own characters change, so formatting and
comments survive.

One ``AddFunction`` may define several functions (a caller with its helpers): they are checked and
added as one edit. A function's source may bring imports and constants along (above its ``def``);
they join the module header unless the header already has that exact line. Header lines are never
removed: the cost of an unused import is nil.
"""

from __future__ import annotations

import ast
import keyword
import re
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from speedrunner.core import pyast
from speedrunner.core.codebook import store
from speedrunner.core.codebook.codebook import Codebook
from speedrunner.core.codebook.model import Author, CallStats, FunctionMeta, GenerationMeta
from speedrunner.core.codebook.parse import assemble, render_signature, split_module
from speedrunner.core.codebook.rules import Rules
from speedrunner.core.codebook.scopes import global_refs
from speedrunner.core.codebook.validate import Problem, Rule, validate_source
from speedrunner.errors import InvalidCodebookError


@dataclass(frozen=True)
class AddFunction:
    """New functions: ``source`` holds one or more ``def``s (helpers with their caller; imports
    and constants may precede them). They are added together or not at all."""

    source: str


@dataclass(frozen=True)
class EditFunction:
    """Replace function ``name`` with ``source``, which must define the same name."""

    name: str
    source: str


@dataclass(frozen=True)
class DeleteFunction:
    name: str


@dataclass(frozen=True)
class RenameFunction:
    """Rename ``old`` to ``new`` and every reference to it in the codebook."""

    old: str
    new: str


@dataclass(frozen=True)
class MakePrivate:
    """``f`` -> ``_f``: hidden from the actor, still callable by other functions."""

    name: str


@dataclass(frozen=True)
class MakePublic:
    """``_f`` -> ``f``: shown to the actor (it then needs a docstring)."""

    name: str


Edit = AddFunction | EditFunction | DeleteFunction | RenameFunction | MakePrivate | MakePublic


@dataclass(frozen=True)
class Candidate:
    """A validated next generation, not yet stored.

    Only a candidate can become a generation, and ``commit`` checks the static rules again
    before writing, so a generation that fails validation cannot reach disk even through a
    hand-built ``Candidate``."""

    parent: Codebook
    source: str
    meta: GenerationMeta
    rules: Rules

    @property
    def generation(self) -> int:
        return self.meta.generation

    def commit(self, run_dir: Path) -> Codebook:
        """Store this generation (atomically, never over another) and return it as loaded."""
        problems = validate_source(self.source, self.rules, smoke=False)
        if problems:
            raise InvalidCodebookError(
                f"codebook generation {self.generation} fails validation and is not "
                "written:\n" + "\n".join(f"  - {p}" for p in problems)
            )
        store.write_generation(run_dir, self.source, self.meta)
        return Codebook.load(run_dir, self.generation)


@dataclass(frozen=True)
class EditRejected:
    """Why a batch of edits did not produce a candidate; ``message`` is for the author. A
    rejection changes nothing: the parent stays current."""

    parent: Codebook
    author: Author
    problems: tuple[Problem, ...]
    source: str | None = None
    """The rejected module when the edits applied but it failed validation."""

    @property
    def message(self) -> str:
        head = (
            f"The codebook edits were rejected ({len(self.problems)} "
            f"problem{'s' if len(self.problems) != 1 else ''}); generation "
            f"{self.parent.generation} stays current."
        )
        return head + "\n" + "\n".join(f"- {p}" for p in self.problems)


def apply_edits(
    codebook: Codebook, edits: Sequence[Edit], author: Author, *, rules: Rules
) -> Candidate | EditRejected:
    """The next generation after ``edits``, validated against ``rules``, or why not.

    Metadata carries over: an untouched, renamed or re-referenced function keeps its author,
    first generation and counts; an edited one gets ``author`` and fresh counts; an added one
    starts in the new generation.
    """
    work = _Work(codebook)
    for i, edit in enumerate(edits, 1):
        work.apply(i, edit)
    if work.problems:
        return EditRejected(codebook, author, tuple(work.problems))
    source = assemble(work.docstring, work.header, [e.text for e in work.funcs.values()])
    problems = validate_source(source, rules)
    if problems:
        return EditRejected(codebook, author, tuple(problems), source)
    return Candidate(codebook, source, _metadata(codebook, source, work, author, rules), rules)


@dataclass
class _Entry:
    text: str
    meta: FunctionMeta | None
    """The parent generation's metadata; ``None`` for a function added by this batch."""
    revised: bool = False


class _Work:
    def __init__(self, codebook: Codebook) -> None:
        parts = split_module(codebook.source)
        metas = {m.name: m for m in codebook.functions}
        self.docstring = parts.docstring
        self.header = list(parts.header)
        self.funcs = {f.name: _Entry(f.text, metas.get(f.name)) for f in parts.functions}
        self.problems: list[Problem] = []

    def fail(
        self,
        i: int,
        edit: Edit,
        message: str,
        *,
        function: str | None = None,
        fix: str | None = None,
        rule: Rule = "edit",
        function_line: int | None = None,
    ) -> None:
        self.problems.append(
            Problem(
                rule,
                f"edit {i} ({_describe(edit)}): {message}",
                function=function,
                function_line=function_line,
                fix=fix,
            )
        )

    def exists(self, i: int, edit: Edit, name: str) -> bool:
        if name in self.funcs:
            return True
        known = ", ".join(self.funcs) or "none"
        self.fail(i, edit, f"there is no function {name!r} (functions: {known})", function=name)
        return False

    def apply(self, i: int, edit: Edit) -> None:
        if isinstance(edit, AddFunction):
            added = self.snippet(i, edit, edit.source, several=True)
            if added is None:
                return
            functions, header = added
            names = [name for name, _ in functions]
            for name in dict.fromkeys(n for n in names if names.count(n) > 1):
                self.fail(
                    i,
                    edit,
                    f"the source defines {name!r} {names.count(name)} times",
                    function=name,
                    fix="keep one definition of each function",
                )
            for name in dict.fromkeys(n for n in names if n in self.funcs):
                self.fail(
                    i,
                    edit,
                    f"a function named {name!r} exists already",
                    function=name,
                    fix=f"use EditFunction({name!r}, ...) to replace it, or choose another name",
                )
            if len(set(names)) != len(names) or any(n in self.funcs for n in names):
                return
            self.merge(header)
            for name, text in functions:
                self.funcs[name] = _Entry(text, None, revised=True)
        elif isinstance(edit, EditFunction):
            if not self.exists(i, edit, edit.name):
                return
            parsed = self.snippet(i, edit, edit.source)
            if parsed is None:
                return
            [(name, text)], header = parsed
            if name != edit.name:
                self.fail(
                    i,
                    edit,
                    f"the new source defines {name!r}, not {edit.name!r}",
                    function=edit.name,
                    fix=f"keep the name {edit.name!r}; rename with RenameFunction({edit.name!r}, "
                    f"{name!r})",
                )
                return
            self.merge(header)
            entry = self.funcs[name]
            entry.text, entry.revised = text, True
        elif isinstance(edit, DeleteFunction):
            if self.exists(i, edit, edit.name):
                del self.funcs[edit.name]
        elif isinstance(edit, RenameFunction):
            self.rename(i, edit, edit.old, edit.new)
        elif isinstance(edit, MakePrivate):
            if not self.exists(i, edit, edit.name):
                return
            if edit.name.startswith("_"):
                self.fail(i, edit, f"{edit.name!r} is private already", function=edit.name)
                return
            self.rename(i, edit, edit.name, "_" + edit.name)
        elif isinstance(edit, MakePublic):
            if not self.exists(i, edit, edit.name):
                return
            if not edit.name.startswith("_") or edit.name.startswith("__"):
                self.fail(
                    i,
                    edit,
                    f"{edit.name!r} is not a private name (one leading underscore)",
                    function=edit.name,
                )
                return
            self.rename(i, edit, edit.name, edit.name[1:])
        else:
            raise TypeError(f"not a codebook edit: {edit!r}")

    def snippet(
        self, i: int, edit: Edit, source: str, *, several: bool = False
    ) -> tuple[list[tuple[str, str]], list[str]] | None:
        """([(function name, its text)], header lines) of an edit's source, or ``None`` after a
        problem. ``several``: the source may define more than one function (AddFunction)."""
        # One newline convention in the module: "\r\n" from a model would end up mixed with ours.
        text = textwrap.dedent(source.replace("\r\n", "\n")).strip("\n")
        try:
            tree = pyast.parse(text)
        except SyntaxError as e:
            name, line = _locate(text, e.lineno or 1)
            where = f"line {line}" if name else f"line {e.lineno} of the source"
            self.fail(
                i,
                edit,
                f"the source does not parse: {e.msg} ({where})",
                function=name,
                rule="syntax",
                function_line=line,
                fix="correct the syntax at that line",
            )
            return None
        defs = [n for n in tree.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]
        if not defs or (len(defs) > 1 and not several):
            want = (
                "at least one top-level function" if several else "exactly one top-level function"
            )
            self.fail(
                i,
                edit,
                f"the source must define {want}; it defines {len(defs)}"
                + (f" ({', '.join(d.name for d in defs)})" if defs else ""),
                fix="AddFunction may define several functions; EditFunction replaces one",
            )
            return None
        parts = split_module(text)
        header = ([parts.docstring] if parts.docstring else []) + list(parts.header)
        return [(f.name, f.text) for f in parts.functions], header

    def merge(self, header: list[str]) -> None:
        self.header.extend(line for line in header if line not in self.header)

    def rename(self, i: int, edit: Edit, old: str, new: str) -> None:
        if not self.exists(i, edit, old):
            return
        if not new.isidentifier() or keyword.iskeyword(new):
            self.fail(i, edit, f"{new!r} is not a valid Python name", function=old)
            return
        if new in self.funcs:
            self.fail(
                i,
                edit,
                f"a function named {new!r} exists already",
                function=old,
                fix="delete or rename that function first, or choose another name",
            )
            return
        texts: dict[str, str] = {}
        blocked = False
        for name, entry in self.funcs.items():
            text, captured = rename_in_function(entry.text, old, new)
            blocked = blocked or bool(captured)
            if captured:
                lines = ", ".join(map(str, captured))
                self.fail(
                    i,
                    edit,
                    f"{name!r} refers to {old!r} at line{'s' if len(captured) > 1 else ''} {lines} "
                    f"where {new!r} is a local name, so the renamed reference would mean that "
                    "local instead",
                    function=name,
                    function_line=captured[0],
                    fix=f"rename the local {new!r} in {name!r} first, or choose another name",
                )
            texts[name] = text
        if blocked:
            return
        renamed: dict[str, _Entry] = {}
        for name, entry in self.funcs.items():
            entry.text = texts[name]
            renamed[new if name == old else name] = entry
        self.funcs = renamed


def rename_in_function(text: str, old: str, new: str) -> tuple[str, list[int]]:
    """``text`` (one top-level function) with its definition of, and references to, the
    module-level ``old`` renamed to ``new``; plus the lines where ``new`` is a local name
    that would capture such a reference (the text is then not to be used)."""
    func = pyast.parse(text).body[0]
    assert isinstance(func, ast.FunctionDef | ast.AsyncFunctionDef)
    lines = text.splitlines(keepends=True)
    spans: list[tuple[int, int, int]] = []  # (line, start byte, end byte)
    if func.name == old:
        line = lines[func.lineno - 1]
        start = _char(line, func.col_offset)
        match = re.compile(r"(?:async\s+)?def\s+").match(line, start)
        assert match is not None and line.startswith(old, match.end())
        byte = len(line[: match.end()].encode("utf-8"))
        spans.append((func.lineno, byte, byte + len(old.encode("utf-8"))))
    captured: list[int] = []
    for ref in global_refs(func):
        if ref.node.id != old:
            continue
        if new in ref.bound:
            captured.append(ref.node.lineno)
        else:
            spans.append((ref.node.lineno, ref.node.col_offset, ref.node.end_col_offset or 0))
    for lineno, start, end in sorted(spans, reverse=True):
        line = lines[lineno - 1]
        lines[lineno - 1] = line[: _char(line, start)] + new + line[_char(line, end) :]
    return "".join(lines), captured


def _char(line: str, byte_offset: int) -> int:
    """``ast`` columns count UTF-8 bytes; string slicing counts characters."""
    return len(line.encode("utf-8")[:byte_offset].decode("utf-8"))


def _locate(text: str, lineno: int) -> tuple[str | None, int | None]:
    """The function whose ``def`` precedes ``lineno`` in unparsable text, and the line within it."""
    found: tuple[str | None, int | None] = (None, None)
    for index, line in enumerate(text.splitlines()[:lineno], 1):
        match = re.match(r"(?:async\s+)?def\s+(\w+)", line)
        if match:
            found = (match.group(1), lineno - index + 1)
    return found


def _describe(edit: Edit) -> str:
    if isinstance(edit, AddFunction):
        names = re.findall(r"^(?:async\s+)?def\s+(\w+)", edit.source, re.MULTILINE)
        return f"AddFunction {', '.join(map(repr, names))}" if names else "AddFunction"
    if isinstance(edit, RenameFunction):
        return f"RenameFunction {edit.old!r} -> {edit.new!r}"
    return f"{type(edit).__name__} {edit.name!r}"


def _docstring(node: ast.FunctionDef | ast.AsyncFunctionDef) -> str | None:
    """The docstring as the actor is shown it: cleaned, no trailing spaces on any line."""
    doc = ast.get_docstring(node)
    return "\n".join(line.rstrip() for line in doc.splitlines()).strip() or None if doc else None


def _metadata(
    parent: Codebook, source: str, work: _Work, author: Author, rules: Rules
) -> GenerationMeta:
    g = parent.generation + 1
    functions = []
    for fs, entry in zip(split_module(source).functions, work.funcs.values(), strict=True):
        node, public = fs.node, not fs.name.startswith("_")
        old = entry.meta
        kept = old is not None and not entry.revised
        functions.append(
            FunctionMeta(
                name=fs.name,
                public=public,
                signature=render_signature(node, fs.name),
                call_signature=render_signature(node, fs.name, hide_first=rules.env_param)
                if public
                else None,
                docstring=_docstring(node),
                author=old.author if kept and old else author,
                first_generation=old.first_generation if old else g,
                revised_generation=old.revised_generation if kept and old else g,
                stats=old.stats if kept and old else CallStats(),
            )
        )
    return GenerationMeta(
        generation=g,
        parent=parent.generation,
        author=author,
        source_sha256=store.sha256(source),
        functions=tuple(functions),
    )
