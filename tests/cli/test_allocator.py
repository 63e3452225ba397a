"""`parley serve` limits glibc's malloc arenas (parley/cli/allocator.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from parley.cli.allocator import ARENA_MAX, limit_malloc_arenas

THREADS = 6
PROBE = """
import ctypes, os, sys, threading
from parley.cli.allocator import limit_malloc_arenas

limited = limit_malloc_arenas() if sys.argv[1] == "limit" else False
barrier = threading.Barrier({threads})
kept = []

def work():
    barrier.wait()
    kept.append(bytearray(64 * 1024))  # malloc, in this thread's arena
    barrier.wait()  # every thread holds its arena at once

threads = [threading.Thread(target=work) for _ in range({threads})]
for thread in threads:
    thread.start()
for thread in threads:
    thread.join()
libc = ctypes.CDLL(None)
libc.fopen.restype = ctypes.c_void_p
libc.fopen.argtypes = [ctypes.c_char_p, ctypes.c_char_p]
libc.malloc_info.argtypes = [ctypes.c_int, ctypes.c_void_p]
libc.fclose.argtypes = [ctypes.c_void_p]
stream = libc.fopen(sys.argv[2].encode(), b"w")
libc.malloc_info(0, stream)
libc.fclose(stream)
with open(sys.argv[2]) as info:
    arenas = info.read().count("<heap nr=")
print(limited, arenas, os.environ.get("MALLOC_ARENA_MAX"))
"""


def arenas_after_threads(mode: str, tmp_path: Path) -> tuple[str, int, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("MALLOC_ARENA_MAX", "GLIBC_TUNABLES")}
    run = subprocess.run(  # noqa: S603 - this interpreter, fixed code
        [sys.executable, "-c", PROBE.format(threads=THREADS), mode, str(tmp_path / "info.xml")],
        env=env, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    limited, arenas, variable = run.stdout.split()
    return limited, int(arenas), variable


def test_serve_limits_malloc_arenas_for_itself_and_its_workers(tmp_path: Path) -> None:
    limited, arenas, variable = arenas_after_threads("limit", tmp_path)
    assert (limited, variable) == ("True", str(ARENA_MAX))
    assert arenas <= ARENA_MAX
    # Without the limit the same threads take an arena each: the probe can tell.
    _, unlimited, _ = arenas_after_threads("none", tmp_path)
    assert unlimited > ARENA_MAX


def test_serve_leaves_malloc_arenas_to_an_operator_who_set_them() -> None:
    chosen = {"MALLOC_ARENA_MAX": "4"}
    assert not limit_malloc_arenas(chosen)
    assert chosen == {"MALLOC_ARENA_MAX": "4"}
    tuned = {"GLIBC_TUNABLES": "glibc.malloc.arena_max=8"}
    assert not limit_malloc_arenas(tuned)
    assert "MALLOC_ARENA_MAX" not in tuned
