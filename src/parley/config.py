"""Settings: one typed class, read once from `PARLEY_*` variables (and `.env`), passed down."""

from __future__ import annotations

import ipaddress
import re
from pathlib import Path
from typing import Literal
from urllib.parse import urlsplit

from pydantic import Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

FERNET_KEY = re.compile(r"[A-Za-z0-9_-]{43}=")
"""A Fernet key as Fernet.generate_key() writes it: 32 bytes, url-safe base64, padded."""

DEFAULT_DATABASE_URL = "sqlite+aiosqlite:///parley.db"
LOG_LEVELS = ("critical", "error", "warning", "info", "debug", "trace")
MAX_RETRIES = 20
MAX_RETRY_WAIT_SECONDS = 7 * 86_400


class Settings(BaseSettings):
    """Everything an operator can configure (API.md section 11)."""

    model_config = SettingsConfigDict(
        env_prefix="PARLEY_", env_file=".env", env_file_encoding="utf-8", extra="ignore"
    )

    database_url: str = DEFAULT_DATABASE_URL
    redis_url: str | None = None
    public_url: str = "http://127.0.0.1:8000"
    """What carriers call and sign, and the default JWT audience's host. Unset, `parley serve`
    makes it follow --host and --port (`listening_url`); this default is `serve`'s own."""
    jwks_allow_http: bool = False
    jwks_allow_private_networks: bool = False
    # Calls going out to customers (webhook tools, webhooks): src/parley/outbound.
    outbound_allow_http: bool = False
    outbound_allow_private_networks: bool = False
    webhook_retry_schedule: str = "5,300,1800,7200,18000,36000,36000"
    """Seconds to wait after each failed webhook attempt (API.md section 14): `1,2,3` means
    at most four attempts."""
    twilio_api_url: str = "https://api.twilio.com"
    """The carrier's REST API (API.md section 15): the operator's, so trusted (http allowed,
    private addresses too: tests point it at a simulator); no credentials or query in it."""
    recordings_dir: Path | None = None
    """Where recordings are kept (API.md section 16); unset: `recordings/` beside the SQLite
    file; with PostgreSQL a directory every instance shares (unset there: none is kept,
    except on an agent's external storage)."""
    secret_key: SecretStr | None = None
    """The Fernet key sealing stored secrets (parley/sealing.py); unset: a key file."""
    jwt_max_lifetime_seconds: int = Field(default=3600, ge=60, le=86_400)
    jwt_rate_per_minute: int = Field(default=60, ge=1, le=1_000_000)
    jwt_rate_burst: int = Field(default=20, ge=1, le=1_000_000)
    log_level: str = "info"
    metrics: bool = False
    metrics_token: str | None = None

    # The conversation engine (docs/engine.md).
    stt: Literal["whisper", "none"] = "whisper"
    stt_model: str | None = None
    """A Whisper model name (tiny.en, base, small) or a CTranslate2 Whisper directory; unset:
    tiny.en (parley/engine/recognizers/models.py)."""
    stt_threads: int = Field(default=2, ge=1, le=64)
    stt_beam_size: int = Field(default=1, ge=1, le=10)
    """Beams of a turn's final decode: 1 is greedy (the fastest); 5 hears noisy and unusual
    speech better for about 70 % more decode time per turn (docs/performance.md)."""
    vad_end_silence_ms: int = Field(default=400, ge=100, le=5_000)
    vad_min_speech_ms: int = Field(default=250, ge=96, le=5_000)
    turn_detection: Literal["vad", "semantic"] | None = None
    """How a turn ends: "semantic" (the end-of-turn model judges each pause), "vad" (silence
    alone); unset: semantic when the model is installed, else vad."""
    turn_model: Path | None = None
    """The Smart Turn v3 ONNX file; unset: the one scripts/install put in the environment."""
    llm_base_url: str | None = None
    llm_api_key: SecretStr | None = None
    llm_model: str | None = None
    llm_timeout_seconds: float = Field(default=10.0, gt=0, le=300)

    @field_validator("secret_key")
    @classmethod
    def _secret_key(cls, value: SecretStr | None) -> SecretStr | None:
        if value is None or not value.get_secret_value():
            return None
        # Imported only when a key is set: most commands never load the crypto library.
        from cryptography.fernet import Fernet

        key = value.get_secret_value()
        try:
            # The shape itself, whatever the library's version forgives (cryptography 51
            # decodes a key without its `=`): 32 bytes are 43 characters and one `=`.
            if not FERNET_KEY.fullmatch(key):
                raise ValueError("not 44 url-safe base64 characters ending in '='")
            Fernet(key)
        except (ValueError, TypeError):  # binascii.Error is a ValueError
            raise ValueError(
                "must be a Fernet key, 32 url-safe base64-encoded bytes (make one with "
                '`python -c "from cryptography.fernet import Fernet; '
                'print(Fernet.generate_key().decode())"`)'
            ) from None
        return value

    @field_validator("webhook_retry_schedule")
    @classmethod
    def _retry_schedule(cls, value: str) -> str:
        parts = [part.strip() for part in value.split(",")]
        if not 1 <= len(parts) <= MAX_RETRIES or not all(
            part.isascii() and part.isdigit() and 1 <= int(part) <= MAX_RETRY_WAIT_SECONDS
            for part in parts
        ):
            raise ValueError(
                f"must be 1 to {MAX_RETRIES} comma-separated waits in seconds, each from 1 to "
                f"{MAX_RETRY_WAIT_SECONDS}, e.g. 5,300,1800"
            )
        return ",".join(str(int(part)) for part in parts)

    @property
    def retry_schedule(self) -> tuple[int, ...]:
        """PARLEY_WEBHOOK_RETRY_SCHEDULE as seconds."""
        return tuple(int(part) for part in self.webhook_retry_schedule.split(","))

    @field_validator("llm_base_url")
    @classmethod
    def _llm_url(cls, value: str | None) -> str | None:
        if value in (None, ""):
            return None
        parts = urlsplit(value)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError("PARLEY_LLM_BASE_URL must be an absolute http(s) URL")
        return value.rstrip("/")

    @field_validator("twilio_api_url")
    @classmethod
    def _twilio_api_url(cls, value: str) -> str:
        parts = urlsplit(value)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError("PARLEY_TWILIO_API_URL must be an absolute http(s) URL")
        if parts.username is not None or parts.query or parts.fragment:
            raise ValueError(
                "PARLEY_TWILIO_API_URL must hold no credentials, query or fragment (the "
                "account's credentials are sent as HTTP Basic authentication)"
            )
        _check_port(value)
        return value.rstrip("/")

    @model_validator(mode="after")
    def _llm_needs_model(self) -> Settings:
        if self.llm_base_url is not None and not self.llm_model:
            raise ValueError("PARLEY_LLM_BASE_URL is set: set PARLEY_LLM_MODEL too")
        return self

    # Bounds on every wait on the database (docs/reliability.md): past them, 503.
    database_connect_timeout_seconds: float = Field(default=3.0, gt=0, le=300)
    database_statement_timeout_seconds: float = Field(default=5.0, gt=0, le=3600)
    database_pool_timeout_seconds: float = Field(default=3.0, gt=0, le=300)
    # Connections each process keeps open to PostgreSQL (docs/reliability.md).
    database_pool_size: int = Field(default=20, ge=1, le=1000)

    # What a client may hold (docs/reliability.md, "Slow clients and proxies"): a request's
    # headers and body arrive within these times, and a process keeps this many connections,
    # this many from one client address (the socket's peer; trusted proxies are exempt).
    http_header_timeout_seconds: float = Field(default=10.0, gt=0, le=300)
    http_body_timeout_seconds: float = Field(default=30.0, gt=0, le=3600)
    max_connections: int = Field(default=1000, ge=1, le=100_000)
    max_connections_per_client: int = Field(default=100, ge=1, le=100_000)
    # Addresses or networks of reverse proxies whose X-Forwarded-For / X-Forwarded-Proto are
    # believed; empty, none is (a client could otherwise choose its own address).
    trusted_proxies: str | None = None

    @field_validator("trusted_proxies")
    @classmethod
    def _trusted_proxies(cls, value: str | None) -> str | None:
        for entry in trusted_proxy_list(value):
            try:
                ipaddress.ip_network(entry, strict=False)
            except ValueError:
                raise ValueError(
                    f"{entry!r} is not an IP address or network (such as 10.0.0.0/8)"
                ) from None
        return value

    # Leases on live conversations (docs/reliability.md): an instance that stops renewing
    # its lease for this long has its live conversations ended by the others.
    instance_id: str | None = Field(default=None, min_length=1, max_length=128)
    conversation_lease_seconds: float = Field(default=15.0, ge=1, le=3600)

    @field_validator("instance_id")
    @classmethod
    def _instance_id(cls, value: str | None) -> str | None:
        if value is not None and not value.isprintable():
            raise ValueError("must hold printable characters only")
        return value

    @field_validator("database_url")
    @classmethod
    def _known_database(cls, value: str) -> str:
        """Accept SQLite and PostgreSQL, normalizing plain URLs to their async drivers."""
        return normalize_database_url(value)

    @field_validator("redis_url")
    @classmethod
    def _redis_scheme(cls, value: str | None) -> str | None:
        if value in (None, ""):
            return None
        if urlsplit(value).scheme not in ("redis", "rediss", "unix"):
            raise ValueError("PARLEY_REDIS_URL must be a redis://, rediss:// or unix:// URL")
        _check_port(value)
        return value

    @field_validator("public_url")
    @classmethod
    def _public_url(cls, value: str) -> str:
        parts = urlsplit(value)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError("PARLEY_PUBLIC_URL must be an absolute http(s) URL")
        return value.rstrip("/")

    @field_validator("metrics_token")
    @classmethod
    def _metrics_token(cls, value: str | None) -> str | None:
        if value in (None, ""):
            return None
        if len(value) < 16 or any(c.isspace() for c in value):
            raise ValueError("must be at least 16 characters, without spaces")
        return value

    @field_validator("log_level")
    @classmethod
    def _log_level(cls, value: str) -> str:
        if value.lower() not in LOG_LEVELS:
            raise ValueError(f"must be one of {', '.join(LOG_LEVELS)}")
        return value.lower()

    @property
    def public_host(self) -> str:
        """The host of the public URL: the default JWT audience (API.md section 7)."""
        return urlsplit(self.public_url).hostname or "127.0.0.1"

    @property
    def distributed(self) -> bool:
        """True when shared state lives in Redis, so several instances may serve."""
        return self.redis_url is not None


