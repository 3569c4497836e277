"""The docs site builds strictly, its config snippets load, and every command it shows exists.

A reader copies what the docs show: a YAML block into a run config, a command into a shell.
These tests make a renamed key, a removed flag or a moved page fail the suite rather than
the reader.
"""

from __future__ import annotations

import importlib.util
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
PAGES = sorted((REPO / "docs").rglob("*.md")) + [REPO / "README.md", REPO / "SPEEDRUN.md"]
SHELL = {"", "bash", "sh", "shell", "console"}
SECTIONS = {"run", "method", "model", "inducer", "benchmark", "speedrun", "logging"}


def _hooks():
    spec = importlib.util.spec_from_file_location(
        "mkdocs_hooks", REPO / "scripts" / "mkdocs_hooks.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _fences(text: str) -> list[tuple[str, str]]:
    """(language, body) of every fenced block, in order (the fence lines tracked, so the text
    between two blocks is never mistaken for one)."""
    blocks, lang, body = [], None, []
    for line in text.splitlines():
        if line.startswith("```"):
            if lang is None:
                lang, body = line[3:].strip(), []
            else:
                blocks.append((lang, "\n".join(body) + "\n"))
                lang = None
        elif lang is not None:
            body.append(line)
    return blocks


def _build(root: Path, out: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "mkdocs",
            "build",
            "--strict",
            "-f",
            str(root / "mkdocs.yml"),
            "-d",
            str(out),
        ],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=300,
        env={**__import__("os").environ, "NO_MKDOCS_2_WARNING": "1"},
    )


def test_the_site_builds_strictly_with_every_page_and_generated_reference(tmp_path: Path) -> None:
    proc = _build(REPO, tmp_path / "site")
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert "WARNING" not in proc.stderr, proc.stderr[-4000:]
    config = (tmp_path / "site" / "reference" / "config-keys" / "index.html").read_text("utf-8")
    for key in (
        "run.sleep_every",
        "model.sampling.temperature",
        "speedrun.metric",
        "logging.wandb.project",
        "method.guide_max_chars",
        "method.retrieval_top_k",
        "benchmark.server_url",
        "benchmark.jvm_options",
    ):
        assert key in config, key
    cli = (tmp_path / "site" / "reference" / "cli" / "index.html").read_text("utf-8")
    assert "--config_file" in cli and "--print-sbatch" in cli and "--allow-scripted" in cli
    api = (tmp_path / "site" / "reference" / "api" / "index.html").read_text("utf-8")
    assert (
        "restore" in api and "eval_episodes" in api
    )  # mkdocstrings rendered the protocols' methods
    leaderboard = (tmp_path / "site" / "leaderboard" / "index.html").read_text("utf-8")
    assert "--8&lt;--" not in leaderboard and "Workflow" in leaderboard  # SPEEDRUN.md was included


@pytest.mark.slow
@pytest.mark.parametrize("breakage", ["link", "page"])
def test_a_broken_link_or_a_missing_page_fails_the_build(tmp_path: Path, breakage: str) -> None:
    root = tmp_path / "repo"
    root.mkdir()
    for name in ("docs", "scripts", "src"):
        (root / name).symlink_to(REPO / name) if name != "docs" else shutil.copytree(
            REPO / "docs", root / "docs"
        )
    for name in ("mkdocs.yml", "SPEEDRUN.md"):
        shutil.copy(REPO / name, root / name)
    if breakage == "link":
        page = root / "docs" / "methods.md"
        page.write_text(
            page.read_text("utf-8") + "\nSee [the old page](no-such-page.md).\n", "utf-8"
        )
    else:
        (root / "docs" / "caps.md").unlink()
    proc = _build(root, tmp_path / "site")
    assert proc.returncode != 0
    assert ("no-such-page.md" if breakage == "link" else "caps.md") in proc.stderr


