"""Layer precedence, weakest to strongest: built-in defaults < file < --quick_test < --set.

One test per boundary, plus how layers combine: mappings deep-merge, lists replace.
"""

from __future__ import annotations

import pytest

from speedrunner.core.config.loader import QUICK_TEST_RUN, ConfigLoader
from speedrunner.errors import ConfigError

from .conftest import WriteConfig


def test_file_beats_builtin_defaults_of_method_and_benchmark(
    loader: ConfigLoader, write_config: WriteConfig
) -> None:
    minimal = write_config(
        """
        method: {name: opo}
        benchmark: {name: babyai}
    """,
        name="minimal.yaml",
    )
    edited = write_config(
        """
        run:
          rollouts: 100
        method:
          name: opo
          guide_max_chars: 3000
        benchmark:
          name: babyai
          max_llm_calls: 12
          task_set: goto
    """,
        name="edited.yaml",
    )

    defaults = loader.load(minimal).config
    # Built-in defaults: the run schedule, the method's and the benchmark's own.
    assert defaults.run.rollouts == 200
    assert defaults.method.guide_max_chars == 6000
    assert defaults.benchmark.max_llm_calls == 30
    assert defaults.benchmark.task_set == "seq"

    config = loader.load(edited).config
    assert config.run.rollouts == 100
    assert config.method.guide_max_chars == 3000
    assert config.benchmark.max_llm_calls == 12
    assert config.benchmark.task_set == "goto"
    # What the file leaves out still comes from the defaults.
    assert config.method.max_trajectory_chars == 12000
    assert config.run.sleep_every == 10


def test_quick_test_preset_beats_the_file(loader: ConfigLoader, write_config: WriteConfig) -> None:
    path = write_config("""
        run:
          seed: 7
          rollouts: 200
          sleep_every: 10
          eval_every: 50
          eval_episodes: 30
        method:
          name: speedrunner
          max_inducer_turns: 20
        benchmark:
          name: babyai
          task_set: seq
          max_llm_calls: 30
    """)
    plain = loader.load(path).config
    quick = loader.load(path, quick_test=True).config

    assert (plain.run.rollouts, plain.benchmark.max_llm_calls, plain.method.max_inducer_turns) == (
        200,
        30,
        20,
    )
    for key, value in QUICK_TEST_RUN.items():
        assert getattr(quick.run, key) == value, key
    assert quick.run.rollouts == 4 and quick.run.eval_episodes == 2
    assert quick.benchmark.max_llm_calls == 6  # babyai's preset
    assert quick.method.max_inducer_turns == 3  # speedrunner's preset
    # Keys the preset does not name keep the file's values.
    assert quick.run.seed == 7
    assert quick.benchmark.task_set == "seq"


def test_set_overrides_beat_the_quick_test_preset(
    loader: ConfigLoader, write_config: WriteConfig
) -> None:
    path = write_config("""
        method: {name: react}
        benchmark: {name: scienceworld, task_set: t3, max_llm_calls: 100}
    """)
    loaded = loader.load(
        path,
        quick_test=True,
        overrides=["run.rollouts=8", "benchmark.max_llm_calls=9", "run.seed=3"],
    )
    config = loaded.config
    assert config.run.rollouts == 8  # --set, not the preset's 4
    assert config.benchmark.max_llm_calls == 9  # --set, not the preset's 5
    assert config.run.seed == 3
    assert (
        config.run.eval_episodes == QUICK_TEST_RUN["eval_episodes"]
    )  # preset where --set is silent
    assert loaded.overrides == ["run.rollouts=8", "benchmark.max_llm_calls=9", "run.seed=3"]
    assert loaded.quick_test is True


