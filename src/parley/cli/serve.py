"""`parley serve` and `parley migrate`."""

from __future__ import annotations

import gc
import logging
import os
import shutil
import signal
import socket
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType
from typing import TYPE_CHECKING

import typer

from parley.cli.allocator import limit_malloc_arenas
from parley.cli.common import load_settings, run_migration, run_with_context, set_debug
from parley.cli.webhook_sender import supervised_sender

if TYPE_CHECKING:
    from parley.config import Settings
    from parley.services import Context
    from parley.services.orgs import NewOrganization


GRACEFUL_SHUTDOWN_SECONDS = 3
SERVER_GC_THRESHOLD = (700, 10, 10)
"""Python's default collection thresholds, which the server keeps."""


def serve(
    host: str = typer.Option("127.0.0.1", help="Address to listen on."),
    port: int = typer.Option(8000, min=1, max=65535, help="Port to listen on."),
    workers: int = typer.Option(1, min=1, max=64, help="Worker processes (needs Redis above 1)."),
    debug: bool = typer.Option(False, "--debug", help="Show tracebacks of start-up failures."),
) -> None:
    """Migrate the database, create the first organization if there is none, and serve."""
    # First of all: a port in use would otherwise be found by uvicorn only after the models
    # load, the database is migrated and the first key is printed (for a database then
    # never served).
    check_port_free(host, port)
    # Before any thread allocates: RSS grew 7-11 MB a minute under load through malloc
    # arenas holding freed memory, one per worker thread (parley/cli/allocator.py).
    limit_malloc_arenas()
    gc.set_threshold(*SERVER_GC_THRESHOLD)  # a long life: Python's defaults (parley.__main__)
    from parley.services import orgs

    set_debug(debug)
    configured = load_settings()
    settings = follow_listening_address(configured, host=host, port=port)
    if workers > 1 and not settings.distributed:
        typer.echo(
            "error: --workers above 1 needs PARLEY_REDIS_URL: in-process stores are not "
            "shared between processes",
            err=True,
        )
        raise typer.Exit(2)
    check_speech_model(settings)
    check_turn_model(settings)
    check_language_model(settings)

    async def bootstrap(ctx: Context) -> NewOrganization | None:
        return await orgs.bootstrap(ctx)

    created = run_with_context(settings, bootstrap)
    if created is not None:
        typer.echo(
            f"Created organization {created.org.name!r} ({created.org.id}). "
            "Its first API key, shown only this once:\n\n"
            f"    {created.api_key.secret}\n\n"
            "Lost it? Make another (the database keeps only its hash):\n"
            "    parley api-keys create --org default\n"
        )
    # A name that survives a restart: the restarted instance ends its previous life's
    # conversations at once (services/instances.py). Workers each get a fresh name; the
    # webhook sender is the instance's.
    instance = settings.instance_id or f"{socket.gethostname()[:64]}:{port}"
    if settings.instance_id is None and workers == 1:
        os.environ["PARLEY_INSTANCE_ID"] = instance
    followed = "public_url" not in configured.model_fields_set
    typer.echo(public_url_line(settings, host=host, followed=followed))
    configure_logging(settings.log_level)
    with (
        shared_metrics_directory(enabled=settings.metrics and workers > 1),
        clean_sigterm_exit(),
        supervised_sender(instance),
    ):
        _run_uvicorn(host=host, port=port, workers=workers, settings=settings)


def _run_uvicorn(*, host: str, port: int, workers: int, settings: Settings) -> None:
    import uvicorn  # imported here: the other commands start faster without it

    from parley.app import WS_PROTOCOL, http_protocol
    from parley.config import trusted_proxy_list
    from parley.services.live import MAX_MESSAGE_BYTES

    # X-Forwarded-For / -Proto count only from the operator's proxies (PARLEY_TRUSTED_PROXIES):
    # they then set the client address (throttle, audit trail, logs) and the scheme (Secure).
    trusted_proxies = trusted_proxy_list(settings.trusted_proxies)

    uvicorn.run(
        "parley.app:create_app_from_env",
        factory=True,
        host=host,
        port=port,
        workers=workers,
        loop="uvloop",
        # Header and body time-outs, the connection cap, 414/431 (parley/api/http_protocol.py).
        http=http_protocol(settings),
        ws=WS_PROTOCOL,  # shutdown closes sockets with 1001 (parley/api/uvicorn_ws.py)
        # API.md section 8: a frame over 1 MiB closes the socket with 1009.
        ws_max_size=MAX_MESSAGE_BYTES,
        ws_per_message_deflate=False,
        access_log=False,
        proxy_headers=bool(trusted_proxies),
        forwarded_allow_ips=trusted_proxies or None,
        server_header=False,
        log_level=settings.log_level,
        # SIGTERM: sockets close at once and their conversations end; a request still
        # running after this long is cut off, so the process always stops.
        timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_SECONDS,
    )


def follow_listening_address(settings: Settings, *, host: str, port: int) -> Settings:
    """Unset, PARLEY_PUBLIC_URL follows --host and --port (`parley.config.listening_url`),
    so the carrier's voice URL, the TwiML stream URL, the signature check and the default
    JWT audience name the port served. A URL the operator set is kept as it is."""
    if "public_url" in settings.model_fields_set:
        return settings
    from parley.config import listening_url

    url = listening_url(host, port)
    os.environ["PARLEY_PUBLIC_URL"] = url  # the workers build their settings from it
    return settings.model_copy(update={"public_url": url})


