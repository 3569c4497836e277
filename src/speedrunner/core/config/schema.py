"""Typed sections of a run configuration file.

Every field has a docstring: ``speedrunner validate-config`` and the error for a wrong
key both show it. Method- and benchmark-specific parameters live in subclasses of
``MethodConfig`` / ``BenchmarkConfig`` that methods and benchmarks register; ``core``
knows neither by name.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, ClassVar, Literal, Self

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializeAsAny,
    field_validator,
    model_validator,
)


class Section(BaseModel):
    """Base for config sections: unknown keys are errors; docstrings become descriptions.

    Strict types: YAML already typed every value, so ``yes`` for a number is an error
    rather than a silent 1.
    """

    model_config = ConfigDict(
        extra="forbid", strict=True, use_attribute_docstrings=True, validate_default=True
    )

    OPERATIONAL: ClassVar[frozenset[str]] = frozenset()
    """Fields that change how a run executes but not its results (endpoints, timeouts,
    parallelism). Only these may change when a run is resumed (``--resume DIR --set ...``)."""


class RunSection(Section):
    OPERATIONAL = frozenset({"parallel_episodes", "output_root", "sandbox", "max_cost_usd"})

    seed: int = 0
    """Run seed; every episode's seed derives from (seed, split, index)."""
    rollouts: int = Field(200, ge=1)
    """Number of online training episodes."""
    sleep_every: int = Field(10, ge=1)
    """Training episodes per batch; a sleep phase follows each batch."""
    eval_every: int = Field(50, ge=1)
    """Evaluate on the held-out set at rollout 0 and every this many rollouts."""
    eval_episodes: int = Field(30, ge=0)
    """Size of the fixed held-out evaluation set (0 disables evaluation)."""
    eval_seed: int = 0
    """Seed of the held-out set. Independent of ``seed``, so every method,
    checkpoint and run seed is evaluated on the same episodes."""
    parallel_episodes: int | Literal["all"] = "all"
    """Episodes of one batch (or one evaluation) that run concurrently: a number, or ``all``
    (every episode of the batch or evaluation at once; calls still obey ``model.max_concurrency``).
    Lower it when envs are heavy (ScienceWorld: one JVM per parallel episode)."""

    @field_validator("parallel_episodes")
    @classmethod
    def _at_least_one(cls, value: int | str) -> int | str:
        if isinstance(value, int) and value < 1:
            raise ValueError("parallel_episodes must be at least 1, or 'all'")
        return value

    def workers(self, episodes: int) -> int:
        """Threads for ``episodes`` episodes played together (a batch or an evaluation)."""
        limit = episodes if self.parallel_episodes == "all" else self.parallel_episodes
        return max(1, min(limit, episodes))

    @property
    def peak_parallel_episodes(self) -> int:
        """The most episodes (envs) this run ever plays at once."""
        return self.workers(max(self.sleep_every, self.eval_episodes))

    @property
    def evaluations(self) -> int:
        """How many evaluations the run makes: at rollout 0, every ``eval_every`` and at the end
        (none when ``eval_episodes`` is 0)."""
        if self.eval_episodes == 0:
            return 0
        return len(set(range(0, self.rollouts + 1, self.eval_every)) | {self.rollouts})

    @property
    def episodes_per_env(self) -> float:
        """How many episodes each env of the run plays on average: training and every
        evaluation over ``peak_parallel_episodes``."""
        return (self.rollouts + self.evaluations * self.eval_episodes) / self.peak_parallel_episodes

    episode_wall_clock_s: float = Field(1800.0, gt=0)
    """Wall-clock cap per episode, in seconds (the paper: 30 minutes)."""
    output_root: str = "runs"
    """Root under which run directories are created."""
    sandbox: Literal["auto", "bwrap", "unshare", "rlimits"] = "auto"
    """Isolation of LLM-written code: the best tier the machine offers (auto), or one named tier."""
    max_cost_usd: float | None = Field(None, gt=0)
    """Spending cap of the run in USD (null: none). Before each paid call the run checks that
    spend so far + the worst case of the calls in flight + this call's worst case stays within
    it; otherwise it stops before the call with status budget_reached (exit code 3). Raise it
    on --resume (--set run.max_cost_usd=...) to go on exactly where it stopped. Needs a price
    for every model of the run. See docs/spending.md."""

    @model_validator(mode="after")
    def _schedule_fits(self) -> RunSection:
        if self.eval_every % self.sleep_every != 0:
            raise ValueError(
                f"eval_every ({self.eval_every}) must be a multiple of sleep_every "
                f"({self.sleep_every}): evaluation happens between batches"
            )
        if self.rollouts % self.sleep_every != 0:
            raise ValueError(
                f"rollouts ({self.rollouts}) must be a multiple of sleep_every ({self.sleep_every})"
            )
        return self


