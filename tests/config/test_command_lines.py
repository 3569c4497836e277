"""Every command line refuses abbreviated flags and shows its help without reST markup."""

from __future__ import annotations

import argparse

import pytest

from speedrunner import cli, train_cli


def _all_parsers() -> list[argparse.ArgumentParser]:
    found, todo = (
        [],
        [cli._parser(), train_cli.build_parser("python -m speedrunner.benchmarks.babyai.train")],
    )
    while todo:
        parser = todo.pop()
        found.append(parser)
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                todo += list(action.choices.values())
    return found


def test_every_parser_and_subparser_refuses_abbreviations() -> None:
    parsers = _all_parsers()
    assert len(parsers) > 10  # speedrunner, its subcommands and their actions, the train command
    assert [p.prog for p in parsers if p.allow_abbrev] == []


def test_config_does_not_silently_mean_config_file(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        train_cli.main(
            "babyai",
            "speedrunner.benchmarks.babyai.train",
            ["--config", "configs/babyai/opo-scripted-seq.yaml"],
        )
    assert e.value.code == 2
    assert "unrecognized arguments: --config" in capsys.readouterr().err


@pytest.mark.parametrize(
    "argv",
    [
        ["leaderboard", "append", "--allow", "x"],
        ["sweep", "f.yaml", "--dry"],
        ["report", "runs", "--o", "x"],
    ],
)
def test_subcommands_refuse_abbreviations_too(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as e:
        cli.main(argv)
    assert e.value.code == 2
    assert "unrecognized arguments" in capsys.readouterr().err


def test_help_shows_no_rest_double_backticks() -> None:
    helps = {p.prog: p.format_help() for p in _all_parsers()}
    assert [prog for prog, text in helps.items() if "``" in text] == []
    # The docstrings the help is made of do use them; they are shown as plain text.
    assert "speedrunner sweep SWEEP.yaml: run a grid" in helps["speedrunner sweep"]
