"""``ManagedModel``: any provider, wrapped once with retries, cache/replay and accounting.

Order of one ``complete()``:

1. resolve sampling (config defaults + per-call overrides, all four always present; a
   caller's ``stop`` sequences only when :attr:`ManagedModel.sends_stop`);
2. hash the canonical request; look up ``(namespace, call_id)`` in the cache — same hash and
   ``model.replay`` on: return the stored response with ``cached=True`` (no request made);
   a different hash: warn and call for real;
3. call the provider through the retry layer, each attempt under the endpoint's
   concurrency semaphore (released while backing off), routed by a stable hash of
   ``call_id`` (vLLM replicas; the next replica on each retry);
4. price it, log it (the durable record), store it in the cache, add it to the totals.

Thread-safe: the runtime calls ``complete()`` from several episode threads at once.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import time
import uuid
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from speedrunner.core.config.schema import ModelConfig, Prices
from speedrunner.core.llm.accounting import CallLog, CallRecord, LLMTotals, Tally
from speedrunner.core.llm.cache import ResponseCache, request_hash
from speedrunner.core.llm.conversation import Conversation, as_conversation, message_dict
from speedrunner.core.llm.prices import cost_usd
from speedrunner.core.llm.provider import CallFailure, Provider, ProviderRequest
from speedrunner.core.llm.replicas import Replicas
from speedrunner.core.llm.retry import Backoff, call_with_retries, may_have_been_billed
from speedrunner.core.llm.slots import endpoint_limit
from speedrunner.core.llm.spend_cap import CallCharge, SpendCap
from speedrunner.core.llm.spent import usd
from speedrunner.core.llm.types import Completion, Message, Model, Purpose, ToolSpec

__all__ = ["SAMPLING_KEYS", "ManagedModel", "is_empty", "is_truncated", "tool_spec_bytes"]

log = logging.getLogger(__name__)

SAMPLING_KEYS = frozenset({"temperature", "top_p", "max_tokens", "seed", "stop"})
MAX_STOP = 4
"""Stop sequences per request: OpenAI's chat API takes at most 4 (Gemini 5)."""


def is_empty(c: Completion) -> bool:
    """No answer: no text and no tool call (a thinking model can spend all of max_tokens
    thinking)."""
    return not c.text.strip() and not c.tool_calls


def tool_spec_bytes(tools: Sequence[ToolSpec]) -> int:
    """UTF-8 bytes of the tool definitions as JSON (an upper bound on their input tokens)."""
    return sum(len(json.dumps(dataclasses.asdict(t), ensure_ascii=False).encode()) for t in tools)


def is_truncated(c: Completion) -> bool:
    """The provider stopped at the token cap; the answer may be cut off."""
    return c.finish_reason in ("length", "max_tokens")


