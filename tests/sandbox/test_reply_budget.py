"""What a skill call's reply may cost the parent: a line past the reply's values budget is refused
before it is decoded, and an honest child at every cap stays within it (its caps count the same
separators), so an honest call is never refused, only cut or marked where a cap is reached."""

from __future__ import annotations

import json
import os
import time

import pytest

from speedrunner.core.sandbox import channel as channel_module
from speedrunner.core.sandbox.channel import Channel, ProtocolError, separators
from speedrunner.core.sandbox.schema import reply_bytes, reply_values
from speedrunner.core.sandbox.tracing import (
    MAX_ERROR_VALUES,
    MAX_NODES,
    MAX_PRINT_VALUES,
    Recorder,
    check_returned,
    check_scratch,
    exception_line,
)
from speedrunner.core.skill import (
    MAX_ACTION_CHARS,
    MAX_RETURN_BYTES,
    MAX_RETURN_VALUES,
    MAX_SCRATCH_CHARS,
    MAX_SCRATCH_VALUES,
)

from .conftest import TIERS, call, open_runner


@pytest.fixture
def pipe() -> Channel:
    read_fd, write_fd = os.pipe()
    ch = Channel(read_fd, write_fd)
    yield ch
    ch.close()


def test_a_line_past_the_values_budget_is_refused_before_it_is_decoded(pipe, monkeypatch) -> None:
    decoded: list[bytes] = []
    real = channel_module._decode
    monkeypatch.setattr(channel_module, "_decode", lambda line: decoded.append(line) or real(line))
    pipe.max_values = 100
    pipe.send({"junk": [0] * 98})  # { [ and 97 commas: 99 separators
    assert pipe.recv(time.monotonic() + 5) == {"junk": [0] * 98} and len(decoded) == 1
    pipe.send({"junk": [0] * 100})  # 101
    with pytest.raises(
        ProtocolError, match=r"a message of 101 JSON values .* more than the 100 an honest reply"
    ):
        pipe.recv(time.monotonic() + 5)
    assert len(decoded) == 1  # never decoded


def test_the_reply_budgets_bound_what_decoding_a_reply_costs() -> None:
    """The budgets that keep a reply's decoding within a few times an honest call's CPU
    (``benchmarks/skill_reply_cpu.py``): about 10,000 values and 100 KB at the default caps, two
    values more per action the call may take, and room for the call's own arguments."""
    assert reply_values(50) <= 10_000 and reply_bytes(10_000, 50) <= 100_000
    assert reply_values(1050) - reply_values(50) == 2000
    assert reply_values(50, 3000) - reply_values(50) == 3000
    assert reply_bytes(10_000, 50, 9000) - reply_bytes(10_000, 50) == 9000


def test_a_returned_value_past_its_values_cap_is_an_error_the_author_sees() -> None:
    assert check_returned([0] * MAX_RETURN_VALUES) == ([0] * MAX_RETURN_VALUES, None)
    value, error = check_returned([0] * (MAX_RETURN_VALUES + 1))
    assert value is None and f"the skill returned {MAX_RETURN_VALUES + 1} JSON values" in error
    assert f"the limit is {MAX_RETURN_VALUES}" in error
    # commas in strings count too
    assert check_returned("," * (MAX_RETURN_VALUES + 1))[1] is not None


def test_env_scratch_past_its_values_cap_keeps_the_scratch_before() -> None:
    grid = {"grid": [[0] * 40 for _ in range(40)]}  # a small map as lists of numbers
    assert check_scratch(grid) == (grid, None)
    kept, error = check_scratch({"k": [0] * MAX_SCRATCH_VALUES})
    assert (
        kept == {}
        and f"more than {MAX_SCRATCH_VALUES}; the scratch of the call before was kept" in error
    )


def test_prints_and_errors_are_cut_to_their_values_budget() -> None:
    rec = Recorder(100_000, type(None))
    rec.enter("f", (), {})
    assert rec.write("a," * 3000) == 6000  # all of it "written", as for the print budget
    rec.write("more, [and] {more}")
    prints = rec.finish()["prints"]
    # +1: the note's "["
    assert separators(prints) <= MAX_PRINT_VALUES + 1 and prints.startswith("a,a,")
    assert "not kept]" in prints
    line = exception_line(ValueError("," * 10_000))
    assert line.startswith("ValueError: ,") and separators(line) == MAX_ERROR_VALUES


CODEBOOK = """
def fill(env, calls, width, returned):
    for _ in range(calls):
        step(env, [0] * width, k=[1] * width)
    for _ in range(30):
        try:
            oops(env)
        except ValueError:
            pass
    print("," * 20000)
    env.scratch["grid"] = [[0] * 40 for _ in range(40)]
    return [0] * returned


def step(env, items, k=()):
    print("[{," * 50)
    return items


def oops(env):
    raise ValueError("," * 5000)


def fails(env):
    raise ValueError("{[," * 5000)
"""


@pytest.fixture
def honest():
    runner = open_runner(TIERS[0], CODEBOOK)
    yield runner
    runner.close()


def test_an_honest_call_at_every_cap_is_accepted(honest) -> None:
    """Past the nodes recorded, each recorded value's items, the tree's values, the prints' and an
    error's separators, and with a returned value and a scratch at their caps: nothing refused."""
    outcome = call(honest, "fill", MAX_NODES + 20, 100, MAX_RETURN_VALUES, max_actions=1000)
    assert "sandbox_violation" not in outcome.tree and outcome.error is None, outcome.tree.get(
        "sandbox_violation"
    )
    assert outcome.returned == [0] * MAX_RETURN_VALUES
    assert outcome.tree["calls_dropped"] > 0 and len(outcome.tree["calls"]) == MAX_NODES - 1
    assert honest.episode_scratch == {"grid": [[0] * 40 for _ in range(40)]}
    failed = call(honest, "fails")
    assert "sandbox_violation" not in failed.tree and "ValueError: {[,{[," in failed.error
    assert separators(failed.error) <= MAX_ERROR_VALUES
    # sent back whole as the root's
    missing = call(honest, "no_such_skill", [0] * 5000, k=[0] * 3000)
    assert (
        "sandbox_violation" not in missing.tree
        and "no skill named 'no_such_skill'" in missing.error
    )
    assert honest.violations == 0
    assert separators(json.dumps(outcome.tree)) < reply_values(1000)


def test_the_skill_api_view_states_the_caps_a_skill_author_can_hit() -> None:
    """What the inducer reads names each cap whose breach the author sees as an error."""
    from speedrunner.core.codebook.api_view import render_api_view
    from speedrunner.methods.wake_sleep.codebook_knowledge import codebook_rules
    from speedrunner.methods.wake_sleep.configs import ASIConfig
    from tests.codebook.test_api_view import api_module, support_for

    config = ASIConfig()
    view = render_api_view(
        api_module("babyai"),
        codebook_rules(support_for("babyai", None), config),
        config,
        example=None,
    )
    assert f"keeps at most {MAX_SCRATCH_CHARS} characters of JSON" in view
    assert f"with at most {MAX_SCRATCH_VALUES} JSON values" in view
    assert (
        f"at most {MAX_RETURN_BYTES} characters of JSON "
        f"with at most {MAX_RETURN_VALUES} JSON values" in view
    )
    assert f"has at most {MAX_ACTION_CHARS} characters" in view
