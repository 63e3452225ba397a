"""Errors of the conversation engine, each with a stable code (see parley.errors).

    ParleyError
     ├── InvalidRequest
     │    ├── UnknownAudioFormat ........ a format name outside API.md section 4's five
     │    └── InvalidAudioChunk (also a ValueError)
     │         ├── AudioChunkTooLong .... more than 40 ms of audio in one chunk
     │         └── AudioChunkMisaligned . 16-bit PCM with an odd number of bytes
     ├── Conflict
     │    └── EngineClosed .............. input after the engine was closed
     ├── UpstreamError
     │    └── LanguageModelRefused ...... the language model answered a request with an error
     ├── RateLimited
     │    ├── TooManyPendingResponses ... say / generate_reply queued faster than spoken
     │    └── RecognizerOverloaded ...... more turns waiting for the recognizer than it queues
     └── Unavailable
          ├── SynthesizerUnavailable .... no speech synthesizer could be loaded
          ├── RecognizerUnavailable ..... the speech model is missing or does not load
          ├── TurnModelUnavailable ...... the end-of-turn model is missing or does not load
          └── ReplyModelFailed .......... the language model failed, timed out or refused

The socket layer reports the InvalidRequest and RateLimited ones as an `error` message and keeps
the socket open (API.md section 8).
"""

from __future__ import annotations

from parley.errors import Conflict, InvalidRequest, RateLimited, Unavailable, UpstreamError


class UnknownAudioFormat(InvalidRequest):
    code = "unknown_audio_format"
    message = "Unknown audio format."  # AudioFormat.parse names the formats, from the enum


class InvalidAudioChunk(InvalidRequest, ValueError):
    code = "invalid_audio_chunk"
    message = "The audio chunk is invalid."


class AudioChunkTooLong(InvalidAudioChunk):
    code = "audio_chunk_too_long"
    message = "An audio chunk may hold at most 40 ms of audio."


class AudioChunkMisaligned(InvalidAudioChunk):
    code = "audio_chunk_misaligned"
    message = "16-bit PCM audio must have an even number of bytes."


class EngineClosed(Conflict):
    code = "engine_closed"
    message = "The conversation's speech engine is not running."


class TooManyPendingResponses(RateLimited):
    code = "too_many_pending_responses"
    message = "Too many responses are waiting to be spoken."


class SynthesizerUnavailable(Unavailable):
    code = "synthesizer_unavailable"
    message = "No speech synthesizer is available on this server."


class RecognizerOverloaded(RateLimited):
    code = "recognizer_overloaded"
    message = "Too many turns are waiting for speech recognition."


class RecognizerUnavailable(Unavailable):
    code = "recognizer_unavailable"
    message = "The speech recognition model is not available."


class ReplyModelFailed(Unavailable):
    code = "reply_model_failed"
    message = "The language model did not answer."


class TurnModelUnavailable(Unavailable):
    code = "turn_model_unavailable"
    message = "The end-of-turn model is not available."


class LanguageModelRefused(UpstreamError):
    """The language model answered a whole-answer request (replies/completions.py) with a
    client error (4xx other than 408 and 429): a request it will not take, such as a
    `response_format` it does not know. A server error or no answer is Unavailable."""

    code = "language_model_refused"
    message = "The language model refused the request."