class ManagedModel(Model):
    """The ``Model`` the runtime calls. Build it with ``speedrunner.core.llm.build_model``."""

    def __init__(
        self,
        config: ModelConfig,
        provider: Provider,
        *,
        namespace: str,
        prices: Prices | None,
        cache: ResponseCache | None = None,
        calls_log: CallLog | None = None,
        backoff: Backoff | None = None,
        log_full_messages: bool = False,
        spend_cap: SpendCap | None = None,
    ) -> None:
        self.config = config
        self.spend_cap = spend_cap
        """The spending caps every paid call is checked against before it is sent (None: none)."""
        self.provider = provider
        self.namespace = namespace
        self.prices = prices
        self.cache = cache
        self.calls_log = calls_log
        self.backoff = backoff or Backoff()
        self.log_full_messages = log_full_messages
        self._semaphores = {  # machine-wide under a sweep (SPEEDRUNNER_LLM_SLOTS_DIR)
            e: endpoint_limit(
                provider.name, e, config.max_concurrency, lease_s=4 * config.timeout_s + 60
            )
            for e in provider.endpoints
        }
        self._replicas = Replicas(provider.endpoints)
        self._tally = Tally()

    def __repr__(self) -> str:
        return (
            f"ManagedModel({self.provider.name}:{self.provider.model}, "
            f"namespace={self.namespace!r})"
        )

    # -- public ------------------------------------------------------------------------------
    def complete(
        self,
        messages: Sequence[Message],
        *,
        purpose: Purpose,
        call_id: str,
        tools: Sequence[ToolSpec] | None = None,
        **sampling: Any,
    ) -> Completion:
        """One model call (or its replay). Raises ``LLMError`` when it fails for good.

        Pass a :class:`Conversation` that you append to turn by turn (the actor does): the
        call then costs O(new turn) in this layer instead of O(history). ``tools`` offers
        native tools (only when :attr:`native_tools` is true); their definitions are part
        of the cache key and of the cost bound.
        """
        messages = as_conversation(messages)
        params = self.sampling_for(sampling)
        specs = tuple(tools or ())
        if specs and not self.native_tools:
            raise ValueError(
                f"{self.provider.name} model {self.provider.model!r} was offered native tools, but "
                f"native_tools is false (model.tool_protocol={self.config.tool_protocol!r}); "
                "callers check ManagedModel.native_tools first"
            )
        req_hash = request_hash(
            provider=self.provider.name,
            model=self.provider.model,
            messages=messages,
            sampling=params,
            options={
                "enable_thinking": self.config.enable_thinking,
                "thinking_level": self.config.thinking_level,
            },
            tools=specs,
        )
        replayed = self._try_replay(messages, purpose, call_id, req_hash, specs)
        if replayed is not None:
            return replayed
        if self.provider.name == "scripted":
            return self._call(messages, purpose, call_id, req_hash, params, specs)
        # A paid call: each attempt starts only if its worst case fits under the caps (else
        # SpendCapReached); an attempt that may have been billed unanswered stays counted.
        charge = CallCharge(self.spend_cap, self._max_cost(messages, params, specs))
        try:
            return self._call(messages, purpose, call_id, req_hash, params, specs, charge)
        finally:
            charge.release()

    @property
    def native_tools(self) -> bool:
        """``model.tool_protocol: native`` and a provider that speaks tool calls (OpenAI,
        vLLM, Gemini); the scripted provider has none, so methods fall back to text."""
        return self.config.tool_protocol == "native" and self.provider.supports_tools

    def totals(self) -> LLMTotals:
        """Running calls / tokens / money (thread-safe snapshot) for progress display."""
        return self._tally.snapshot()

    def close(self) -> None:
        if self.cache is not None:
            self.cache.close()

    @property
    def sends_stop(self) -> bool:
        """Whether a caller's ``stop`` sequences go out with its requests: only to a provider
        that accepts them for this model and endpoint (``accepts_stop``: OpenAI's reasoning
        models answer HTTP 400 to ``stop``; the scripted provider has none), and not when
        thinking is switched on: servers match stop sequences on the reasoning text too, and
        a cut thought would leave an answer with no action."""
        return (
            self.provider.accepts_stop()
            and self.config.enable_thinking is not True
            and self.config.thinking_level is None
        )

    def sampling_for(self, overrides: dict[str, Any]) -> dict[str, Any]:
        """Config sampling with per-call overrides; every key always present (seed may be None).
        ``stop`` is there only when it is sent (:attr:`sends_stop`): the sampling dict is what
        the request carries, and it is part of the cache key, so a replay or a resume
        matches exactly what was asked and a provider that gets no stop keeps its keys."""
        unknown = set(overrides) - SAMPLING_KEYS
        if unknown:
            raise TypeError(
                f"unknown sampling parameter(s) {sorted(unknown)}; allowed: {sorted(SAMPLING_KEYS)}"
            )
        stop = overrides.get("stop")
        if stop is not None and (
            isinstance(stop, str)
            or len(stop) > MAX_STOP
            or not all(isinstance(s, str) and s for s in stop)
        ):
            raise TypeError(
                f"stop must be a list of at most {MAX_STOP} non-empty strings, not {stop!r}"
            )
        params = self.config.sampling.model_dump()
        params.update(overrides)
        out = {k: params[k] for k in ("temperature", "top_p", "max_tokens", "seed")}
        if stop and self.sends_stop:
            out["stop"] = list(stop)
        return out

    # -- steps -------------------------------------------------------------------------------
    def _try_replay(
        self,
        messages: Conversation,
        purpose: Purpose,
        call_id: str,
        req_hash: str,
        tools: tuple[ToolSpec, ...] = (),
    ) -> Completion | None:
        if self.cache is None or not self.config.replay:
            return None
        entry = self.cache.get(self.namespace, call_id)
        if entry is None:
            return None
        if entry.request_hash != req_hash:
            log.warning(
                "cache: call %s in run %s was made before with a different request "
                "(hash %s..., now %s...); calling the model instead of replaying",
                call_id,
                self.namespace,
                entry.request_hash[:12],
                req_hash[:12],
            )
            return None
        completion = replace(entry.completion, cached=True)
        self.provider.on_replay(purpose, call_id)
        self._account(
            messages, purpose, call_id, completion, endpoint=None, attempts=0, tools=tools
        )
        return completion

    def _endpoint(self, call_id: str, attempt: int) -> str:
        return self._replicas.pick(call_id, attempt)

    def _call(
        self,
        messages: Conversation,
        purpose: Purpose,
        call_id: str,
        req_hash: str,
        params: dict[str, Any],
        tools: tuple[ToolSpec, ...] = (),
        charge: CallCharge | None = None,
    ) -> Completion:
        started = time.monotonic()
        used: dict[str, str] = {}
        scripted = self.provider.name == "scripted"
        worst = charge.worst if charge is not None else self._max_cost(messages, params, tools)
        if self.cache is not None and not scripted:  # write-ahead: a kill from here on is reported
            self.cache.mark_sent(self.namespace, call_id, purpose, worst)
        what = f"{self.provider.name} {self.provider.model} call {call_id!r} ({purpose})"
        logged: list[bool] = []

        def attempt(n: int) -> Any:
            if charge is not None and n > 1:
                charge.before_attempt()  # a retry after a possibly billed attempt reserves afresh
                if charge.unanswered and self.cache is not None:  # a kill now may cost all of them
                    bound = None if worst is None else worst * (charge.unanswered + 1)
                    self.cache.mark_sent(self.namespace, call_id, purpose, bound)
            endpoint = self._endpoint(call_id, n)
            used["endpoint"] = endpoint
            request = ProviderRequest(
                messages, params, purpose, call_id, endpoint, self.config.timeout_s, tools
            )
            with self._semaphores[endpoint]:
                try:
                    result = self.provider.call(request)
                except CallFailure as failure:
                    # a dead replica is skipped for a while
                    self._replicas.failed(endpoint, failure)
                    if charge is not None and may_have_been_billed(failure):
                        charge.unanswered_attempt()
                    raise
            self._replicas.answered(endpoint)
            return result

        def log_failure(error: str, endpoint: str | None, attempts: int) -> None:
            logged.append(True)
            if self.cache is not None:
                self.cache.mark_failed(self.namespace, call_id)
            if self.calls_log is not None:
                self.calls_log.append(
                    self._record(
                        messages,
                        purpose,
                        call_id,
                        None,
                        req_hash=req_hash,
                        sampling=params,
                        endpoint=endpoint,
                        attempts=attempts,
                        latency=time.monotonic() - started,
                        error=error,
                        tools=tools,
                        unknown_usd=0.0 if charge is None else charge.unknown_usd,
                    )
                )

        def on_failure(failure: CallFailure, attempts: int) -> None:
            self._tally.add_failure()
            log_failure(failure.describe(), failure.endpoint, attempts)

        try:
            result, attempts = call_with_retries(
                attempt,
                max_attempts=self.config.max_attempts,
                backoff=self.backoff,
                what=what,
                on_failure=on_failure,
            )
        except BaseException as e:
            if charge is not None and charge.unanswered and not logged:
                # stopped (cap, Ctrl-C) between attempts: what the earlier ones may have cost
                # is logged
                log_failure(
                    f"stopped after {charge.unanswered} unanswered attempt(s): {e}",
                    used.get("endpoint"),
                    charge.unanswered,
                )
            raise
        completion = Completion(
            text=result.text,
            reasoning=result.reasoning,
            usage=result.usage,
            latency_s=round(
                time.monotonic() - started, 6
            ),  # as logged: an answer restored from its row is this one
            cached=False,
            finish_reason=result.finish_reason,
            provider=self.provider.name,
            model=self.provider.model,
            scripted=scripted,
            cost_usd=0.0 if scripted else cost_usd(result.usage, self.prices),
            request_hash=req_hash,
            sampling=dict(params),
            tool_calls=tuple(result.tool_calls),
        )
        if is_empty(completion) or is_truncated(completion):
            log.info(
                "%s returned %s output (finish_reason=%s)",
                what,
                "empty" if is_empty(completion) else "truncated",
                completion.finish_reason,
            )
        over = 0.0 if charge is None else charge.answered(completion.cost_usd or 0.0)
        if over:
            log.warning(
                "%s cost %s, %s more than its worst case at max_tokens=%s: counted as billed; "
                "the spending cap is checked against it before the next call",
                what,
                usd(completion.cost_usd),
                usd(over),
                params.get("max_tokens"),
            )
        if self.cache is None and self.calls_log is None:  # nothing to record it in
            self._tally.add(completion)
            return completion
        record = self._record(
            messages,
            purpose,
            call_id,
            completion,
            req_hash=req_hash,
            sampling=completion.sampling,
            endpoint=used.get("endpoint"),
            attempts=attempts,
            latency=completion.latency_s,
            log_id=uuid.uuid4().hex,
            tools=tools,
            unknown_usd=0.0 if charge is None else charge.unknown_usd,
            over_reservation_usd=round(over, 9) if over else None,
        )
        # The row first: it is the durable record of the paid answer (fsynced) and holds all of
        # it; the cache's commit then ends the call's pending entry. A kill between the two is
        # repaired on resume from the row (journal.reconcile): replayed, never paid twice.
        if self.calls_log is not None:
            self.calls_log.append(record)
        if self.cache is not None:
            self.cache.commit_answer(self.namespace, call_id, completion)
        self._tally.add(completion)
        return completion

    def _max_cost(
        self, messages: Sequence[Message], params: dict[str, Any], tools: Sequence[ToolSpec] = ()
    ) -> float | None:
        """What this call can cost at most: every input byte a token (tool definitions
        included: the provider bills them as input), and all of max_tokens."""
        if self.prices is None:
            return None
        input_bytes = as_conversation(messages).input_bytes + tool_spec_bytes(tools)
        return (
            self.prices.input * input_bytes + self.prices.output * (params.get("max_tokens") or 0)
        ) / 1e6

    def _account(
        self,
        messages: Conversation,
        purpose: Purpose,
        call_id: str,
        c: Completion,
        *,
        endpoint: str | None,
        attempts: int,
        tools: tuple[ToolSpec, ...] = (),
    ) -> None:
        self._tally.add(c)
        if self.calls_log is not None:
            self.calls_log.append(
                self._record(
                    messages,
                    purpose,
                    call_id,
                    c,
                    req_hash=c.request_hash,
                    sampling=c.sampling,
                    endpoint=endpoint,
                    attempts=attempts,
                    latency=c.latency_s,
                    tools=tools,
                )
            )

    def _record(
        self,
        messages: Conversation,
        purpose: Purpose,
        call_id: str,
        c: Completion | None,
        *,
        req_hash: str,
        sampling: dict[str, Any],
        endpoint: str | None,
        attempts: int,
        latency: float,
        error: str | None = None,
        log_id: str | None = None,
        tools: tuple[ToolSpec, ...] = (),
        unknown_usd: float = 0.0,
        over_reservation_usd: float | None = None,
    ) -> CallRecord:
        """The call's log row, whole: every path (answered, replayed, failed) builds it here."""
        usage = c.usage if c is not None else None
        return CallRecord(
            ts=time.time(),
            namespace=self.namespace,
            purpose=purpose,
            call_id=call_id,
            provider=self.provider.name,
            model=self.provider.model,
            endpoint=endpoint,
            request_hash=req_hash,
            messages_sha256=messages.digest(),
            n_messages=len(messages),
            last_message=messages[-1].content if messages else None,
            response=c.text if c is not None else None,
            reasoning=c.reasoning if c is not None else None,
            usage={
                "input_uncached": usage.input_uncached if usage else 0,
                "input_cached": usage.input_cached if usage else 0,
                "output": usage.output if usage else 0,
                "reasoning": usage.reasoning if usage else 0,
            },
            cost_usd=c.cost_usd if c is not None else None,
            spent_usd=(0.0 if c.cached else c.cost_usd) if c is not None else 0.0,
            latency_s=round(latency, 6),
            cache_hit=bool(c and c.cached),
            scripted=self.provider.name == "scripted",
            finish_reason=c.finish_reason if c is not None else None,
            empty=is_empty(c) if c is not None else False,
            truncated=is_truncated(c) if c is not None else False,
            sampling=dict(sampling),
            attempts=attempts,
            error=error,
            log_id=log_id,
            messages=[message_dict(m) for m in messages] if self.log_full_messages else None,
            tool_calls=[
                {
                    "id": t.id,
                    "name": t.name,
                    "arguments": t.arguments,
                    **({"signature": t.signature} if t.signature else {}),
                }
                for t in c.tool_calls
            ]
            if c is not None and c.tool_calls
            else None,
            tools_offered=[t.name for t in tools] if tools else None,
            unknown_usd=unknown_usd,
            over_reservation_usd=over_reservation_usd,
        )
