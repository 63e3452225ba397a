"""The webhook sender process of `parley serve` (composition/webhook_sender.py): the hidden
command that runs it, and the supervisor that starts it beside uvicorn, starts it again if
it dies, and stops it with the server."""

from __future__ import annotations

import contextlib
import gc
import logging
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import typer

from parley.cli.common import load_settings, run

log = logging.getLogger("parley.webhooks")

RESTART_DELAY_S = 1.0
"""After a crash (a status other than 0, or a signal's), the sender starts again this soon."""
CLEAN_EXIT_RESTART_DELAY_S = 5.0
"""After a clean exit (a SIGTERM), this late: a process manager that stops the whole group
(systemd's default, `timeout`) stops the sender with the server, and the server's own stop
(uvicorn's graceful 3 s) comes before this, so the sender is not started again for nothing."""
STOP_TIMEOUT_S = 10.0
"""How long a stopping sender may take (its sends in flight are cancelled, its attempts
recorded, its claims released) before it is killed."""


def webhook_sender(
    socket: Path = typer.Option(..., help="The doorbell the serving workers ring."),
    name: str = typer.Option(..., help="The name the sender claims deliveries under."),
) -> None:
    """Send this instance's webhooks (started by `parley serve`; not for direct use)."""
    import asyncio
    import dataclasses

    from parley.cli.allocator import limit_malloc_arenas
    from parley.cli.serve import SERVER_GC_THRESHOLD, configure_logging
    from parley.clock import SystemClock
    from parley.composition.options import runtime_options
    from parley.composition.webhook_sender import SenderAddress, run_sender

    limit_malloc_arenas()  # a long life, as `parley serve`'s
    gc.set_threshold(*SERVER_GC_THRESHOLD)
    settings = load_settings()
    configure_logging(settings.log_level)
    # Ctrl-C reaches the whole process group: the sender stops when `parley serve` tells
    # it to (SIGTERM), after the server, or when `parley serve` is gone (its pipe closes).
    signal.signal(signal.SIGINT, signal.SIG_IGN)

    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        loop.add_signal_handler(signal.SIGTERM, stop.set)
        parent = sys.stdin.fileno()

        def on_parent_readable() -> None:
            if not os.read(parent, 512):
                _die_with_parent(socket)

        loop.add_reader(parent, on_parent_readable)
        await run_sender(
            # The sender asks no language model (the work after a call is the server's):
            # it loads no engine.
            dataclasses.replace(runtime_options(settings), language_model=None),
            SenderAddress(socket=socket, claimer=name),
            clock=SystemClock(),
            retry_schedule=settings.retry_schedule,
            stop=stop,
            freeze_heap=True,
        )

    import uvloop  # as uvicorn's loop="uvloop" for the server: its loop costs less a wake-up

    run(main(), settings, loop_factory=uvloop.new_event_loop)


def _die_with_parent(doorbell: Path) -> None:
    """End at once, as if killed with `parley serve` (its pipe closed: it died, even by
    SIGKILL). Nothing is released: a sender restarted under the same name releases this
    one's claims before its first (a slower, graceful stop could release them after)."""
    with contextlib.suppress(OSError):
        doorbell.unlink()
        doorbell.parent.rmdir()  # made for it by the supervisor that is gone
    os._exit(0)


class _Supervisor:
    """Keeps one sender process running until `stop`."""

    def __init__(self, command: list[str]) -> None:
        self._command = command
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._process: subprocess.Popen[bytes] | None = None
        self._thread = threading.Thread(target=self._keep_running, name="parley-webhook-sender")

    def start(self) -> None:
        self._thread.start()

    def _keep_running(self) -> None:
        while True:
            with self._lock:
                if self._stopping.is_set():
                    return
                # Its standard input is a pipe from this process: it ends when we do.
                self._process = process = subprocess.Popen(self._command, stdin=subprocess.PIPE)  # noqa: S603
            code = process.wait()
            delay = CLEAN_EXIT_RESTART_DELAY_S if code == 0 else RESTART_DELAY_S
            if self._stopping.wait(delay):
                return
            log.warning("the webhook sender exited with status %s; starting it again", code)

    def stop(self) -> None:
        with self._lock:
            self._stopping.set()
            process = self._process
        if process is not None and process.poll() is None:
            process.terminate()
            try:
                process.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        self._thread.join()


UNIX_PATH_MAX = 107
"""The longest path a Unix socket's address holds (Linux: 108 bytes with the final NUL)."""


def doorbell_directory() -> Path:
    """A new directory (0700: ours alone) for the doorbell: in TMPDIR, or in /tmp when
    TMPDIR's path is too long for a Unix socket's address (a test's or a CI job's nested
    temporary directory can be)."""
    directory = Path(tempfile.mkdtemp(prefix="parley-webhooks-"))
    if len(os.fsencode(directory / "doorbell")) <= UNIX_PATH_MAX:
        return directory
    directory.rmdir()
    return Path(tempfile.mkdtemp(prefix="parley-webhooks-", dir="/tmp"))


@contextmanager
def supervised_sender(instance: str) -> Iterator[None]:
    """Run the webhook sender of `instance` beside the server for the block, and tell the
    serving workers (started inside the block, inheriting the environment) where it is."""
    from parley.composition.webhook_sender import SENDER_VARIABLE, SenderAddress

    directory = doorbell_directory()
    address = SenderAddress.for_instance(instance, directory / "doorbell")
    os.environ.update(address.to_environment())
    command = [sys.executable, "-m", "parley", "webhook-sender"]
    supervisor = _Supervisor([*command, "--socket", str(address.socket), "--name", address.claimer])
    supervisor.start()
    try:
        yield
    finally:
        supervisor.stop()
        os.environ.pop(SENDER_VARIABLE, None)
        shutil.rmtree(directory, ignore_errors=True)
