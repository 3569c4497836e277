"""After Ctrl-C (which stops ScienceWorld's JVMs too) py4j's own error logs are silenced: the
ones through its ``py4j`` loggers and the ones it sends to the root logger with
``logging.exception`` (which would also install a stderr handler). Anything else still logs."""

from __future__ import annotations

import logging
import os

import py4j
import pytest

from speedrunner.benchmarks.scienceworld.env import _not_from_py4j, quiet_py4j

PY4J_FILE = os.path.join(os.path.dirname(py4j.__file__), "java_gateway.py")


@pytest.fixture
def restore_logging():
    py4j_logger, root = logging.getLogger("py4j"), logging.getLogger()
    level = py4j_logger.level
    yield
    py4j_logger.setLevel(level)
    root.removeFilter(_not_from_py4j)


def test_py4j_logs_are_silenced_on_stop_and_others_are_not(restore_logging, caplog) -> None:
    caplog.set_level(logging.INFO)
    as_py4j_does = compile(
        "import logging\ntry:\n    1 / 0\nexcept ZeroDivisionError:\n"
        "    logging.exception('Exception while sending command.')\n",
        PY4J_FILE,
        "exec",
    )
    quiet_py4j()
    logging.getLogger("py4j.java_gateway").error(
        "An error occurred while trying to connect to the Java server"
    )
    exec(as_py4j_does, {})
    logging.getLogger("speedrunner.test").error("still heard")
    assert [r.getMessage() for r in caplog.records] == ["still heard"]


def test_before_a_stop_py4j_logs_as_usual(caplog) -> None:
    caplog.set_level(logging.INFO)
    logging.getLogger("py4j.java_gateway").error("connect failed")
    assert [r.getMessage() for r in caplog.records] == ["connect failed"]
