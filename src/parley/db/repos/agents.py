"""Agents and their phone numbers."""

from __future__ import annotations

import functools
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Row, Select, bindparam, delete, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from parley.db.pagination import after_cursor, cursor_params
from parley.db.repos.audit import Guard
from parley.db.session import Reader
from parley.db.tables import AgentRow, PhoneNumberRow, ProjectRow, StoragePolicyRow
from parley.errors import AgentNotFound, Forbidden, NameTaken, PhoneNumberTaken
from parley.ids import looks_like_id
from parley.records import (
    UNSET,
    Agent,
    AgentPatch,
    AgentSpec,
    ConfigurationEndpoint,
    Delivery,
    Project,
    ProjectRef,
    RetentionPolicy,
    StoragePolicy,
    TemplateVariable,
    Unset,
)

UNIQUE_VIOLATIONS = {
    "uq_agents_project_id_name": NameTaken,
    "agents.project_id, agents.name": NameTaken,
    "pk_phone_numbers": PhoneNumberTaken,
    "phone_numbers.number": PhoneNumberTaken,
}


@dataclass(frozen=True, slots=True)
class AgentState:
    """What the rules of an agent read; changes go through this module, by ID."""

    id: str
    org_id: str
    project_id: str
    name: str
    disabled_at: datetime | None


_AGENTS = AgentRow.__table__
_PROJECTS = ProjectRow.__table__
_PHONE_NUMBERS = PhoneNumberRow.__table__
_POLICIES = StoragePolicyRow.__table__


def to_record(
    row: AgentRow | Row[Any],
    project_name: str,
    numbers: Sequence[str],
    storage_policy_name: str | None = None,
) -> Agent:
    """The record of an agent row; `storage_policy_name` is the current name of the
    external storage policy it names (by ID), if it names one."""
    return Agent(
        id=row.id,
        org_id=row.org_id,
        project=ProjectRef(id=row.project_id, name=project_name),
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
        tools=tuple(row.tools or ()),
        template_variables={
            name: TemplateVariable(default_value=stored["default_value"])
            for name, stored in (row.template_variables or {}).items()
        },
        boosted_keywords=tuple(row.boosted_keywords or ()),
        no_input_poke_sec=row.no_input_poke_sec,
        no_input_poke_text=row.no_input_poke_text,
        no_input_end_conversation_sec=row.no_input_end_conversation_sec,
        voicemail_message=row.voicemail_message,
        data_retention_policy=RetentionPolicy.from_json(row.data_retention_policy),
        external_storage_policy=storage_policy_name,
        external_storage_policy_id=row.external_storage_policy_id,
        extraction_schemas=tuple(row.extraction_schemas or ()),
        eval_prompts=tuple(row.eval_prompts or ()),
        enable_redaction=bool(row.enable_redaction),
        configuration_endpoint=endpoint_of(row.configuration_endpoint),
        delivery=Delivery.from_json(row.delivery),
        additional_languages=tuple(row.additional_languages or ()),
        multilingual_mode=row.multilingual_mode,
        version=int(row.version),
    )


def endpoint_of(stored: Mapping[str, Any] | None) -> ConfigurationEndpoint | None:
    """The record of a stored configuration endpoint (values still sealed), or None."""
    if not stored:
        return None
    return ConfigurationEndpoint(
        url=stored["url"],
        headers=dict(stored.get("headers") or {}),
        timeout_ms=int(stored["timeout_ms"]),
        secret=stored["secret"],
    )


def stored_endpoint(endpoint: ConfigurationEndpoint | None) -> dict[str, Any] | None:
    """The JSON column of a configuration endpoint record (values sealed), or None."""
    if endpoint is None:
        return None
    return {
        "url": endpoint.url,
        "headers": dict(endpoint.headers),
        "timeout_ms": endpoint.timeout_ms,
        "secret": endpoint.secret,
    }