def test_mappings_deep_merge(loader: ConfigLoader, write_config: WriteConfig) -> None:
    # A file that changes one sampling key keeps the defaults of the others ...
    one_key = write_config(
        """
        method: {name: react}
        model:
          sampling:
            temperature: 0.3
        benchmark: {name: babyai}
    """,
        name="one_key.yaml",
    )
    sampling = loader.load(one_key).config.model.sampling
    assert (sampling.temperature, sampling.top_p, sampling.max_tokens) == (0.3, 1.0, 4096)
    assert loader.load(one_key).config.model.name == "gpt-5.4-mini"

    # ... and --set of one nested key keeps the file's siblings (no section replacement).
    full = write_config(
        """
        method: {name: react}
        model:
          provider: vllm
          name: Qwen/Qwen3.5-35B-A3B
          base_url: http://127.0.0.1:5012/v1
          sampling: {temperature: 0.6, top_p: 0.95, max_tokens: 8192}
        benchmark: {name: babyai}
    """,
        name="full.yaml",
    )
    model = loader.load(full, overrides=["model.sampling.temperature=0.2"]).config.model
    assert model.sampling.temperature == 0.2
    assert model.sampling.top_p == 0.95
    assert model.sampling.max_tokens == 8192
    assert model.provider == "vllm" and model.base_url == "http://127.0.0.1:5012/v1"


def test_lists_replace_wholesale(loader: ConfigLoader, write_config: WriteConfig) -> None:
    path = write_config("""
        method: {name: react}
        model:
          provider: vllm
          name: Qwen/Qwen3.5-35B-A3B
          base_url: [http://a:5012/v1, http://b:5012/v1, http://c:5012/v1]
        benchmark:
          name: crafter
          area: [32, 32]
    """)
    assert loader.load(path).config.model.base_url == [
        "http://a:5012/v1",
        "http://b:5012/v1",
        "http://c:5012/v1",
    ]

    config = loader.load(
        path, overrides=["model.base_url=[http://z:5012/v1]", "benchmark.area=[16, 20]"]
    ).config
    assert config.model.base_url == ["http://z:5012/v1"]  # not merged with a, b, c
    assert config.benchmark.area == [16, 20]

    # An element-wise merge would silently turn [9] over [32, 32] into [9, 32].
    with pytest.raises(ConfigError) as info:
        loader.load(path, overrides=["benchmark.area=[9]"])
    assert "[--set] benchmark.area" in str(info.value)


def test_inducer_keys_deep_merge_over_the_actor_model(
    loader: ConfigLoader, write_config: WriteConfig
) -> None:
    path = write_config("""
        method: {name: opo}
        model:
          provider: vllm
          name: Qwen/Qwen3.5-35B-A3B
          base_url: http://127.0.0.1:5012/v1
          sampling: {temperature: 0.6, top_p: 0.95}
        inducer:
          sampling: {temperature: 0.2}
        benchmark: {name: babyai}
    """)
    inducer = loader.load(path).config.inducer_model
    # Not a silent switch to the built-in default (OpenAI) model: the actor's model, cooler.
    assert (inducer.provider, inducer.name, inducer.base_url) == (
        "vllm",
        "Qwen/Qwen3.5-35B-A3B",
        "http://127.0.0.1:5012/v1",
    )
    assert (inducer.sampling.temperature, inducer.sampling.top_p) == (0.2, 0.95)
    other = write_config(
        """
        method: {name: opo}
        model:
          provider: vllm
          name: Qwen/Qwen3.5-35B-A3B
          base_url: "http://127.0.0.1:5012/v1"
          max_attempts: 3
        inducer: {provider: openai, name: gpt-5.4-mini}
        benchmark: {name: babyai}
    """,
        name="other.yaml",
    )
    inducer = loader.load(other).config.inducer_model
    # Another provider inherits no endpoint, but keeps provider-independent settings.
    assert (inducer.provider, inducer.base_url, inducer.max_attempts) == ("openai", None, 3)


