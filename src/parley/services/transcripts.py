"""A conversation as the language model reads it after the call (API.md section 16).

Rules:
1. The transcript is what is stored: the items so far, in order (a live conversation's
   too: what was said up to now), with the tool calls the agent made. With redaction on,
   what is stored is already redacted, so the model reads the tags, never the words.
2. A conversation whose transcript is not kept has nothing to read: zero data retention,
   or a transcript already deleted (409 `no_transcript`).
3. The text sent is bounded: `MAX_CHARACTERS` at most, the start and the end kept when a
   conversation is longer; a tool call's parameters and output `MAX_TOOL_JSON` each.
"""

from __future__ import annotations

import json
from typing import Any, Final

from parley.db.repos import conversations as conversation_repo
from parley.db.repos.conversations import ConversationState
from parley.errors import ConversationNotFound, NoTranscript
from parley.records import Conversation, RetentionPolicy, ToolCall
from parley.services.context import Context

__all__ = ["MAX_CHARACTERS", "check_kept", "readable_conversation", "transcript_text"]

MAX_CHARACTERS: Final = 100_000
MAX_TOOL_JSON: Final = 500
NOTHING_SAID: Final = "(Nothing was said.)"


async def readable_conversation(ctx: Context, *, org_id: str, conversation_id: str) -> Conversation:
    """Return the conversation with its items; 404 when there is none, 409 `no_transcript`
    when its transcript is not kept (rule 2)."""
    async with ctx.db.read() as session:
        state = await conversation_repo.find(session, org_id, conversation_id)
        if state is None:
            raise ConversationNotFound()
        check_kept(state)
        return await conversation_repo.load(session, state)


def check_kept(state: ConversationState) -> None:
    """Refuse (NoTranscript) a conversation whose transcript is deleted or never kept."""
    if state.transcripts_deleted_at is not None:
        raise NoTranscript("The conversation's transcript has been deleted: nothing to read.")
    if RetentionPolicy.from_json(state.retention).zero_data_retention:
        raise NoTranscript("The conversation keeps no transcript (zero data retention).")


def transcript_text(conversation: Conversation) -> str:
    """The conversation as lines of `User: …` and `Agent: …`, with the agent's tool calls."""
    lines: list[str] = []
    for item in conversation.items:
        speaker = "User" if item.role == "user" else "Agent"
        if item.text:
            lines.append(f"{speaker}: {item.text}")
        lines.extend(_tool_call_line(call) for call in item.tool_calls)
    text = "\n".join(lines) or NOTHING_SAID
    if len(text) <= MAX_CHARACTERS:
        return text
    half = MAX_CHARACTERS // 2
    left_out = len(text) - 2 * half
    return f"{text[:half]}\n[… {left_out} characters left out …]\n{text[-half:]}"


def _tool_call_line(call: ToolCall) -> str:
    return (
        f"[The agent called the tool {call.tool_name} with {_short_json(call.parameters)}; "
        f"it answered {_short_json(call.output)}]"
    )


def _short_json(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= MAX_TOOL_JSON else text[: MAX_TOOL_JSON - 1] + "…"
