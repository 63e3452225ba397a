"""Custom tools of projects (API.md section 12).

The signing secret is stored sealed; this module never sees it in clear: the service seals
it before `insert` and unseals `Tool.signing_secret` after `load`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import delete, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from parley.db.pagination import paginate
from parley.db.tables import ProjectRow, ToolRow
from parley.errors import Forbidden, NameTaken, ToolNotFound
from parley.ids import looks_like_id
from parley.records import ProjectRef, Tool, ToolPatch, ToolSpec, Unset

UNIQUE_VIOLATIONS = {
    "uq_tools_project_id_name": NameTaken,
    "tools.project_id, tools.name": NameTaken,
}
PATCHABLE_COLUMNS = tuple(name for name in ToolPatch.__slots__)
TRANSFER_COLUMNS = (
    "phone_number",
    "dtmf",
    "dynamic_dtmf",
    "use_agent_phone_number",
    "keep_listening",
    "post_transfer_message",
    "on_transfer_no_answer",
    "detect_voicemail",
    "agents_to_transfer_to",
)
"""A transfer tool's settings (API.md section 15), stored as they are named."""


def to_record(row: ToolRow, project_name: str) -> Tool:
    """The record, with the secret still sealed (`signing_secret` holds the sealed form)."""
    return Tool(
        id=row.id,
        org_id=row.org_id,
        project=ProjectRef(id=row.project_id, name=project_name),
        name=row.name,
        description=row.description,
        type=row.type,
        execution_mode=row.execution_mode,
        parameters=row.parameters,
        parameter_locations=row.parameter_locations,
        endpoint_method=row.endpoint_method,
        endpoint_url=row.endpoint_url,
        endpoint_headers=row.endpoint_headers,
        endpoint_timeout_ms=row.endpoint_timeout_ms,
        tool_call_output_timeout_ms=row.tool_call_output_timeout_ms,
        require_speech_before_tool_call=row.require_speech_before_tool_call,
        signing_secret=row.signing_secret_sealed,
        created_at=row.created_at,
        updated_at=row.updated_at,
        **{
            name: getattr(row, name) for name in TRANSFER_COLUMNS if name != "agents_to_transfer_to"
        },
        agents_to_transfer_to=(
            tuple(row.agents_to_transfer_to) if row.agents_to_transfer_to is not None else None
        ),
    )


def _with_project() -> Any:
    return select(ToolRow, ProjectRow.name).join(ProjectRow, ProjectRow.id == ToolRow.project_id)


async def find(
    session: AsyncSession,
    org_id: str,
    name_or_id: str,
    *,
    project_id: str | None,
    for_update: bool = False,
) -> Tool:
    """Return the tool named `name_or_id` in a project, or identified by it in any project.

    With `for_update` the row stays locked until the transaction ends (an agent naming the
    tool, or a deletion, waits). Raises ToolNotFound, or Forbidden for another
    organization's tool ID.
    """
    query = _with_project()
    if looks_like_id(name_or_id, "tool"):
        query = query.where(ToolRow.id == name_or_id)
    elif project_id is None:
        raise ToolNotFound()
    else:
        query = query.where(ToolRow.project_id == project_id, ToolRow.name == name_or_id)
    if for_update:
        query = query.with_for_update(of=ToolRow)
    found = (await session.execute(query.execution_options(populate_existing=True))).first()
    if found is None:
        raise ToolNotFound()
    row, project_name = found
    if row.org_id != org_id:
        raise Forbidden()
    return to_record(row, project_name)


async def by_names(
    session: AsyncSession, project_id: str, names: Sequence[str], *, for_update: bool = False
) -> list[Tool]:
    """Return the project's tools with these names (those that exist), by name."""
    if not names:
        return []
    query = (
        _with_project()
        .where(ToolRow.project_id == project_id, ToolRow.name.in_(sorted(set(names))))
        .order_by(ToolRow.name)
    )
    if for_update:
        query = query.with_for_update(of=ToolRow)
    rows = (await session.execute(query.execution_options(populate_existing=True))).all()
    return [to_record(row, project_name) for row, project_name in rows]


async def insert(
    session: AsyncSession,
    *,
    tool_id: str,
    org_id: str,
    project: ProjectRef,
    spec: ToolSpec,
    sealed_secret: str,
    now: datetime,
) -> Tool:
    row = ToolRow(
        id=tool_id,
        org_id=org_id,
        project_id=project.id,
        name=spec.name,
        description=spec.description,
        type=spec.type,
        execution_mode=spec.execution_mode,
        parameters=spec.parameters,
        parameter_locations=_plain(spec.parameter_locations),
        endpoint_method=spec.endpoint_method,
        endpoint_url=spec.endpoint_url,
        endpoint_headers=_plain(spec.endpoint_headers),
        endpoint_timeout_ms=spec.endpoint_timeout_ms,
        tool_call_output_timeout_ms=spec.tool_call_output_timeout_ms,
        require_speech_before_tool_call=spec.require_speech_before_tool_call,
        signing_secret_sealed=sealed_secret,
        created_at=now,
        updated_at=now,
        **{name: _plain(getattr(spec, name)) for name in TRANSFER_COLUMNS},
    )
    session.add(row)
    await session.flush()
    return to_record(row, project.name)


async def apply_patch(
    session: AsyncSession, tool_id: str, patch: ToolPatch, *, now: datetime
) -> None:
    """Write the set fields of `patch` (a complete, checked result: see services/tools.py)."""
    changes: dict[str, Any] = {}
    for column in PATCHABLE_COLUMNS:
        value = getattr(patch, column)
        if not isinstance(value, Unset):
            changes[column] = _plain(value)
    await session.execute(
        update(ToolRow).where(ToolRow.id == tool_id).values(**changes, updated_at=now)
    )


async def name_taken(session: AsyncSession, project_id: str, name: str) -> bool:
    query = select(ToolRow.id).where(ToolRow.project_id == project_id, ToolRow.name == name)
    return (await session.scalar(query)) is not None


async def list_page(
    session: AsyncSession,
    org_id: str,
    *,
    project_id: str | None,
    cursor: str | None,
    limit: int,
) -> list[Tool]:
    query = _with_project().where(ToolRow.org_id == org_id)
    if project_id is not None:
        query = query.where(ToolRow.project_id == project_id)
    query = paginate(
        query, created_at=ToolRow.created_at, row_id=ToolRow.id, cursor=cursor, limit=limit
    )
    return [to_record(row, project_name) for row, project_name in await session.execute(query)]


async def delete_row(session: AsyncSession, tool_id: str) -> None:
    await session.execute(delete(ToolRow).where(ToolRow.id == tool_id))


def _plain(value: Any) -> Any:
    """A mapping as a plain dict and a tuple as a list, for a JSON column; others as they
    are."""
    if isinstance(value, tuple):
        return list(value)
    return dict(value) if isinstance(value, Mapping) else value
