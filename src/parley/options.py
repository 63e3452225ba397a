"""From the operator's Settings to the plain values the services need.

Shared by the composition root (`parley.app`) and the operator commands (`parley.cli`), which
open a services context without loading the HTTP layer.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from parley.composition import RuntimeOptions, new_instance_id
from parley.config import Settings

if TYPE_CHECKING:
    from parley.engine import EngineOptions


def runtime_options(settings: Settings) -> RuntimeOptions:
    """Hand the services the plain values they need from the configuration."""
    return RuntimeOptions(
        database_url=settings.database_url,
        redis_url=settings.redis_url,
        default_audience=settings.public_host,
        public_url=settings.public_url,
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
        instance_id=settings.instance_id or new_instance_id(),
        conversation_lease_seconds=settings.conversation_lease_seconds,
        secret_key=settings.secret_key.get_secret_value() if settings.secret_key else None,
    )


def engine_options(settings: Settings) -> EngineOptions:
    """Choose the engine's plug-ins and tuning from the configuration."""
    # The engine (numpy, soxr, Silero) loads only for serving, not for operator commands.
    from parley.engine import EngineOptions, EngineSettings, LlmOptions, VadParams

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
    return EngineOptions(
        stt=settings.stt,
        stt_model=settings.stt_model,
        stt_threads=settings.stt_threads,
        llm=llm,
        tuning=EngineSettings(vad=vad),
    )
