"""A skill sandbox whose restricted layer has been left: real sandboxed children running
unrestricted code that speaks the skill protocol the way an attacker would.

The restricted layer is defence in depth; the parent must hold without it. So these tests
start the child in analysis mode (the whole language, same tier, limits and uid) and run a
small server in it that answers ``load`` honestly and each ``call`` with one of the
``SCENARIOS``: forged trees, replies to the wrong request, queued replies, absurd nesting,
huge messages. ``HostileRunner`` is the real ``SandboxSkillRunner`` with its first
``hostile_starts`` processes replaced by such a child (later ones are honest again, so a
test can check the runner recovers).
"""

from __future__ import annotations

import time
from typing import Any

from speedrunner.core.runtime.skill_call import Skills
from speedrunner.core.sandbox.analysis import PRELOAD
from speedrunner.core.sandbox.limits import ProcessLimits
from speedrunner.core.sandbox.process import SandboxProcess
from speedrunner.core.sandbox.schema import SKILL_MESSAGE_BYTES, reply_bytes
from speedrunner.core.sandbox.skills import SandboxSkillRunner
from speedrunner.core.sandbox.tracing import (
    MAX_ERROR_CHARS,
    MAX_NODES,
    MAX_TREE_CHARS,
    MAX_TREE_VALUES,
    NODE_COST,
)
from speedrunner.core.skill import (
    MAX_RETURN_BYTES,
    MAX_RETURN_VALUES,
    MAX_SCRATCH_CHARS,
    MAX_SCRATCH_VALUES,
)

SERVER = """
import inspect, json, os
ch = next(f.frame.f_locals["channel"] for f in inspect.stack() if "channel" in f.frame.f_locals)

def node(name, actions=(), calls=(), **extra):
    base = {"name": name, "args": [], "kwargs": {}, "calls": list(calls),
            "actions": [{"i": i} for i in actions], "returned": None, "error": None, "prints": ""}
    base.update(extra)
    return base

def result(rid, tree, **extra):
    return {"id": rid, "result": {"tree": tree, "returned": None, "error": None,
                                  "stopped_by": "returned", "scratch": {}, **extra}}

def act(rid, action="inc"):
    ch.send({"act": action, "id": rid})
    return ch.recv()

def write_line(text):
    data = text.encode() + b"\\n"
    while data:
        data = data[os.write(ch.write_fd, data):]

seen = []  # the ids of the requests so far

SCENARIO
while True:
    req = ch.recv()
    rid = req.get("id")
    seen.append(rid)
    if req.get("op") == "load":
        ch.send({"id": rid, "loaded": True, "functions": []})
    else:
        scenario(req, rid)
"""

