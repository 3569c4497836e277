"""SpeedRunner: a coding agent over stored experience edits the codebook every sleep phase.

After each batch the inducer gets the current codebook (public and private), the batch's
episodes in brief and the skill statistics, then works for at most
``method.max_inducer_turns`` turns, one tool per turn (``speedrunner_tools`` is the text
protocol): it analyses the experience by running code in a sandbox session (``run_python``;
``speedrunner_no_cl`` has no such tool and never starts that session), reads the draft
and episodes, and edits the draft — add, edit, delete, rename, make private or public —
each edit validated at once. ``submit`` (or running out of turns, counted as a
``max_inducer_turns`` cap hit) makes the draft the next generation. Nothing is append-only
and there is no replay gate.

Every turn is stored as ``sleep/batch_<b>/turn_<t>.json`` (prompt, answer, tool, result)
and the phase as ``sleep/batch_<b>/sleep.json``. Call ids are ``sleep/<b>/inducer/<t>``,
and every tool result depends only on the stored files, so a killed sleep replays its
paid turns from the response cache and reaches the same generation.
"""

from __future__ import annotations

import ast
import dataclasses
import re

from speedrunner.core import pyast
from speedrunner.core.answers import FormatTally, with_cut_note
from speedrunner.core.atomic import atomic_write_json
from speedrunner.core.codebook.api_view import (
    ANALYSIS_MODULE,
    add_function_rule,
    analysis_helper_names,
    inducer_caps,
    render_analysis_helpers,
)
from speedrunner.core.codebook.codebook import Codebook
from speedrunner.core.codebook.edits import (
    AddFunction,
    DeleteFunction,
    Edit,
    EditFunction,
    EditRejected,
    MakePrivate,
    MakePublic,
    RenameFunction,
    apply_edits,
)
from speedrunner.core.codebook.model import Author
from speedrunner.core.episode_files import episode_path, load_trajectory
from speedrunner.core.llm.types import Completion, Message
from speedrunner.core.method import AnalysisSandbox, MethodContext, SleepResult
from speedrunner.core.prompts import load_prompts
from speedrunner.core.runtime.sleep_caps import count_caps, rejected_caps
from speedrunner.core.trajectory import CorruptTrajectory, Trajectory
from speedrunner.errors import ConfigError
from speedrunner.methods.wake_sleep.codebook_knowledge import CodebookMethod, inducer_api_view
from speedrunner.methods.wake_sleep.configs import SpeedRunnerConfig, SpeedRunnerNoCLConfig
from speedrunner.methods.wake_sleep.speedrunner_native import (
    NATIVE_NOTE,
    native_messages,
    read_turn,
    tool_specs,
)
from speedrunner.methods.wake_sleep.speedrunner_tools import TOOLS, ToolCall

PROMPTS = load_prompts("speedrunner.methods.wake_sleep", "speedrunner_prompts.yaml")
CODE_TOOLS = ("run_python", "test_skill")
"""The tools that run code (analysis code, or a skill in a replayed episode): ``speedrunner``
only."""
SETUP = (
    "from speedrunner.core import experience as _experience\n"
    "_experience.configure({episodes!r}, {codebook!r}, {upto!r})\n"
    "from speedrunner.core.experience import {helpers}\n"
)


class SpeedRunnerMethod(CodebookMethod[SpeedRunnerConfig | SpeedRunnerNoCLConfig]):
    name = "speedrunner"
    code_execution = True
    """Whether the inducer has ``run_python`` and ``test_skill``; the method name alone decides
    it."""

    def __init__(
        self, config: SpeedRunnerConfig | SpeedRunnerNoCLConfig, ctx: MethodContext
    ) -> None:
        super().__init__(config, ctx)
        self.tools = frozenset(t for t in TOOLS if self.code_execution or t not in CODE_TOOLS)

    def sleep(self, batch: list[Trajectory], *, batch_index: int) -> SleepResult:
        phase = _Phase(
            self,
            self.codebook.record_usage(batch),
            sorted(batch, key=lambda t: t.index),
            batch_index,
        )
        try:
            self.codebook = phase.run()
        finally:
            phase.close()
        return SleepResult(self.knowledge(), phase.completions, count_caps(phase.capped))

    def system_prompt(self) -> str:
        docs = "\n".join(PROMPTS.render(f"tool_{t}") for t in TOOLS if t in self.tools)
        return PROMPTS.render("system", tools=docs, max_turns=self.config.max_inducer_turns)


