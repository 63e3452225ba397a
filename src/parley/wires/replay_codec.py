"""The in-process wire of a replay (`conversations.replay`, API.md section 17): no socket,
no client. Its frames are the recorded user channel's PCM bytes, already in the session's
input format; nothing goes out (there is no one to hear the agent: its words are stored as
any conversation's are, and its audio is recorded).

The codec watches the session's messages so that the feed (api/replays.py) knows when the
last reply is over: `settled` says whether the agent has answered the user's last turn,
finished speaking, and been quiet for a while; `failed` whether the session refused the
replay's `config` (no conversation will go live).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from parley import engine
from parley.services.live import codec


class ReplayCodec:
    """`codec.Codec` for a replay (see the module doc); `now` is a monotonic clock."""

    client_tools = False
    playback_pending = False

    def __init__(self, now: Callable[[], float]) -> None:
        self._now = now
        self._speaking = False
        self._awaiting_reply = False
        self._quiet_since = now()
        self.live = False
        """The conversation went live (`ConversationCreated`)."""
        self.failed = False
        """The session answered an error before the conversation went live."""

    def decode(self, data: codec.Frame) -> Sequence[codec.Inbound]:
        """A frame is user audio; the feed sends nothing else."""
        return [codec.AudioIn(data if isinstance(data, bytes) else data.encode())]

    def encode(self, message: codec.Outbound) -> Sequence[codec.Frame]:
        """Note what the session says (see `settled`); send nothing."""
        if isinstance(message, codec.ConversationCreated):
            self.live = True
        elif isinstance(message, codec.RequestError) and not self.live:
            self.failed = True
        elif isinstance(message, engine.UserStartedSpeaking):
            self._awaiting_reply = True
        elif isinstance(message, engine.AssistantStartedSpeaking):
            self._speaking, self._awaiting_reply = True, False
        elif isinstance(
            message,
            engine.AssistantFinishedSpeaking
            | engine.InterruptedResponse
            | engine.AssistantChoseNotToRespond,
        ):
            self._speaking = False
            self._quiet_since = self._now()
        return ()

    def settled(self, quiet_s: float) -> bool:
        """True when no reply is awaited or being spoken, and none was for `quiet_s`."""
        if self._speaking or self._awaiting_reply:
            return False
        return self._now() - self._quiet_since >= quiet_s