class Sampling(Section):
    """Sampling parameters; always sent explicitly and logged with every call."""

    temperature: float = Field(1.0, ge=0)
    """Sampling temperature."""
    top_p: float = Field(1.0, gt=0, le=1)
    """Nucleus sampling mass."""
    max_tokens: int = Field(4096, ge=1)
    """Cap on output tokens per call (reasoning included)."""
    seed: int | None = None
    """Provider-side sampling seed, where the provider supports one."""


class Prices(Section):
    """USD per 1M tokens. Cost = input*uncached + cached_input*cached + output*output."""

    input: float = Field(ge=0)
    """Price of uncached input tokens."""
    cached_input: float = Field(ge=0)
    """Price of cached (prefix-cache hit) input tokens."""
    output: float = Field(ge=0)
    """Price of output tokens, reasoning included."""


class ModelConfig(Section):
    """One model endpoint (the actor's, or the sleep-phase inducer's)."""

    OPERATIONAL = frozenset(
        {
            "base_url",
            "api_key_env",
            "timeout_s",
            "max_attempts",
            "max_concurrency",
            "context_tokens",
        }
    )

    provider: Literal["openai", "vllm", "gemini", "scripted"] = "openai"
    """Which API: openai, vllm (any OpenAI-compatible server), gemini, or scripted (offline)."""
    name: str = "gpt-5.4-mini"
    """Model name as the provider knows it. A scripted model's name always starts with
    "scripted" (e.g. "scripted-uniform"); any other name becomes "scripted", so no file of a
    scripted run carries a real model's name."""
    base_url: str | list[str] | None = None
    """Endpoint URL; for vllm one URL or a list of data-parallel replicas. Unset: OPENAI_BASE_URL
    (openai) or GOOGLE_GEMINI_BASE_URL (gemini), else the public API."""
    api_key_env: str | None = None
    """Environment variable holding the API key (default: OPENAI_API_KEY; gemini: GOOGLE_API_KEY,
    else GEMINI_API_KEY)."""
    sampling: Sampling = Field(default_factory=Sampling)
    """Sampling parameters."""
    prices: Prices | None = None
    """USD per 1M tokens; null looks the model up in the built-in price table
    (unknown -> cost unknown)."""
    context_tokens: int | None = Field(None, ge=1)
    """The model's context window in tokens, for ``speedrunner estimate``: no call's input can
    exceed it, which bounds the worst case of long episodes. Null looks the model up in the
    built-in table (speedrunner/data/context_windows.yaml); a model in neither gets no bound.
    For a vLLM server, its --max-model-len. Never changes a run's results."""
    enable_thinking: bool | None = None
    """Qwen-style thinking switch sent as chat_template_kwargs; null leaves the server default."""
    thinking_level: str | None = None
    """Gemini 3 thinking level (e.g. "low", "high"); null leaves the API default."""
    timeout_s: float = Field(120.0, gt=0)
    """Per-call timeout in seconds."""
    max_attempts: int = Field(6, ge=1)
    """Attempts per call for retryable failures (429, 5xx, timeouts, connection errors)."""
    max_concurrency: int = Field(32, ge=1)
    """Concurrent in-flight calls per endpoint (enough for a whole evaluation at once; lower it for
    a strict rate limit — 429 answers are retried with backoff either way)."""
    replay: bool = True
    """Replay responses already paid for (resume); false always calls the provider."""
    script: str | None = None
    """scripted provider only: path to a YAML/JSON list of responses (null: built-in policy)."""
    tool_protocol: Literal["text", "native"] = "text"
    """How an agentic inducer (SpeedRunner's tools) calls tools and how Voyager's action agent
    hands in its skill: "text" (a `Tool:` line and a fenced block / a `Code:` block; every
    provider) or "native" (OpenAI tools / Gemini function calls / vLLM tool calls: the
    inducer's tools, or one `submit_skill(plan, code)`; falls back to text on the scripted
    provider, which has no tools). The other prompts (actor, ASI, OPO, curriculum, critic)
    are text under both."""

    @field_validator("api_key_env")
    @classmethod
    def _env_var_name(cls, v: str | None) -> str | None:
        # A key pasted here would be copied into config.resolved.json; refuse it.
        if v is not None and not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", v):
            raise ValueError(
                "api_key_env is the NAME of the environment variable that holds the key "
                "(e.g. OPENAI_API_KEY), never the key itself"
            )
        return v

    @model_validator(mode="after")
    def _provider_fields(self) -> ModelConfig:
        if self.provider == "vllm" and not self.base_url:
            raise ValueError(
                "provider 'vllm' needs base_url, e.g. http://127.0.0.1:5012/v1 (see "
                "scripts/run_server.sh)"
            )
        if isinstance(self.base_url, list) and self.provider != "vllm":
            raise ValueError(
                f"a list of base_urls is only for provider 'vllm', not {self.provider!r}"
            )
        if self.script is not None and self.provider != "scripted":
            raise ValueError(f"'script' is only for provider 'scripted', not {self.provider!r}")
        if self.provider == "scripted" and not self.name.startswith("scripted"):
            # e.g. --set model.provider=scripted on a gpt config: results must not read as gpt's
            self.name = "scripted"
        return self


