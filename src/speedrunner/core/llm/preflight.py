"""Pre-flight: ask each model endpoint once, for free, before a run directory exists.

A run against an endpoint that is down, a key that is rejected or a model name the server
does not serve would otherwise fail after the run directory was made, leaving an orphan
directory with no checkpoint. The check costs no tokens: it lists the models
(``GET /models`` on OpenAI-compatible servers, ``models.get`` on Gemini) through the same
SDK client, base URL and key the calls will use.

Then :func:`probe_endpoint` asks for one tiny completion (a few tokens: the only thing the
pre-flight pays for) through the provider's own request path, and warns about what would
otherwise go unnoticed for a whole run: a server that ignores the length limit (llama.cpp's
server ignores ``max_completion_tokens``, so truncation is never detected) and, under
``tool_protocol: native``, a server that returns the tool call as message content (native
mode would silently become the text protocol). Each warning names the setting that fixes it.
"""

from __future__ import annotations

from typing import Any

from speedrunner.core.config.schema import ModelConfig
from speedrunner.core.llm.build import make_provider
from speedrunner.core.llm.conversation import Conversation
from speedrunner.core.llm.provider import Provider, ProviderRequest, ProviderResult
from speedrunner.core.llm.slots import endpoint_limit
from speedrunner.core.llm.types import Message, ToolSpec
from speedrunner.core.redact import scrub
from speedrunner.errors import PreflightError

__all__ = ["PROBE_LIMIT", "PROBE_PROMPTS", "check_model_endpoints", "probe_endpoint"]

SKIP_HINT = "(--skip_preflight skips this check)"
PROBE_LIMIT = 8
"""The probe's length limit in tokens; its prompt asks for far more."""
_PROBE = "Count from 1 to 60 in words, separated by commas. Write nothing else."
_TOOL_PROBE = "Call the get_time tool now."
PROBE_PROMPTS = (_PROBE, _TOOL_PROBE)
"""How a probe is recognised (the fake server answers it apart from a test's script)."""
_TOOL = ToolSpec(
    "get_time", "The current time.", {"type": "object", "properties": {}, "required": []}
)


def check_model_endpoints(
    config: ModelConfig, *, role: str = "model", timeout_s: float = 10.0, probe: bool = True
) -> list[str]:
    """Raise ``PreflightError`` naming the endpoint, what answered and the fix; else return
    the warnings of :func:`probe_endpoint` (``probe``: ask for the tiny completion)."""
    if config.provider == "scripted":
        return []
    provider = make_provider(config)
    warnings: list[str] = []
    for endpoint in provider.endpoints:
        if config.provider == "gemini":
            _check_gemini(provider, endpoint, role, timeout_s)
        else:
            _check_openai_compatible(provider, endpoint, role, timeout_s)
        if probe:
            warnings += probe_endpoint(
                provider, endpoint, role, config, timeout_s=max(timeout_s, 60.0)
            )
    return warnings


def probe_endpoint(
    provider: Provider, endpoint: str, role: str, config: ModelConfig, *, timeout_s: float = 60.0
) -> list[str]:
    """Warnings about how the endpoint answers a tiny completion (never an error: a probe
    that fails says nothing about the run, whose own calls retry and report)."""
    where = f"{role}.provider {provider.name}: endpoint {scrub(endpoint)}"
    warnings = []
    # The probe is a call like any other: under a sweep it takes one of the endpoint's shared
    # slots, so a run starting never pushes another run past model.max_concurrency.
    with endpoint_limit(provider.name, endpoint, config.max_concurrency):
        answer = _ask(provider, endpoint, _PROBE, timeout_s)
    if answer is not None and (
        answer.usage.output > PROBE_LIMIT + 2
        or (answer.finish_reason != "length" and len(answer.text.split()) > PROBE_LIMIT + 2)
    ):
        param = provider.length_param(endpoint)
        fix = (
            f"set {role}.provider: vllm (it sends max_tokens, which OpenAI-compatible servers "
            "honour)"
            if param == "max_completion_tokens"
            else f"the server ignores {param} too: set its own output limit (llama.cpp: "
            "--n_predict / n_predict; vLLM: --max-model-len) and keep max_tokens small"
        )
        warnings.append(
            f"{where} ignored the length limit: asked for at most {PROBE_LIMIT} tokens (sent as "
            f"{param}), it wrote {answer.usage.output} (finish_reason {answer.finish_reason!r}); "
            f"answers cut at {role}.sampling.max_tokens would never be detected: {fix}"
        )
    if config.tool_protocol == "native" and provider.supports_tools:
        with endpoint_limit(provider.name, endpoint, config.max_concurrency):
            answer = _ask(provider, endpoint, _TOOL_PROBE, timeout_s, tools=(_TOOL,))
        if answer is not None and not answer.tool_calls and "get_time" in answer.text:
            warnings.append(
                f"{where} returned the tool call as message content ({scrub(answer.text)[:80]!r}), "
                "not as a tool call: native mode would silently read text; set "
                f"{role}.tool_protocol: text, or start the server with a tool-call parser (vLLM: "
                "--enable-auto-tool-choice --tool-call-parser ...)"
            )
    return warnings