def public_url_line(settings: Settings, *, host: str, followed: bool) -> str:
    """The start-up line naming the public URL in force, and where it comes from."""
    from parley.config import WILDCARD_HOSTS

    line = f"Public URL: {settings.public_url}"
    if not followed:
        return f"{line} (PARLEY_PUBLIC_URL)"
    line += " (PARLEY_PUBLIC_URL is unset: it follows --host and --port"
    if host.strip("[]") in WILDCARD_HOSTS:
        line += f"; --host {host} listens on every address: set PARLEY_PUBLIC_URL to the one"
        line += " carriers and browsers reach"
    return line + ")"


@contextmanager
def clean_sigterm_exit() -> Iterator[None]:
    """Exit with status 0 when SIGTERM stops the server, instead of dying by the signal.

    uvicorn shuts down gracefully on SIGTERM, then restores the previous handler and raises
    the signal again, so the default handler killed the process (status -15) and process
    supervisors counted every clean stop as a failure. The handler installed here turns
    that re-raised signal (or one arriving before uvicorn listens) into exit status 0.
    """

    def exit_cleanly(signum: int, frame: FrameType | None) -> None:  # noqa: ARG001
        raise SystemExit(0)

    previous = signal.signal(signal.SIGTERM, exit_cleanly)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@contextmanager
def shared_metrics_directory(*, enabled: bool) -> Iterator[None]:
    """With several workers and metrics on, give prometheus-client a fresh directory for
    every worker's values (PROMETHEUS_MULTIPROC_DIR, parley/metrics.py) and remove it at
    exit. One the operator set already is used as it is, and kept."""
    from parley.metrics import MULTIPROCESS_VARIABLE

    if not enabled or os.environ.get(MULTIPROCESS_VARIABLE):
        yield
        return
    directory = tempfile.mkdtemp(prefix="parley-metrics-")
    os.environ[MULTIPROCESS_VARIABLE] = directory  # inherited by the workers uvicorn starts
    try:
        yield
    finally:
        del os.environ[MULTIPROCESS_VARIABLE]
        shutil.rmtree(directory, ignore_errors=True)


PAYLOAD_LOGGERS = ("aiosqlite", "asyncpg", "httpcore", "httpcore2", "httpx", "hpack", "openai")
"""Libraries whose DEBUG lines carry what they send (SQL parameters, HTTP headers and
bodies): a tool's endpoint headers, sealed secrets, a model's key. Never below INFO."""


def configure_logging(level: str) -> None:
    """Log Parley at `level` to standard error; the payload loggers never below INFO."""
    logging.basicConfig(level=level.upper(), format="%(levelname)s %(name)s: %(message)s")
    for name in PAYLOAD_LOGGERS:
        logger = logging.getLogger(name)
        logger.setLevel(max(logger.getEffectiveLevel(), logging.INFO))


def check_port_free(host: str, port: int) -> None:
    """Exit 2 with one line naming `--port` (or `--host`) when the address cannot be bound.

    The socket is bound as uvicorn binds it (SO_REUSEADDR, so a closing connection in
    TIME_WAIT is no false alarm) and closed at once.
    """
    import errno

    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as error:
            if error.errno == errno.EADDRINUSE:
                message = f"--port {port}: {host}:{port} is already in use; choose another --port"
            else:
                message = f"--host {host} --port {port}: cannot listen there ({error.strerror})"
            typer.echo(f"error: {message}", err=True)
            raise typer.Exit(2) from None


def check_speech_model(settings: Settings) -> None:
    """Refuse to start, with a clear message, when the speech model cannot be used."""
    if settings.stt != "whisper":
        return
    from parley.engine import RecognizerUnavailable, check_model_dir
    from parley.engine.recognizers import default_model_dir

    try:
        check_model_dir(settings.stt_model or default_model_dir())
    except RecognizerUnavailable as error:
        variable = "PARLEY_STT_MODEL" if settings.stt_model else "the bundled model"
        typer.echo(
            f"error: {variable}: {error.message} Set PARLEY_STT_MODEL to tiny.en, base, small "
            "or a CTranslate2 Whisper model directory, or PARLEY_STT=none to run without "
            "speech recognition.",
            err=True,
        )
        raise typer.Exit(2) from None


def check_turn_model(settings: Settings) -> None:
    """Refuse to start when PARLEY_TURN_DETECTION=semantic and the model is not installed."""
    if settings.turn_detection != "semantic":
        return  # unset: semantic if the model is there, else vad (composition/options.py)
    from parley.engine import installed_turn_model

    path = settings.turn_model or installed_turn_model()
    if not path.is_file():
        variable = "PARLEY_TURN_MODEL" if settings.turn_model else "the end-of-turn model"
        typer.echo(
            f"error: PARLEY_TURN_DETECTION=semantic: {variable} {path} is not installed. Run "
            "scripts/install (it installs the model), set PARLEY_TURN_MODEL to the Smart Turn "
            "v3 ONNX file, or set PARLEY_TURN_DETECTION=vad.",
            err=True,
        )
        raise typer.Exit(2)


def check_language_model(settings: Settings) -> None:
    """Warn in one line when PARLEY_LLM_BASE_URL is set and does not answer (not fatal)."""
    if settings.llm_base_url is None:
        return
    from parley.cli.language_model import language_model_warning

    key = settings.llm_api_key.get_secret_value() if settings.llm_api_key else None
    if warning := language_model_warning(settings.llm_base_url, key):
        typer.echo(warning, err=True)


def migrate() -> None:
    """Migrate the database to the newest schema."""
    run_migration(load_settings())
    typer.echo("The database is at the newest schema.")