def test_a_relative_script_in_a_config_file_is_found_next_to_that_file(
    loader: ConfigLoader, write_config: WriteConfig, tmp_path, monkeypatch
) -> None:
    config = write_config(
        """
        method: {name: react}
        benchmark: {name: babyai}
        model: {provider: scripted, script: answers/actor.yaml}
    """,
        name="demo.yaml",
    )
    (config.parent / "answers").mkdir()
    (config.parent / "answers" / "actor.yaml").write_text("- 'Action: turn left'\n")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)  # not where the config file is
    assert loader.load(config).config.model.script == str(
        config.parent.resolve() / "answers" / "actor.yaml"
    )
    # A --set path is a command-line path: relative to the working directory, as given.
    (elsewhere / "mine.yaml").write_text("- 'Action: turn left'\n")
    assert (
        loader.load(config, overrides=["model.script=mine.yaml"]).config.model.script == "mine.yaml"
    )


def test_a_quick_scienceworld_run_compiles_with_c1_only_and_keeps_the_files_jvm_options(
    loader: ConfigLoader, write_config: WriteConfig
) -> None:
    """A quick run's JVMs play a few short episodes each: C2's compiling would cost more CPU
    than it saves (benchmark.jvm_compiler says so); the file's heap and GC options stay."""
    from speedrunner.benchmarks.scienceworld.benchmark import ScienceWorldBenchmark

    path = write_config("""
        method: {name: react}
        benchmark: {name: scienceworld, jvm_options: "-Xmx2g -XX:+UseSerialGC"}
    """)
    full = loader.load(path, overrides=["benchmark.jvm_compiler=full"]).config.benchmark
    quick = loader.load(path, quick_test=True).config.benchmark
    assert (full.jvm_compiler, quick.jvm_compiler) == ("full", "quick")
    assert full.launch_jvm_options == "-Xmx2g -XX:+UseSerialGC"
    assert quick.launch_jvm_options == "-Xmx2g -XX:+UseSerialGC -XX:TieredStopAtLevel=1"
    env = ScienceWorldBenchmark(quick, rollouts=4, eval_episodes=2).make_env()  # starts no JVM
    assert env.jvm_options == quick.launch_jvm_options
    again = loader.load(
        path, quick_test=True, overrides=["benchmark.jvm_compiler=full"]
    ).config.benchmark
    assert again.launch_jvm_options == "-Xmx2g -XX:+UseSerialGC"


@pytest.mark.parametrize(
    ("schedule", "compiler"),
    [
        ([], "full"),  # the paper's: 350 episodes, 30 at once
        (["run.parallel_episodes=10"], "full"),  # as the t4 configs ship: 35 per env
        (
            [
                "run.rollouts=2",
                "run.sleep_every=2",
                "run.eval_every=2",
                "run.eval_episodes=10",
                "run.parallel_episodes=10",
            ],
            "quick",
        ),  # 22 episodes on 10 JVMs
        (
            [
                "run.rollouts=2",
                "run.sleep_every=2",
                "run.eval_every=2",
                "run.eval_episodes=10",
                "run.parallel_episodes=1",
            ],
            "full",
        ),  # the same 22 on one JVM
        (
            [
                "run.rollouts=4",
                "run.sleep_every=2",
                "run.eval_every=4",
                "run.eval_episodes=0",
                "run.parallel_episodes=1",
            ],
            "quick",
        ),  # 4 episodes, no evaluation
    ],
)
def test_auto_gives_short_jvm_lives_the_quick_compiler(
    loader: ConfigLoader, write_config: WriteConfig, schedule: list[str], compiler: str
) -> None:
    """The default ``auto`` settles by the schedule the run's envs will play, in the run's
    own benchmark (what the train entry point builds); a named compiler is kept."""
    from speedrunner.train_cli import build_benchmark

    path = write_config("method: {name: react}\nbenchmark: {name: scienceworld}\n")
    config = loader.load(path, overrides=schedule).config
    assert config.benchmark.jvm_compiler == "auto"
    assert build_benchmark(config).config.jvm_compiler == compiler
    for named in ("full", "quick"):
        pinned = loader.load(path, overrides=[*schedule, f"benchmark.jvm_compiler={named}"]).config
        assert build_benchmark(pinned).config.jvm_compiler == named
    babyai = loader.load(write_config("method: {name: react}\nbenchmark: {name: babyai}\n")).config
    assert build_benchmark(babyai).config == babyai.benchmark  # nothing to settle elsewhere
