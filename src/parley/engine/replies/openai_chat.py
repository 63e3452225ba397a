"""Replies from a language model through the OpenAI chat-completions API, streamed.

Any server speaking that API works: OpenAI, or a vLLM, Ollama or llama.cpp server on the
customer's own machines (PARLEY_LLM_BASE_URL, PARLEY_LLM_API_KEY, PARLEY_LLM_MODEL). The
official `openai` client streams the answer (server-sent events) and the engine speaks
each sentence as soon as it is complete.

The messages sent: the agent's system prompt as the system message; the conversation's
turns so far (the last `max_history` items, each `user` or `assistant`); the user's new
message, already the last turn; and a `system_message` of API.md section 8, when given,
as a second system message for this reply only.

Tools (API.md section 12): a request with tools sends them as OpenAI `tools` (function
calling, each definition's JSON Schema as its `parameters`). Streamed `tool_calls` are
assembled (`tool_calls.py`) and yielded as ToolCallParts after the text; the history sends a
call as an assistant message's `tool_calls` and its output as a `tool` message.

Limits: the first token must come within `first_token_timeout_s`, and each later piece
within `timeout_s` of the one before (the answer is at most `max_tokens` long). A refusal,
an error or a timeout raises ReplyModelFailed, whose message names neither the key nor the
server's own words; the engine then warns the client and speaks a short apology.
Nothing is retried: a retry would only add to the caller's wait.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator
from typing import Any

import anyio

from parley.engine.base import ReplyPart, ReplyRequest, SessionConfig
from parley.engine.errors import ReplyModelFailed
from parley.engine.replies.rules import welcome_message
from parley.engine.replies.tool_calls import ToolCallAssembler, history_messages, tool_spec

logger = logging.getLogger(__name__)


class ChatCompletionReplies:
    """A ReplyGenerator backed by an OpenAI-compatible chat-completions server."""

    def __init__(
        self,
        *,
        base_url: str,
        api_key: str,
        model: str,
        timeout_s: float = 20.0,
        first_token_timeout_s: float = 8.0,
        max_history: int = 40,
        max_tokens: int = 300,
    ) -> None:
        from openai import AsyncOpenAI  # imported here: the CLI starts without it

        self._model = model
        self._timeout = timeout_s
        self._first_token_timeout = first_token_timeout_s
        self._max_history = max_history
        self._max_tokens = max_tokens
        # The client's own timeout is a backstop; ours (per wait, below) decide.
        backstop = max(timeout_s, first_token_timeout_s) + 5.0
        self._client = AsyncOpenAI(
            base_url=base_url, api_key=api_key or "none", max_retries=0, timeout=backstop
        )

    def greeting(self, config: SessionConfig) -> str | None:
        """Return the agent's welcome message (not generated: it is the agent's own words)."""
        return welcome_message(config)

    def messages(self, request: ReplyRequest) -> list[dict[str, Any]]:
        """Return the chat messages for one reply (see the module doc)."""
        messages: list[dict[str, Any]] = [{"role": "system", "content": request.system_prompt}]
        history = request.history[-self._max_history :] if self._max_history else ()
        messages += history_messages(history)
        if request.system_message:
            messages.append({"role": "system", "content": request.system_message})
        return messages

    async def reply(self, request: ReplyRequest) -> AsyncGenerator[ReplyPart, None]:
        """Stream the model's answer as text pieces; raise ReplyModelFailed on any failure."""
        from openai import APIStatusError, OpenAIError

        try:
            # Timeouts wrap each wait for the server, never a `yield`: the caller speaks
            # each sentence (in real time) between two of our chunks.
            extra: dict[str, Any] = {}
            if request.tools:
                extra["tools"] = [tool_spec(tool) for tool in request.tools]
            with anyio.fail_after(self._first_token_timeout):
                stream: Any = await self._client.chat.completions.create(
                    model=self._model,
                    messages=self.messages(request),  # type: ignore[arg-type]
                    stream=True,
                    max_tokens=self._max_tokens,
                    **extra,
                )
            calls = ToolCallAssembler()
            async with stream:
                chunks = stream.__aiter__()
                wait = self._first_token_timeout
                while True:
                    with anyio.fail_after(wait):
                        try:
                            chunk = await chunks.__anext__()
                        except StopAsyncIteration:
                            break
                    delta = _delta(chunk)
                    if calls.feed(getattr(delta, "tool_calls", None)):
                        wait = self._timeout
                    text = getattr(delta, "content", None)
                    if isinstance(text, str) and text:
                        wait = self._timeout
                        yield text
            for call in calls.finish():
                yield call
        # One warning line per failed reply, naming the setting to look at; no traceback (the
        # engine does not log ReplyModelFailed again) and never the key or the server's words.
        except TimeoutError:
            logger.warning("the language model (PARLEY_LLM_BASE_URL) did not answer in time")
            raise ReplyModelFailed("The language model did not answer in time.") from None
        except APIStatusError as error:
            logger.warning(
                "the language model (PARLEY_LLM_BASE_URL) answered HTTP %s", error.status_code
            )
            raise ReplyModelFailed() from None
        except OpenAIError as error:
            logger.warning(
                "the language model (PARLEY_LLM_BASE_URL) failed: %s", type(error).__name__
            )
            raise ReplyModelFailed() from None

    async def aclose(self) -> None:
        """Close the HTTP client."""
        await self._client.close()


def _delta(chunk: Any) -> Any:
    choices = getattr(chunk, "choices", None) or []
    return getattr(choices[0], "delta", None) if choices else None
