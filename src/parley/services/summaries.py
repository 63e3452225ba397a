"""A conversation's summary (API.md section 16): a few sentences by the language model.

Rules:
1. None, and nothing asked, without a language model, for a conversation that keeps no
   transcript (zero data retention, or deleted) and for one in which nothing was said.
2. The summary is plain text of at most `MAX_CHARACTERS`, stored on the conversation
   (`summary`; null until then) unless its transcript was deleted meanwhile; an empty
   answer stores nothing.
3. A model that cannot be reached (Unavailable) or refuses (UpstreamError) raises: the
   caller decides (the work after a call logs it and goes on).
"""

from __future__ import annotations

import logging
from typing import Final

from parley.db.repos import conversations as conversation_repo
from parley.errors import NoTranscript
from parley.records import Conversation
from parley.services.context import Context
from parley.services.transcripts import readable_conversation, transcript_text
from parley.text import is_text

__all__ = ["MAX_CHARACTERS", "summarize", "summarize_conversation", "summary_messages"]

log = logging.getLogger(__name__)

MAX_CHARACTERS: Final = 2_000
MAX_ANSWER_TOKENS: Final = 300
INSTRUCTIONS: Final = (
    "Summarize the conversation between a user and an AI agent below in two to four "
    "sentences: what the user wanted, what the agent did, and how it ended. Plain text, "
    "no lists, no headings."
)


async def summarize(ctx: Context, org_id: str, conversation_id: str) -> str | None:
    """Write the conversation's summary with the language model, store and return it; None
    when there is nothing to summarize or no model to ask (rule 1)."""
    if ctx.language_model is None:
        return None
    try:
        conversation = await readable_conversation(
            ctx, org_id=org_id, conversation_id=conversation_id
        )
    except NoTranscript:
        return None
    return await summarize_conversation(ctx, conversation)


async def summarize_conversation(ctx: Context, conversation: Conversation) -> str | None:
    """`summarize` for a conversation already read (services/transcripts.py), whose
    transcript is kept."""
    if ctx.language_model is None or not any(item.text for item in conversation.items):
        return None
    answer = await ctx.language_model.complete(
        summary_messages(transcript_text(conversation)), max_tokens=MAX_ANSWER_TOKENS
    )
    summary = " ".join(answer.split())[:MAX_CHARACTERS]
    if not summary or not is_text(summary):
        log.info("the language model gave no summary of a conversation")
        return None
    async with ctx.db.transaction() as session:
        kept = await conversation_repo.set_summary(
            session, conversation.org_id, conversation.id, summary
        )
    return summary if kept else None


def summary_messages(transcript: str) -> list[dict[str, str]]:
    """The chat messages of a summary: the instructions, then the transcript."""
    return [
        {"role": "system", "content": INSTRUCTIONS},
        {"role": "user", "content": f"Transcript:\n\n{transcript}"},
    ]