class SpeedRunnerNoCLMethod(SpeedRunnerMethod):
    """The same inducer, prompts and edit tools, without ``run_python`` and ``test_skill``."""

    name = "speedrunner_no_cl"
    code_execution = False


def _feedback(call: ToolCall, result: str, turn: int, left: int, native: bool) -> str:
    """The next user message: the tool's result, named; a turn that called no tool is never
    shown as the result of a tool (small models echo such headings). A first turn with no
    call (small models restate the rules) gets a short re-ask naming one concrete tool."""
    if call.tool is not None:
        return PROMPTS.render("turn", tool=call.tool, result=result, turns_left=left)
    if turn == 0:
        return PROMPTS.render(
            "first_reask",
            turns_left=left,
            call="a call of the `view_codebook` tool"
            if native
            else "the line `Tool: view_codebook`",
        )
    return PROMPTS.render("no_tool", result=result, turns_left=left)


class _Phase:
    """One sleep phase: the conversation, the draft and the (lazily started) analysis session."""

    def __init__(
        self, method: SpeedRunnerMethod, base: Codebook, batch: list[Trajectory], batch_index: int
    ) -> None:
        self.method, self.base, self.batch, self.batch_index = method, base, batch, batch_index
        self.draft = base
        self.edits: list[Edit] = []
        self.accepted: list[str] = []
        self.completions: list[Completion] = []
        self.upto = max((t.index for t in batch), default=-1)
        self.dir = method.run_dir / "sleep" / f"batch_{batch_index:04d}"
        self.session: AnalysisSandbox | None = None
        self.ran_code = 0
        self.reading = FormatTally("inducer")
        self.capped: list[
            str
        ] = []  # the cap behind each binding: per rejected edit, and running out of turns
        self.violations = 0
        """Analysis turns that ended in a sandbox protocol violation (recorded in sleep.json)."""

    # ---------------------------------------------------------------- the loop
    def run(self) -> Codebook:
        cfg = self.method.config
        native = self.method.model.native_tools  # model.tool_protocol: native
        system = self.method.system_prompt() + (NATIVE_NOTE if native else "")
        messages = [Message("system", system), Message("user", self._start())]
        ended_by, note = "out_of_turns", ""
        for turn in range(cfg.max_inducer_turns):
            # ALGO LOGIC: one inducer turn: the model answers with one tool call ...
            completion = self.method.model.complete(
                messages,
                purpose="inducer",
                call_id=f"sleep/{self.batch_index:04d}/inducer/{turn:04d}",
                **({"tools": tool_specs(self.method.tools)} if native else {}),
            )
            self.completions.append(completion)
            call = read_turn(
                completion.text,
                completion.tool_calls,
                self.method.tools,
                finish_reason=completion.finish_reason,
                max_tokens=completion.sampling.get("max_tokens"),
                native=native,
            )
            # ALGO LOGIC: ... which runs against the draft codebook (analysis, tests, edits) ...
            result = with_cut_note(self._result(call), completion)
            self.reading.add(call.format, completion, dropped_calls=call.dropped_calls)
            left = cfg.max_inducer_turns - turn - 1
            atomic_write_json(
                self.dir / f"turn_{turn:04d}.json",
                {
                    "turn": turn,
                    "call_id": f"sleep/{self.batch_index:04d}/inducer/{turn:04d}",
                    "prompt": messages[-1].content,
                    "answer": completion.text,
                    "tool": call.tool,
                    "args": list(call.args),
                    "block": call.block,
                    "result": result,
                    "scripted": completion.scripted,
                    "finish_reason": completion.finish_reason,
                    "format": call.format,
                    "repairs": list(call.repairs),
                    "dropped_calls": call.dropped_calls,
                    **(
                        {"tool_calls": [dataclasses.asdict(u) for u in completion.tool_calls]}
                        if completion.tool_calls
                        else {}
                    ),
                },
            )
            # ALGO LOGIC: ... until the inducer submits or runs out of turns; the result is its
            # feedback
            if call.tool == "submit" and call.problem is None:
                ended_by, note = "submit", call.block or ""
                break
            feedback = _feedback(call, result, turn, left, native)
            messages += (
                native_messages(completion.text, completion.tool_calls, feedback)
                if completion.tool_calls
                else [Message("assistant", completion.text), Message("user", feedback)]
            )
        if ended_by == "out_of_turns":  # the cap ended the phase, not the inducer
            self.capped.append("max_inducer_turns")
        author = Author(
            method=self.method.name,
            batch_index=self.batch_index,
            scripted=any(c.scripted for c in self.completions),
        )
        # ALGO LOGIC: the accepted edits, applied together, become the next generation of skills
        final = apply_edits(self.base, self.edits, author, rules=self.method.rules)
        if isinstance(final, EditRejected):  # every edit was validated with all earlier ones
            raise RuntimeError(
                f"the inducer's accepted edits no longer validate together:\n{final.message}"
            )
        codebook = final.commit(self.method.run_dir)
        atomic_write_json(
            self.dir / "sleep.json",
            {
                "batch": self.batch_index,
                "method": self.method.name,
                "generation": codebook.generation,
                "ended_by": ended_by,
                "note": note
                if ended_by == "submit"
                else f"ran out of turns ({cfg.max_inducer_turns}): the last valid draft was "
                "submitted",
                "edits": self.accepted,
                "turns": len(self.completions),
                "run_python_calls": self.ran_code,
                "cap_hits": count_caps(self.capped),
                "sandbox_violations": self.violations,
                "analysis_tier": self.session.tier if self.session is not None else None,
                "isolation": self.session.isolation if self.session is not None else None,
                "public": sorted(codebook.signatures()),
                "scripted": author.scripted,
                **self.reading.record(),
                "system_prompt": messages[0].content,
                "tool_protocol": "native" if native else "text",
            },
        )
        return codebook

    def close(self) -> None:
        if self.session is not None:
            self.session.close()

    def _start(self) -> str:
        # The same view as speedrunner_no_cl's and asi's; only the analysis helpers are extra.
        api = inducer_api_view(
            self.method.support, self.method.rules, self.method.config, self.batch
        )
        helpers = render_analysis_helpers() + "\n\n" if self.method.code_execution else ""
        return PROMPTS.render(
            "start",
            batch_index=self.batch_index,
            api_view=api,
            inducer_caps=inducer_caps(self.method.config),
            add_function_rule=add_function_rule(),
            analysis_helpers=helpers,
            codebook=self.base.source.strip(),
            stats=_stats(self.base),
            episodes="\n".join(_episode_line(t) for t in self.batch) or "(no episodes)",
        )

    # ------------------------------------------------------------------ tools
    def _result(self, call: ToolCall) -> str:
        text = f"Not run: {call.problem}" if call.problem is not None else self._tool(call)
        note = f"\n(note: {call.note})" if call.note else ""
        return _truncate(text, self.method.config.max_tool_output_chars) + note

    def _tool(self, call: ToolCall) -> str:
        name, args, block = call.tool, call.args, call.block or ""
        if name == "run_python":
            return self._run_python(block)
        if name == "test_skill":
            return self._test_skill(args[0], args[1], block)
        if name == "view_codebook":
            return (
                f"```python\n{self.draft.source.strip()}\n```\n"
                f"Counts (calls / successes / errors):\n{_stats(self.draft)}"
            )
        if name == "view_function":
            return self._view_function(args[0])
        if name == "view_episode":
            return self._view_episode(args[0])
        if name == "submit":
            return f"Submitted: the draft becomes generation {self.base.generation + 1}."
        edit: Edit = {
            "add_function": lambda: AddFunction(block),
            "edit_function": lambda: EditFunction(args[0], block),
            "delete_function": lambda: DeleteFunction(args[0]),
            "rename_function": lambda: RenameFunction(args[0], args[1]),
            "make_private": lambda: MakePrivate(args[0]),
            "make_public": lambda: MakePublic(args[0]),
        }[str(name)]()
        return self._edit(edit, f"{name} {' '.join(args)}".strip())

    def _edit(self, edit: Edit, label: str) -> str:
        author = Author(method=self.method.name, batch_index=self.batch_index)
        candidate = apply_edits(self.base, [*self.edits, edit], author, rules=self.method.rules)
        if isinstance(candidate, EditRejected):
            self.capped += rejected_caps(candidate.problems)
            return _in_tool_words(
                candidate.message.replace(
                    f"generation {self.base.generation} stays current", "the draft is unchanged"
                )
            )
        before = {f.name for f in self.draft.functions}
        self.edits.append(edit)
        self.draft = Codebook(candidate.source, candidate.meta)
        if isinstance(edit, AddFunction):
            label = "add_function " + ", ".join(
                sorted({f.name for f in self.draft.functions} - before)
            )
        self.accepted.append(label)
        public = ", ".join(f.name for f in self.draft.functions if f.public) or "(none)"
        private = ", ".join(f.name for f in self.draft.functions if not f.public) or "(none)"
        return f"Accepted. Draft: public {public}; private {private}."

    def _run_python(self, code: str) -> str:
        timeout = self.method.config.analysis_timeout_s  # type: ignore[union-attr]  # only speedrunner offers the tool
        if self.session is None:
            self.session = self._open_session()
        self.ran_code += 1
        setup = SETUP.format(
            episodes=str(self.method.run_dir / "episodes" / "train"),
            codebook=str(self.method.run_dir / "codebook"),
            upto=self.upto,
            helpers=", ".join(analysis_helper_names()),
        )
        prepared = self.session.run(
            setup, timeout
        )  # again each time: a timeout restarts the process
        notes = []
        if prepared.error is not None and not prepared.timed_out:
            # Earlier code broke the session (or its pipe): a fresh process, then the setup must
            # work.
            self.violations += prepared.violation is not None
            self.session.restart()
            notes.append(
                "(earlier code left the session broken; it was restarted and variables are lost)"
            )
            prepared = self.session.run(setup, timeout)
            if prepared.error is not None and not prepared.timed_out:
                raise RuntimeError(
                    f"the analysis session could not load the experience helper:\n{prepared.error}"
                )
        result = self.session.run(code, timeout)
        self.violations += result.violation is not None
        parts = notes + ([result.stdout.rstrip("\n")] if result.stdout else [])
        if result.error is not None:
            parts.append(
                ("Timed out: " if result.timed_out else "Error:\n") + result.error.rstrip()
            )
        return "\n".join(parts) or "(no output)"

    def _open_session(self) -> AnalysisSandbox:
        """The run's analysis sandbox (``SkillSupport.open_analysis``), seeing only this run's
        training episodes and codebook generations."""
        support = self.method.support
        if support.open_analysis is None:
            raise ConfigError(
                f"method {self.method.name!r} runs analysis code, but its skill "
                "support offers no analysis sandbox (SkillSupport.open_analysis): "
                "start the run through a train entry point, or pass one"
            )
        mounts = [self.method.run_dir / "episodes" / "train", self.method.run_dir / "codebook"]
        return support.open_analysis(
            mounts=[p for p in mounts if p.exists()], preload=(ANALYSIS_MODULE,)
        )

    def _test_skill(self, index: str, step: str, block: str) -> str:
        trajectory = self._load(index)
        if isinstance(trajectory, str):
            return trajectory
        lines = [
            line.strip()
            for line in block.strip().splitlines()
            if line.strip() and not line.startswith("#")
        ]
        if len(lines) != 1:
            return (
                "test_skill takes exactly one call in its block, e.g. name(args); "
                f"got {len(lines)} lines"
            )
        if not step.isdigit() or int(step) > len(trajectory.steps):
            return f"No step {step!r}: episode {index} has steps 0..{len(trajectory.steps)}"
        prefix = [a for s in trajectory.steps[: int(step)] for a in s.executed]
        skills = self.draft.to_skills(self.method.support.api_module)
        r = self.method.support.replay(
            trajectory.task, trajectory.seed, skills, [*prefix, lines[0]]
        )
        outcome = f"error: {r.error}" if r.error else f"returned: {r.returned!r}"
        return (
            f"Replayed episode {index} ({trajectory.task}, seed {trajectory.seed}) up to step "
            f"{step} ({len(prefix)} primitive actions), then `{lines[0]}`.\n"
            f"success: {r.success}; skills that ran: {', '.join(sorted(r.called)) or 'none'}; "
            f"env actions in all: {r.env_actions}; {outcome}\n"
            f"observation at the end:\n{r.final_text}"
        )

    def _load(self, index: str) -> Trajectory | str:
        """A stored training episode this phase may see, or why not."""
        if not index.isdigit() or int(index) > self.upto:
            return f"No training episode {index!r}: episodes 0..{self.upto} exist so far"
        path = episode_path(self.method.run_dir, "train", int(index))
        if not path.exists():
            return f"No training episode {index!r} is stored"
        try:
            return load_trajectory(path)
        except CorruptTrajectory as e:
            return f"Training episode {index} cannot be read: {e}"

    def _view_function(self, name: str) -> str:
        try:
            meta = self.draft.function(name)
        except KeyError:
            return (
                f"No function {name!r} in the draft; functions: "
                f"{', '.join(f.name for f in self.draft.functions)}"
            )
        tree = pyast.parse(self.draft.source)
        node = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == name)
        s = meta.stats
        return (
            f"```python\n{ast.get_source_segment(self.draft.source, node)}\n```\n"
            f"{'public' if meta.public else 'private'}; calls {s.calls}, successes {s.successes}, "
            f"errors {s.errors}; written in generation {meta.revised_generation}"
        )

    def _view_episode(self, index: str) -> str:
        trajectory = self._load(index)
        if isinstance(trajectory, str):
            return trajectory
        return trajectory.summary(self.method.config.max_trajectory_chars)


