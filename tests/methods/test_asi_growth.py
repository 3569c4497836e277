"""ASI's library is not capped by default: an inducer that adds 5 functions per successful
episode takes it past 160 functions (the paper's ASI library size), and it keeps learning.
Under the caps every run had before (40 functions) it stops at 40, and every rejected
induction is counted as a ``max_functions`` cap hit."""

from __future__ import annotations

import json
import re

from tests.methods.test_asi import answer, episode, method

PER_EPISODE, EPISODES, BATCH = 5, 36, 6


def function(name: str) -> str:
    return f'def {name}(env) -> str:\n    """Turn left (skill {name}).\n\n    Returns:\n        The observation.\n    """\n' \
           f'    return env.act("turn left")\n'


def five_new(messages, purpose, call_id) -> str:
    """Five functions with names not yet in the codebook the prompt shows (all a model reads)."""
    shown = len(re.findall(r"^def ", messages[-1].content, re.M))
    names = [f"skill_{shown + k}" for k in range(PER_EPISODE)]
    return answer("".join(function(n) for n in names), f"{names[0]}()")


def grow(tmp_path, **config):
    asi, _ = method(tmp_path, {}, **config)
    asi.model.policy = five_new
    sizes, hits = [], []
    for b in range(EPISODES // BATCH):
        result = asi.sleep([episode(b * BATCH + i, version=b) for i in range(BATCH)], batch_index=b)
        sizes.append(len(result.knowledge.skills.signatures) if result.knowledge.skills else 0)
        hits.append(result.cap_hits["max_functions"])
    return asi, sizes, hits


def test_uncapped_asi_passes_160_functions_and_keeps_learning(tmp_path):
    asi, sizes, hits = grow(tmp_path)
    assert sizes == [30, 60, 90, 120, 150, 180] and sizes[-1] > 160
    assert hits == [0] * len(sizes)
    last = json.loads((tmp_path / "sleep" / "asi_0005.json").read_text())
    assert all(len(i["added"]) == PER_EPISODE for i in last["inductions"])  # still adding, at 180
    assert len(re.findall(r"^def ", (tmp_path / "codebook" / "gen_6.py").read_text(), re.M)) == 180


def test_under_the_old_cap_it_stops_at_40_and_every_rejection_is_counted(tmp_path):
    _, sizes, hits = grow(tmp_path, max_functions=40)
    assert sizes == [30, 40, 40, 40, 40, 40]
    assert hits == [0, 4, 6, 6, 6, 6]  # batch 1: two inductions fit (35, 40), the other four are rejected
