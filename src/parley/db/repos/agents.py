"""Agents and their phone numbers."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import delete, select
from sqlalchemy.ext.asyncio import AsyncSession

from parley.db.pagination import paginate
from parley.db.tables import AgentRow, PhoneNumberRow, ProjectRow
from parley.errors import AgentNotFound, Forbidden, NameTaken, PhoneNumberTaken
from parley.ids import looks_like_id
from parley.records import Agent, AgentPatch, AgentSpec, Unset

__all__ = ["AgentRow"]  # what `find` returns: services read it, never change it

UNIQUE_VIOLATIONS = {
    "uq_agents_project_id_name": NameTaken,
    "agents.project_id, agents.name": NameTaken,
    "pk_phone_numbers": PhoneNumberTaken,
    "phone_numbers.number": PhoneNumberTaken,
}


def to_record(row: AgentRow, project_name: str, numbers: Sequence[str]) -> Agent:
    return Agent(
        id=row.id,
        org_id=row.org_id,
        project=project_name,
        name=row.name,
        voice_id=row.voice_id,
        system_prompt=row.system_prompt,
        welcome_message=row.welcome_message,
        language=row.language,
        audio_format=row.audio_format,
        phone_numbers=tuple(numbers),
        disabled_at=row.disabled_at,
        created_at=row.created_at,
        updated_at=row.updated_at,
    )


async def load(session: AsyncSession, row: AgentRow) -> Agent:
    """Return the record of one agent row, with its project name and phone numbers."""
    project_name = await session.scalar(
        select(ProjectRow.name).where(ProjectRow.id == row.project_id)
    )
    numbers = await phone_numbers_of(session, [row.id])
    return to_record(row, project_name or "", numbers.get(row.id, []))


async def phone_numbers_of(session: AsyncSession, agent_ids: Sequence[str]) -> dict[str, list[str]]:
    rows = await session.scalars(
        select(PhoneNumberRow)
        .where(PhoneNumberRow.agent_id.in_(agent_ids))
        .order_by(PhoneNumberRow.agent_id, PhoneNumberRow.position)
    )
    numbers: dict[str, list[str]] = defaultdict(list)
    for number in rows:
        numbers[number.agent_id].append(number.number)
    return numbers


async def find(
    session: AsyncSession,
    org_id: str,
    name_or_id: str,
    *,
    project: ProjectRow | None,
    for_update: bool = False,
) -> AgentRow:
    """Return the agent named `name_or_id` in `project`, or identified by it in any project.

    With `for_update`, the row is locked until the transaction ends, so that concurrent
    read-modify-write operations on one agent (update vs disable) run one after the other.
    Raises AgentNotFound, or Forbidden when the ID belongs to another organization.
    """
    if looks_like_id(name_or_id, "agent"):
        query = select(AgentRow).where(AgentRow.id == name_or_id)
    elif project is None:
        raise AgentNotFound()
    else:
        query = select(AgentRow).where(
            AgentRow.project_id == project.id, AgentRow.name == name_or_id
        )
    if for_update:
        query = query.with_for_update()
    row = await session.scalar(query.execution_options(populate_existing=True))
    if row is None:
        raise AgentNotFound()
    if row.org_id != org_id:
        raise Forbidden()
    return row


async def insert(
    session: AsyncSession,
    *,
    agent_id: str,
    org_id: str,
    project_id: str,
    spec: AgentSpec,
    now: datetime,
) -> AgentRow:
    """Insert a new agent row and its phone numbers."""
    row = AgentRow(
        id=agent_id,
        org_id=org_id,
        project_id=project_id,
        name=spec.name,
        voice_id=spec.voice_id,
        system_prompt=spec.system_prompt,
        welcome_message=spec.welcome_message,
        language=spec.language,
        audio_format=spec.audio_format,
        disabled_at=None,
        created_at=now,
        updated_at=now,
    )
    session.add(row)
    await session.flush()
    await replace_phone_numbers(session, row.id, spec.phone_numbers)
    return row


PATCHABLE_COLUMNS = (
    "name",
    "voice_id",
    "system_prompt",
    "welcome_message",
    "language",
    "audio_format",
)


async def apply_patch(
    session: AsyncSession, row: AgentRow, patch: AgentPatch, *, now: datetime
) -> None:
    """Write the set fields of `patch` to the (locked) agent row."""
    for column in PATCHABLE_COLUMNS:
        value = getattr(patch, column)
        if not isinstance(value, Unset):
            setattr(row, column, value)
    if not isinstance(patch.phone_numbers, Unset):
        await replace_phone_numbers(session, row.id, patch.phone_numbers)
    row.updated_at = now
    await session.flush()


async def set_disabled(session: AsyncSession, row: AgentRow, *, at: datetime) -> None:
    row.disabled_at = row.updated_at = at
    await session.flush()


async def set_enabled(session: AsyncSession, row: AgentRow, *, at: datetime) -> None:
    row.disabled_at = None
    row.updated_at = at
    await session.flush()


async def name_taken(session: AsyncSession, project_id: str, name: str) -> bool:
    query = select(AgentRow.id).where(AgentRow.project_id == project_id, AgentRow.name == name)
    return (await session.scalar(query)) is not None


async def numbers_owned_elsewhere(
    session: AsyncSession, numbers: Sequence[str], agent_id: str | None
) -> list[str]:
    """Return those of `numbers` that belong to an agent other than `agent_id`."""
    if not numbers:
        return []
    query = select(PhoneNumberRow.number).where(PhoneNumberRow.number.in_(numbers))
    if agent_id is not None:
        query = query.where(PhoneNumberRow.agent_id != agent_id)
    return list(await session.scalars(query))


async def replace_phone_numbers(
    session: AsyncSession, agent_id: str, numbers: Sequence[str]
) -> None:
    """Make `numbers` (in order) the agent's phone numbers."""
    await session.execute(delete(PhoneNumberRow).where(PhoneNumberRow.agent_id == agent_id))
    await session.flush()
    session.add_all(
        PhoneNumberRow(number=number, agent_id=agent_id, position=position)
        for position, number in enumerate(numbers)
    )
    await session.flush()


async def list_page(
    session: AsyncSession,
    org_id: str,
    *,
    project_id: str | None,
    cursor: str | None,
    limit: int,
) -> list[Agent]:
    query = select(AgentRow, ProjectRow.name).join(ProjectRow, ProjectRow.id == AgentRow.project_id)
    query = query.where(AgentRow.org_id == org_id)
    if project_id is not None:
        query = query.where(AgentRow.project_id == project_id)
    query = paginate(
        query, created_at=AgentRow.created_at, row_id=AgentRow.id, cursor=cursor, limit=limit
    )
    rows = (await session.execute(query)).all()
    numbers = await phone_numbers_of(session, [row.id for row, _ in rows])
    return [to_record(row, name, numbers.get(row.id, [])) for row, name in rows]


async def delete_row(session: AsyncSession, row: AgentRow) -> None:
    await session.delete(row)
    await session.flush()