async def load(session: AsyncSession, agent_id: str) -> Agent:
    """Return the record of one agent, with its project name, phone numbers and the name
    of its external storage policy."""
    query = (
        select(AgentRow, ProjectRow.name, StoragePolicyRow.name)
        .join(ProjectRow, ProjectRow.id == AgentRow.project_id)
        .outerjoin(StoragePolicyRow, StoragePolicyRow.id == AgentRow.external_storage_policy_id)
        .where(AgentRow.id == agent_id)
    )
    found = (await session.execute(query.execution_options(populate_existing=True))).first()
    if found is None:
        raise AgentNotFound()
    row, project_name, policy_name = found
    numbers = await phone_numbers_of(session, [agent_id])
    return to_record(row, project_name, numbers.get(agent_id, []), policy_name)


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
    project_id: str | None,
    for_update: bool = False,
) -> AgentState:
    """Return the agent named `name_or_id` in a project, or identified by it in any project.

    With `for_update`, the row is locked until the transaction ends, so that concurrent
    read-modify-write operations on one agent (update vs disable) run one after the other.
    Raises AgentNotFound, or Forbidden when the ID belongs to another organization.
    """
    if looks_like_id(name_or_id, "agent"):
        query = select(AgentRow).where(AgentRow.id == name_or_id)
    elif project_id is None:
        raise AgentNotFound()
    else:
        query = select(AgentRow).where(
            AgentRow.project_id == project_id, AgentRow.name == name_or_id
        )
    if for_update:
        query = query.with_for_update()
    row = await session.scalar(query.execution_options(populate_existing=True))
    if row is None:
        raise AgentNotFound()
    if row.org_id != org_id:
        raise Forbidden()
    return AgentState(row.id, row.org_id, row.project_id, row.name, row.disabled_at)


async def find_named(
    session: AsyncSession,
    org_id: str,
    project_name: str,
    name: str,
    *,
    for_update: bool = False,
) -> AgentState:
    """Return the agent named `name` in the organization's project named `project_name`.

    One statement for the project and the agent (issue #23: a write holds SQLite's lock for
    every round trip it makes). With `for_update`, the agent's row (not the project's) is
    locked until the transaction ends. Raises AgentNotFound, also when the project does not
    exist.
    """
    query = _FIND_NAMED_FOR_UPDATE if for_update else _FIND_NAMED
    params = {"org_id": org_id, "project_name": project_name, "name": name}
    row = await session.scalar(query, params)
    if row is None:
        raise AgentNotFound()
    return AgentState(row.id, row.org_id, row.project_id, row.name, row.disabled_at)


# Built once with bound parameters (their cache keys computed once): the look-up of every
# change to an agent by name, in the writer's turn (docs/performance.md).
_FIND_NAMED = (
    select(AgentRow)
    .join(ProjectRow, ProjectRow.id == AgentRow.project_id)
    .where(ProjectRow.org_id == bindparam("org_id"), ProjectRow.name == bindparam("project_name"))
    .where(AgentRow.name == bindparam("name"))
    .execution_options(populate_existing=True)
)
_FIND_NAMED_FOR_UPDATE = _FIND_NAMED.with_for_update(of=AgentRow)


async def insert(
    session: AsyncSession,
    *,
    agent_id: str,
    org_id: str,
    project: Project,
    spec: AgentSpec,
    now: datetime,
    storage_policy: StoragePolicy | None = None,
    configuration_endpoint: ConfigurationEndpoint | None = None,
) -> Agent:
    """Insert a new agent and its phone numbers; `storage_policy` is the one its
    `spec.external_storage_policy` names, `configuration_endpoint` its endpoint sealed."""
    row = AgentRow(
        id=agent_id,
        org_id=org_id,
        project_id=project.id,
        name=spec.name,
        voice_id=spec.voice_id,
        system_prompt=spec.system_prompt,
        welcome_message=spec.welcome_message,
        language=spec.language,
        audio_format=spec.audio_format,
        tools=list(spec.tools),
        template_variables=_stored_variables(spec.template_variables),
        boosted_keywords=list(spec.boosted_keywords),
        no_input_poke_sec=spec.no_input_poke_sec,
        no_input_poke_text=spec.no_input_poke_text,
        no_input_end_conversation_sec=spec.no_input_end_conversation_sec,
        voicemail_message=spec.voicemail_message,
        data_retention_policy=spec.data_retention_policy.to_json(),
        external_storage_policy_id=storage_policy.id if storage_policy else None,
        extraction_schemas=list(spec.extraction_schemas),
        eval_prompts=list(spec.eval_prompts),
        enable_redaction=spec.enable_redaction,
        configuration_endpoint=stored_endpoint(configuration_endpoint),
        delivery=spec.delivery.to_json(),
        additional_languages=list(spec.additional_languages),
        multilingual_mode=spec.multilingual_mode,
        disabled_at=None,
        created_at=now,
        updated_at=now,
    )
    session.add(row)
    await session.flush()
    await replace_phone_numbers(session, row.id, spec.phone_numbers)
    policy_name = storage_policy.name if storage_policy else None
    return to_record(row, project.name, spec.phone_numbers, policy_name)


PATCHABLE_COLUMNS = (
    "name",
    "voice_id",
    "system_prompt",
    "welcome_message",
    "language",
    "audio_format",
    "no_input_poke_sec",
    "no_input_poke_text",
    "no_input_end_conversation_sec",
    "voicemail_message",
    "enable_redaction",
    "multilingual_mode",
)