@dataclass(frozen=True)
class SkillCaps:
    """The caps a method config puts on LLM-written skills; ``None``: no cap (a call's action
    cap: the episode's remaining budget; its time: derived from its action cap)."""

    max_skill_actions: int | None = None
    skill_timeout_s: float | None = None
    max_functions: int | None = None
    max_codebook_chars: int | None = None


class MethodConfig(Section):
    """Base of every method's section; the method's own class adds its parameters and
    overrides the hooks below that concern it (the defaults: nothing to check, no cap)."""

    name: str
    """Method name; it alone decides the method's behaviour."""

    def check_runnable(self) -> None:
        """Before any run directory is made: raise a ``SpeedRunnerError`` naming the fix if the
        method cannot run here (Voyager: its embedding key is unset)."""
        return None

    def check_prices(self) -> None:
        """With a spending cap set: raise ``ConfigError`` if the method pays an endpoint of its
        own that has no price (Voyager's embeddings), since no cap could bound its calls."""
        return None

    def skill_caps(self) -> SkillCaps:
        """The caps on the skills this method's knowledge holds (the runner and the sandbox
        enforce them; the skill writer is shown them)."""
        return SkillCaps()

    def analysis_code_timeout_s(self) -> float | None:
        """Wall-clock cap of the analysis code the sleep phase runs over the run directory;
        ``None``: it runs none (only then may ``run.sandbox`` be weaker than skills need)."""
        return None

    def own_work_caps(self) -> list[str]:
        """The caps on the sleep phase's own work, as phrases its prompt shows (turns, tool
        output, new functions per answer); none by default."""
        return []


class BenchmarkConfig(Section):
    """Base of every benchmark's section; the benchmark's own class adds its parameters."""

    name: str
    """Benchmark name."""
    task_set: str
    """Which tasks to train and evaluate on."""
    max_llm_calls: int | None = Field(None, ge=1)
    """Per-episode budget of LLM calls (BabyAI 30, ScienceWorld 100); null = unlimited."""
    max_env_actions: int | None = Field(None, ge=1)
    """Per-episode budget of environment actions (Crafter 2,000); null = unlimited."""

    def for_run(self, run: RunSection) -> Self:
        """This section with its schedule-dependent choices made for ``run`` (nothing to make
        here; ScienceWorld picks its JVMs' compiler). The train entry point calls it once."""
        return self

    @model_validator(mode="after")
    def _some_budget(self) -> BenchmarkConfig:
        if self.max_llm_calls is None and self.max_env_actions is None:
            raise ValueError("set max_llm_calls or max_env_actions: an episode needs a budget")
        return self


class SpeedrunSection(Section):
    """The speedrun target: the first rollout at which the method reaches it is recorded
    (``speedrun.json``, written by ``core/runtime/speedrun.py``; see SPEEDRUN.md)."""

    OPERATIONAL = frozenset({"results_dir"})

    metric: Literal["success", "progress", "train_success_rolling"] = "success"
    """What is compared with the target: the evaluation's mean success or progress (checked at each
    evaluation), or train_success_rolling, the success rate of the last ``window`` training episodes
    (checked after every batch)."""
    target: float = Field(0.9, ge=0, le=1)
    """Threshold on the metric: reached when the metric is at least this."""
    window: int = Field(20, ge=1)
    """Training episodes in the rolling window of train_success_rolling
    (ignored by the other metrics)."""
    results_dir: str | None = None
    """Folder that collects a copy of every run's speedrun.json as <result_id>.json (what
    ``speedrunner leaderboard append`` reads); null means speedrun/ in the run's own output root
    (beside the run directory for a run placed with --run_dir), never the shell's working
    directory."""

    @property
    def episode_metric(self) -> Literal["success", "progress"]:
        """The per-episode field the metric is built from
        (progress displays and final evaluations)."""
        return "progress" if self.metric == "progress" else "success"