# ------------------------------------------------------------------------------ YAML
def _yaml_blocks() -> list[tuple[str, str]]:
    blocks = []
    for page in PAGES:
        yamls = [body for lang, body in _fences(page.read_text("utf-8")) if lang in ("yaml", "yml")]
        blocks += [(f"{page.relative_to(REPO)}#{i}", body) for i, body in enumerate(yamls)]
    return blocks


def _base_config(fragment: dict) -> Path:
    method = (fragment.get("method") or {}).get("name")
    if method == "voyager":
        return REPO / "configs" / "crafter" / "voyager-gpt-crafter.yaml"
    bench = (fragment.get("benchmark") or {}).get("name", "babyai")
    return {
        "babyai": REPO / "configs" / "babyai" / "opo-gpt-seq.yaml",
        "crafter": REPO / "configs" / "crafter" / "react-gpt-crafter.yaml",
        "scienceworld": REPO / "configs" / "scienceworld" / "react-gpt-t4.yaml",
    }[bench]


def test_every_yaml_block_in_the_docs_is_checked() -> None:
    kinds = {label: _kind(yaml.safe_load(text)) for label, text in _yaml_blocks()}
    assert kinds and all(kinds.values()), {k: v for k, v in kinds.items() if not v}
    assert {"run-config", "sweep"} <= set(kinds.values())


def _kind(data: object) -> str | None:
    if isinstance(data, dict) and data and set(data) <= SECTIONS:
        return "run-config"
    if isinstance(data, dict) and {"name", "configs"} <= set(data):
        return "sweep"
    return None


@pytest.mark.parametrize(("label", "text"), _yaml_blocks(), ids=[b[0] for b in _yaml_blocks()])
def test_a_config_snippet_loads_with_the_project_loader(
    tmp_path: Path, label: str, text: str
) -> None:
    from speedrunner.catalog import config_loader
    from speedrunner.core.config.loader import deep_merge
    from speedrunner.sweep.spec import load_sweep

    data = yaml.safe_load(text)
    if _kind(data) == "sweep":
        (tmp_path / "sweeps").mkdir()
        for bench in ("babyai", "crafter", "scienceworld"):
            (tmp_path / bench).symlink_to(REPO / "configs" / bench)
        (tmp_path / "sweeps" / "doc.yaml").write_text(text, "utf-8")
        assert load_sweep(tmp_path / "sweeps" / "doc.yaml").runs
        return
    base = yaml.safe_load(_base_config(data).read_text("utf-8"))
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(deep_merge(base, data)), "utf-8")
    loaded = config_loader().load(tmp_path / "config.yaml").config
    for section, values in data.items():  # what the snippet sets is what the config holds
        held = getattr(loaded, section).model_dump()
        for key, value in values.items():
            if not isinstance(value, dict):
                assert held[key] == value, f"{label}: {section}.{key}"


# -------------------------------------------------------------------------- commands
_COMMAND = re.compile(r"^(?:\$ |exec )?((?:speedrunner|python -m speedrunner[\w.]*)(?: .*)?)$")


def _shown_commands() -> dict[str, list[str]]:
    """Every ``speedrunner ...`` / ``python -m speedrunner...`` line of a shell block, and every
    inline code span that is one, with the pages showing it."""
    found: dict[str, list[str]] = {}
    for page in PAGES:
        text = page.read_text("utf-8")
        lines = []
        for block in [body for lang, body in _fences(text) if lang in SHELL]:
            joined = re.sub(r"\\\n\s*", " ", block)
            lines += [line.strip() for line in joined.splitlines()]
        lines += re.findall(r"`((?:speedrunner|python -m speedrunner[\w.]*) [^`]+)`", text)
        for line in lines:
            m = _COMMAND.match(line.split("  #")[0].split(" # ")[0].strip())
            if m:
                found.setdefault(m.group(1).strip(), []).append(str(page.relative_to(REPO)))
    return found


