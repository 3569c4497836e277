"""The shipped configs: each validates for its own entry point, all experiments are covered,
and the defaults follow the protocol."""

from __future__ import annotations

from pathlib import Path

import pytest

from speedrunner.core.config.loader import ConfigLoader
from speedrunner.shipped_configs import configs_root, list_configs, shipped_config_path

from .conftest import WriteConfig

SHIPPED = list_configs()
# Names kept for compatibility; each must be an exact copy of a conventionally named config.
ALIASES = {"crafter/voyager_crafter": "crafter/voyager-gpt-crafter"}
DEMOS = {
    "babyai/opo-scripted-seq",  # the offline demo (README main job)
    "crafter/voyager-scripted-crafter",
}  # the recorded Voyager demo: 2 worlds, not 200

TASK_SETS = {"babyai": ["seq"], "crafter": ["crafter"], "scienceworld": ["t3", "t4", "t3t4"]}
METHODS = ["react", "opo", "speedrunner", "speedrunner_no_cl", "asi"]
BUDGETS = {
    "babyai": {"max_llm_calls": 30, "max_env_actions": None},
    "scienceworld": {"max_llm_calls": 100, "max_env_actions": None},
    "crafter": {"max_llm_calls": 4000, "max_env_actions": 2000},  # LLM calls: a safety cap only
}
PROTOCOL_RUN = {"rollouts": 200, "sleep_every": 10, "eval_every": 50, "eval_episodes": 30}


def entry_point(benchmark: str, method: str) -> str:
    if method == "voyager":
        return "speedrunner.benchmarks.crafter.train_voyager"
    return f"speedrunner.benchmarks.{benchmark}.train"


def canonical(name: str) -> str:
    return ALIASES.get(name, name)


@pytest.mark.parametrize("name", SHIPPED)
def test_shipped_config_validates_for_its_entry_point(name: str, loader: ConfigLoader) -> None:
    benchmark_dir, stem = canonical(name).split("/")
    method, model, task_set = stem.split("-")
    loaded = loader.load(
        shipped_config_path(name),
        expect_benchmark=benchmark_dir,
        entry_point=entry_point(benchmark_dir, method),
    )
    config = loaded.config
    # The name says what the file holds.
    assert config.benchmark.name == benchmark_dir
    assert config.method.name == method
    assert config.benchmark.task_set == task_set
    provider = {"gpt": "openai", "gemini": "gemini", "qwen": "vllm", "scripted": "scripted"}[model]
    assert config.model.provider == provider
    if model == "gpt":
        assert config.model.name.startswith("gpt-")
    if model == "qwen":
        assert "Qwen" in config.model.name and config.model.base_url
    # And it also validates with the quick-test preset (what a smoke run uses).
    assert loader.load(shipped_config_path(name), quick_test=True).config.run.rollouts == 4


@pytest.mark.parametrize("name", sorted(n for n in SHIPPED if n not in DEMOS))
def test_shipped_config_follows_the_protocol(name: str, loader: ConfigLoader) -> None:
    config = loader.load(shipped_config_path(name)).config
    for key, value in PROTOCOL_RUN.items():
        assert getattr(config.run, key) == value, key
    for key, value in BUDGETS[config.benchmark.name].items():
        assert getattr(config.benchmark, key) == value, key


@pytest.mark.parametrize("benchmark", sorted(TASK_SETS))
def test_builtin_defaults_follow_the_protocol(
    benchmark: str, loader: ConfigLoader, write_config: WriteConfig
) -> None:
    path = write_config(f"""
        method: {{name: react}}
        benchmark: {{name: {benchmark}}}
    """)
    config = loader.load(path).config
    for key, value in PROTOCOL_RUN.items():
        assert getattr(config.run, key) == value, key
    for key, value in BUDGETS[benchmark].items():
        assert getattr(config.benchmark, key) == value, key


def test_every_experiment_has_a_config() -> None:
    expected = set()
    for benchmark, task_sets in TASK_SETS.items():
        for task_set in task_sets:
            expected |= {f"{benchmark}/{m}-gpt-{task_set}" for m in METHODS}
            expected |= {
                f"{benchmark}/{m}-{model}-{task_set}"
                for m in ("react", "speedrunner")
                for model in ("gemini", "qwen")
            }
    expected.add("crafter/voyager-gpt-crafter")
    missing = expected - set(SHIPPED)
    assert not missing, sorted(missing)
    # And nothing that breaks the naming convention except known aliases.
    unconventional = {n for n in SHIPPED if len(n.split("/")[1].split("-")) != 3}
    assert unconventional == set(ALIASES)


@pytest.mark.parametrize(("alias", "target"), sorted(ALIASES.items()))
def test_aliases_are_exact_copies(alias: str, target: str) -> None:
    assert shipped_config_path(alias).read_bytes() == shipped_config_path(target).read_bytes()


def test_repo_root_configs_is_the_package_data() -> None:
    repo_configs = Path(__file__).resolve().parents[2] / "configs"
    if not repo_configs.exists():
        pytest.skip("not running from a checkout")
    assert repo_configs.resolve() == configs_root().resolve()


REPO = Path(__file__).resolve().parents[2]


EVERY_FILE = sorted(str(p.relative_to(configs_root())) for p in configs_root().rglob("*.yaml"))
"""Run configs, sweep files and recorded scripts: everything ``configs/`` ships."""


@pytest.mark.parametrize("rel", EVERY_FILE)
def test_every_shipped_file_points_at_the_protocol_and_at_documents_that_exist(rel: str) -> None:
    """A user who opens any shipped file finds where its numbers come from (docs/protocol.md),
    and a header that points at a document points at one the project ships."""
    import re

    text = (configs_root() / rel).read_text("utf-8")
    comments = [line for line in text.splitlines() if line.lstrip().startswith("#")]
    assert any("(docs/protocol.md)" in line for line in comments), (
        f"{rel}: no comment names (docs/protocol.md)"
    )
    for doc in re.findall(r"\(([\w./-]+\.md)\)", "\n".join(comments)):
        assert (REPO / doc).is_file(), f"{rel} names {doc}, which the project does not have"


def test_the_readme_links_the_protocol() -> None:
    """Where a reader of the README learns the protocol's numbers come from."""
    assert "](docs/protocol.md)" in (REPO / "README.md").read_text("utf-8")


def test_protocol_doc_states_the_numbers_the_code_uses() -> None:
    """docs/protocol.md is what the config headers cite: its schedule and budgets must be
    the defaults the code applies (checked above against the configs themselves)."""
    doc = (REPO / "docs" / "protocol.md").read_text("utf-8")
    for needle in (
        "| 200 |",
        "every 10",
        "every 50",
        "30 fixed episodes",
        "30 LLM calls",
        "100 LLM calls",
        "2,000 environment actions",
        "episode_wall_clock_s: 1800",
    ):
        assert needle in doc, needle
    from speedrunner.core.llm.prices import load_price_table  # noqa: PLC0415

    for model, price in load_price_table().models.items():
        assert f"| {model} | {price.input:g} | {price.cached_input:g} | {price.output:g} |" in doc