def _stats(codebook: Codebook) -> str:
    lines = [
        f"- {f.name} ({'public' if f.public else 'private'}): "
        f"{f.stats.calls} / {f.stats.successes} / {f.stats.errors}"
        for f in codebook.functions
    ]
    return "\n".join(lines) or "(no functions yet)"


def _episode_line(t: Trajectory) -> str:
    calls = t.skill_calls()
    failed = sum(1 for c in calls if (c["tree"] or {}).get("error"))
    names: dict[str, int] = {}
    for c in calls:
        name = (c["tree"] or {}).get("name", "?")
        names[name] = names.get(name, 0) + 1
    used = ", ".join(f"{n} x{k}" for n, k in sorted(names.items()))
    return (
        f"- episode {t.index} ({t.task}): {'SUCCESS' if t.success else 'FAILURE'}, "
        f"progress {t.progress:.2f}, "
        f"stopped by {t.stop_reason}, {t.llm_calls} LLM calls, {t.env_actions} env actions, "
        f"{len(calls)} skill calls ({failed} failed){': ' + used if used else ''}"
    )


_EDIT_CALLS = [
    (re.compile(r"EditFunction\('(\w+)', \.\.\.\)"), r"`Tool: edit_function \1`"),
    (re.compile(r"RenameFunction\('(\w+)', '(\w+)'\)"), r"`Tool: rename_function \1 \2`"),
]
_EDIT_NAMES = {
    "AddFunction": "add_function",
    "EditFunction": "edit_function",
    "DeleteFunction": "delete_function",
    "RenameFunction": "rename_function",
    "MakePrivate": "make_private",
    "MakePublic": "make_public",
}


def _in_tool_words(message: str) -> str:
    """The validator's fixes name the codebook's edit classes; the inducer knows them as tools."""
    for pattern, replacement in _EDIT_CALLS:
        message = pattern.sub(replacement, message)
    return re.sub("|".join(_EDIT_NAMES), lambda m: _EDIT_NAMES[m.group(0)], message)


def _truncate(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return (
        text[:limit] + f"\n[output truncated: showing the first {limit} of {len(text)} characters]"
    )
