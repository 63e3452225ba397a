"""The unit of work the services hold between a repository call and the next.

Services receive a session from `Database.transaction()` or `Database.read()` and hand it
to repositories; they never use it themselves, so they need no SQLAlchemy import.
"""

from sqlalchemy.ext.asyncio import AsyncSession as Session

__all__ = ["Session"]
