"""Persistence: SQLAlchemy 2 (async) over SQLite or PostgreSQL, migrated by Alembic."""