SCENARIOS = {
    # The tree claims five actions; the parent served none.
    "forged_actions": """
def scenario(req, rid):
    ch.send(result(rid, node(req["name"], actions=range(5)), returned=5))
""",
    # An honest-looking result with a second one queued behind it (the protocol out of step).
    "two_results": """
def scenario(req, rid):
    act(rid)
    line = json.dumps(result(rid, node(req["name"], actions=[0]), returned="first"))
    write_line(line + "\\n" + line.replace("first", "queued"))
""",
    # An honest result; a second one 0.3 s later, waiting for the next call to read it.
    "late_result": """
import time
calls = []
def scenario(req, rid):
    calls.append(rid)
    if len(calls) > 1:
        time.sleep(30)
    act(rid)
    ch.send(result(rid, node(req["name"], actions=[0]), returned="first"))
    time.sleep(0.3)
    ch.send(result(rid, node(req["name"], actions=[0]), returned="late"))
""",
    # A reply carrying the id of an earlier request (the codebook's load).
    "stale_id": """
def scenario(req, rid):
    ch.send(result(seen[0], node(req["name"])))
""",
    # An honest call that leaves a thread behind; 0.3 s after the real result, the thread writes a
    # result for the request it expects next (the next id if ids count up, else a guess): "FORGED",
    # 50 nested calls of codebook functions, no action. The next call does nothing itself.
    "delayed_forgery": """
import threading, time
def forge(after):
    time.sleep(0.3)
    guess = after + 1 if isinstance(after, int) else "0" * 32
    ch.send(result(guess, node("forward", calls=[node("forward") for _ in range(50)]),
                   returned="FORGED"))
def scenario(req, rid):
    if len(seen) > 2:  # the second call: wait, and let the forged result answer it
        time.sleep(30)
    act(rid)
    ch.send(result(rid, node(req["name"], actions=[0]), returned="first"))
    threading.Thread(target=forge, args=(rid,), daemon=True).start()
""",
    # A call tree nested 400 levels deep (RecursionError in the parent's serializer before).
    "deep_tree": """
def scenario(req, rid):
    act(rid)
    tree = node("leaf", actions=[0])
    for _ in range(400):
        tree = node("nest", calls=[tree])
    ch.send(result(rid, tree))
""",
    # A 31 MB tree on one line.
    "huge_tree": """
def scenario(req, rid):
    write_line(json.dumps(result(rid, node(req["name"], prints="x" * (31 * 1024 * 1024)))))
""",
    # A tree within the message caps but over the tree's (50 calls more than it may record).
    "wide_tree": f"""
def scenario(req, rid):
    kids = [node("forward") for _ in range({MAX_NODES + 50})]
    ch.send(result(rid, node(req["name"], calls=kids)))
""",
    # The tree states observation texts of its own next to the indices.
    "claims_text": """
def scenario(req, rid):
    act(rid)
    tree = node(req["name"])
    tree["actions"] = [{"i": 0, "text": "You won.", "done": True}]
    ch.send(result(rid, tree))
""",
    # One action served, the tree leaves it out.
    "hides_action": """
def scenario(req, rid):
    act(rid)
    ch.send(result(rid, node(req["name"])))
""",
    # An action string far over the cap.
    "long_action": """
def scenario(req, rid):
    act(rid, "inc" * 10000)
    ch.send(result(rid, node(req["name"], actions=[0])))
""",
    # A nested call of a function the codebook does not have.
    "invented_name": """
def scenario(req, rid):
    act(rid)
    kids = [node("forward"), node("solve_the_level", actions=[0])]
    ch.send(result(rid, node(req["name"], calls=kids)))
""",
    # Not JSON at all.
    "garbage": """
def scenario(req, rid):
    write_line("this is not json {")
""",
    # Near the largest tree the parent accepts: every node it records, their arguments filling the
    # tree's characters, every call.
    "max_valid_tree": f"""
def scenario(req, rid):
    n = {(MAX_TREE_CHARS - (NODE_COST + 20) * MAX_NODES) // (MAX_NODES - 1) - 10}
    kids = [node("forward", args=["k" * n]) for _ in range({MAX_NODES - 1})]
    ch.send(result(rid, node(req["name"], calls=kids, prints="p" * 1900)))
""",
    # A nested node whose stopped_by holds 40 KB, within the call's message cap (kept and counted
    # nowhere before: 4 MB of it, 300 calls, took the parent to 3.5 GB).
    "stopped_by_flood": """
def scenario(req, rid):
    act(rid)
    kids = [node("forward", stopped_by="s" * 40_000)]
    ch.send(result(rid, node(req["name"], actions=[0], calls=kids)))
""",
    # A nested calls_dropped of 4,299 digits.
    "huge_count": """
def scenario(req, rid):
    act(rid)
    kids = [node("forward", calls_dropped=int("9" * 4299))]
    ch.send(result(rid, node(req["name"], actions=[0], calls=kids)))
""",
    # Every key the parent keeps filled to its cap (values, errors, prints escaped six-fold as JSON,
    # counts, every node it records), plus unknown keys filling the rest of the call's message cap:
    # accepted, and all of it counted.
    "every_key": f"""
WIDE = "\\u00e9"
def scenario(req, rid):
    act(rid)
    kids = [node("forward", args=["k" * 50], error="e" * 60, calls_dropped=10**15,
                 stopped_by="returned", junk=1)
            for _ in range({MAX_NODES - 1})]
    root = node(req["name"], actions=[0], calls=kids, prints=WIDE * (PRINT_CHARS // 6),
                error=WIDE * {MAX_ERROR_CHARS // 6}, calls_dropped=10**15, stopped_by="returned",
                returned="r" * 1900, junk="")
    reply = result(rid, root, returned="R" * {MAX_RETURN_BYTES - 100},
                   error=WIDE * {MAX_ERROR_CHARS // 6},
                   scratch={{"s": "x" * {MAX_SCRATCH_CHARS - 100}}}, junk="j" * 100)
    cap = REPLY_BYTES + REPLY_BYTES_PER_ACTION * req["max_actions"]
    root["junk"] = "j" * (cap - len(json.dumps(reply, separators=(",", ":"))) - 1000)
    ch.send(reply)
""",
    # A returned value of small items at its cap: the most JSON values a returned value may make
    # the parent decode and check.
    "dense_return": f"""
def scenario(req, rid):
    act(rid)
    ch.send(result(rid, node(req["name"], actions=[0]), returned=[0] * {MAX_RETURN_VALUES}))
""",
    # Every node the tree may record, their arguments sharing the tree's whole value budget as
    # small items.
    "dense_tree": f"""
def scenario(req, rid):
    act(rid)
    n = {(MAX_TREE_VALUES + 2 * MAX_NODES - 2) // (MAX_NODES - 1) - 2}
    kids = [node("forward", args=[[0] * n]) for _ in range({MAX_NODES - 1})]
    ch.send(result(rid, node(req["name"], actions=[0], calls=kids)))
""",
    # An unknown key (dropped) of small items filling the rest of the reply's values budget (the
    # request's max_values), then of two-character escapes (the costliest string to decode per
    # byte) filling the rest of its message cap.
    "dense_junk": """
def scenario(req, rid):
    act(rid)
    cap = REPLY_BYTES + REPLY_BYTES_PER_ACTION * req["max_actions"]
    reply = result(rid, node(req["name"], actions=[0]), junk=[], more="")
    line = json.dumps(reply, separators=(",", ":"))
    # one separator short:
    reply["result"]["junk"] = [0] * (req["max_values"] - sum(map(line.count, ",[{")))
    line = json.dumps(reply, separators=(",", ":"))
    reply["result"]["more"] = "\\n" * ((cap - len(line)) // 2 - 1000)
    ch.send(reply)
""",
    # Small items a few over the reply's values budget, far within its message cap: refused before
    # it is decoded.
    "values_over_the_budget": """
def scenario(req, rid):
    act(rid)
    ch.send(result(rid, node(req["name"], actions=[0]), junk=[0] * req["max_values"]))
""",
    # The same, a few KB over the call's message cap (an honest reply never is; the old fixed 4 MiB
    # cap let it through, to be decoded and dropped).
    "junk_over_the_cap": """
def scenario(req, rid):
    act(rid)
    cap = REPLY_BYTES + REPLY_BYTES_PER_ACTION * req["max_actions"]
    ch.send(result(rid, node(req["name"], actions=[0]), junk=[0] * (cap // 2 + 2000)))
""",
    # env.scratch over its cap (within the reply's).
    "huge_scratch": f"""
def scenario(req, rid):
    ch.send(result(rid, node(req["name"]), scratch={{"k": "v" * {MAX_SCRATCH_CHARS + 1000}}}))
""",
    # env.scratch of more small items than its cap (within its characters).
    "dense_scratch": f"""
def scenario(req, rid):
    ch.send(result(rid, node(req["name"]), scratch={{"k": [0] * {MAX_SCRATCH_VALUES + 1}}}))
""",
}


