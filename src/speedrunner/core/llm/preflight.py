"""Pre-flight: ask each model endpoint once, for free, before a run directory exists.

A run against an endpoint that is down, a key that is rejected or a model name the server
does not serve would otherwise fail after the run directory was made, leaving an orphan
directory with no checkpoint. The check costs no tokens: it lists the models
(``GET /models`` on OpenAI-compatible servers, ``models.get`` on Gemini) through the same
SDK client, base URL and key the calls will use.
"""

from __future__ import annotations

from typing import Any

from speedrunner.core.config.schema import ModelConfig
from speedrunner.core.llm.build import make_provider
from speedrunner.core.redact import scrub
from speedrunner.errors import PreflightError

__all__ = ["check_model_endpoints"]

SKIP_HINT = "(--skip_preflight skips this check)"


def check_model_endpoints(config: ModelConfig, *, role: str = "model", timeout_s: float = 10.0) -> None:
    """Raise ``PreflightError`` naming the endpoint, what answered and the fix; else return."""
    if config.provider == "scripted":
        return
    provider = make_provider(config)
    for endpoint in provider.endpoints:
        if config.provider == "gemini":
            _check_gemini(provider, endpoint, role, timeout_s)
        else:
            _check_openai_compatible(provider, endpoint, role, timeout_s)


def _check_openai_compatible(provider: Any, endpoint: str, role: str, timeout_s: float) -> None:
    import openai

    where = f"{role}.provider {provider.name}: endpoint {scrub(endpoint)}"
    client = openai.OpenAI(base_url=endpoint, api_key=provider._api_key, max_retries=0, timeout=timeout_s)
    try:
        served = [m.id for m in client.models.list()]
    except openai.APITimeoutError:
        raise PreflightError(f"{where} did not answer within {timeout_s:g}s (GET /models). Is the "
                             f"server up and the URL right ({role}.base_url)? {SKIP_HINT}") from None
    except openai.APIConnectionError as e:
        fix = ("start it (scripts/run_server.sh prints the base_url to use)" if provider.name == "vllm"
               else f"check {role}.base_url and OPENAI_BASE_URL")
        raise PreflightError(f"{where} did not answer ({_cause(e)}): {fix}. {SKIP_HINT}") from None
    except openai.AuthenticationError as e:
        raise PreflightError(f"{where} rejected the API key (HTTP {e.status_code}): check the key "
                             f"variable ({role}.api_key_env). {SKIP_HINT}") from None
    except openai.APIStatusError as e:
        raise PreflightError(f"{where} answered GET /models with HTTP {e.status_code} "
                             f"({scrub(str(e))[:200]}): it does not look like an OpenAI-compatible API; "
                             f"check {role}.base_url (it usually ends in /v1). {SKIP_HINT}") from None
    except (openai.APIError, ValueError) as e:  # garbled body: something else answers there
        raise PreflightError(f"{where} answered GET /models with something that is not an OpenAI "
                             f"model list ({scrub(str(e))[:200]}); check {role}.base_url. {SKIP_HINT}") from None
    if provider.model not in served:
        shown = ", ".join(served[:10]) + (" ..." if len(served) > 10 else "")
        fix = ("start vLLM with --served-model-name set to it, or set " if provider.name == "vllm"
               else "check the spelling of ")
        raise PreflightError(f"{where} does not serve {role}.name={provider.model!r} (it serves: "
                             f"{shown or 'nothing'}); {fix}{role}.name. {SKIP_HINT}")


def _check_gemini(provider: Any, endpoint: str, role: str, timeout_s: float) -> None:
    from google.genai import errors as genai_errors

    where = f"{role}.provider gemini: endpoint {scrub(endpoint)}"
    client = provider._client(endpoint, timeout_s)
    try:
        client.models.get(model=provider.model)
    except genai_errors.APIError as e:
        if e.code in (401, 403) or (e.code == 400 and "key" in str(e).lower()):
            raise PreflightError(f"{where} rejected the API key (HTTP {e.code}): check GEMINI_API_KEY "
                                 f"/ GOOGLE_API_KEY ({role}.api_key_env). {SKIP_HINT}") from None
        if e.code == 404:
            raise PreflightError(f"{where} knows no model {provider.model!r} (HTTP 404): check "
                                 f"{role}.name. {SKIP_HINT}") from None
        raise PreflightError(f"{where} answered HTTP {e.code} ({scrub(str(e))[:200]}). {SKIP_HINT}") from None
    except Exception as e:  # httpx2 connection errors and timeouts: the SDK does not wrap them
        raise PreflightError(f"{where} did not answer ({type(e).__name__}: {scrub(str(e))[:200]}); "
                             f"check {role}.base_url and the network. {SKIP_HINT}") from None


def _cause(e: BaseException) -> str:
    """The innermost reason, e.g. 'Connection refused', instead of the SDK's generic text."""
    while e.__cause__ is not None:
        e = e.__cause__
    return scrub(str(e) or type(e).__name__)[:200]
