"""Extraction schemas of projects (API.md section 16)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import delete, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from parley.db.pagination import paginate
from parley.db.tables import ExtractionSchemaRow, ProjectRow
from parley.errors import ExtractionSchemaNotFound, Forbidden, NameTaken
from parley.ids import looks_like_id
from parley.records import (
    ExtractionField,
    ExtractionSchema,
    ExtractionSchemaPatch,
    ExtractionSchemaSpec,
    ProjectRef,
    Unset,
)

UNIQUE_VIOLATIONS = {
    "uq_extraction_schemas_project_id_name": NameTaken,
    "extraction_schemas.project_id, extraction_schemas.name": NameTaken,
}


def to_record(row: ExtractionSchemaRow, project_name: str) -> ExtractionSchema:
    return ExtractionSchema(
        id=row.id,
        org_id=row.org_id,
        project=ProjectRef(id=row.project_id, name=project_name),
        name=row.name,
        prompt=row.prompt,
        fields=fields_from_json(row.fields),
        created_at=row.created_at,
        updated_at=row.updated_at,
    )


def fields_from_json(stored: Sequence[dict[str, Any]]) -> tuple[ExtractionField, ...]:
    return tuple(
        ExtractionField(name=f["name"], type=f["type"], description=f.get("description"))
        for f in stored
    )


def fields_to_json(fields: Sequence[ExtractionField]) -> list[dict[str, Any]]:
    return [{"name": f.name, "type": f.type, "description": f.description} for f in fields]


def _with_project() -> Any:
    return select(ExtractionSchemaRow, ProjectRow.name).join(
        ProjectRow, ProjectRow.id == ExtractionSchemaRow.project_id
    )


async def find(
    session: AsyncSession,
    org_id: str,
    name_or_id: str,
    *,
    project_id: str | None,
    for_update: bool = False,
) -> ExtractionSchema:
    """Return the schema named `name_or_id` in a project, or identified by it in any project.

    With `for_update` the row stays locked until the transaction ends (an agent naming it,
    or a deletion, waits). Raises ExtractionSchemaNotFound, or Forbidden for another
    organization's schema ID.
    """
    query = _with_project()
    if looks_like_id(name_or_id, "schema"):
        query = query.where(ExtractionSchemaRow.id == name_or_id)
    elif project_id is None:
        raise ExtractionSchemaNotFound()
    else:
        query = query.where(
            ExtractionSchemaRow.project_id == project_id, ExtractionSchemaRow.name == name_or_id
        )
    if for_update:
        query = query.with_for_update(of=ExtractionSchemaRow)
    found = (await session.execute(query.execution_options(populate_existing=True))).first()
    if found is None:
        raise ExtractionSchemaNotFound()
    row, project_name = found
    if row.org_id != org_id:
        raise Forbidden()
    return to_record(row, project_name)


async def by_names(
    session: AsyncSession, project_id: str, names: Sequence[str], *, for_update: bool = False
) -> list[ExtractionSchema]:
    """Return the project's schemas with these names (those that exist), by name."""
    if not names:
        return []
    query = (
        _with_project()
        .where(
            ExtractionSchemaRow.project_id == project_id,
            ExtractionSchemaRow.name.in_(sorted(set(names))),
        )
        .order_by(ExtractionSchemaRow.name)
    )
    if for_update:
        query = query.with_for_update(of=ExtractionSchemaRow)
    rows = (await session.execute(query.execution_options(populate_existing=True))).all()
    return [to_record(row, project_name) for row, project_name in rows]


async def insert(
    session: AsyncSession,
    *,
    schema_id: str,
    org_id: str,
    project: ProjectRef,
    spec: ExtractionSchemaSpec,
    now: datetime,
) -> ExtractionSchema:
    row = ExtractionSchemaRow(
        id=schema_id,
        org_id=org_id,
        project_id=project.id,
        name=spec.name,
        prompt=spec.prompt,
        fields=fields_to_json(spec.fields),
        created_at=now,
        updated_at=now,
    )
    session.add(row)
    await session.flush()
    return to_record(row, project.name)


async def apply_patch(
    session: AsyncSession, schema_id: str, patch: ExtractionSchemaPatch, *, now: datetime
) -> None:
    """Write the set fields of `patch` (checked by services/extraction_schemas.py)."""
    changes: dict[str, Any] = {}
    if not isinstance(patch.name, Unset):
        changes["name"] = patch.name
    if not isinstance(patch.prompt, Unset):
        changes["prompt"] = patch.prompt
    if not isinstance(patch.fields, Unset):
        changes["fields"] = fields_to_json(patch.fields)
    await session.execute(
        update(ExtractionSchemaRow)
        .where(ExtractionSchemaRow.id == schema_id)
        .values(**changes, updated_at=now)
    )


async def name_taken(session: AsyncSession, project_id: str, name: str) -> bool:
    query = select(ExtractionSchemaRow.id).where(
        ExtractionSchemaRow.project_id == project_id, ExtractionSchemaRow.name == name
    )
    return (await session.scalar(query)) is not None


async def list_page(
    session: AsyncSession,
    org_id: str,
    *,
    project_id: str | None,
    cursor: str | None,
    limit: int,
) -> list[ExtractionSchema]:
    query = _with_project().where(ExtractionSchemaRow.org_id == org_id)
    if project_id is not None:
        query = query.where(ExtractionSchemaRow.project_id == project_id)
    query = paginate(
        query,
        created_at=ExtractionSchemaRow.created_at,
        row_id=ExtractionSchemaRow.id,
        cursor=cursor,
        limit=limit,
    )
    return [to_record(row, project_name) for row, project_name in await session.execute(query)]


async def delete_row(session: AsyncSession, schema_id: str) -> None:
    await session.execute(delete(ExtractionSchemaRow).where(ExtractionSchemaRow.id == schema_id))
