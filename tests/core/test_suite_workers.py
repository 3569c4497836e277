"""The suite runs on several xdist workers: tests sharing an expensive fixture stay on one."""

from __future__ import annotations

import itertools

import pytest

BUILT: list[int] = []


@pytest.fixture(scope="module")
def shared_thing() -> int:
    BUILT.append(1)
    return len(BUILT)


def test_one_user_of_the_shared_fixture(shared_thing: int) -> None:
    assert shared_thing == 1


def test_another_user_of_the_shared_fixture(shared_thing: int) -> None:
    assert shared_thing == 1


def test_users_of_a_module_fixture_share_one_xdist_group(request: pytest.FixtureRequest) -> None:
    mine = [i for i in request.session.items if i.path == request.node.path]
    groups = {
        i.name: (m.args[0] if (m := i.get_closest_marker("xdist_group")) else None) for i in mine
    }
    expected = "tests/core/test_suite_workers.py::shared_thing"
    assert groups["test_one_user_of_the_shared_fixture"] == expected
    assert groups["test_another_user_of_the_shared_fixture"] == expected
    assert (
        groups["test_users_of_a_module_fixture_share_one_xdist_group"] is None
    )  # tmp_path & co group nothing


def test_the_suite_runs_on_every_core_by_default(pytestconfig: pytest.Config) -> None:
    """`python -m pytest -q` spreads the tests over one worker per core (pyproject addopts)."""
    import shlex
    import tomllib
    from pathlib import Path

    pyproject = tomllib.loads((Path(__file__).resolve().parents[2] / "pyproject.toml").read_text())
    addopts = shlex.split(pyproject["tool"]["pytest"]["ini_options"]["addopts"])
    assert (
        addopts[addopts.index("-n") + 1] == "auto"
        and addopts[addopts.index("--dist") + 1] == "loadgroup"
    )


def test_modules_with_slow_tests_are_handed_out_first_each_in_one_piece(
    request: pytest.FixtureRequest,
) -> None:
    """The suite's last minutes are short tests on every worker, not one long run on one."""
    items = request.session.items
    slow = [i.get_closest_marker("slow") is not None for i in items]
    if not (any(slow) and not all(slow)):
        pytest.skip("this selection has only slow or only quick tests")
    runs = [path for path, _ in itertools.groupby(i.path for i in items)]
    assert len(runs) == len(set(runs)), "a module was split"
    slow_modules = {i.path for i, s in zip(items, slow, strict=True) if s}
    assert runs == sorted(runs, key=lambda p: p not in slow_modules)
