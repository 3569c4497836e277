"""ASI: append-only skill induction from successful episodes (Wang et al., 2025).

After each batch, every successful episode (in index order) gets one induction call: the
inducer sees the episode and the current codebook, proposes new functions and rewrites the
episode as a script that uses them (at most ``method.max_functions_per_episode`` new
functions are read from one answer; an answer with more counts a cap hit and the rest is
ignored). ASI only ever *adds*: a name that exists is never replaced or deleted. With
``method.replay_verify`` the script is played in the sandbox on the same task and seed (no
LLM), and the episode's new functions are kept only if that replay succeeds and calls at
least one of them; the paper's main runs keep them unverified.

Generation ``g`` of the codebook is ``codebook/gen_<g>.py`` (+ ``.json``); every sleep
phase writes the next generation, changed or not, so knowledge version = batches slept.
What each induction did (added, skipped, rejected and why, the functions beyond the cap,
the caps that bound) goes to ``sleep/asi_<b>.json`` with the phase's ``cap_hits``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from speedrunner.core.answers import FormatTally
from speedrunner.core.atomic import atomic_write_json
from speedrunner.core.codebook import (
    AddFunction,
    Author,
    Codebook,
    EditRejected,
    apply_edits,
)
from speedrunner.core.codebook.api_view import inducer_caps
from speedrunner.core.llm.types import Completion, Message
from speedrunner.core.method import SleepResult
from speedrunner.core.prompts import load_prompts
from speedrunner.core.runtime.sleep_caps import count_caps, rejected_caps
from speedrunner.core.trajectory import Trajectory
from speedrunner.methods.wake_sleep.asi_parse import Induction, parse_induction
from speedrunner.methods.wake_sleep.codebook_knowledge import CodebookMethod, inducer_api_view
from speedrunner.methods.wake_sleep.configs import ASIConfig

PROMPTS = load_prompts("speedrunner.methods.wake_sleep", "asi_prompts.yaml")


class ASIMethod(CodebookMethod[ASIConfig]):
    name = "asi"

    # ----------------------------------------------------------- ALGO LOGIC
    def sleep(self, batch: list[Trajectory], *, batch_index: int) -> SleepResult:
        base = self.codebook.record_usage(batch)
        current, accepted = base, []  # this sleep phase's additions so far, on top of base
        completions: list[Completion] = []
        notes: list[dict[str, Any]] = []
        successes = sorted((t for t in batch if t.success), key=lambda t: t.index)
        # The API view: the same for every induction of the batch (and as speedrunner's inducer
        # sees it).
        view = inducer_api_view(self.support, self.rules, self.config, batch) if successes else ""
        reading = FormatTally("inducer")
        for trajectory in successes:
            completion = self.model.complete(
                [
                    Message("system", PROMPTS.render("system")),
                    Message("user", self._prompt(view, current, trajectory)),
                ],
                purpose="inducer",
                call_id=f"sleep/{batch_index:04d}/asi/{trajectory.index:04d}",
            )
            completions.append(completion)
            author = Author(method=self.name, batch_index=batch_index, scripted=completion.scripted)
            induction = parse_induction(completion.text, finish_reason=completion.finish_reason)
            reading.add(induction.format, completion)
            note, added = self._induce(base, accepted, current, trajectory, induction, author)
            note.update(format=induction.format, finish_reason=completion.finish_reason)
            notes.append(note)
            if added is not None:
                accepted, current = accepted + added.edits, added.codebook
        author = Author(
            method=self.name, batch_index=batch_index, scripted=any(c.scripted for c in completions)
        )
        final = apply_edits(base, accepted, author, rules=self.rules)
        if isinstance(final, EditRejected):  # every addition was validated with all earlier ones
            raise RuntimeError(
                f"ASI's accepted additions no longer validate together:\n{final.message}"
            )
        self.codebook = final.commit(self.run_dir)
        cap_hits = count_caps(cap for n in notes for cap in n.get("cap_hits", []))
        atomic_write_json(
            self.run_dir / "sleep" / f"asi_{batch_index:04d}.json",
            {
                "batch": batch_index,
                "generation": self.codebook.generation,
                "inductions": notes,
                "cap_hits": cap_hits,
                "scripted": author.scripted,
                **reading.record(),
            },
        )
        return SleepResult(self.knowledge(), completions, cap_hits)

    def _prompt(self, view: str, current: Codebook, trajectory: Trajectory) -> str:
        return PROMPTS.render(
            "induce",
            api_view=view,
            inducer_caps=inducer_caps(self.config),
            codebook=current.source.strip() or "# (no skills yet)",
            trajectory=trajectory.summary(self.config.max_trajectory_chars),
            max_functions=self.config.max_functions_per_episode,
        )

    def _induce(
        self,
        base: Codebook,
        accepted: list[AddFunction],
        current: Codebook,
        trajectory: Trajectory,
        induction: Induction,
        author: Author,
    ) -> tuple[dict[str, Any], _Added | None]:
        """What one induction adds: new names only, validated with everything accepted so
        far, and (``replay_verify``) proven by a replay that succeeds and calls them."""
        note: dict[str, Any] = {
            "episode": trajectory.index,
            "proposed": [f.name for f in induction.functions],
            "added": [],
            "skipped": [],
            "rejected": None,
            "cap_hits": [],
            "replay": None,
        }
        if induction.problem:
            note["rejected"] = induction.problem
            return note, None
        taken = {f.name for f in current.functions}
        edits, names = [], []
        cap = self.config.max_functions_per_episode
        if len(induction.functions) > cap:  # the rest of the answer is ignored: a cap hit
            note["beyond_cap"] = [f.name for f in induction.functions[cap:]]
            note["cap_hits"].append("max_functions_per_episode")
        for function in induction.functions[:cap]:
            if function.name in taken:
                note["skipped"].append(f"{function.name}: exists (ASI never replaces a function)")
                continue
            taken.add(function.name)
            names.append(function.name)
            edits.append(AddFunction("\n".join([*induction.imports, function.source])))
        if not edits:
            return note, None
        candidate = apply_edits(base, accepted + edits, author, rules=self.rules)
        if isinstance(candidate, EditRejected):
            note["rejected"] = candidate.message
            note["cap_hits"] += rejected_caps(candidate.problems)
            return note, None
        codebook = Codebook(candidate.source, candidate.meta)  # in memory; stored once, at the end
        if self.config.replay_verify:
            replay = self.support.replay(
                trajectory.task,
                trajectory.seed,
                codebook.to_skills(self.support.api_module),
                induction.script,
            )
            note["replay"] = {
                "success": replay.success,
                "called": sorted(replay.called),
                "env_actions": replay.env_actions,
                "error": replay.error,
            }
            if not replay.success or not replay.called & set(names):
                why = (
                    "did not succeed" if not replay.success else "called none of the new functions"
                )
                note["rejected"] = f"the replay on the same task and seed {why}"
                return note, None
        note["added"] = names
        return note, _Added(edits, codebook)


@dataclass(frozen=True)
class _Added:
    edits: list[AddFunction]
    codebook: Codebook
    """The codebook with these and every earlier accepted addition."""
