"""Rule-based replies: the offline replier, used when no language model is configured.

RuleBasedReplies greets with the agent's welcome_message and answers each turn with one or two
short, deterministic sentences: an acknowledgement of the user's words and a line drawn from
the system prompt's "You are ..." sentence (else the agent's name). It cannot follow
instructions: `system_message` is accepted and ignored. "bye" or "goodbye" in the user's words
gets a farewell and ends the conversation. An LLM plugs in as another ReplyGenerator.
A reply in a language of phrasebook.py (the request's `language`) uses its sentences.
"""

from __future__ import annotations

import re
from collections.abc import AsyncGenerator

from parley.engine.base import EndConversation, ReplyPart, ReplyRequest, SessionConfig
from parley.engine.replies.phrasebook import PHRASEBOOK, Phrases

_MAX_QUOTED_WORDS = 12
_ROLE = re.compile(r"\s*you\s+are\s+(.+?)(?:[.!?\n]|$)", re.IGNORECASE)
_GOODBYE = re.compile(r"\b(?:good\s*bye|bye)\b", re.IGNORECASE)
FAREWELL = "Goodbye, and thank you for calling."


class RuleBasedReplies:
    """Deterministic replies from the welcome message and the system prompt (see module doc)."""

    def greeting(self, config: SessionConfig) -> str | None:
        """Return the welcome message, or None when the agent has none."""
        return welcome_message(config)

    async def aclose(self) -> None:
        """Nothing to release."""

    async def reply(self, request: ReplyRequest) -> AsyncGenerator[ReplyPart, None]:
        """Yield the reply's text, then EndConversation when the user said goodbye."""
        message = (request.user_message or "").strip()
        phrases = PHRASEBOOK.get(request.language)
        if phrases is not None:
            async for part in _translated(phrases, message, transcribed=request.transcribed):
                yield part
            return
        role = _role_line(request.system_prompt, request.agent_name)
        if not message:
            yield f"{role} How can I help you?"
        elif not request.transcribed:
            yield f"I heard you, but I cannot make out words yet. {role}"
        elif _GOODBYE.search(message):
            yield FAREWELL
            yield EndConversation()
        else:
            yield f"You said: {_quote(message)}. {role}"


async def _translated(
    phrases: Phrases, message: str, *, transcribed: bool
) -> AsyncGenerator[ReplyPart, None]:
    """The reply in a language of the phrasebook."""
    if not message:
        yield phrases.offer
    elif not transcribed:
        yield phrases.unclear
    elif phrases.goodbye.search(message) or _GOODBYE.search(message):
        yield phrases.farewell
        yield EndConversation()
    else:
        yield f"{phrases.you_said}: {_quote(message)}. {phrases.offer}"


def welcome_message(config: SessionConfig) -> str | None:
    """Return the agent's welcome message, or None when it has none."""
    text = (config.welcome_message or "").strip()
    return text or None


def _role_line(system_prompt: str, agent_name: str) -> str:
    match = _ROLE.match(system_prompt)
    if match:
        return f"As {_first_words(match.group(1))}, I am here to help."
    name = re.sub(r"[-_]+", " ", agent_name).strip()
    return f"This is {name}, here to help." if name else "I am here to help."


def _quote(message: str) -> str:
    return _first_words(message).rstrip(".!?,;: ")


def _first_words(text: str) -> str:
    return " ".join(text.split()[:_MAX_QUOTED_WORDS])
