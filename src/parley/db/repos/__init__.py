"""Queries per aggregate: rows in, records out, database errors translated."""
