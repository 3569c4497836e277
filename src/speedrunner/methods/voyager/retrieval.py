"""Skill retrieval over LLM-written descriptions: embeddings when configured, else BM25.

Voyager ranks its skills by the similarity of their descriptions to the task. Two rankers:

- ``EmbeddingRanker``: an OpenAI-compatible ``/embeddings`` endpoint (OpenAI, a vLLM
  embedding model, or Gemini's OpenAI-compatible URL), cosine similarity. Every vector is
  stored in ``voyager/embeddings.jsonl`` (model, text hash, tokens, cost, the rollout it
  was paid for) the moment it is paid for, so a resumed run reads it back instead of paying
  again, and the rollout's cost includes it (also after a resume). Each paid request is also
  a row of the run's ``llm_calls.jsonl`` (purpose ``embedding``, call id
  ``embedding/<rollout>/<request hash>``), so money spent sums over that file as for every
  other call.
- ``BM25Ranker``: local and lexical, ``rank_bm25.BM25Okapi``. Chosen over ``bm25s``: one
  small pure-Python module whose only dependency (numpy) the project already has, stable
  for years, and our corpora are a few hundred descriptions at most, where bm25s's sparse
  matrices (and scipy) buy nothing. No model or data is downloaded at run time.

Ties are broken by name, so the same library and query give the same ranking anywhere.
"""

from __future__ import annotations

import hashlib
import os
import re
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Protocol

import numpy as np

from speedrunner.core.atomic import append_jsonl, read_jsonl, repair_jsonl
from speedrunner.core.llm.accounting import CallLog, CallRecord
from speedrunner.core.llm.spend_cap import SpendCap
from speedrunner.errors import ConfigError, LLMError

__all__ = ["BM25Ranker", "EmbeddingRanker", "Ranker", "tokenize", "top_k"]

EMBEDDINGS_FILE = "embeddings.jsonl"


class Ranker(Protocol):
    kind: str

    def scores(self, query: str, documents: Sequence[str], charge_to: str) -> list[float]:
        """One similarity per document (higher is more relevant); anything paid for is
        charged to ``charge_to`` (a rollout's call-id prefix, e.g. ``train/0003``)."""
        ...

    def cost_for(self, charge_to: str) -> float | None:
        """USD paid for ``charge_to`` (0 when nothing was; ``None`` when a price is unknown)."""
        ...


def tokenize(text: str) -> list[str]:
    """Lower-case words; ``collect_wood`` and ``collectWood`` split into their words."""
    text = re.sub(r"([a-z])([A-Z])", r"\1 \2", text)
    return re.findall(r"[a-z0-9]+", text.lower().replace("_", " "))


def top_k(
    ranker: Ranker,
    query: str,
    descriptions: Mapping[str, str],
    k: int,
    charge_to: str = "knowledge",
) -> list[str]:
    """The names of the ``min(k, len(descriptions))`` best descriptions for ``query``."""
    names = sorted(descriptions)
    k = min(k, len(names))
    if k <= 0:
        return []
    scores = ranker.scores(query, [descriptions[n] for n in names], charge_to)
    order = sorted(range(len(names)), key=lambda i: (-scores[i], names[i]))
    return [names[i] for i in order[:k]]


class BM25Ranker:
    kind = "bm25"

    def cost_for(self, charge_to: str) -> float | None:
        return 0.0

    def scores(self, query: str, documents: Sequence[str], charge_to: str = "") -> list[float]:
        from rank_bm25 import BM25Okapi

        corpus = [tokenize(d) or ["_"] for d in documents]
        return [float(s) for s in BM25Okapi(corpus).get_scores(tokenize(query))]


