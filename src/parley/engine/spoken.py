"""Text spoken outside a conversation: a voice's preview and the speech stream (API.md 17).

`spoken` cuts the text into sentences (sentences.py, as the speaker does) and yields each
one's audio in the wire format as soon as it is made: the synthesizer runs off the event
loop (hibari in a worker thread, espeak-ng in a process), and so do the resampling and
encoding; the next sentence is synthesized while the caller sends the one before.
`wav_file` wraps audio of a wire format in a WAV file: 16-bit PCM, or G.711 mu-law
(format tag 7), so a preview plays in a browser's `<audio>` whatever format was asked.
"""

from __future__ import annotations

import asyncio
import struct
from collections.abc import AsyncIterator

import anyio.to_thread

from parley.engine.audio import AudioFormat, render
from parley.engine.base import Synthesizer
from parley.engine.sentences import SentenceSplitter

_WAVE_PCM = 1
_WAVE_MULAW = 7


def sentences_of(text: str) -> list[str]:
    """The sentences `text` is spoken in, in order (none for blank text)."""
    splitter = SentenceSplitter()
    return splitter.feed(text) + splitter.flush()


async def spoken(
    synthesizer: Synthesizer,
    sentences: list[str],
    *,
    voice: str,
    speed: float,
    output_format: AudioFormat,
) -> AsyncIterator[bytes]:
    """Yield the audio of each sentence in `output_format`, in order, each as soon as it is
    made; `voice` must come from `synthesizer.resolve_voice`."""

    async def make(sentence: str) -> bytes:
        samples = await synthesizer.synthesize(sentence, voice=voice, speed=speed)
        rate = synthesizer.sample_rate
        return await anyio.to_thread.run_sync(render, samples, rate, output_format)

    pending: asyncio.Future[bytes] | None = None
    try:
        for index, sentence in enumerate(sentences):
            audio = await (pending if pending is not None else make(sentence))
            following = sentences[index + 1] if index + 1 < len(sentences) else None
            pending = asyncio.ensure_future(make(following)) if following else None
            if audio:
                yield audio
    finally:
        if pending is not None:  # the caller left early: the next sentence is not wanted
            pending.cancel()


def wav_file(audio: bytes, output_format: AudioFormat) -> bytes:
    """A mono WAV file holding `audio`, encoded in `output_format` (PCM16 or mu-law)."""
    rate, width = output_format.sample_rate, output_format.bytes_per_sample
    tag = _WAVE_MULAW if output_format.is_mulaw else _WAVE_PCM
    fmt = struct.pack("<HHIIHH", tag, 1, rate, rate * width, width, 8 * width)
    body = b"WAVE" + b"fmt " + struct.pack("<I", len(fmt)) + fmt
    body += b"data" + struct.pack("<I", len(audio)) + audio
    if len(audio) % 2:
        body += b"\0"  # RIFF chunks are padded to an even size
    return b"RIFF" + struct.pack("<I", len(body)) + body