def _resolve(command: str, commands: dict[str, object]) -> tuple[str, list[str]]:
    words = shlex.split(command.replace("[", " ").replace("]", " ").replace("...", " "))
    if words[:2] == ["python", "-m"]:
        words = [f"python -m {words[2]}", *words[3:]]
    name = words[0]
    rest = words[1:]
    while rest and f"{name} {rest[0]}" in commands:
        name, rest = f"{name} {rest[0]}", rest[1:]
    return name, rest


def test_every_command_the_docs_show_exists_with_the_flags_shown() -> None:
    import argparse

    commands = dict(_hooks().cli_commands())
    shown = _shown_commands()
    assert len(shown) > 30  # the README and the pages show many; a broken extractor finds none
    problems = []
    for command, pages in shown.items():
        name, rest = _resolve(command, commands)
        parser = commands.get(name)
        if parser is None:
            problems.append(f"{pages[0]}: `{command}`: no such command")
            continue
        subcommands = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        if subcommands and rest and not rest[0].startswith("-"):
            problems.append(f"{pages[0]}: `{command}`: {name} has no subcommand {rest[0]!r}")
        options = {s for a in parser._actions for s in a.option_strings}
        if "--config_file" in rest[:-1]:
            config = rest[rest.index("--config_file") + 1]
            if not (REPO / config).is_file():
                problems.append(f"{pages[0]}: `{command}`: no config {config} in the repo")
        for word in rest:
            flag = word.split("=", 1)[0]
            if flag.startswith("--") and flag not in options:
                problems.append(f"{pages[0]}: `{command}`: {name} has no option {flag}")
    assert not problems, "\n".join(problems)


@pytest.mark.slow
def test_the_help_of_every_command_the_docs_show_runs() -> None:
    commands = dict(_hooks().cli_commands())
    names = {_resolve(c, commands)[0] for c in _shown_commands()}
    names &= set(commands)
    assert "speedrunner sweep" in names and "python -m speedrunner.benchmarks.babyai.train" in names
    console = Path(sys.executable).parent / "speedrunner"
    for name in sorted(names):
        words = name.split()
        argv = (
            [sys.executable, "-m", words[2]]
            if words[0] == "python"
            else [str(console) if console.exists() else "speedrunner", *words[1:]]
        )
        proc = subprocess.run(
            [*argv, "--help"], capture_output=True, text=True, timeout=120, cwd=REPO
        )
        assert proc.returncode == 0 and "usage:" in proc.stdout, (name, proc.stderr[-2000:])


def test_every_script_the_docs_run_is_in_the_repo() -> None:
    missing = []
    for page in PAGES:
        text = page.read_text("utf-8")
        for block in [body for lang, body in _fences(text) if lang in SHELL]:
            for path in re.findall(
                r"(?:^|\s|python )((?:benchmarks|scripts|BALROG)/[\w/.-]+\.(?:py|sh))", block, re.M
            ):
                if not (REPO / path).is_file():
                    missing.append(f"{page.relative_to(REPO)}: {path}")
    assert not missing, missing


# ---------------------------------------------------------------------------- README
def test_the_readme_is_short_and_every_link_in_it_resolves() -> None:
    """The README is the front page (at most ~200 lines); its details live in docs/, linked
    relatively so the links work on GitHub, where mkdocs does not check them."""
    readme = (REPO / "README.md").read_text("utf-8")
    assert len(readme.splitlines()) <= 200
    links = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", readme)
    local = [link for link in links if "://" not in link]
    assert len(local) >= 20 and all((REPO / link).exists() for link in local), [
        link for link in local if not (REPO / link).exists()
    ]
    anchors = re.findall(r"\]\(#([^)]+)\)", readme)
    headings = {
        re.sub(r"[^\w\- ]", "", h).strip().lower().replace(" ", "-")
        for h in re.findall(r"^#+ (.+)$", readme, re.M)
    }
    assert set(anchors) <= headings, set(anchors) - headings
