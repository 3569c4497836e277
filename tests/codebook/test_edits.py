"""Edit operations: what each does to the module, to the actor's view and to the metadata."""

from __future__ import annotations

import dataclasses
import types

import pytest

from speedrunner.core.codebook import (
    AddFunction,
    Author,
    CallStats,
    Codebook,
    DeleteFunction,
    EditFunction,
    EditRejected,
    MakePrivate,
    MakePublic,
    RenameFunction,
    apply_edits,
)

from .helpers import API, AUTHOR, GO_TO, IMPORT_FIND, RULES, STEP, build, built, only

LATER = Author(method="speedrunner", batch_index=7, scripted=True)


def base() -> Codebook:
    """Generation 1 (in memory): go_to calls the private _step, which uses the API's find."""
    return built(AddFunction(IMPORT_FIND + "\n" + STEP), AddFunction(GO_TO))


def rejected(codebook: Codebook, *edits, rules=RULES) -> EditRejected:
    result = apply_edits(codebook, list(edits), LATER, rules=rules)
    assert isinstance(result, EditRejected), result.source
    return result


def run(source: str, monkeypatch: pytest.MonkeyPatch) -> dict:
    """Import the module in-process (trusted test code) against a fake skill API."""
    api = types.ModuleType(API)
    api.find = lambda state, name: (
        types.SimpleNamespace(distance=state["distance"]) if name in state else None
    )
    monkeypatch.setitem(__import__("sys").modules, API, api)
    namespace: dict = {}
    exec(compile(source, "codebook", "exec"), namespace)
    return namespace


class FakeEnv:
    def __init__(self) -> None:
        self.state = {"red ball": True, "distance": 1}
        self.actions: list[str] = []

    def act(self, action: str) -> str:
        self.actions.append(action)
        return ""