def _ask(
    provider: Provider,
    endpoint: str,
    prompt: str,
    timeout_s: float,
    tools: tuple[ToolSpec, ...] = (),
) -> ProviderResult | None:
    request = ProviderRequest(
        Conversation([Message("user", prompt)]),
        {"temperature": 0.0, "top_p": 1.0, "max_tokens": PROBE_LIMIT, "seed": None},
        "actor",
        "preflight/probe",
        endpoint,
        timeout_s,
        tools,
    )
    try:
        return provider.call(request)
    except Exception:  # noqa: BLE001 - a failed probe is no finding; the run's own calls report failures
        return None


def _check_openai_compatible(provider: Any, endpoint: str, role: str, timeout_s: float) -> None:
    import openai

    where = f"{role}.provider {provider.name}: endpoint {scrub(endpoint)}"
    client = openai.OpenAI(
        base_url=endpoint, api_key=provider._api_key, max_retries=0, timeout=timeout_s
    )
    try:
        served = [m.id for m in client.models.list()]
    except openai.APITimeoutError:
        raise PreflightError(
            f"{where} did not answer within {timeout_s:g}s (GET /models). Is the "
            f"server up and the URL right ({role}.base_url)? {SKIP_HINT}"
        ) from None
    except openai.APIConnectionError as e:
        fix = (
            "start it (scripts/run_server.sh prints the base_url to use)"
            if provider.name == "vllm"
            else f"check {role}.base_url and OPENAI_BASE_URL"
        )
        raise PreflightError(f"{where} did not answer ({_cause(e)}): {fix}. {SKIP_HINT}") from None
    except openai.AuthenticationError as e:
        raise PreflightError(
            f"{where} rejected the API key (HTTP {e.status_code}): check the key "
            f"variable ({role}.api_key_env). {SKIP_HINT}"
        ) from None
    except openai.APIStatusError as e:
        raise PreflightError(
            f"{where} answered GET /models with HTTP {e.status_code} "
            f"({scrub(str(e))[:200]}): it does not look like an OpenAI-compatible API; "
            f"check {role}.base_url (it usually ends in /v1). {SKIP_HINT}"
        ) from None
    except (openai.APIError, ValueError) as e:  # garbled body: something else answers there
        raise PreflightError(
            f"{where} answered GET /models with something that is not an OpenAI "
            f"model list ({scrub(str(e))[:200]}); check {role}.base_url. {SKIP_HINT}"
        ) from None
    if provider.model not in served:
        shown = ", ".join(served[:10]) + (" ..." if len(served) > 10 else "")
        fix = (
            "start vLLM with --served-model-name set to it, or set "
            if provider.name == "vllm"
            else "check the spelling of "
        )
        raise PreflightError(
            f"{where} does not serve {role}.name={provider.model!r} (it serves: "
            f"{shown or 'nothing'}); {fix}{role}.name. {SKIP_HINT}"
        )


def _check_gemini(provider: Any, endpoint: str, role: str, timeout_s: float) -> None:
    from google.genai import errors as genai_errors

    where = f"{role}.provider gemini: endpoint {scrub(endpoint)}"
    client = provider._client(endpoint, timeout_s)
    try:
        client.models.get(model=provider.model)
    except genai_errors.APIError as e:
        if e.code in (401, 403) or (e.code == 400 and "key" in str(e).lower()):
            raise PreflightError(
                f"{where} rejected the API key (HTTP {e.code}): check GEMINI_API_KEY "
                f"/ GOOGLE_API_KEY ({role}.api_key_env). {SKIP_HINT}"
            ) from None
        if e.code == 404:
            raise PreflightError(
                f"{where} knows no model {provider.model!r} (HTTP 404): check "
                f"{role}.name. {SKIP_HINT}"
            ) from None
        raise PreflightError(
            f"{where} answered HTTP {e.code} ({scrub(str(e))[:200]}). {SKIP_HINT}"
        ) from None
    except Exception as e:  # httpx2 connection errors and timeouts: the SDK does not wrap them
        raise PreflightError(
            f"{where} did not answer ({type(e).__name__}: {scrub(str(e))[:200]}); "
            f"check {role}.base_url and the network. {SKIP_HINT}"
        ) from None


def _cause(e: BaseException) -> str:
    """The innermost reason, e.g. 'Connection refused', instead of the SDK's generic text."""
    while e.__cause__ is not None:
        e = e.__cause__
    return scrub(str(e) or type(e).__name__)[:200]
