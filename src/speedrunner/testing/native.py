"""Let a fake that writes text-protocol tool turns answer with native tool calls instead.

A fake LLM decides *what* to do as a text turn (``Tool: add_function`` + a fenced block); when
the request offers tools (``tools`` in a chat body, function declarations in a Gemini body),
a real model would call them natively, so :func:`native_reply` turns that text into a
:class:`Reply` with ``tool_calls`` — what the fake reads is still only the request.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from speedrunner.methods.wake_sleep.speedrunner_native import native_arguments
from speedrunner.methods.wake_sleep.speedrunner_tools import parse_tool_call
from speedrunner.testing.fake_llm_server import Reply

__all__ = ["native_reply", "offered_tools"]


def offered_tools(body: dict[str, Any]) -> set[str]:
    """Names of the tools a request offers (OpenAI-compatible or Gemini body)."""
    names: set[str] = set()
    for tool in body.get("tools") or ():
        if "function" in tool:
            names.add(tool["function"]["name"])
        for decl in tool.get("functionDeclarations") or tool.get("function_declarations") or ():
            names.add(decl["name"])
    return names


def native_reply(body: dict[str, Any], reply: Reply) -> Reply:
    """``reply`` with its text-protocol call moved into ``tool_calls`` when the request offers
    that tool; unchanged otherwise (no tools offered, or no readable call in the text)."""
    offered = offered_tools(body)
    if not offered or not reply.text:
        return reply
    call = parse_tool_call(reply.text, offered)
    if call.tool is None or call.problem is not None:
        return reply
    prose = reply.text.split("Tool:", 1)[0].strip()
    arguments = json.dumps(native_arguments(call))
    return dataclasses.replace(
        reply, text=prose or None, tool_calls=[{"name": call.tool, "arguments": arguments}]
    )
