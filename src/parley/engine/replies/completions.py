"""Whole answers from the language model (PARLEY_LLM_*), not streamed: what the work after a
call asks of it (API.md section 16: summaries, extractions, evaluations), and the replies
that replays ask for, with the tool calls they would make (section 17: `respond`).

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
from dataclasses import dataclass
from secrets import token_hex
from typing import Any

import anyio

from parley.engine.base import ToolCallPart, Turn
from parley.engine.errors import LanguageModelRefused
from parley.engine.replies.tool_calls import history_messages, tool_spec
from parley.engine.tools import ToolDefinition
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
        extra: dict[str, Any] = {}
        if response_format is not None:
            extra["response_format"] = dict(response_format)
        return _content(await self._create(messages, max_tokens, extra))

    async def respond(
        self,
        *,
        system_prompt: str,
        history: Sequence[Turn],
        tools: Sequence[ToolDefinition] = (),
        max_tokens: int | None = None,
    ) -> ModelAnswer:
        """Return the model's next turn after `history` (tool calls and outputs included),
        offered `tools`: its text and the calls it makes, which nothing here runs (API.md
        section 17's replays). The messages are those of a live reply (openai_chat.py)."""
        messages = [{"role": "system", "content": system_prompt}, *history_messages(history)]
        extra: dict[str, Any] = {"tools": [tool_spec(tool) for tool in tools]} if tools else {}
        answer = await self._create(messages, max_tokens, extra)
        return ModelAnswer(text=_content(answer), tool_calls=_tool_calls(answer))

    async def _create(
        self, messages: Sequence[Mapping[str, Any]], max_tokens: int | None, extra: dict[str, Any]
    ) -> Any:
        from openai import APIStatusError, OpenAIError

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
        return answer

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


@dataclass(frozen=True, slots=True)
class ModelAnswer:
    """A whole answer: its text ("" when it has none) and the tool calls it makes."""

    text: str
    tool_calls: tuple[ToolCallPart, ...] = ()


def _message(answer: Any) -> Any:
    choices = getattr(answer, "choices", None) or []
    return getattr(choices[0], "message", None) if choices else None


def _content(answer: Any) -> str:
    content = getattr(_message(answer), "content", None)
    return content if isinstance(content, str) else ""


def _tool_calls(answer: Any) -> tuple[ToolCallPart, ...]:
    calls = getattr(_message(answer), "tool_calls", None) or []
    found = []
    for call in calls:
        function = getattr(call, "function", None)
        name = getattr(function, "name", None)
        if not isinstance(name, str) or not name:
            continue
        arguments = getattr(function, "arguments", None)
        call_id = getattr(call, "id", None)
        found.append(
            ToolCallPart(
                call_id if isinstance(call_id, str) and call_id else f"call_{token_hex(12)}",
                name,
                arguments if isinstance(arguments, str) else "{}",
            )
        )
    return tuple(found)
