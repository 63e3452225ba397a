"""The C allocator of `parley serve`: glibc malloc limited to a few arenas, so RSS stays flat.

glibc gives each thread that allocates an arena of its own, up to 8 per core, and an arena
other than the main one hands freed memory back to the system only from its top. The
engine's native work (hibari-tts inference and its numpy DSP, soxr) runs in AnyIO worker
threads that come and go (an idle one exits after 10 s), so each sentence's large
temporaries, of a different size every time, are carved from whichever arena the thread
got, and every arena keeps the holes. Under bench/soak.py (SQLite, PARLEY_STT=none) malloc's
memory in use stayed flat (about 213 MB, Python objects too: tracemalloc and gc counts)
while the free memory the arenas held grew from 43 to 81 MB in 5 minutes, and RSS by
7 to 11 MB a minute. With two arenas the same load ran at 0.5 MB a minute or less, with
the same throughput.

An operator's own MALLOC_ARENA_MAX (or the glibc.malloc.arena_max tunable) wins; on a C
library other than glibc nothing changes.
"""

from __future__ import annotations

import ctypes
import os
from collections.abc import MutableMapping

ARENA_MAX = 2
"""Arenas for the whole process: the main one and one that the threads share."""

_M_ARENA_MAX = -8  # glibc <malloc.h>


def limit_malloc_arenas(environ: MutableMapping[str, str] = os.environ) -> bool:
    """Cap glibc's arenas at ARENA_MAX here and in the worker processes started later.

    Call it first thing, before any thread allocates: glibc fixes the cap when it first
    needs more than 8 arenas, so it must be set while there are fewer. Returns True if the
    cap was set; False if the operator chose one or the C library is not glibc.
    """
    if "MALLOC_ARENA_MAX" in environ or "arena_max" in environ.get("GLIBC_TUNABLES", ""):
        return False
    if not _is_glibc():
        return False
    if not ctypes.CDLL(None).mallopt(_M_ARENA_MAX, ARENA_MAX):
        return False
    # uvicorn's `--workers` are new interpreters: glibc reads this when each one starts.
    environ["MALLOC_ARENA_MAX"] = str(ARENA_MAX)
    return True


def _is_glibc() -> bool:
    try:
        version = os.confstr("CS_GNU_LIBC_VERSION")
    except (ValueError, OSError):
        return False
    return version is not None and version.startswith("glibc")
