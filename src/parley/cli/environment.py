"""The environment variables `parley serve` reads, for its help (kept in step with
`parley.config.Settings` by tests/cli/test_startup_errors.py, without importing pydantic)."""

from __future__ import annotations

VARIABLES: tuple[tuple[str, str, str], ...] = (
    ("PARLEY_DATABASE_URL", "sqlite:///parley.db", "SQLite file or postgresql://user:pw@host/db"),
    ("PARLEY_REDIS_URL", "unset", "Redis shared by instances; unset: in-process stores"),
    (
        "PARLEY_PUBLIC_URL",
        "http://127.0.0.1:8000",
        "public URL; unset: follows --host and --port; its host is the JWT audience",
    ),
    ("PARLEY_JWKS_ALLOW_HTTP", "false", "allow http:// JWKS URLs (local testing)"),
    ("PARLEY_JWKS_ALLOW_PRIVATE_NETWORKS", "false", "allow JWKS hosts on private addresses"),
    ("PARLEY_OUTBOUND_ALLOW_HTTP", "false", "allow http:// webhook and tool URLs"),
    ("PARLEY_OUTBOUND_ALLOW_PRIVATE_NETWORKS", "false", "allow webhook hosts on private addresses"),
    (
        "PARLEY_WEBHOOK_RETRY_SCHEDULE",
        "5,300,1800,7200,18000,36000,36000",
        "seconds between webhook attempts",
    ),
    ("PARLEY_TWILIO_API_URL", "https://api.twilio.com", "the carrier's REST API (http(s))"),
    (
        "PARLEY_RECORDINGS_DIR",
        "unset",
        "where recordings are kept; unset: recordings/ beside the SQLite file",
    ),
    ("PARLEY_SECRET_KEY", "unset", "Fernet key sealing stored secrets; unset: parley.secret"),
    ("PARLEY_JWT_MAX_LIFETIME_SECONDS", "3600", "longest JWT exp - iat accepted (60..86400)"),
    ("PARLEY_JWT_RATE_PER_MINUTE", "60", "JWT requests per (iss, sub, conversation)"),
    ("PARLEY_JWT_RATE_BURST", "20", "burst of that rate limit"),
    ("PARLEY_LOG_LEVEL", "info", "critical, error, warning, info, debug or trace"),
    ("PARLEY_METRICS", "false", "serve Prometheus metrics at /metrics"),
    ("PARLEY_METRICS_TOKEN", "unset", "bearer token /metrics requires (16+ characters)"),
    ("PARLEY_STT", "whisper", "speech recognition: whisper, or none (placeholder words)"),
    ("PARLEY_STT_MODEL", "unset", "tiny.en, base, small or a Whisper model dir; unset: tiny.en"),
    ("PARLEY_STT_THREADS", "2", "CPU threads of one speech decode"),
    ("PARLEY_STT_BEAM_SIZE", "1", "beams of a turn's final decode (1..10); 1: greedy, fastest"),
    ("PARLEY_VAD_END_SILENCE_MS", "400", "silence that ends the user's turn (100..5000)"),
    ("PARLEY_VAD_MIN_SPEECH_MS", "250", "least speech for a turn (96..5000)"),
    (
        "PARLEY_TURN_DETECTION",
        "unset",
        "turn end: semantic (end-of-turn model) or vad; unset: semantic if installed",
    ),
    ("PARLEY_TURN_MODEL", "unset", "Smart Turn v3 ONNX file; unset: the one scripts/install put"),
    ("PARLEY_LLM_BASE_URL", "unset", "OpenAI-compatible API; unset: rule-based replies"),
    ("PARLEY_LLM_API_KEY", "unset", "its bearer key"),
    ("PARLEY_LLM_MODEL", "unset", "its model name (required with a base URL)"),
    ("PARLEY_LLM_TIMEOUT_SECONDS", "10.0", "first token, and each later piece, within this"),
    ("PARLEY_DATABASE_CONNECT_TIMEOUT_SECONDS", "3.0", "longest wait to connect to the database"),
    ("PARLEY_DATABASE_STATEMENT_TIMEOUT_SECONDS", "5.0", "longest database statement"),
    ("PARLEY_DATABASE_POOL_TIMEOUT_SECONDS", "3.0", "longest wait for a pooled connection"),
    ("PARLEY_DATABASE_POOL_SIZE", "20", "PostgreSQL connections kept per process (+ half more)"),
    ("PARLEY_HTTP_HEADER_TIMEOUT_SECONDS", "10.0", "a request's line and headers within this"),
    ("PARLEY_HTTP_BODY_TIMEOUT_SECONDS", "30.0", "a request's body within this of its headers"),
    ("PARLEY_MAX_CONNECTIONS", "1000", "open connections per process; past it, 503"),
    ("PARLEY_MAX_CONNECTIONS_PER_CLIENT", "100", "of those, from one client address; past it, 503"),
    ("PARLEY_TRUSTED_PROXIES", "unset", "proxy addresses/networks whose X-Forwarded-* count"),
    ("PARLEY_INSTANCE_ID", "unset", "this instance's name; unset: host:port of serve"),
    ("PARLEY_CONVERSATION_LEASE_SECONDS", "15.0", "live conversations of a silent instance end"),
)


def serve_epilog() -> str:
    """The variables as a help section (the \\b line keeps click from rewrapping it)."""
    width = max(len(name) for name, _, _ in VARIABLES)
    lines = [f"  {name:<{width}}  {text} [default: {default}]" for name, default, text in VARIABLES]
    return "\b\nEnvironment variables (also read from ./.env):\n" + "\n".join(lines)
