"""`conversations.replay` (API.md section 17): an ended conversation's recorded user channel
played, at real-time pace, into a new conversation with an agent.

Rules:
1. The conversation must have ended (409 `conversation_live`) and have its recording in
   this server's recordings directory (409 `no_recording`: none made, not yet written,
   deleted, or zero data retention); a recording kept in an external storage policy's
   bucket is 400 `not_supported` (the server does not read buckets back), and so is one
   over `MAX_RECORDING_BYTES` (it is read whole).
2. The agent: the one given (a name in the conversation's project, or an ID), else the
   conversation's own; with neither (the agent deleted) 400. A disabled agent is 409
   `agent_disabled`, as for any new conversation.
3. The new conversation is made `pending` at once, with `replay_of` naming the replayed one
   (its `origin` is `replay`) and the replayed one's template values; the caller gets its
   ID while the replay runs in the background (api/replays.py), through the same session
   and engine a socket conversation uses. Its user audio is the recording's left channel
   (services/live/recorder.py: the user on the left, the agent on the right), at the
   recording's rate.
"""

from __future__ import annotations

import io
import wave
from dataclasses import dataclass
from typing import Final

import anyio
import numpy as np

from parley.errors import ConversationLive, NoRecording, NotSupported, ValidationFailed
from parley.records import Status
from parley.services import conversations, endings
from parley.services.context import Context
from parley.services.live.codec import Configure

__all__ = ["FORMATS", "ReplayPlan", "abandon_replay", "prepare_replay", "user_channel"]

FORMATS: Final = {8_000: "pcm_8000", 16_000: "pcm_16000", 24_000: "pcm_24000", 44_100: "pcm_44100"}
"""The recording's rate -> the replay's input and output format (rule 3)."""
MAX_RECORDING_BYTES: Final = 2 * 3600 * 16_000 * 4
"""A recording read whole to replay is at most this big (two hours of stereo 16 kHz)."""


@dataclass(frozen=True, slots=True)
class ReplayPlan:
    """A replay about to run: the new conversation and what its session is fed."""

    org_id: str
    conversation_id: str
    replayed_id: str
    configure: Configure
    """The session's `config`: the pending conversation's agent, in the recording's format."""
    user_audio: bytes
    """16-bit little-endian mono PCM in `configure.input_format`."""
    sample_rate: int


async def prepare_replay(
    ctx: Context, *, org_id: str, conversation_id: str, agent: str | None
) -> ReplayPlan:
    """Check the replay (rules 1 and 2), read the user's channel and make the new
    conversation (rule 3)."""
    replayed = await conversations.get_conversation(
        ctx, org_id=org_id, conversation_id=conversation_id
    )
    if replayed.status != Status.ENDED:
        raise ConversationLive("The conversation has not ended: only an ended one replays.")
    if replayed.recording_policy_id is not None:
        raise NotSupported(
            "The recording is kept in an external storage policy's bucket, which Parley "
            "does not read back: only recordings of the recordings directory replay."
        )
    key = replayed.recording_key
    if key is None or replayed.audio_deleted_at is not None or ctx.recordings is None:
        raise NoRecording()
    stored = await ctx.recordings.find(key)
    if stored is None:
        raise NoRecording()
    if stored.size > MAX_RECORDING_BYTES:
        raise NotSupported("The recording is too long to replay (over 2 hours at 16 kHz).")
    path = stored.path
    audio, rate = await anyio.to_thread.run_sync(lambda: user_channel(path.read_bytes()))
    ref = agent or (replayed.agent.id if replayed.agent else None)
    if ref is None:
        raise ValidationFailed(param_errors={"agent": "is required: the conversation's is gone"})
    project = replayed.project.id if replayed.project and agent else None
    made = await conversations.create_conversation(
        ctx,
        org_id=org_id,
        agent=ref,
        project=project,
        conversation_id=None,
        replay_of=replayed.id,
    )
    fmt = FORMATS[rate]
    configure = Configure(
        agent=None,
        input_format=fmt,
        output_format=fmt,
        template_variables=dict(replayed.template_variables),
    )
    return ReplayPlan(org_id, made.id, replayed.id, configure, audio, rate)


def user_channel(wav: bytes) -> tuple[bytes, int]:
    """The left channel of a recording (a stereo 16-bit WAV) as mono PCM, and its rate;
    NoRecording for anything else."""
    try:
        with wave.open(io.BytesIO(wav)) as reader:
            channels, width, rate = (
                reader.getnchannels(),
                reader.getsampwidth(),
                reader.getframerate(),
            )
            frames = reader.readframes(reader.getnframes())
    except (wave.Error, EOFError) as error:
        raise NoRecording("The conversation's recording cannot be read.") from error
    if channels != 2 or width != 2 or rate not in FORMATS:
        raise NoRecording("The conversation's recording is not one Parley made.")
    samples = np.frombuffer(frames, dtype="<i2").reshape(-1, 2)
    return np.ascontiguousarray(samples[:, 0]).tobytes(), rate


async def abandon_replay(ctx: Context, plan: ReplayPlan) -> None:
    """End the replay's conversation if its session never made it live (rule 3: it must
    not stay `pending`); nothing when it went live (the session ended it)."""
    await endings.end_conversation(
        ctx,
        org_id=plan.org_id,
        conversation_id=plan.conversation_id,
        ending=endings.REPLAY_NEVER_LIVE,
        only_from=Status.PENDING,
    )