class WandbSection(Section):
    """Weights & Biases logging (``pip install -e ".[wandb]"``). The run's own files stay the
    record; W&B gets a copy of what they hold, one W&B run per SpeedRunner run."""

    OPERATIONAL = frozenset({"project", "entity", "group", "tags", "mode"})

    project: str = Field(min_length=1)
    """W&B project the run is logged to."""
    entity: str | None = None
    """W&B entity (user or team); null: your default entity."""
    group: str | None = None
    """W&B group; null: the experiment (``<benchmark>/<method>-<model>-<task set>``),
    so a sweep's seeds group together."""
    tags: list[str] = Field(default_factory=list)
    """W&B tags added to the run (the method, benchmark and 'scripted' are always added)."""
    mode: Literal["online", "offline"] = "online"
    """online uploads as the run goes (needs ``wandb login`` or WANDB_API_KEY); offline writes W&B's
    files under the run directory for ``wandb sync`` later. WANDB_MODE=offline in the environment
    also forces offline."""


class LoggingSection(Section):
    """Experiment tracking beside the run's own files. Absent: nothing is logged anywhere else."""

    OPERATIONAL = frozenset({"wandb"})

    wandb: WandbSection | None = None
    """Weights & Biases; null: off."""


class RunConfig(Section):
    """A whole experiment: one method x model x benchmark task set x seed."""

    OPERATIONAL = frozenset({"logging"})

    run: RunSection = Field(default_factory=RunSection)
    """Schedule, seed, parallelism, output location."""
    method: SerializeAsAny[MethodConfig]
    """Method name and its parameters."""
    model: ModelConfig = Field(default_factory=ModelConfig)
    """The actor model."""
    inducer: ModelConfig | None = None
    """The sleep-phase model: null uses the actor's; keys given here deep-merge over the actor's
    model section (a different provider inherits only sampling and retry settings)."""
    benchmark: SerializeAsAny[BenchmarkConfig]
    """Benchmark name, task set, budgets, environment parameters."""
    speedrun: SpeedrunSection = Field(default_factory=SpeedrunSection)
    """Speedrun target."""
    logging: LoggingSection | None = None
    """Experiment tracking (Weights & Biases); null: none. Never decides results,
    so it may be added or changed on --resume."""

    @model_validator(mode="after")
    def _window_fits(self) -> RunConfig:
        if (
            self.speedrun.metric == "train_success_rolling"
            and self.speedrun.window > self.run.rollouts
        ):
            raise ValueError(
                f"speedrun.window ({self.speedrun.window}) exceeds run.rollouts "
                f"({self.run.rollouts}): the rolling training success could never be measured; "
                "lower speedrun.window"
            )
        return self

    @property
    def inducer_model(self) -> ModelConfig:
        """The model the sleep phase uses (the actor's unless ``inducer`` is set)."""
        return self.inducer or self.model


def operational_paths(config: Section, prefix: tuple[str, ...] = ()) -> set[tuple[str, ...]]:
    """Dotted paths (as tuples) of every operational field in ``config``,
    nested sections included."""
    paths = {(*prefix, name) for name in config.OPERATIONAL}
    for name in type(config).model_fields:
        value = getattr(config, name)
        if isinstance(value, Section):
            paths |= operational_paths(value, (*prefix, name))
    return paths


def results_view(config: RunConfig) -> dict[str, Any]:
    """The resolved config without operational fields: what decides a run's results."""
    data = config.model_dump(mode="json")
    for path in operational_paths(config):
        node = data
        for part in path[:-1]:
            node = node.get(part) if isinstance(node, dict) else None
        if isinstance(node, dict):
            node.pop(path[-1], None)
    if data["speedrun"]["metric"] != "train_success_rolling":
        # ``window`` means nothing to the other metrics: runs that differ only there are alike.
        data["speedrun"].pop("window", None)
    return data
