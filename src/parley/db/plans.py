"""Statements compiled once, for the paths that run them on a driver directly instead of
through the engine: SQLite's reads in the event loop's thread (`direct.py: InlineReads`)
and PostgreSQL's statements on asyncpg (`driver.py: DriverStatements`).

A plan is what the engine itself would do with the statement: the SQL its dialect renders,
the parameters in that SQL's order, and the type processors that convert values going in
and columns coming out.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Executable
from sqlalchemy.engine import Dialect

Processor = Callable[[Any], Any] | None

PLANS_MAX = 256
"""Plans kept per path; hot statements are built once, so this is never reached."""


@dataclass(frozen=True, slots=True)
class Plan:
    """One statement compiled by one dialect."""

    sql: str
    names: tuple[str, ...]
    """The bound parameters' names, in the order the SQL takes them."""
    defaults: Mapping[str, Any]
    """The values the statement binds itself (a `LIMIT`)."""
    binds: tuple[Processor, ...]
    """Each parameter's conversion to the driver's value (None: as given)."""
    columns: tuple[Processor, ...] | None
    """Each result column's conversion from the driver's value; None: the statement
    selects no known columns (a textual statement)."""
    expanding: bool
    """An expanding `IN`: only the engine renders it."""
    converts_values: bool
    """Some parameter has a conversion."""
    converts_columns: bool
    """Some result column has a conversion."""

    def values(self, parameters: Mapping[str, Any] | None) -> list[Any]:
        """The driver's positional values for `parameters` (the statement's own included)."""
        given = {**self.defaults, **(parameters or {})}
        return [
            given[name] if convert is None else convert(given[name])
            for name, convert in zip(self.names, self.binds, strict=True)
        ]

    def rows(self, records: Iterable[Sequence[Any]]) -> list[tuple[Any, ...]]:
        """The driver's rows, each column converted as the engine converts it."""
        if self.columns is None or not self.converts_columns:  # as the driver gives them
            return [tuple(record) for record in records]
        columns = self.columns
        return [
            tuple(
                value if convert is None else convert(value)
                for convert, value in zip(columns, record, strict=True)
            )
            for record in records
        ]


class Plans:
    """The plans of one dialect, each made at a statement's first use."""

    def __init__(self, dialect: Dialect) -> None:
        self._dialect = dialect
        self._plans: dict[Executable, Plan] = {}

    def __call__(self, statement: Executable) -> Plan:
        known = self._plans.get(statement)
        if known is None:
            if len(self._plans) >= PLANS_MAX:
                self._plans.clear()
            known = self._plans[statement] = _plan_of(statement, self._dialect)
        return known


def _plan_of(statement: Executable, dialect: Dialect) -> Plan:
    compiled = statement.compile(dialect=dialect)  # type: ignore[attr-defined]
    names = tuple(compiled.positiontup or ())
    binds = tuple(
        compiled.binds[name].type.dialect_impl(dialect).bind_processor(dialect) for name in names
    )
    defaults = {name: bind.value for name, bind in compiled.binds.items() if not bind.required}
    selected = getattr(statement, "selected_columns", None)
    columns = (
        None
        if selected is None
        else tuple(c.type.dialect_impl(dialect).result_processor(dialect, None) for c in selected)
    )
    return Plan(
        sql=compiled.string,
        names=names,
        defaults=defaults,
        binds=binds,
        columns=columns,
        expanding="POSTCOMPILE" in compiled.string,
        converts_values=any(convert is not None for convert in binds),
        converts_columns=columns is not None and any(c is not None for c in columns),
    )