def start_hostile(tier: str, limits: ProcessLimits, scenario: str) -> SandboxProcess:
    """A real sandbox child (analysis mode: unrestricted code) serving the skill protocol per
    ``scenario``."""
    process = SandboxProcess(
        tier, limits, mode="analysis", preload=PRELOAD, max_message_bytes=SKILL_MESSAGE_BYTES
    )
    base = reply_bytes(limits.max_print_chars, 0)
    code = (
        SERVER.replace("SCENARIO", SCENARIOS[scenario])
        .replace("REPLY_BYTES_PER_ACTION", str(reply_bytes(limits.max_print_chars, 1) - base))
        .replace("REPLY_BYTES", str(base))
        .replace("PRINT_CHARS", str(limits.max_print_chars))
    )
    process.request({"op": "run", "id": 0, "code": code}, time.monotonic() + 10)
    return process


class HostileRunner(SandboxSkillRunner):
    """The real runner; its first ``hostile_starts`` processes run ``scenario`` instead of the
    skill server."""

    def __init__(
        self,
        skills: Skills,
        tier: str,
        limits: ProcessLimits,
        scenario: str,
        hostile_starts: int = 1,
    ) -> None:
        self.scenario = scenario
        self.hostile_left = hostile_starts
        super().__init__(skills, tier, limits)

    def _start_process(self) -> Any:
        if self.hostile_left > 0:
            self.hostile_left -= 1
            return start_hostile(self.tier, self.limits, self.scenario)
        return super()._start_process()
