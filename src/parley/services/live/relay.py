"""Relaying engine events to the wire, and storing what was said as conversation items."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Final

from parley import engine
from parley.services import conversations
from parley.services.context import Context
from parley.services.live.analysis import TurnAnalysis, timings
from parley.services.live.redacting import redact_text
from parley.services.live.tools import ConversationTools, Emit

NOT_SENT: Final = (engine.AssistantHandedOff,)
"""Engine events the session acts on and no wire carries (a transfer is the session's)."""


class Relay:
    """Emits each engine event (the codec makes it a frame) and stores the user's and
    assistant's words.

    The assistant's item is what it said: the sentences of a finished response, or, for an
    interrupted one, what the listener had heard (InterruptedResponse's text, or what the
    wire acknowledged as played of it when the codec knows: `heard`).

    The first audio chunk of a reply to a spoken turn goes out with its stages' `timings`,
    counted as it is sent (analysis.py, API.md section 18).

    With `redact` (API.md section 16) an item's words are stored with personal data replaced
    by tags (redacting.py); the events emitted keep the words as heard.

    The language of each user turn joins the conversation's `heard_languages` the first
    time it is heard (API.md section 18).
    """

    def __init__(
        self,
        ctx: Context,
        *,
        org_id: str,
        conversation_id: str,
        emit: Emit,
        tools: ConversationTools | None = None,
        heard: Callable[[str], str] | None = None,
        keeps_items: bool = True,
        redact: bool = False,
    ) -> None:
        """`keeps_items` False: zero data retention (API.md section 16), nothing stored;
        `redact`: personal data stored only as tags (the tools redact their records)."""
        self._keeps_items = keeps_items
        self._redact = redact
        self._ctx = ctx
        self._heard = heard
        self._tools = tools
        self._org_id = org_id
        self._conversation_id = conversation_id
        self._emit = emit
        self._spoken: list[str] = []
        self.analysis = TurnAnalysis(ctx.clock)
        """The conversation's figures so far (stored when it ends)."""
        self._languages_heard: set[str] = set()

    async def relay(self, event: engine.EngineEvent) -> None:
        """Store what the event says, then emit it (a tool call under its public ID)."""
        self.analysis.observe(event)
        match event:
            case engine.InputText(text=text, language=language):
                await self.store("user", text)
                await self._heard_language(language)
            case engine.AudioChunk(text=text, turn=marks):
                if text:
                    self._spoken.append(text)
                if marks is not None:  # sent now: the reply's stages (API.md section 18)
                    event = replace(event, timings=timings(self.analysis.replied(marks)))
            case engine.AssistantStartedSpeaking():
                self._spoken = []
            case engine.AssistantFinishedSpeaking():
                await self.store("assistant", " ".join(self._spoken))
            case engine.InterruptedResponse(text=text):
                await self.store("assistant", self._heard(text) if self._heard else text)
            case engine.ToolCallInterrupted(call_id=call_id) if self._tools is not None:
                event = replace(event, call_id=self._tools.public_id(call_id))
            case engine.AssistantHandedOff():
                return  # NOT_SENT: the session carries it out; the client saw its output
        await self._emit(event)

    async def _heard_language(self, language: str) -> None:
        if language not in self._languages_heard:
            self._languages_heard.add(language)
            await conversations.add_heard_language(
                self._ctx,
                org_id=self._org_id,
                conversation_id=self._conversation_id,
                language=language,
            )

    async def store(self, role: str, text: str) -> None:
        """Add an item to the conversation: an assistant item carries the tool calls of its
        turn (and is stored for them even with no words); nothing for an empty item."""
        calls = self._tools.take_calls() if self._tools is not None and role == "assistant" else ()
        item_id = None
        if (text or calls) and self._keeps_items:
            item_id = await conversations.add_item(
                self._ctx,
                org_id=self._org_id,
                conversation_id=self._conversation_id,
                role=role,
                text=redact_text(text) if self._redact else text,
                tool_calls=calls,
            )
        if role == "assistant":
            self.analysis.stored(item_id)