def normalize_database_url(value: str) -> str:
    """Map `sqlite:`/`postgresql:` URLs to the async drivers; refuse other databases."""
    scheme, sep, rest = value.partition("://")
    if not sep:
        raise ValueError("PARLEY_DATABASE_URL must be a URL such as sqlite:///parley.db")
    drivers = {
        "sqlite": "sqlite+aiosqlite",
        "sqlite+aiosqlite": "sqlite+aiosqlite",
        "postgres": "postgresql+asyncpg",
        "postgresql": "postgresql+asyncpg",
        "postgresql+asyncpg": "postgresql+asyncpg",
    }
    if scheme not in drivers:
        raise ValueError("PARLEY_DATABASE_URL must name SQLite or PostgreSQL")
    if drivers[scheme].startswith("sqlite"):
        database = rest.removeprefix("/").partition("?")[0]
        if database in ("", ":memory:"):
            raise ValueError(
                "PARLEY_DATABASE_URL names an in-memory SQLite database, gone when the process "
                "ends: name a file, e.g. sqlite:///parley.db"
            )
    else:
        _check_port(value)
    return f"{drivers[scheme]}://{rest}"


def _check_port(url: str) -> None:
    """Refuse a port that is not a number from 1 to 65535 (urlsplit says why)."""
    try:
        port = urlsplit(url).port
    except ValueError as error:  # "Port out of range 0-65535", "Port could not be cast…"
        raise ValueError(f"has an invalid port: {error}") from None
    if port == 0:
        raise ValueError("has an invalid port: 0")


WILDCARD_HOSTS = {"0.0.0.0": "127.0.0.1", "::": "[::1]", "": "127.0.0.1"}  # noqa: S104
"""A server listening on every address is reached locally through the loopback address of
the same family (docs/decisions.md, "The public URL follows --port")."""


def listening_url(host: str, port: int) -> str:
    """The public URL of a server listening on `host`:`port` when PARLEY_PUBLIC_URL is unset:
    `http://host:port`, a wildcard host named by its loopback address, IPv6 in brackets."""
    name = WILDCARD_HOSTS.get(host.strip("[]"), host.strip("[]"))
    if ":" in name and not name.startswith("["):
        name = f"[{name}]"
    return f"http://{name}:{port}"


def trusted_proxy_list(value: str | None) -> list[str]:
    """Split PARLEY_TRUSTED_PROXIES (comma-separated, blanks ignored) into its entries."""
    return [entry.strip() for entry in (value or "").split(",") if entry.strip()]
