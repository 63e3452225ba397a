"""What a long-lived server process tunes once: its cyclic collector and its log records."""

from __future__ import annotations

import gc
import logging


def freeze_startup_heap() -> None:
    """Collect once, then freeze what survives, for a process that has finished starting.

    The modules, the app, its context and the loaded models live as long as the process;
    Python's full collections walked all of them (about 186,000 objects in `parley serve`)
    and stopped the event loop for about 110 ms every second or so under load: /health's
    p99 was there (docs/performance.md). Frozen, they are never walked again; later
    collections see only what was allocated since. Not for a test process, which builds
    many apps in one and must get their garbage back.
    """
    gc.collect()
    gc.freeze()


def lean_log_records() -> None:
    """Stop filling in what no server log line shows: the calling function, file and line
    (a walk up the stack per record), the thread and the process.

    The server's formats are Parley's `%(levelname)s %(name)s: %(message)s` and uvicorn's
    `%(levelprefix)s %(message)s`, and every request writes an access line, so each record
    paid for fields never printed; these are the switches the logging HOWTO names for it
    ("Optimization"). Not for a test process, whose captured logs show file and line.
    """
    logging.logThreads = False
    logging.logProcesses = False
    logging.logMultiprocessing = False
    logging._srcfile = None  # the documented switch for caller information
