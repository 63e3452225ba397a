"""From the operator's Settings to the plain values the wiring needs: the services', the
database's and the engine's.

Light on purpose: the operator commands import it (for `database_options`) without loading
the JWT kernel, the stores, the HTTP client or the engine (imported by `engine_options`).
"""

from __future__ import annotations

import os
import secrets
import socket
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from parley.services.context import DEFAULT_PUBLIC_URL

if TYPE_CHECKING:
    from parley.config import Settings
    from parley.engine import EngineOptions


@dataclass(frozen=True, slots=True)
class LanguageModelOptions:
    """The language model the work after a call asks (PARLEY_LLM_*)."""

    base_url: str
    model: str
    api_key: str = field(default="", repr=False)
    timeout_s: float = 30.0
    """For a whole answer: three times PARLEY_LLM_TIMEOUT_SECONDS, which bounds a reply's
    first token."""


@dataclass(frozen=True, slots=True)
class RuntimeOptions:
    """The plain values the services need from the configuration."""

    database_url: str
    redis_url: str | None
    default_audience: str
    jwks_allow_http: bool = False
    jwks_allow_private_networks: bool = False
    outbound_allow_http: bool = False
    outbound_allow_private_networks: bool = False
    jwt_max_lifetime_seconds: int = 3600
    jwt_rate_per_minute: int = 60
    jwt_rate_burst: int = 20
    database_connect_timeout_seconds: float | None = None
    database_statement_timeout_seconds: float | None = None
    database_pool_timeout_seconds: float | None = None
    database_pool_size: int | None = None
    instance_id: str = ""
    """This instance's name (empty: a fresh one, `new_instance_id()`)."""
    notices_redis_loss: bool = True
    """Whether this context watches Redis for a loss of its data, and logs and counts one
    (False for the webhook sender: its instance's server does, once for the instance)."""
    conversation_lease_seconds: float = 15.0
    secret_key: str | None = field(default=None, repr=False)
    """PARLEY_SECRET_KEY; None: the key file (parley/sealing.py)."""
    public_url: str = DEFAULT_PUBLIC_URL
    """PARLEY_PUBLIC_URL, without a trailing slash: what carriers call and sign (API.md 13)."""
    twilio_api_url: str = "https://api.twilio.com"
    """PARLEY_TWILIO_API_URL, without a trailing slash: the carrier's REST API (API.md 15)."""
    recordings_dir: Path | None = None
    """Where recordings are kept (PARLEY_RECORDINGS_DIR, or beside the SQLite file); None:
    on no directory (PostgreSQL without the setting)."""
    language_model: LanguageModelOptions | None = None
    """The language model of summaries, extractions and evaluations; None: none set."""


@dataclass(frozen=True, slots=True)
class DatabaseOptions:
    """Where the database is and how long to wait on it (seconds; None: the defaults)."""

    url: str
    connect_timeout_seconds: float | None = None
    statement_timeout_seconds: float | None = None
    pool_timeout_seconds: float | None = None
    pool_size: int | None = None


def runtime_options(settings: Settings) -> RuntimeOptions:
    """Hand the services the plain values they need from the configuration."""
    return RuntimeOptions(
        database_url=settings.database_url,
        redis_url=settings.redis_url,
        default_audience=settings.public_host,
        public_url=settings.public_url,
        twilio_api_url=settings.twilio_api_url,
        jwks_allow_http=settings.jwks_allow_http,
        jwks_allow_private_networks=settings.jwks_allow_private_networks,
        outbound_allow_http=settings.outbound_allow_http,
        outbound_allow_private_networks=settings.outbound_allow_private_networks,
        jwt_max_lifetime_seconds=settings.jwt_max_lifetime_seconds,
        jwt_rate_per_minute=settings.jwt_rate_per_minute,
        jwt_rate_burst=settings.jwt_rate_burst,
        database_connect_timeout_seconds=settings.database_connect_timeout_seconds,
        database_statement_timeout_seconds=settings.database_statement_timeout_seconds,
        database_pool_timeout_seconds=settings.database_pool_timeout_seconds,
        database_pool_size=settings.database_pool_size,
        instance_id=settings.instance_id or new_instance_id(),
        conversation_lease_seconds=settings.conversation_lease_seconds,
        secret_key=settings.secret_key.get_secret_value() if settings.secret_key else None,
        recordings_dir=settings.recordings_dir or default_recordings_dir(settings.database_url),
        language_model=language_model_options(settings),
    )


WHOLE_ANSWER_FACTOR = 3
"""A whole answer may take this many times PARLEY_LLM_TIMEOUT_SECONDS (a reply's first
token): an extraction reads the whole conversation and writes every field."""


def language_model_options(settings: Settings) -> LanguageModelOptions | None:
    """The language model of the work after a call, when PARLEY_LLM_BASE_URL is set."""
    if settings.llm_base_url is None or settings.llm_model is None:
        return None
    key = settings.llm_api_key.get_secret_value() if settings.llm_api_key else ""
    return LanguageModelOptions(
        base_url=settings.llm_base_url,
        model=settings.llm_model,
        api_key=key,
        timeout_s=settings.llm_timeout_seconds * WHOLE_ANSWER_FACTOR,
    )


def default_recordings_dir(database_url: str) -> Path | None:
    """`recordings/` beside the SQLite file; None for another database (API.md 16: with
    PostgreSQL the directory must be named, one every instance shares)."""
    # Imported here: the operator commands import this module without `cryptography`.
    from parley.sealing import embedded_directory

    beside = embedded_directory(database_url)
    return None if beside is None else beside / "recordings"


def database_options(settings: Settings) -> DatabaseOptions:
    """Hand the operator commands the database's URL and time-outs from the configuration."""
    return DatabaseOptions(
        url=settings.database_url,
        connect_timeout_seconds=settings.database_connect_timeout_seconds,
        statement_timeout_seconds=settings.database_statement_timeout_seconds,
        pool_timeout_seconds=settings.database_pool_timeout_seconds,
        pool_size=settings.database_pool_size,
    )


def engine_options(settings: Settings) -> EngineOptions:
    """Choose the engine's plug-ins and tuning from the configuration."""
    # The engine (numpy, soxr, Silero) loads only for serving, not for operator commands.
    from parley.engine import (
        EngineOptions,
        EngineSettings,
        LlmOptions,
        VadParams,
        installed_turn_model,
    )

    llm = None
    if settings.llm_base_url is not None and settings.llm_model is not None:
        key = settings.llm_api_key.get_secret_value() if settings.llm_api_key else ""
        llm = LlmOptions(
            base_url=settings.llm_base_url,
            model=settings.llm_model,
            api_key=key,
            timeout_s=settings.llm_timeout_seconds,
        )
    vad = VadParams(
        end_silence_ms=settings.vad_end_silence_ms, min_speech_ms=settings.vad_min_speech_ms
    )
    turn_model = settings.turn_model or installed_turn_model()
    turn_detection = settings.turn_detection or ("semantic" if turn_model.is_file() else "vad")
    return EngineOptions(
        stt=settings.stt,
        stt_model=settings.stt_model,
        stt_threads=settings.stt_threads,
        stt_beam_size=settings.stt_beam_size,
        llm=llm,
        turn_detection=turn_detection,
        turn_model=turn_model,
        tuning=EngineSettings(vad=vad),
    )


def new_instance_id() -> str:
    """A name for an instance that was given none: host, process and a random part."""
    return f"{socket.gethostname()[:64]}:{os.getpid()}:{secrets.token_hex(4)}"
