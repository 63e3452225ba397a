"""Bring the database's schema up to date before a Context opens on it.

Its own module, light: `parley migrate` on a current schema asks the driver only and loads
no SQLAlchemy engine (tests/cli/test_start.py), which composition/database.py would.
"""

from __future__ import annotations


async def migrate_database(url: str) -> None:
    """Bring the database at `url` to the newest schema (the engine opens only if needed)."""
    from parley.db.migrate import is_current

    if await is_current(url):
        return

    from parley.db.engine import create_engine
    from parley.db.migrate import upgrade_if_needed

    engine = create_engine(url)
    try:
        await upgrade_if_needed(engine)
    finally:
        await engine.dispose()
