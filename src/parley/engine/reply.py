"""Rule-based replies (the offline stand-in for an LLM) and the sentence splitter.

RuleBasedReplies greets with the agent's welcome_message and answers each turn with one or two
short, deterministic sentences: an acknowledgement of the user's words and a line drawn from
the system prompt's "You are ..." sentence (else the agent's name). It cannot follow
instructions: `system_message` is accepted and ignored. "bye" or "goodbye" in the user's words
gets a farewell and ends the conversation. An LLM plugs in as another ReplyGenerator.
"""

from __future__ import annotations

import re
from collections.abc import AsyncGenerator

from parley.engine.base import EndConversation, ReplyPart, ReplyRequest, SessionConfig

_MAX_QUOTED_WORDS = 12
_ROLE = re.compile(r"\s*you\s+are\s+(.+?)(?:[.!?\n]|$)", re.IGNORECASE)
_GOODBYE = re.compile(r"\b(?:good\s*bye|bye)\b", re.IGNORECASE)
FAREWELL = "Goodbye, and thank you for calling."


class RuleBasedReplies:
    """Deterministic replies from the welcome message and the system prompt (see module doc)."""

    def greeting(self, config: SessionConfig) -> str | None:
        """Return the welcome message, or None when the agent has none."""
        text = (config.welcome_message or "").strip()
        return text or None

    async def reply(self, request: ReplyRequest) -> AsyncGenerator[ReplyPart, None]:
        """Yield the reply's text, then EndConversation when the user said goodbye."""
        message = (request.user_message or "").strip()
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


# --- sentences --------------------------------------------------------------------------

_CLOSERS = "\"')]\u201d\u2019"  # quotes and brackets that may follow the end of a sentence
_OPENERS = "(\"'\u201c\u2018"
_SENTENCE_END = re.compile(rf"[.!?\u2026]+[{re.escape(_CLOSERS)}]*(?=\s)")
_NOT_AN_END = frozenset({"mr", "mrs", "ms", "dr", "st", "jr", "sr", "prof", "vs", "e.g", "i.e"})


class SentenceSplitter:
    """Cuts streamed text into sentences, each synthesized and sent as one unit.

    A sentence ends at . ! ? or … followed by whitespace, except after a title ("Dr.") or a
    single initial. Text with no end in `max_chars` is cut at its last space, so a reply
    without punctuation still streams.
    """

    def __init__(self, max_chars: int = 300) -> None:
        self._max = max_chars
        self._buffer = ""

    def feed(self, text: str) -> list[str]:
        """Add text; return the sentences it completes."""
        self._buffer += text
        out: list[str] = []
        cut = 0
        for match in _SENTENCE_END.finditer(self._buffer):
            word = self._buffer[cut : match.start()].rsplit(maxsplit=1)[-1:] or [""]
            bare = word[0].lstrip(_OPENERS).lower()
            if bare in _NOT_AN_END or (len(bare) == 1 and bare.isalpha()):
                continue
            out.append(self._buffer[cut : match.end()])
            cut = match.end()
        self._buffer = self._buffer[cut:]
        while len(self._buffer) > self._max:
            space = self._buffer.rfind(" ", 0, self._max)
            split = space if space > 0 else self._max
            out.append(self._buffer[:split])
            self._buffer = self._buffer[split:]
        return [sentence.strip() for sentence in out if sentence.strip()]

    def flush(self) -> list[str]:
        """Return what is left as a last sentence (none if only whitespace)."""
        rest, self._buffer = self._buffer.strip(), ""
        return [rest] if rest else []
