"""How much of each actor prompt a provider prefix cache can reuse.

Plays one Crafter episode with the scripted model through the real runtime, records every
actor call's messages exactly as sent, and prints, side by side, the fraction of each
call's prompt that is a prefix of the next call's prompt: for our append-only rendering,
and for the same prompts with a per-turn header line (the kind of change that defeats
prefix caching). 1.000 means the whole previous prompt is reused.
"""

from __future__ import annotations

from speedrunner.benchmarks.crafter.benchmark import CrafterBenchmark
from speedrunner.benchmarks.crafter.config import CrafterConfig
from speedrunner.core.benchmark import Budget
from speedrunner.core.config.schema import ModelConfig
from speedrunner.core.llm.build import build_model
from speedrunner.core.method import Knowledge
from speedrunner.core.runtime.episode import EpisodeContext, run_episode


class Recording:
    def __init__(self, model) -> None:
        self.model, self.prompts = model, []

    def complete(self, messages, **kwargs):
        self.prompts.append("".join(f"<{m.role}>{m.content}" for m in messages))
        return self.model.complete(messages, **kwargs)


def shared_prefix(a: str, b: str) -> int:
    n, i = min(len(a), len(b)), 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


def reuse(prompts: list[str]) -> float:
    pairs = list(zip(prompts, prompts[1:], strict=False))
    return sum(shared_prefix(a, b) / len(a) for a, b in pairs) / len(pairs)


def measure(max_env_actions: int = 40) -> tuple[float, float, int, float]:
    """Prefix reuse of our prompts and of headed prompts, the number of calls, mean prompt chars."""
    benchmark = CrafterBenchmark(CrafterConfig(), rollouts=1, eval_episodes=1)
    env = benchmark.make_env()
    model = Recording(
        build_model(ModelConfig(provider="scripted", name="uniform"), namespace="bench")
    )
    knowledge = Knowledge(1, "Strategy guide", "Collect wood first, then place a table. " * 20)
    run_episode(
        env,
        benchmark.train_episode(0, 0),
        EpisodeContext(model, knowledge, Budget(None, max_env_actions, 600)),
    )
    env.close()
    ours = model.prompts
    headed = [p.replace("<user>", f"<user>Turn {i}.\n", 1) for i, p in enumerate(ours)]
    return reuse(ours), reuse(headed), len(ours), sum(map(len, ours)) / len(ours)


def main() -> None:
    ours, headed, calls, chars = measure()
    print(f"actor calls: {calls}; mean prompt chars: {chars:.0f}")
    print(f"prefix reused, append-only rendering (ours): {ours:.3f}")
    print(f"prefix reused, with a per-turn header line:  {headed:.3f}")
    print(f"ratio: {ours / headed:.1f}x")


if __name__ == "__main__":
    main()
