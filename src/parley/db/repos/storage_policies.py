"""External storage policies of projects (API.md section 16).

Both credentials are stored sealed; this module never sees them in clear: the service seals
them before `insert` and `apply_patch`, and unseals what `sealed_credentials` returns. Every
read counts the agents that name the policy in the same statement (a correlated subquery,
so a page of policies costs one statement, not one per policy).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Select, delete, func, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from parley.db.pagination import paginate
from parley.db.tables import AgentRow, ProjectRow, StoragePolicyRow
from parley.errors import Forbidden, NameTaken, StoragePolicyNotFound
from parley.ids import looks_like_id
from parley.records import ProjectRef, StoragePolicy, StoragePolicySpec

UNIQUE_VIOLATIONS = {
    "uq_external_storage_policies_project_id_name": NameTaken,
    "external_storage_policies.project_id, external_storage_policies.name": NameTaken,
}
SETTINGS_COLUMNS = ("name", "endpoint_url", "bucket", "region", "key_prefix", "addressing_style")
"""The columns stored as they are given (the credentials are stored sealed)."""


def to_record(row: StoragePolicyRow, project_name: str, agent_count: int) -> StoragePolicy:
    return StoragePolicy(
        id=row.id,
        org_id=row.org_id,
        project=ProjectRef(id=row.project_id, name=project_name),
        name=row.name,
        endpoint_url=row.endpoint_url,
        bucket=row.bucket,
        region=row.region,
        key_prefix=row.key_prefix,
        addressing_style="virtual" if row.addressing_style == "virtual" else "path",
        agent_count=agent_count,
        created_at=row.created_at,
        updated_at=row.updated_at,
    )


def _agent_count() -> Any:
    """How many agents name the policy of the outer row."""
    return (
        select(func.count(AgentRow.id))
        .where(AgentRow.external_storage_policy_id == StoragePolicyRow.id)
        .correlate(StoragePolicyRow)
        .scalar_subquery()
    )


def _selected() -> Select[Any]:
    return select(StoragePolicyRow, ProjectRow.name, _agent_count()).join(
        ProjectRow, ProjectRow.id == StoragePolicyRow.project_id
    )


async def find(
    session: AsyncSession,
    org_id: str,
    name_or_id: str,
    *,
    project_id: str | None,
    for_update: bool = False,
) -> StoragePolicy:
    """Return the policy named `name_or_id` in a project, or identified by it in any project.

    With `for_update` the row stays locked until the transaction ends (an agent naming the
    policy waits). Raises StoragePolicyNotFound, or Forbidden for another organization's ID.
    """
    query = _selected()
    if looks_like_id(name_or_id, "storage"):
        query = query.where(StoragePolicyRow.id == name_or_id)
    elif project_id is None:
        raise StoragePolicyNotFound()
    else:
        query = query.where(
            StoragePolicyRow.project_id == project_id, StoragePolicyRow.name == name_or_id
        )
    if for_update:
        query = query.with_for_update(of=StoragePolicyRow)
    found = (await session.execute(query.execution_options(populate_existing=True))).first()
    if found is None:
        raise StoragePolicyNotFound()
    row, project_name, agent_count = found
    if row.org_id != org_id:
        raise Forbidden()
    return to_record(row, project_name, agent_count)


async def named_for_agent(
    session: AsyncSession, project_id: str, name: str
) -> StoragePolicy | None:
    """Return the project's policy with this name, its row locked for share until the
    transaction ends (so it is not deleted before an agent naming it is stored), or None."""
    query = (
        _selected()
        .where(StoragePolicyRow.project_id == project_id, StoragePolicyRow.name == name)
        .with_for_update(read=True, of=StoragePolicyRow)
    )
    found = (await session.execute(query.execution_options(populate_existing=True))).first()
    if found is None:
        return None
    row, project_name, agent_count = found
    return to_record(row, project_name, agent_count)


async def id_named(session: AsyncSession, project_id: str, name: str) -> str | None:
    """Return the ID of the project's policy with this name, or None."""
    query = select(StoragePolicyRow.id).where(
        StoragePolicyRow.project_id == project_id, StoragePolicyRow.name == name
    )
    found: str | None = await session.scalar(query)
    return found


async def insert(
    session: AsyncSession,
    *,
    policy_id: str,
    org_id: str,
    project: ProjectRef,
    spec: StoragePolicySpec,
    sealed_access_key_id: str,
    sealed_secret_access_key: str,
    now: datetime,
) -> StoragePolicy:
    row = StoragePolicyRow(
        id=policy_id,
        org_id=org_id,
        project_id=project.id,
        **{column: getattr(spec, column) for column in SETTINGS_COLUMNS},
        access_key_id_sealed=sealed_access_key_id,
        secret_access_key_sealed=sealed_secret_access_key,
        created_at=now,
        updated_at=now,
    )
    session.add(row)
    await session.flush()
    return to_record(row, project.name, agent_count=0)


async def apply_patch(
    session: AsyncSession, policy_id: str, changes: dict[str, Any], *, now: datetime
) -> None:
    """Write `changes` (columns of SETTINGS_COLUMNS, and the sealed credentials as
    `access_key_id_sealed` and `secret_access_key_sealed`) to the policy's row."""
    await session.execute(
        update(StoragePolicyRow)
        .where(StoragePolicyRow.id == policy_id)
        .values(**changes, updated_at=now)
    )


async def name_taken(session: AsyncSession, project_id: str, name: str) -> bool:
    return await id_named(session, project_id, name) is not None


async def list_page(
    session: AsyncSession,
    org_id: str,
    *,
    project_id: str | None,
    cursor: str | None,
    limit: int,
) -> list[StoragePolicy]:
    """Return a page of policies (one more than `limit`) with their agent counts, in one
    statement."""
    query = _selected().where(StoragePolicyRow.org_id == org_id)
    if project_id is not None:
        query = query.where(StoragePolicyRow.project_id == project_id)
    query = paginate(
        query,
        created_at=StoragePolicyRow.created_at,
        row_id=StoragePolicyRow.id,
        cursor=cursor,
        limit=limit,
    )
    return [to_record(*found) for found in (await session.execute(query)).all()]


async def agents_naming(session: AsyncSession, policy_id: str) -> list[str]:
    """Return the names of the agents that name the policy, sorted."""
    query = select(AgentRow.name).where(AgentRow.external_storage_policy_id == policy_id)
    return sorted(await session.scalars(query))


async def sealed_credentials(
    session: AsyncSession, org_id: str, policy_id: str
) -> tuple[StoragePolicy, str, str] | None:
    """Return the organization's policy with this ID and its two sealed credentials (access
    key ID, secret access key), or None."""
    query = _selected().add_columns(
        StoragePolicyRow.access_key_id_sealed, StoragePolicyRow.secret_access_key_sealed
    )
    query = query.where(StoragePolicyRow.id == policy_id, StoragePolicyRow.org_id == org_id)
    found = (await session.execute(query)).first()
    if found is None:
        return None
    row, project_name, agent_count, access_key_id, secret_access_key = found
    return to_record(row, project_name, agent_count), access_key_id, secret_access_key


async def delete_row(session: AsyncSession, policy_id: str) -> None:
    await session.execute(delete(StoragePolicyRow).where(StoragePolicyRow.id == policy_id))
