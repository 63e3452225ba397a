"""Whole answers from the language model (PARLEY_LLM_*), not streamed: what the work after a
call asks of it (API.md section 16: summaries, extractions, evaluations).

One chat-completions request per call of `complete`, through the official `openai` client,
optionally with a `response_format` (a JSON Schema the answer must follow); the answer's
text comes back as it is, and checking it is the caller's. Nothing is retried here: the
callers decide what a bad answer costs.

Failures, as the services tell them apart:
- no answer (connection refused, reset, the whole answer not in `timeout_s`), or a server
  error or overload (5xx, 408, 429): `Unavailable` (503, `service_unavailable`), the
  dependency is down;
- any other error status (a request the model will not take): `LanguageModelRefused`.
Neither message holds the key or the server's own words.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

import anyio

from parley.engine.errors import LanguageModelRefused
from parley.errors import Unavailable

logger = logging.getLogger(__name__)

UNAVAILABLE_STATUSES = frozenset({408, 429})
"""Client-error statuses that say "not now" rather than "not this": treated like a 5xx."""


class ChatCompletions:
    """One whole chat completion per call, from an OpenAI-compatible server."""

    def __init__(
        self,
        *,
        base_url: str,
        api_key: str,
        model: str,
        timeout_s: float = 30.0,
        max_tokens: int = 1000,
    ) -> None:
        self._base_url = base_url
        self._api_key = api_key
        self._model = model
        self._timeout = timeout_s
        self._max_tokens = max_tokens
        self._client: Any = None  # made at the first call: `openai` loads only when used

    async def complete(
        self,
        messages: Sequence[Mapping[str, str]],
        *,
        response_format: Mapping[str, Any] | None = None,
        max_tokens: int | None = None,
    ) -> str:
        """Return the text of the model's answer to `messages` ("" when it has none)."""
        from openai import APIStatusError, OpenAIError

        extra: dict[str, Any] = {}
        if response_format is not None:
            extra["response_format"] = dict(response_format)
        try:
            with anyio.fail_after(self._timeout):
                answer = await self._openai().chat.completions.create(
                    model=self._model,
                    messages=[dict(message) for message in messages],
                    stream=False,
                    max_tokens=max_tokens or self._max_tokens,
                    **extra,
                )
        except TimeoutError:
            logger.warning("the language model (PARLEY_LLM_BASE_URL) did not answer in time")
            raise Unavailable("The language model did not answer in time.") from None
        except APIStatusError as error:
            status = error.status_code
            logger.warning("the language model (PARLEY_LLM_BASE_URL) answered HTTP %s", status)
            if status >= 500 or status in UNAVAILABLE_STATUSES:
                raise Unavailable(f"The language model answered HTTP {status}.") from None
            raise LanguageModelRefused(f"The language model answered HTTP {status}.") from None
        except OpenAIError as error:  # no connection, reset, an answer that is not JSON
            logger.warning(
                "the language model (PARLEY_LLM_BASE_URL) failed: %s", type(error).__name__
            )
            raise Unavailable("The language model cannot be reached.") from None
        return _content(answer)

    def _openai(self) -> Any:
        if self._client is None:
            from openai import AsyncOpenAI

            # The client's own timeout is a backstop; ours (above) decides.
            self._client = AsyncOpenAI(
                base_url=self._base_url,
                api_key=self._api_key or "none",
                max_retries=0,
                timeout=self._timeout + 5.0,
            )
        return self._client

    async def aclose(self) -> None:
        """Close the HTTP client, if one was made."""
        if self._client is not None:
            await self._client.close()


def _content(answer: Any) -> str:
    choices = getattr(answer, "choices", None) or []
    message = getattr(choices[0], "message", None) if choices else None
    content = getattr(message, "content", None)
    return content if isinstance(content, str) else ""
