"""A plug-in's skill API imports in the skill sandbox however the plug-in was installed (a source
tree on PYTHONPATH, ``pip install -e``), its package is read-only there, and one that cannot be
imported there is refused before a run starts (exit 2)."""

from __future__ import annotations

import dataclasses
import errno
import shutil
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from speedrunner import cli, train_cli
from speedrunner.core.runtime.skill_support import ImportCheck
from speedrunner.core.sandbox.limits import ProcessLimits
from speedrunner.core.sandbox.process import SandboxProcess
from speedrunner.core.specs import BENCHMARKS

from .conftest import TIERS

REPO = Path(__file__).resolve().parents[2]
CODEBOOK = "from {top}.api import twice\n\ndef four(env):\n    return twice(2)\n"


def world_readable_dir() -> Path:
    """Not under pytest's tmp_path (0700): a root parent's sandbox child runs as another uid."""
    path = Path(tempfile.mkdtemp(prefix="speedrunner-plugin-test-"))
    path.chmod(0o755)
    return path


def write_package(root: Path, top: str, api: str = "") -> None:
    (root / top).mkdir(parents=True)
    (root / top / "__init__.py").write_text("")
    (root / top / "api.py").write_text(
        api
        or textwrap.dedent("""\
        __all__ = ["twice"]
        PRIMITIVE_ACTIONS = ("inc", "noop")

        def twice(x):
            return 2 * x
    """)
    )
    for p in [root, *root.rglob("*")]:
        p.chmod(0o755 if p.is_dir() else 0o644)


@pytest.fixture
def source_tree(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A package found through a source tree on the path (as PYTHONPATH puts it there)."""
    root = world_readable_dir()
    top = f"plugsrc_{root.name[-8:].replace('-', '_')}"
    write_package(root / "src", top)
    monkeypatch.syspath_prepend(str(root / "src"))
    yield top
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def editable(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A package installed with ``pip install -e`` into a target the suite sees through a .pth."""
    root = world_readable_dir()
    top = f"plugedit_{root.name[-8:].replace('-', '_')}"
    project = root / "project"
    write_package(project, top)
    (project / "pyproject.toml").write_text(
        textwrap.dedent(f"""\
        [build-system]
        requires = ["setuptools>=64"]
        build-backend = "setuptools.build_meta"
        [project]
        name = "{top.replace("_", "-")}"
        version = "0.1"
        [tool.setuptools]
        packages = ["{top}"]
    """)
    )
    target = root / "site"
    installed = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "-q",
            "--no-deps",
            "--no-build-isolation",
            "--no-index",
            "--no-cache-dir",  # parallel tests' pip runs share no cache
            "--target",
            str(target),
            "-e",
            str(project),
        ],
        capture_output=True,
        text=True,
    )
    assert installed.returncode == 0, installed.stderr[-3000:]
    import site

    before = list(sys.meta_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    site.addsitedir(str(target))  # runs the install's .pth, as the interpreter's start would
    yield top
    sys.meta_path[:] = before
    shutil.rmtree(root, ignore_errors=True)


@pytest.mark.parametrize("install", ["source_tree", "editable"])
@pytest.mark.parametrize("tier", TIERS)
def test_a_plug_in_skill_api_imports_in_the_sandbox(
    tier: str, install: str, request: pytest.FixtureRequest
) -> None:
    top = request.getfixturevalue(install)
    check = ImportCheck(f"{top}.api", tier)
    try:
        assert check(CODEBOOK.format(top=top)) is None
    finally:
        check.close()


@pytest.mark.parametrize("install", ["source_tree", "editable"])
def test_the_plug_in_package_is_read_only_and_alone_inside_bwrap(
    install: str, request: pytest.FixtureRequest
) -> None:
    if "bwrap" not in TIERS:
        pytest.skip("bubblewrap is not installed here")
    top = request.getfixturevalue(install)
    package = Path(__import__(top).__file__).resolve().parent
    package.chmod(0o777)  # only the mount can refuse the write now
    (package.parent / "secret.env").write_text("KEY=planted\n")
    process = SandboxProcess("bwrap", ProcessLimits(), mode="analysis", preload=[f"{top}.api"])
    try:
        request_id = SandboxProcess.new_request_id()
        code = "\n".join(
            [
                "import os",
                "try:",
                f"    open({str(package / 'new.py')!r}, 'w')",
                "    print('written')",
                "except OSError as e:",
                "    print('errno', e.errno)",
                f"print('secret visible', os.path.exists({str(package.parent / 'secret.env')!r}))",
            ]
        )
        process.start_request({"op": "run", "id": request_id, "code": code}, deadline=_soon())
        reply = process.receive(_soon())
    finally:
        process.kill()
    assert reply.get("error") is None, reply
    assert f"errno {errno.EROFS}" in reply["stdout"]
    assert "secret visible False" in reply["stdout"]  # its package only, not its whole directory
    assert not (package / "new.py").exists()


def _soon() -> float:
    import time

    return time.monotonic() + 30


@pytest.fixture
def api_with_an_unseen_dependency(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A skill API that imports here but not in the sandbox: it needs a second source tree that
    only this process's path holds."""
    root = world_readable_dir()
    top = f"plugdep_{root.name[-8:].replace('-', '_')}"
    dep = f"{top}_helper"
    api = f"from {dep} import VALUE\n__all__ = []\nPRIMITIVE_ACTIONS = ()\n"
    write_package(root / "src", top, api=api)
    (root / "lib").mkdir()
    (root / "lib" / f"{dep}.py").write_text("VALUE = 1\n")
    monkeypatch.syspath_prepend(str(root / "lib"))
    monkeypatch.syspath_prepend(str(root / "src"))
    monkeypatch.setitem(
        BENCHMARKS._specs,
        "babyai",
        dataclasses.replace(BENCHMARKS.get("babyai"), skill_api=f"{top}.api"),
    )
    yield f"{top}.api"
    shutil.rmtree(root, ignore_errors=True)


def test_a_skill_api_the_sandbox_cannot_import_is_refused_before_the_run(
    api_with_an_unseen_dependency: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = str(REPO / "configs" / "babyai" / "speedrunner-scripted-seq.yaml")
    small = [
        "--set",
        "run.rollouts=2",
        "--set",
        "run.sleep_every=1",
        "--set",
        "run.eval_every=2",
        "--set",
        "run.eval_episodes=1",
        "--set",
        "run.sandbox=rlimits",
    ]

    rc = cli.main(["validate-config", config, *small])
    err = capsys.readouterr().err
    assert rc == 2, err
    assert api_with_an_unseen_dependency in err and "rlimits sandbox" in err
    assert "No module named" in err
    assert "pip install -e" in err  # the fix

    run_dir = tmp_path / "run"
    rc = train_cli.main(
        "babyai",
        "speedrunner.benchmarks.babyai.train",
        ["--config_file", config, "--run_dir", str(run_dir), "--skip_preflight", *small],
    )
    err = capsys.readouterr().err
    assert rc == 2, err
    assert api_with_an_unseen_dependency in err and "Traceback" not in err
    assert not run_dir.exists()  # nothing ran, nothing was paid for
