"""What a real small model (Qwen2.5-Coder-0.5B-Instruct) wrote as SpeedRunner's inducer and
as OPO's guide writer, quoted from issue 29: the feedback it gets never shows a made-up
tool name, speaks of the protocol in use, and a guide that repeats the prompt is never stored."""

from __future__ import annotations

from speedrunner.core.llm.types import ToolUse
from speedrunner.methods.wake_sleep.opo import PROMPTS as OPO_PROMPTS
from speedrunner.methods.wake_sleep.opo import read_guide
from speedrunner.methods.wake_sleep.speedrunner_native import read_turn
from speedrunner.methods.wake_sleep.speedrunner_tools import TOOLS
from tests.methods.test_speedrunner import episode, method, stored

ALL = frozenset(TOOLS)
RESTATED = (
    "You maintain a codebook of reusable Python skills for an agent that plays a text game.\n"
    "The agent sees the public functions (signature and docstring) and calls one as a single "
    "action; each skill plays primitive actions through `env.act(...)`.\n\n"
    "What a good skill is:\n"
    "- deterministic and parameterised (arguments instead of constants from one episode);\n" * 3
)


def test_a_first_turn_restating_the_rules_gets_a_short_re_ask_naming_one_tool(tmp_path):
    seen: list[str] = []
    answers = [RESTATED, "Result of `?`:\nNot run: no `Tool:` line found", "Tool: submit\ndone"]

    def policy(messages, purpose, call_id):
        seen.append(messages[-1].content)
        return answers[int(call_id.rsplit("/", 1)[1])]

    m, model = method(tmp_path, answers, max_inducer_turns=3)
    model.policy = policy
    m.sleep(stored(tmp_path, [episode(0)]), batch_index=0)
    reask, later = seen[1], seen[2]
    assert "`?`" not in reask and "`?`" not in later
    assert "Tool: view_codebook" in reask and len(reask) < 300
    assert later.startswith("No tool ran:")


def test_native_feedback_speaks_of_tool_calls_not_tool_lines():
    call = read_turn("I should look at the codebook first.", (), ALL, native=True)
    assert (
        call.tool is None
        and "function-calling" in call.problem
        and "`Tool:` line" not in call.problem
    )
    assert "`Tool:` line" in read_turn("I should look at the codebook first.", (), ALL).problem


def test_a_tool_call_returned_as_content_is_still_read():
    """llama-cpp-python's server returns the call as the message content, tools sent or not."""
    call = read_turn('{"name": "view_codebook", "arguments": {}}', (), ALL, native=True)
    assert (call.tool, call.problem) == ("view_codebook", None)
    assert (
        read_turn("", (ToolUse("c", "view_codebook", "{}"),), ALL, native=True).tool
        == "view_codebook"
    )


PLACEHOLDER = "(empty: this is the first guide)"


def test_opo_never_stores_the_prompt_s_placeholder_guide():
    prompt = OPO_PROMPTS.render(
        "rewrite",
        guide=PLACEHOLDER,
        trajectories="--- Episode 0 ---\n...",
        max_chars=2000,
        n=1,
        successes=0,
    )
    # the model repeated the prompt first, then wrote its guide
    answer = read_guide(
        prompt + "\n\n<guide>\nOpen doors before walking through them.\n</guide>", echoes=(prompt,)
    )
    assert (answer.guide, answer.problem) == ("Open doors before walking through them.", None)
    assert "the prompt repeated" in answer.repairs
    # the model only repeated the prompt: no guide at all, the old one stays
    only = read_guide(prompt, echoes=(prompt,))
    assert only.guide == "" and "repeats the prompt" in only.problem
    assert read_guide(f"<guide>{PLACEHOLDER}</guide>", echoes=(prompt,)).guide == ""


def test_a_repeated_prompt_is_taken_out_whatever_its_whitespace():
    """Models re-wrap what they repeat: other line breaks, tabs, a non-breaking space."""
    prompt = OPO_PROMPTS.render(
        "rewrite",
        guide=PLACEHOLDER,
        trajectories="--- Episode 0 ---\nstep 1: go",
        max_chars=2000,
        n=1,
        successes=0,
    )
    rewrapped = "\t\u00a0".join(prompt.split())
    answer = read_guide(f"{rewrapped}\n<guide>Pick up the key first.</guide>", echoes=(prompt,))
    assert answer.guide == "Pick up the key first." and "the prompt repeated" in answer.repairs
    # a part of the prompt is no echo of it
    half = " ".join(prompt.split()[: len(prompt.split()) // 2])
    assert (
        "the prompt repeated"
        not in read_guide(f"{half}\n<guide>Go.</guide>", echoes=(prompt,)).repairs
    )


def test_opo_keeps_a_guide_that_only_shares_a_few_words_with_the_prompt():
    prompt = OPO_PROMPTS.render(
        "rewrite", guide="Go to the door.", trajectories="...", max_chars=2000, n=1, successes=1
    )
    answer = read_guide(
        "<guide>Go to the door. Then open it with toggle.</guide>", echoes=(prompt,)
    )
    assert answer.guide == "Go to the door. Then open it with toggle." and answer.problem is None


def test_opo_never_stores_a_guide_copied_from_the_episodes_it_was_shown():
    """What the 0.5B model wrote as its "guide": the episodes of the prompt, re-wrapped."""
    episodes = (
        "--- Episode 0 ---\nTask: Your goal is to pick up the purple box, then go to the grey key\n"
        "Outcome: FAILURE (progress 0.00, stopped by max_llm_calls, 4 LLM calls, 4 env actions)\n"
        "[0] obs: a wall 1 step forward | a wall 3 steps left\n    action: pick up"
    )
    prompt = OPO_PROMPTS.render(
        "rewrite", guide=PLACEHOLDER, trajectories=episodes, max_chars=2000, n=1, successes=0
    )
    copied = (
        "<guide>\n<episode 0>\n"
        "    Task: Your goal is to pick up the purple box, then go to the grey key\n"
        "    Outcome: FAILURE "
        "(progress 0.00, stopped by max_llm_calls, 4 LLM calls, 4 env actions)\n"
        "    [0] obs: a wall 1 step forward | a wall 3 steps left\n</episode>\n</guide>"
    )
    answer = read_guide(copied, echoes=(prompt,))
    assert answer.guide == "" and "repeats the prompt" in answer.problem
    advice = (
        "<guide>\nTask: Your goal is to pick up the purple box, then go to the grey key\n"
        "- Face the box first.\n"
        "- Use pick up only when the box is 1 step forward.\n"
        "- Then turn towards the key and go forward.\n</guide>"
    )
    # one copied line of four is a guide
    assert read_guide(advice, echoes=(prompt,)).guide.startswith("Task:")
