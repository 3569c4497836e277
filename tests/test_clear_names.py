"""Names a reader can follow: no two classes in ``src`` share a name, the sleep phase's state has
real names, and CleanRL's ``ALGO LOGIC`` markers sit on the lines of each algorithm a researcher
would change (not on small helpers)."""

from __future__ import annotations

import ast
import inspect
from collections import defaultdict
from pathlib import Path

from speedrunner.methods.voyager.voyager import VoyagerMethod
from speedrunner.methods.wake_sleep import speedrunner
from speedrunner.methods.wake_sleep.opo import OPOMethod

SRC = Path(__file__).resolve().parents[1] / "src"
SHARED = {"Estimate"}
"""Class names still defined twice, left to their modules' owners (each must still be shared)."""
MARKER = "# ALGO LOGIC"


def test_no_two_classes_in_src_share_a_name() -> None:
    where: dict[str, list[str]] = defaultdict(list)
    for path in sorted(SRC.rglob("*.py")):
        for node in ast.parse(path.read_text("utf-8")).body:
            if isinstance(node, ast.ClassDef):
                where[node.name].append(str(path.relative_to(SRC)))
    shared = {name: paths for name, paths in where.items() if len(paths) > 1}
    assert set(shared) <= SHARED, (
        f"one name, several classes (rename each to say what it is): {shared}"
    )
    assert set(shared) >= SHARED, (
        f"no longer shared, take them off SHARED: {sorted(SHARED - set(shared))}"
    )


def test_the_sleep_phase_names_its_state() -> None:
    tree = ast.parse(inspect.getsource(speedrunner._Phase))
    attributes = {
        node.attr
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Name)
        and node.value.id == "self"
    }
    assert {"method", "batch_index"} <= attributes
    assert not [a for a in attributes if len(a) <= 2], "one- or two-letter attributes of _Phase"


def test_algo_logic_markers_sit_on_the_algorithms() -> None:
    for algorithm in (speedrunner._Phase.run, OPOMethod.sleep, VoyagerMethod._iteration):
        assert MARKER in inspect.getsource(algorithm), algorithm.__qualname__
    for helper in (
        speedrunner.SpeedRunnerMethod.sleep,
        OPOMethod.knowledge,
        VoyagerMethod.knowledge,
    ):
        lines, first = inspect.getsourcelines(helper)
        above = Path(inspect.getsourcefile(helper) or "").read_text("utf-8").splitlines()[first - 2]
        assert MARKER not in above + "".join(lines), (
            f"a marker on {helper.__qualname__}, a short helper"
        )