# --------------------------------------------------------------------------- add
def test_add_puts_the_function_and_its_imports_in_the_module(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    cb = base()
    assert [f.name for f in cb.functions] == ["_step", "go_to"]
    assert cb.source.count(IMPORT_FIND) == 1
    env = FakeEnv()
    assert run(cb.source, monkeypatch)["go_to"](env, "red ball") is True and env.actions == [
        "go forward"
    ]
    meta = cb.function("go_to")
    assert (meta.author, meta.first_generation, meta.revised_generation, meta.stats) == (
        AUTHOR,
        1,
        1,
        CallStats(),
    )
    assert meta.signature == "go_to(env, name: str, steps: int = 10) -> bool"
    assert meta.call_signature == "go_to(name: str, steps: int = 10) -> bool"
    assert meta.docstring == "Walk to the nearest visible ``name``; True when next to it."
    assert cb.meta.author == AUTHOR and cb.meta.parent == 0


def test_add_an_existing_name_is_rejected() -> None:
    result = rejected(base(), AddFunction(GO_TO))
    p = only(result.problems, "edit")
    assert (
        p.function == "go_to"
        and "edit 1 (AddFunction 'go_to'): a function named 'go_to' exists already" in str(p)
    )
    assert "EditFunction('go_to', ...)" in p.fix


def test_one_add_may_define_a_caller_with_its_helpers() -> None:
    """A coding agent writes helpers with their caller: one edit, validated as one."""
    together = built(AddFunction(IMPORT_FIND + "\n" + STEP + "\n" + GO_TO))
    apart = base()
    assert together.source == apart.source
    assert [f.name for f in together.functions] == ["_step", "go_to"]
    assert together.signatures() == {"go_to": "go_to(name: str, steps: int = 10) -> bool"}


def test_a_several_function_add_is_all_or_nothing() -> None:
    # one of the two is bad (its callee's import is missing): neither is added
    result = rejected(Codebook.empty(), AddFunction(STEP + "\n" + GO_TO))
    assert only(result.problems, "undefined-name").function == "_step"
    # one name exists already: the edit names it, and nothing changes
    p = only(
        rejected(base(), AddFunction(GO_TO.replace("go_to", "walk_to") + "\n" + GO_TO)).problems,
        "edit",
    )
    assert str(p).startswith(
        "function 'go_to' [edit]: edit 1 (AddFunction 'walk_to', 'go_to'): a function named "
        "'go_to' exists already"
    )
    p = only(rejected(Codebook.empty(), AddFunction(IMPORT_FIND + STEP + STEP)).problems, "edit")
    assert "the source defines '_step' 2 times" in p.message


def test_add_must_define_a_function_and_edit_exactly_one() -> None:
    p = only(rejected(Codebook.empty(), AddFunction("X = 1")).problems, "edit")
    assert "must define at least one top-level function; it defines 0" in p.message
    p = only(
        rejected(
            base(), EditFunction("go_to", GO_TO + "\n" + STEP.replace("_step", "_other"))
        ).problems,
        "edit",
    )
    assert "must define exactly one top-level function; it defines 2 (go_to, _other)" in p.message


def test_a_syntax_error_in_an_edit_names_the_function_and_its_line() -> None:
    p = only(
        rejected(base(), AddFunction("import re\n\ndef broken(env):\n    return (1,\n")).problems,
        "syntax",
    )
    assert p.function == "broken" and p.function_line == 2 and p.line is None
    assert str(p).startswith(
        "function 'broken', line 2 [syntax]: edit 1 (AddFunction 'broken'): the source does not "
        "parse"
    )


def test_added_code_is_validated_as_part_of_the_module() -> None:
    result = rejected(base(), AddFunction('def peek(env):\n    """Peek."""\n    return eval("1")'))
    p = only(result.problems, "forbidden-name")
    assert (p.function, p.function_line) == ("peek", 3) and "eval is not allowed" in p.message
    assert result.source is not None and "def peek" in result.source
    assert "generation 1 stays current" in result.message and str(p) in result.message


def test_a_rejected_batch_changes_nothing() -> None:
    cb = base()
    result = rejected(cb, DeleteFunction("go_to"), DeleteFunction("nope"))
    p = only(result.problems, "edit")
    assert "edit 2 (DeleteFunction 'nope'): there is no function 'nope' (functions: _step)" in str(
        p
    )
    assert result.parent is cb and [f.name for f in cb.functions] == ["_step", "go_to"]


def test_the_smoke_test_rejects_a_candidate_with_its_message() -> None:
    calls: list[str] = []

    def smoke(source: str) -> str | None:
        calls.append(source)
        return "ImportError: cannot import name 'find' from 'fake_skill_api'"

    rules = dataclasses.replace(RULES, smoke_test=smoke)
    result = rejected(Codebook.empty(), AddFunction(IMPORT_FIND + "\n" + STEP), rules=rules)
    p = only(result.problems, "smoke-test")
    assert calls == [result.source]
    assert (
        "importing the module in the sandbox failed: ImportError: cannot import name 'find'"
        in result.message
    )
    assert p.function is None
    accepted = apply_edits(
        Codebook.empty(),
        [AddFunction(IMPORT_FIND + "\n" + STEP)],
        AUTHOR,
        rules=dataclasses.replace(RULES, smoke_test=lambda source: None),
    )
    assert not isinstance(accepted, EditRejected)


# -------------------------------------------------------------------------- edit
def test_edit_replaces_the_source_and_restarts_its_metadata_except_its_origin() -> None:
    cb = base().with_usage(
        {"go_to": CallStats(calls=4, successes=3, errors=1), "_step": CallStats(calls=9)}
    )
    new_go_to = GO_TO.replace("steps: int = 10", "steps: int = 20")
    candidate = build(EditFunction("go_to", new_go_to), base=cb)
    meta = candidate.meta.functions[1]
    assert meta.call_signature == "go_to(name: str, steps: int = 20) -> bool"
    assert (meta.first_generation, meta.revised_generation, meta.author, meta.stats) == (
        1,
        2,
        AUTHOR,
        CallStats(),
    )
    assert candidate.meta.functions[0].stats == CallStats(calls=9)  # untouched: carried over
    assert "steps: int = 20" in candidate.source


def test_edit_must_keep_the_name_and_name_an_existing_function() -> None:
    p = only(
        rejected(base(), EditFunction("go_to", GO_TO.replace("def go_to", "def walk_to"))).problems,
        "edit",
    )
    assert (
        "the new source defines 'walk_to', not 'go_to'" in p.message
        and "RenameFunction('go_to', 'walk_to')" in p.fix
    )
    p = only(rejected(base(), EditFunction("walk", GO_TO)).problems, "edit")
    assert "there is no function 'walk' (functions: _step, go_to)" in p.message


def test_an_unrelated_edit_keeps_other_functions_byte_for_byte() -> None:
    commented = STEP.replace("    env.act", "    # one step at a time\n    env.act")
    cb = built(AddFunction(IMPORT_FIND + "\n" + commented), AddFunction(GO_TO))
    candidate = build(EditFunction("go_to", GO_TO.replace("10", "11")), base=cb)
    assert commented.strip() in candidate.source


# ------------------------------------------------------------------------ delete
def test_delete_removes_the_function_and_a_dangling_call_is_reported() -> None:
    candidate = build(DeleteFunction("go_to"), base=base())
    assert [f.name for f in candidate.meta.functions] == [
        "_step"
    ] and "def go_to" not in candidate.source
    p = only(rejected(base(), DeleteFunction("_step")).problems, "undefined-name")
    assert (p.function, p.function_line) == ("go_to", 4) and "'_step' is not defined" in p.message


# ------------------------------------------------------------------------ rename
OTHERS = '''
def fetch(env, name):
    """Go to ``name`` and pick it up: a go_to then a pick up."""
    reached = go_to(env, name)
    plan = {"go_to": 1}
    env.go_to = go_to
    again = [go_to for _ in range(1)]
    return reached and env.act("pick up") and plan and again and _walk_alias(go_to=name)


def _walk_alias(go_to=None):
    return go_to


def _local(env):
    go_to = 3
    return go_to
'''


def rename_base() -> Codebook:
    cb = built(
        AddFunction(IMPORT_FIND + "\n" + STEP),
        AddFunction(GO_TO),
        *(AddFunction(part) for part in OTHERS.split("\n\n\n")),
    )
    return cb.with_usage({"go_to": CallStats(calls=5, successes=5)})


def test_rename_updates_call_sites_but_not_strings_attributes_keywords_or_locals() -> None:
    candidate = build(RenameFunction("go_to", "walk_to"), base=rename_base())
    source = candidate.source
    fetch = source[source.index("def fetch") : source.index("def _walk_alias")]
    assert "reached = walk_to(env, name)" in fetch
    assert "env.go_to = walk_to" in fetch  # the attribute stays, the value is the function
    assert "again = [walk_to for _ in range(1)]" in fetch
    assert '{"go_to": 1}' in fetch and "_walk_alias(go_to=name)" in fetch
    assert '"""Go to ``name`` and pick it up: a go_to then a pick up."""' in fetch
    assert "def _walk_alias(go_to=None):\n    return go_to" in source  # a parameter of that name
    assert "def _local(env):\n    go_to = 3\n    return go_to" in source  # a local of that name
    assert (
        "def walk_to(env, name: str, steps: int = 10) -> bool:" in source
        and "def go_to" not in source
    )


def test_rename_keeps_the_metadata_and_the_position() -> None:
    cb = rename_base()
    candidate = build(RenameFunction("go_to", "walk_to"), base=cb)
    old, new = cb.function("go_to"), candidate.meta.functions[1]
    assert new.name == "walk_to" and [f.name for f in candidate.meta.functions][:2] == [
        "_step",
        "walk_to",
    ]
    assert (new.author, new.first_generation, new.revised_generation) == (AUTHOR, 1, 1)
    assert new.stats == CallStats(calls=5, successes=5) == old.stats
    assert new.call_signature == "walk_to(name: str, steps: int = 10) -> bool"
    assert (
        candidate.meta.functions[2].revised_generation == 1
    )  # fetch's references changed, not its code


def test_rename_updates_recursive_calls() -> None:
    countdown = (
        'def countdown(env, n):\n    """Count down."""\n'
        "    return n if n <= 0 else countdown(env, n - 1)"
    )
    cb = built(AddFunction(countdown))
    candidate = build(RenameFunction("countdown", "count_down"), base=cb)
    assert "return n if n <= 0 else count_down(env, n - 1)" in candidate.source


def test_a_rename_a_local_would_capture_is_rejected() -> None:
    result = rejected(rename_base(), RenameFunction("go_to", "reached"))
    p = only(result.problems, "edit")
    assert (p.function, p.function_line) == ("fetch", 3)
    assert "'fetch' refers to 'go_to' at lines 3, 5, 6 where 'reached' is a local name" in p.message
    assert "rename the local 'reached' in 'fetch' first" in p.fix


@pytest.mark.parametrize(
    ("new", "needle"),
    [
        ("_step", "a function named '_step' exists already"),
        ("class", "'class' is not a valid Python name"),
        ("2go", "'2go' is not a valid Python name"),
    ],
)
def test_rename_needs_a_free_valid_name(new: str, needle: str) -> None:
    p = only(rejected(base(), RenameFunction("go_to", new)).problems, "edit")
    assert needle in p.message and p.function == "go_to"


def test_renamed_code_is_validated() -> None:
    p = only(rejected(base(), RenameFunction("go_to", "go_forward")).problems, "name-collision")
    assert p.function == "go_forward" and "reads as the primitive action 'go forward'" in p.message


def test_rename_handles_non_ascii_text_before_the_name() -> None:
    caller = 'def lead(env):\n    """Lead."""\n    return ("→", go_to(env, "é"))'
    cb = built(AddFunction(IMPORT_FIND + "\n" + STEP), AddFunction(GO_TO), AddFunction(caller))
    assert 'return ("→", walk(env, "é"))' in build(RenameFunction("go_to", "walk"), base=cb).source


# ---------------------------------------------------------------- private/public
def test_make_private_hides_from_the_actor_and_keeps_it_callable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    lead = 'def lead(env):\n    """Lead the way."""\n    return go_to(env, "red ball")'
    cb = built(AddFunction(IMPORT_FIND + "\n" + STEP), AddFunction(GO_TO), AddFunction(lead))
    assert set(cb.signatures()) == {"go_to", "lead"}
    candidate = build(MakePrivate("go_to"), base=cb)
    after = Codebook(candidate.source, candidate.meta)
    assert after.signatures() == {"lead": "lead()"}
    assert "go_to" not in after.render_api() and "lead()" in after.render_api()
    assert after.function("_go_to").call_signature is None
    env = FakeEnv()
    assert run(after.source, monkeypatch)["lead"](env) is True and env.actions == ["go forward"]


def test_make_public_shows_it_and_needs_a_docstring() -> None:
    p = only(rejected(base(), MakePublic("_step")).problems, "docstring")
    assert p.function == "step" and "public function 'step' has no docstring" in p.message
    documented = STEP.replace(
        "def _step(env, name):\n", 'def _step(env, name):\n    """One step toward name."""\n'
    )
    cb = built(AddFunction(IMPORT_FIND + "\n" + documented))
    after = build(MakePublic("_step"), base=cb)
    shown = Codebook(after.source, after.meta)
    assert (
        shown.signatures() == {"step": "step(name)"}
        and "step(name)\n    One step toward name." in shown.render_api()
    )


def test_private_public_preconditions() -> None:
    assert (
        "'_step' is private already"
        in only(rejected(base(), MakePrivate("_step")).problems, "edit").message
    )
    assert (
        "'go_to' is not a private name"
        in only(rejected(base(), MakePublic("go_to")).problems, "edit").message
    )


def test_edits_apply_in_order() -> None:
    candidate = build(
        RenameFunction("go_to", "walk"),
        EditFunction("walk", GO_TO.replace("def go_to", "def walk")),
        DeleteFunction("walk"),
        base=base(),
    )
    assert [f.name for f in candidate.meta.functions] == ["_step"]
