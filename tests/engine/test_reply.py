from __future__ import annotations

import dataclasses

import pytest

from parley.engine import EndConversation, ReplyPart, ReplyRequest, RuleBasedReplies, SessionConfig
from parley.engine.replies import FAREWELL
from parley.engine.sentences import SentenceSplitter

PROMPT = "You are a friendly support agent for Acme. Keep answers short."


def request(**changes: object) -> ReplyRequest:
    base = ReplyRequest(agent_name="support-bot", system_prompt=PROMPT, language="en", history=())
    return dataclasses.replace(base, **changes)  # type: ignore[arg-type]


async def collect(req: ReplyRequest) -> list[ReplyPart]:
    return [part async for part in RuleBasedReplies().reply(req)]


def test_greeting_welcome_message_returned(config: SessionConfig) -> None:
    with_welcome = dataclasses.replace(config, welcome_message="  Hi, this is Acme!  ")
    assert RuleBasedReplies().greeting(with_welcome) == "Hi, this is Acme!"


@pytest.mark.parametrize("welcome", [None, "", "   "])
def test_greeting_no_welcome_message_none(config: SessionConfig, welcome: str | None) -> None:
    assert RuleBasedReplies().greeting(dataclasses.replace(config, welcome_message=welcome)) is None


@pytest.mark.anyio
async def test_reply_user_message_quoted_with_role_from_prompt() -> None:
    parts = await collect(request(user_message="Where is my parcel?"))
    assert parts == [
        "You said: Where is my parcel. As a friendly support agent for Acme, I am here to help."
    ]


@pytest.mark.anyio
async def test_reply_same_request_same_reply() -> None:
    req = request(user_message="Can you help me with billing?")
    assert await collect(req) == await collect(req)


@pytest.mark.anyio
async def test_reply_long_user_message_quote_truncated() -> None:
    words = " ".join(f"word{i}" for i in range(30))
    (text,) = await collect(request(user_message=words))
    assert isinstance(text, str)
    assert "word11." in text
    assert "word12" not in text


@pytest.mark.anyio
async def test_reply_placeholder_transcript_admits_no_words() -> None:
    (text,) = await collect(request(user_message="[speech 1.2 s]", transcribed=False))
    assert isinstance(text, str)
    assert text.startswith("I heard you, but I cannot make out words yet.")
    assert "[speech" not in text


@pytest.mark.anyio
async def test_reply_no_user_message_offers_help() -> None:
    assert await collect(request()) == [
        "As a friendly support agent for Acme, I am here to help. How can I help you?"
    ]


@pytest.mark.anyio
async def test_reply_prompt_without_role_uses_agent_name() -> None:
    parts = await collect(request(system_prompt="Answer briefly.", user_message="Hello"))
    assert parts == ["You said: Hello. This is support bot, here to help."]


@pytest.mark.anyio
@pytest.mark.parametrize("message", ["Goodbye!", "ok bye then", "Good bye."])
async def test_reply_goodbye_farewell_then_end(message: str) -> None:
    assert await collect(request(user_message=message)) == [FAREWELL, EndConversation()]


def test_sentence_splitter_streamed_pieces_split_at_sentence_ends() -> None:
    splitter = SentenceSplitter()
    out = splitter.feed("Hello there. How")
    out += splitter.feed(" are you? I am")
    out += splitter.feed(" fine!")
    assert out == ["Hello there.", "How are you?"]
    assert splitter.flush() == ["I am fine!"]
    assert splitter.flush() == []


def test_sentence_splitter_titles_and_initials_not_ends() -> None:
    splitter = SentenceSplitter()
    assert splitter.feed("Dr. Smith met J. K. Rowling. Then ") == ["Dr. Smith met J. K. Rowling."]


def test_sentence_splitter_text_without_punctuation_cut_at_space() -> None:
    splitter = SentenceSplitter(max_chars=20)
    out = splitter.feed("one two three four five six seven")
    assert out == ["one two three four"]
    assert all(len(sentence) <= 20 for sentence in out)
    assert splitter.flush() == ["five six seven"]