class EmbeddingRanker:
    """Cosine similarity of embeddings; each distinct text is embedded (and paid) once per run."""

    kind = "embeddings"

    def __init__(
        self,
        *,
        model: str,
        base_url: str | None,
        api_key_env: str,
        timeout_s: float,
        price_per_million: float | None,
        store_dir: Path,
        calls_log: CallLog | None = None,
        namespace: str = "",
        spend_cap: SpendCap | None = None,
    ) -> None:
        key = os.environ.get(api_key_env)
        if not key:
            raise ConfigError(
                f"method.embedding needs an API key in ${api_key_env} (for a local vLLM "
                "server any value, e.g. EMPTY); or remove method.embedding to rank with BM25"
            )
        from openai import OpenAI

        self.model = model
        self.price = price_per_million
        self.path = Path(store_dir) / EMBEDDINGS_FILE
        self.base_url = base_url
        self.calls_log, self.namespace = calls_log, namespace
        self.spend_cap = (
            spend_cap  # the run's spending cap: an embedding request is a paid call too
        )
        self._client = OpenAI(api_key=key, base_url=base_url, timeout=timeout_s, max_retries=3)
        self._lock = threading.Lock()
        repair_jsonl(self.path)  # a kill may have torn the last line; that vector is asked again
        rows = read_jsonl(self.path)
        self._vectors: dict[str, np.ndarray] = {
            row["key"]: np.asarray(row["vector"], dtype=float) for row in rows
        }
        self._costs: dict[str, list[float | None]] = {}
        for row in rows:
            self._costs.setdefault(row["charged_to"], []).append(row["cost_usd"])

    def _key(self, text: str) -> str:
        return hashlib.sha256(f"{self.model}\0{text}".encode()).hexdigest()

    def cost_for(self, charge_to: str) -> float | None:
        costs = self._costs.get(charge_to, [])
        return None if any(c is None for c in costs) else float(sum(costs))  # type: ignore[arg-type]

    def embed(self, texts: Sequence[str], charge_to: str = "knowledge") -> list[np.ndarray]:
        with self._lock:
            missing = list(dict.fromkeys(t for t in texts if self._key(t) not in self._vectors))
            if missing:
                started = time.monotonic()
                reservation = None
                if (
                    self.spend_cap is not None and self.spend_cap.active
                ):  # every input byte a token at most
                    worst = (
                        sum(len(t.encode()) for t in missing) * self.price / 1e6
                        if self.price is not None
                        else float("inf")
                    )
                    reservation = self.spend_cap.reserve(worst)
                try:
                    response = self._client.embeddings.create(model=self.model, input=missing)
                except BaseException as e:
                    if reservation is not None and self.spend_cap is not None:
                        self.spend_cap.settle(
                            reservation, 0.0
                        )  # failed: logged as spending nothing
                    if isinstance(
                        e, Exception
                    ):  # the SDK's errors: the run stops, resumable, nothing lost
                        raise LLMError(
                            f"embedding endpoint failed for model {self.model!r}: {e}"
                        ) from e
                    raise
                tokens = int(getattr(response.usage, "prompt_tokens", 0) or 0)
                cost = None if self.price is None else tokens * self.price / 1e6
                if reservation is not None and self.spend_cap is not None:
                    self.spend_cap.settle(reservation, cost or 0.0)
                elif self.spend_cap is not None:
                    self.spend_cap.add_spent(cost or 0.0)
                self._log_call(missing, charge_to, tokens, cost, time.monotonic() - started)
                for i, (text, item) in enumerate(
                    zip(missing, sorted(response.data, key=lambda d: d.index), strict=True)
                ):
                    key = self._key(text)
                    row = {
                        "key": key,
                        "model": self.model,
                        "charged_to": charge_to,
                        "text_sha256": hashlib.sha256(text.encode()).hexdigest(),
                        "tokens": tokens if i == 0 else 0,
                        "cost_usd": cost if i == 0 else 0.0,
                        "vector": list(item.embedding),
                    }
                    append_jsonl(self.path, row)
                    self._costs.setdefault(charge_to, []).append(row["cost_usd"])
                    self._vectors[key] = np.asarray(item.embedding, dtype=float)
            return [self._vectors[self._key(t)] for t in texts]

    def _log_call(
        self,
        texts: Sequence[str],
        charge_to: str,
        tokens: int,
        cost: float | None,
        latency_s: float,
    ) -> None:
        """The request's row in ``llm_calls.jsonl``, written before its vectors are stored (a kill
        in between re-pays the request and logs it again: the file never under-counts)."""
        if self.calls_log is None:
            return
        digest = hashlib.sha256("\0".join([self.model, *texts]).encode()).hexdigest()
        self.calls_log.append(
            CallRecord(
                ts=time.time(),
                namespace=self.namespace,
                purpose="embedding",
                call_id=f"embedding/{charge_to}/{digest[:12]}",
                provider="openai-embeddings",
                model=self.model,
                endpoint=self.base_url,
                request_hash=digest,
                messages_sha256=digest,
                n_messages=len(texts),
                last_message=None,
                response=None,
                reasoning=None,
                usage={"input_uncached": tokens, "input_cached": 0, "output": 0, "reasoning": 0},
                cost_usd=cost,
                spent_usd=cost,
                latency_s=round(latency_s, 4),
                cache_hit=False,
                scripted=False,
                finish_reason=None,
                empty=False,
                truncated=False,
                sampling={},
                attempts=1,
            )
        )

    def scores(
        self, query: str, documents: Sequence[str], charge_to: str = "knowledge"
    ) -> list[float]:
        vectors = self.embed([query, *documents], charge_to)
        q = vectors[0] / (np.linalg.norm(vectors[0]) or 1.0)
        return [float(q @ (d / (np.linalg.norm(d) or 1.0))) for d in vectors[1:]]
