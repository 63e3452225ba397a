"""What every use-case receives: the database, the clock and the shared stores."""

from __future__ import annotations

from dataclasses import dataclass

from parley.clock import Clock
from parley.db.database import Database


@dataclass(frozen=True, slots=True)
class Context:
    """The dependencies of the services, built once by the composition root (app.py)."""

    db: Database
    clock: Clock
