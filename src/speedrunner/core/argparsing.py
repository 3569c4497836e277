"""The argument parser of every ``speedrunner`` command line.

Two things ``argparse`` does by default that a user trips over: it accepts abbreviations
(``--config`` silently meant ``--config_file``, and a later flag that shares the prefix would
change what an old command means), and the help shown is our docstrings, whose reST
``double backticks`` read as noise in a terminal.
"""

from __future__ import annotations

import argparse
import re
from typing import Any

_LITERAL = re.compile(r"``(.+?)``", re.DOTALL)


def plain(text: str) -> str:
    """``text`` without reST inline-literal markup: ````x```` reads ``x``."""
    return _LITERAL.sub(r"\1", text)


class ArgumentParser(argparse.ArgumentParser):
    """``argparse.ArgumentParser`` with abbreviations off and help shown as plain text.

    Its subcommands' parsers are of this class too (``add_subparsers`` uses the parent's class).
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def format_help(self) -> str:
        return plain(super().format_help())

    def format_usage(self) -> str:
        return plain(super().format_usage())