def _stored_variables(variables: Mapping[str, TemplateVariable]) -> dict[str, dict[str, str]]:
    return {name: {"default_value": v.default_value} for name, v in variables.items()}


async def apply_patch(
    session: AsyncSession,
    agent_id: str,
    patch: AgentPatch,
    *,
    now: datetime,
    storage_policy_id: str | Unset | None = UNSET,
    configuration_endpoint: ConfigurationEndpoint | Unset | None = UNSET,
    delivery: Delivery | Unset = UNSET,
) -> None:
    """Write the set fields of `patch` to the agent (locked by `find(..., for_update=True)`);
    `storage_policy_id` is the ID of the policy its `external_storage_policy` names,
    `configuration_endpoint` the sealed endpoint its `configuration_endpoint` makes, and
    `delivery` the agent's delivery with `patch.delivery` applied."""
    changes = {
        column: value
        for column in PATCHABLE_COLUMNS
        if not isinstance(value := getattr(patch, column), Unset)
    }
    if not isinstance(storage_policy_id, Unset):
        changes["external_storage_policy_id"] = storage_policy_id
    if not isinstance(configuration_endpoint, Unset):
        changes["configuration_endpoint"] = stored_endpoint(configuration_endpoint)
    if not isinstance(patch.data_retention_policy, Unset):
        changes["data_retention_policy"] = patch.data_retention_policy.to_json()
    if not isinstance(delivery, Unset):
        changes["delivery"] = delivery.to_json()
    for listed in ("tools", "extraction_schemas", "eval_prompts", "additional_languages"):
        if not isinstance(names := getattr(patch, listed), Unset):
            changes[listed] = list(names)
    if not isinstance(patch.boosted_keywords, Unset):
        changes["boosted_keywords"] = list(patch.boosted_keywords)
    if not isinstance(patch.template_variables, Unset):
        changes["template_variables"] = _stored_variables(patch.template_variables)
    changes["version"] = AgentRow.version + 1
    await _set(session, agent_id, **changes, updated_at=now)
    if not isinstance(patch.phone_numbers, Unset):
        await replace_phone_numbers(session, agent_id, patch.phone_numbers)


async def set_disabled(session: AsyncSession, agent_id: str, *, at: datetime) -> None:
    await _set(session, agent_id, disabled_at=at, updated_at=at)


async def set_enabled(session: AsyncSession, agent_id: str, *, at: datetime) -> None:
    await _set(session, agent_id, disabled_at=None, updated_at=at)


async def name_of(reader: Reader, org_id: str, agent_id: str) -> str | None:
    """Return the name of the organization's agent with this ID, if it has one."""
    params = {"org_id": org_id, "agent_id": agent_id}
    name: str | None = (await reader.execute(_NAME_OF, params)).scalar()
    return name


_NAME_OF = select(AgentRow.name).where(
    AgentRow.id == bindparam("agent_id"), AgentRow.org_id == bindparam("org_id")
)


def in_state(org_id: str, agent_id: str, *, disabled: bool) -> Guard:
    """The guard of an audit event about an agent (by ID) that is still disabled, or
    still enabled (`audit.append_guarded`)."""
    query = _BY_ID_DISABLED if disabled else _BY_ID_ENABLED
    return Guard(query, "FOR SHARE", {"guard_org_id": org_id, "guard_agent_id": agent_id})


def named_in_state(org_id: str, project_name: str, name: str, *, disabled: bool) -> Guard:
    """The same guard for an agent named in a project (by the project's name)."""
    query = _NAMED_DISABLED if disabled else _NAMED_ENABLED
    params = {"guard_org_id": org_id, "guard_project": project_name, "guard_name": name}
    return Guard(query, "FOR SHARE OF agents", params)


_BY_ID = "SELECT id AS target FROM agents WHERE id = :guard_agent_id AND org_id = :guard_org_id"
_NAMED = (
    "SELECT agents.id AS target FROM agents JOIN projects ON projects.id = agents.project_id"
    " WHERE projects.org_id = :guard_org_id AND projects.name = :guard_project"
    " AND agents.name = :guard_name"
)
_BY_ID_DISABLED = _BY_ID + " AND disabled_at IS NOT NULL"
_BY_ID_ENABLED = _BY_ID + " AND disabled_at IS NULL"
_NAMED_DISABLED = _NAMED + " AND agents.disabled_at IS NOT NULL"
_NAMED_ENABLED = _NAMED + " AND agents.disabled_at IS NULL"


async def _set(session: AsyncSession, agent_id: str, **values: object) -> None:
    await session.execute(update(AgentRow).where(AgentRow.id == agent_id).values(**values))


