"""Check the language model named by PARLEY_LLM_BASE_URL once at start-up.

One bounded request to its models endpoint (`GET {base}/models`, 3 s, as OpenAI, vLLM,
Ollama and llama.cpp serve it). A model that cannot be reached is a warning, not a refusal:
it may come up after Parley; until it does each reply fails with one log line and the
caller hears a short apology. The key is sent as the replies send it and never shown.
"""

from __future__ import annotations

import httpx

TIMEOUT_SECONDS = 3.0


def language_model_warning(base_url: str, api_key: str | None) -> str | None:
    """Return one warning line when `base_url`'s models endpoint does not answer 2xx, or None."""
    url = f"{base_url.rstrip('/')}/models"
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    try:
        with httpx.Client(timeout=TIMEOUT_SECONDS, trust_env=False) as client:
            response = client.get(url, headers=headers)
    except httpx.TimeoutException:
        reason = f"no answer from {url} within {TIMEOUT_SECONDS:g} s"
    except httpx.HTTPError as error:
        reason = f"cannot reach {url} ({type(error).__name__})"
    else:
        if response.is_success:
            return None
        variable = "PARLEY_LLM_API_KEY" if response.status_code in (401, 403) else None
        reason = f"{url} answered HTTP {response.status_code}" + (
            f" (check {variable})" if variable else ""
        )
    return (
        f"warning: PARLEY_LLM_BASE_URL: {reason}; serving anyway, and replies fail until "
        "the model answers"
    )
