"""The one retry layer for every provider (the SDKs' own retries are switched off).

Retried: 429, 5xx, timeouts, dropped connections, garbled bodies — with jittered
exponential backoff, or the server's ``Retry-After`` (capped, so a hostile or buggy header
cannot park a run for an hour). Never retried: 400/401/403/404 — another try cannot fix a
bad request or a bad key. After ``max_attempts`` the failure becomes an ``LLMError`` that says
what happened (status, attempts, endpoint) and what to do.
"""

from __future__ import annotations

import logging
import random
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

import httpx2
import tenacity

from speedrunner.core.interrupt import check_stop, sleep_unless_stopped
from speedrunner.core.llm.provider import CallFailure
from speedrunner.core.redact import scrub
from speedrunner.errors import ContextLengthError, LLMError

__all__ = ["Backoff", "call_with_retries", "may_have_been_billed"]

log = logging.getLogger(__name__)
T = TypeVar("T")


@dataclass(frozen=True)
class Backoff:
    """Wait between attempts. Tests pass tiny values; production keeps the defaults."""

    initial_s: float = 1.0
    """Base of the exponential backoff (attempt n waits up to initial_s * 2**(n-1))."""
    max_s: float = 60.0
    """Cap on one exponential wait."""
    retry_after_cap_s: float = 120.0
    """Cap on an honoured Retry-After value."""

    def wait_s(self, failure: BaseException | None, attempt: int) -> float:
        """Retry-After (capped, plus up to 10% jitter) when given, else full-jitter exponential."""
        if isinstance(failure, CallFailure) and failure.retry_after is not None:
            base = min(failure.retry_after, self.retry_after_cap_s)
            return base + random.uniform(0, 0.1 * base)
        ceiling = min(self.max_s, self.initial_s * 2 ** (attempt - 1))
        return random.uniform(ceiling / 2, ceiling)


def may_have_been_billed(failure: CallFailure) -> bool:
    """The attempt reached the provider and got no answer it could read: a timeout, a
    connection lost after the request went out, a garbled body. The provider may have run
    (and billed) it. An HTTP error status, and a connection never made, are not billed."""
    if failure.kind not in ("timeout", "connection", "malformed"):
        return False
    cause: BaseException | None = failure
    while cause is not None:  # the SDK's error wraps the transport's
        if isinstance(cause, httpx2.ConnectError | httpx2.ConnectTimeout | ConnectionRefusedError):
            return False
        cause = cause.__cause__ or cause.__context__
    return True


def _is_retryable(e: BaseException) -> bool:
    return isinstance(e, CallFailure) and e.retryable


def call_with_retries(
    attempt_fn: Callable[[int], T],
    *,
    max_attempts: int,
    backoff: Backoff,
    what: str,
    on_failure: Callable[[CallFailure, int], None] | None = None,
) -> tuple[T, int]:
    """Run ``attempt_fn(attempt_number)`` until it succeeds; return (result, attempts used).

    ``what`` names the call in messages (e.g. ``"openai gpt-5.4-mini call train/0/actor/3"``).
    ``on_failure(failure, attempts)`` is told about the final failure before ``LLMError`` is
    raised (the accounting layer logs it). Exceptions other than ``CallFailure`` (our bugs,
    ``LLMError`` from a provider) pass through untouched.
    """

    def wait(state: tenacity.RetryCallState) -> float:
        exc = state.outcome.exception() if state.outcome else None
        return backoff.wait_s(exc, state.attempt_number)

    def before_sleep(state: tenacity.RetryCallState) -> None:
        exc = state.outcome.exception() if state.outcome else None
        desc = exc.describe() if isinstance(exc, CallFailure) else repr(exc)
        sleep = state.next_action.sleep if state.next_action else 0.0
        log.warning(
            "%s: attempt %d failed (%s); retrying in %.2fs", what, state.attempt_number, desc, sleep
        )

    retrying = tenacity.Retrying(
        stop=tenacity.stop_after_attempt(max_attempts),
        retry=tenacity.retry_if_exception(_is_retryable),
        wait=wait,
        before_sleep=before_sleep,
        sleep=sleep_unless_stopped,  # Ctrl-C / SIGTERM ends a back-off at once
        reraise=True,
    )
    attempts = 0
    try:
        for attempt in retrying:
            check_stop("model call")  # never start a paid attempt once the run is stopping
            with attempt:
                attempts = attempt.retry_state.attempt_number
                result = attempt_fn(attempts)
    except CallFailure as e:
        if on_failure is not None:
            on_failure(e, attempts)
        if is_context_overflow(e):
            raise ContextLengthError(_message(e, attempts, max_attempts, what)) from e
        raise LLMError(_message(e, attempts, max_attempts, what)) from e
    return result, attempts


_CONTEXT_OVERFLOW = re.compile(
    r"context[ _-]?(length|window)|maximum context|too many (input )?tokens|prompt is too long"
    r"|input (token count|is too long)|exceeds the (maximum|model's)",
    re.IGNORECASE,
)


def is_context_overflow(e: CallFailure) -> bool:
    """A 400 (or 413) whose message says the request does not fit the context window."""
    return e.status in (400, 413) and bool(_CONTEXT_OVERFLOW.search(str(e)))


def _message(e: CallFailure, attempts: int, max_attempts: int, what: str) -> str:
    return scrub(_unscrubbed_message(e, attempts, max_attempts, what))


def _unscrubbed_message(e: CallFailure, attempts: int, max_attempts: int, what: str) -> str:
    head = f"{what} failed after {attempts} attempt(s): {e.describe()}."
    if not e.retryable:
        if e.status in (401, 403):
            return head + " Not retried: check the API key (model.api_key_env) and its permissions."
        return (
            head
            + " Not retried: check the model name, base_url and request (a retry cannot fix it)."
        )
    return head + (
        f" Gave up at model.max_attempts={max_attempts}: check that the server at {e.endpoint} "
        "is up and not overloaded, or raise model.max_attempts / model.timeout_s."
    )