async def listing_tool(session: AsyncSession, project_id: str, tool_name: str) -> list[str]:
    """Return the names of the project's agents whose `tools` list `tool_name`."""
    return await _listing(session, project_id, "tools", tool_name)


async def rename_tool(
    session: AsyncSession, project_id: str, old: str, new: str, *, now: datetime
) -> None:
    """Follow a tool's new name in the `tools` of the project's agents that list it."""
    await _rename(session, project_id, "tools", old, new, now=now)


async def listing_extraction_schema(
    session: AsyncSession, project_id: str, schema_name: str
) -> list[str]:
    """Return the names of the project's agents whose `extraction_schemas` list the name."""
    return await _listing(session, project_id, "extraction_schemas", schema_name)


async def rename_extraction_schema(
    session: AsyncSession, project_id: str, old: str, new: str, *, now: datetime
) -> None:
    """Follow an extraction schema's new name in the lists of the agents that name it."""
    await _rename(session, project_id, "extraction_schemas", old, new, now=now)


async def _listing(session: AsyncSession, project_id: str, column: str, name: str) -> list[str]:
    """The names of the project's agents whose list `column` holds `name`.

    The lists are short JSON arrays: they are read and searched here, the same way on every
    database.
    """
    listed = getattr(AgentRow, column)
    rows = await session.execute(
        select(AgentRow.name, listed).where(AgentRow.project_id == project_id)
    )
    return sorted(agent for agent, names in rows if name in (names or ()))


async def _rename(
    session: AsyncSession, project_id: str, column: str, old: str, new: str, *, now: datetime
) -> None:
    listed = getattr(AgentRow, column)
    rows = await session.execute(
        select(AgentRow.id, listed).where(AgentRow.project_id == project_id)
    )
    for agent_id, names in rows.all():
        if old in (names or ()):
            renamed = [new if name == old else name for name in names]
            await _set(session, agent_id, **{column: renamed, "updated_at": now})


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
    reader: Reader,
    org_id: str,
    *,
    project_id: str | None,
    cursor: str | None,
    limit: int,
) -> list[Agent]:
    """Return a page of agents (one more than `limit`, for the next cursor) with their
    project names and phone numbers, in one Core statement."""
    params: dict[str, Any] = {"org_id": org_id, "limit": limit + 1}
    if project_id is not None:
        params["project_id"] = project_id
    if cursor is not None:
        params.update(cursor_params(cursor))
    query = _page_query(in_project=project_id is not None, after=cursor is not None)
    rows: dict[str, tuple[Row[Any], list[str]]] = {}
    for row in (await reader.execute(query, params)).all():
        _, numbers = rows.setdefault(row.id, (row, []))
        if row.phone_number is not None:
            numbers.append(row.phone_number)
    return [
        to_record(row, row.project_name, numbers, row.storage_policy_name)
        for row, numbers in rows.values()
    ]


@functools.cache
def _page_query(*, in_project: bool, after: bool) -> Select[Any]:
    """The page (a subquery, so the limit counts agents) joined with its phone numbers.

    Built once per shape with bound parameters: building it per request (the subquery's
    column proxies and its cache key) was a third of the agent list's time in the profile
    (docs/performance.md); a statement built once keeps its cache key.
    """
    created_at, agent_id = _AGENTS.c.created_at, _AGENTS.c.id
    page = (
        select(
            _AGENTS,
            _PROJECTS.c.name.label("project_name"),
            _POLICIES.c.name.label("storage_policy_name"),
        )
        .join(_PROJECTS, _PROJECTS.c.id == _AGENTS.c.project_id)
        .outerjoin(_POLICIES, _POLICIES.c.id == _AGENTS.c.external_storage_policy_id)
        .where(_AGENTS.c.org_id == bindparam("org_id"))
    )
    if in_project:
        page = page.where(_AGENTS.c.project_id == bindparam("project_id"))
    if after:
        page = page.where(after_cursor(created_at, agent_id))
    agents = page.order_by(created_at, agent_id).limit(bindparam("limit")).subquery()
    return (
        select(agents, _PHONE_NUMBERS.c.number.label("phone_number"))
        .outerjoin(_PHONE_NUMBERS, _PHONE_NUMBERS.c.agent_id == agents.c.id)
        .order_by(agents.c.created_at, agents.c.id, _PHONE_NUMBERS.c.position)
    )


async def delete_row(session: AsyncSession, agent_id: str) -> None:
    """Delete an agent; its phone numbers go with it (ON DELETE CASCADE)."""
    await session.execute(delete(AgentRow).where(AgentRow.id == agent_id))
