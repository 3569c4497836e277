"""A config error quotes the key's meaning on one indented line, however its docstring wraps."""

from __future__ import annotations

import pytest

from speedrunner import cli
from speedrunner.core.config.schema import ModelConfig

from .conftest import WriteConfig


def test_a_wrapped_field_docstring_is_quoted_on_one_indented_line(
    write_config: WriteConfig, capsys: pytest.CaptureFixture[str]
) -> None:
    raw = ModelConfig.model_fields["max_concurrency"].description
    assert raw is not None and "\n" in raw  # the case under test: a docstring over two lines
    path = write_config("""
        method:
          name: react
        model:
          name: gpt-4o-mini
          max_concurrency: 0
        benchmark:
          name: babyai
    """)
    rc = cli.main(["validate-config", str(path)])
    err = capsys.readouterr().err
    assert rc == 2
    assert f"      model.max_concurrency: {' '.join(raw.split())}\n" in err
    # every line of the report is the header, a problem or an indented meaning
    assert all(line.startswith(("error:", "  ")) for line in err.splitlines() if line), err
