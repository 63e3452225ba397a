"""A program written for the hosted service, moved to Parley by changing where it connects.

    PARLEY_URL=http://127.0.0.1:8000 PARLEY_API_KEY=parley_sk_... python examples/sdk/switch.py

It uses the official `phonic` SDK unchanged: it creates (or replaces) an agent, talks to it
over the conversation socket in text, and reads the conversation back. The only line that
differs from the hosted service's is the `environment=` argument (docs/switching.md).
"""

from __future__ import annotations

import os

from phonic import (
    AssistantFinishedSpeakingPayload,
    ConfigPayload,
    ConversationCreatedPayload,
    GenerateReplyPayload,
    Phonic,
)
from phonic.environment import PhonicEnvironment

url = os.environ["PARLEY_URL"].rstrip("/")
client = Phonic(
    api_key=os.environ["PARLEY_API_KEY"],
    # The one change: Parley's REST base and its socket's host instead of the hosted service's.
    environment=PhonicEnvironment(base=f"{url}/v1", production=url.replace("http", "ws", 1)),
)

client.agents.upsert(
    name="front-desk",
    system_prompt="You answer questions about the Bistro's opening hours. Be brief.",
    welcome_message="Hello, this is the Bistro.",
)

with client.conversations.connect() as socket:
    socket.send_config(
        ConfigPayload(agent="front-desk", input_format="pcm_16000", output_format="pcm_16000")
    )
    conversation_id = None
    asked = False
    for message in socket:
        if isinstance(message, ConversationCreatedPayload):
            conversation_id = message.conversation_id
        elif isinstance(message, AssistantFinishedSpeakingPayload):
            if asked:  # the answer has been spoken
                break
            # The welcome has been spoken: ask.
            socket.send_generate_reply(GenerateReplyPayload(user_message="When do you open?"))
            asked = True

if conversation_id is None:
    raise SystemExit("the socket closed before the conversation was created")
conversation = client.conversations.get(conversation_id).conversation
for item in conversation.items:
    print(f"{item.role}: {item.live_transcript}")  # noqa: T201
