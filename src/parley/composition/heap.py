"""The cyclic collector of a long-lived server process."""

from __future__ import annotations

import gc


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
