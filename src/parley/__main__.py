"""`python -m parley` and the `parley` script: the command line, started quickly."""

from __future__ import annotations

import gc

COMMAND_GC_THRESHOLD = (10_000, 10, 10)
"""Collect every 10,000 net allocations while a command runs (Python's default: 700)."""


def main() -> None:
    """Run the command line (`parley.cli`), the cyclic collector tuned for a short life.

    bench/cli_start.py showed it: collecting every 700 allocations while typer, pydantic and
    SQLAlchemy import, then over every object they made as the interpreter exits, cost
    about 0.15 s a command. A command collects less often (`parley serve` restores the
    defaults), and what exists at the end is frozen, so exit does not walk it: its memory
    is the operating system's to reclaim, and every resource was closed by then.
    """
    gc.set_threshold(*COMMAND_GC_THRESHOLD)
    from parley.cli import main as run_command_line

    try:
        run_command_line()
    finally:
        gc.freeze()


if __name__ == "__main__":
    main()
