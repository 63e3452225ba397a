"""Alembic environment: runs on the connection `parley.db.migrate` hands it."""

from __future__ import annotations

from typing import Any, Literal

from alembic import context
from alembic.autogenerate.api import AutogenContext
from sqlalchemy.engine import Connection

from parley.db.tables import Base, Timestamp

target_metadata = Base.metadata


def render_item(type_: str, obj: Any, _context: AutogenContext) -> str | Literal[False]:
    """Render our UTC timestamp type as the plain column type it stores."""
    if type_ == "type" and isinstance(obj, Timestamp):
        return "sa.DateTime(timezone=True)"
    return False


def run_on(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        render_as_batch=connection.dialect.name == "sqlite",
        render_item=render_item,
        compare_type=True,
    )
    with context.begin_transaction():
        context.run_migrations()


connection = context.config.attributes.get("connection")
if connection is None:
    raise RuntimeError("run migrations with `parley migrate`, which provides the connection")
run_on(connection)
