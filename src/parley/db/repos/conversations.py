"""Conversations and their items."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from datetime import datetime
from typing import Any

from sqlalchemy import Row, and_, bindparam, delete, insert, or_, select, tuple_, update
from sqlalchemy.ext.asyncio import AsyncSession

from parley.db.pagination import SelectT, decode_cursor, paginate
from parley.db.session import StatementConnection
from parley.db.tables import (
    AgentRow,
    ConversationExtractionRow,
    ConversationItemRow,
    ConversationRow,
    InstanceRow,
    OrganizationRow,
    RecordingUploadRow,
)
from parley.errors import ConversationExists
from parley.ids import is_valid_conversation_id, new_id
from parley.records import (
    AgentRef,
    CallInfo,
    Conversation,
    ConversationItem,
    EndedBy,
    Outcome,
    ProjectRef,
    RetentionPolicy,
    Status,
    ToolCall,
    TurnTiming,
)

UNIQUE_VIOLATIONS = {
    "pk_conversations": ConversationExists,
    "conversations.org_id": ConversationExists,
}


@dataclass(frozen=True, slots=True)
class ConversationState:
    """A conversation's columns, as the rules of its life read them; changes go through this
    module, by ID."""

    org_id: str
    id: str
    agent_id: str | None
    project_id: str | None
    project_name: str | None
    status: str
    end_user: str | None
    external_id: str | None
    started_at: datetime | None
    ended_at: datetime | None
    created_at: datetime
    instance_id: str | None
    template_variables: Mapping[str, str] = field(default_factory=dict)
    from_phone_number: str | None = None
    to_phone_number: str | None = None
    twilio_call_sid: str | None = None
    ended_by: str | None = None
    latencies_ms: tuple[int, ...] = ()
    interruptions_count: int = 0
    turn_timings: tuple[Mapping[str, Any], ...] = ()
    call_direction: str | None = None
    call_settings: Mapping[str, Any] | None = None
    answered_by: str | None = None
    transfer: Mapping[str, Any] | None = None
    transfer_since: datetime | None = None
    recording_key: str | None = None
    recording_policy_id: str | None = None
    recorded_at: datetime | None = None
    transcripts_deleted_at: datetime | None = None
    audio_deleted_at: datetime | None = None
    retention: Mapping[str, Any] | None = None
    transcripts_due_at: datetime | None = None
    audio_due_at: datetime | None = None
    summary: str | None = None
    redacted: bool = False
    replay_of: str | None = None
    heard_languages: tuple[str, ...] = ()
    test_run_id: str | None = None
    tool_overrides: Mapping[str, Any] | None = None


COLUMNS = tuple(field.name for field in fields(ConversationState))


def to_state(row: ConversationRow) -> ConversationState:
    return ConversationState(
        org_id=row.org_id,
        id=row.id,
        agent_id=row.agent_id,
        project_id=row.project_id,
        project_name=row.project_name,
        status=row.status,
        end_user=row.end_user,
        external_id=row.external_id,
        started_at=row.started_at,
        ended_at=row.ended_at,
        created_at=row.created_at,
        instance_id=row.instance_id,
        template_variables=dict(row.template_variables or {}),
        from_phone_number=row.from_phone_number,
        to_phone_number=row.to_phone_number,
        twilio_call_sid=row.twilio_call_sid,
        ended_by=row.ended_by,
        latencies_ms=tuple(row.latencies_ms or ()),
        interruptions_count=row.interruptions_count or 0,
        turn_timings=tuple(row.turn_timings or ()),
        call_direction=row.call_direction,
        call_settings=row.call_settings,
        answered_by=row.answered_by,
        transfer=row.transfer,
        transfer_since=row.transfer_since,
        recording_key=row.recording_key,
        recording_policy_id=row.recording_policy_id,
        recorded_at=row.recorded_at,
        transcripts_deleted_at=row.transcripts_deleted_at,
        audio_deleted_at=row.audio_deleted_at,
        retention=row.retention,
        transcripts_due_at=row.transcripts_due_at,
        audio_due_at=row.audio_due_at,
        summary=row.summary,
        redacted=bool(row.redacted),
        replay_of=row.replay_of,
        heard_languages=tuple(row.heard_languages or ()),
        test_run_id=row.test_run_id,
        tool_overrides=row.tool_overrides,
    )


_CONVERSATIONS = ConversationRow.__table__
_ITEMS = ConversationItemRow.__table__
_AGENTS = AgentRow.__table__
_ORGS = OrganizationRow.__table__


@dataclass(frozen=True, slots=True)
class Joined:
    """What a conversation's record shows of the rows it refers to: its organization's name
    and its agent's name, language and audio format (each None without an agent)."""

    workspace: str = ""
    agent_name: str | None = None
    language: str | None = None
    audio_format: str | None = None
    additional_languages: tuple[str, ...] = ()
    multilingual_mode: str | None = None

    @classmethod
    def of(cls, row: Any) -> Joined:
        """From a row with the columns `JOINED_COLUMNS` labels."""
        return cls(
            row.workspace or "",
            row.agent_name,
            row.agent_language,
            row.agent_format,
            tuple(row.agent_additional_languages or ()),
            row.agent_multilingual_mode,
        )


JOINED_COLUMNS = (
    OrganizationRow.name.label("workspace"),
    AgentRow.name.label("agent_name"),
    AgentRow.language.label("agent_language"),
    AgentRow.audio_format.label("agent_format"),
    AgentRow.additional_languages.label("agent_additional_languages"),
    AgentRow.multilingual_mode.label("agent_multilingual_mode"),
)
"""Select these, outer-joined (`with_joined`), and read them with `Joined.of`."""


def with_joined(query: SelectT) -> SelectT:
    """`query` over conversations, outer-joined to the rows `JOINED_COLUMNS` read."""
    return query.outerjoin(AgentRow, AgentRow.id == ConversationRow.agent_id).outerjoin(
        OrganizationRow, OrganizationRow.id == ConversationRow.org_id
    )


def to_record(
    row: ConversationRow | ConversationState | Row[Any],
    joined: Joined,
    items: Sequence[ConversationItem],
) -> Conversation:
    agent_name = joined.agent_name
    agent = AgentRef(id=row.agent_id, name=agent_name) if row.agent_id and agent_name else None
    project = None
    if row.project_id and row.project_name:
        project = ProjectRef(id=row.project_id, name=row.project_name)
    return Conversation(
        id=row.id,
        org_id=row.org_id,
        agent=agent,
        project=project,
        status=row.status,
        end_user=row.end_user,
        external_id=row.external_id,
        started_at=row.started_at,
        ended_at=row.ended_at,
        created_at=row.created_at,
        items=tuple(items),
        template_variables=dict(row.template_variables or {}),
        call_info=_call_info(row),
        ended_by=row.ended_by,
        latencies_ms=tuple(row.latencies_ms or ()),
        interruptions_count=row.interruptions_count or 0,
        turns=tuple(TurnTiming.from_json(turn) for turn in row.turn_timings or ()),
        call_settings=dict(row.call_settings or {}),
        answered_by=row.answered_by,
        transfer=dict(row.transfer) if row.transfer else None,
        recording_key=row.recording_key,
        recording_policy_id=row.recording_policy_id,
        transcripts_deleted_at=row.transcripts_deleted_at,
        audio_deleted_at=row.audio_deleted_at,
        summary=row.summary,
        is_redacted=bool(row.redacted),
        zero_data_retention=RetentionPolicy.from_json(row.retention).zero_data_retention,
        workspace=joined.workspace,
        language=joined.language if row.agent_id else None,
        audio_format=joined.audio_format if row.agent_id else None,
        replay_of=row.replay_of,
        heard_languages=tuple(row.heard_languages or ()),
        additional_languages=joined.additional_languages if row.agent_id else (),
        multilingual_mode=joined.multilingual_mode if row.agent_id else None,
        test_run_id=row.test_run_id,
        tool_overrides=dict(row.tool_overrides) if row.tool_overrides is not None else None,
    )


def _call_info(row: ConversationRow | ConversationState | Row[Any]) -> CallInfo | None:
    """A phone call's `call_info` (API.md section 13); None for other conversations."""
    if row.twilio_call_sid is None and row.to_phone_number is None:
        return None
    return CallInfo(
        from_phone_number=row.from_phone_number,
        to_phone_number=row.to_phone_number,
        twilio_call_sid=row.twilio_call_sid,
        direction=row.call_direction or "inbound",
    )


async def find(
    session: AsyncSession, org_id: str, conversation_id: str, *, for_update: bool = False
) -> ConversationState | None:
    """Return the conversation's state, or None; an ID that breaks the rule names none (and
    never reaches the database, which may not even accept it).

    With `for_update`, the row is locked until the transaction ends: later changes through
    this module (go_live, end, set_external_id) run under that lock.
    """
    if not is_valid_conversation_id(conversation_id):
        return None
    query = select(ConversationRow).where(
        ConversationRow.org_id == org_id, ConversationRow.id == conversation_id
    )
    if for_update:
        query = query.with_for_update()
    row = await session.scalar(query.execution_options(populate_existing=True))
    return None if row is None else to_state(row)


async def get(
    connection: StatementConnection, org_id: str, conversation_id: str
) -> Conversation | None:
    """Return the conversation with its agent's name and items, or None: one Core statement
    (a row per item, or one row without an item; `Database.statement()`)."""
    if not is_valid_conversation_id(conversation_id):
        return None
    params = {"org_id": org_id, "conversation_id": conversation_id}
    return _assembled((await connection.execute(_READ, params)).all())


async def get_short(
    connection: StatementConnection, org_id: str, conversation_id: str
) -> tuple[Conversation | None, bool]:
    """`get`, reading at most `ITEMS_IN_A_SHORT_READ` items: (the conversation or None,
    whether that was all of it). A longer conversation comes back as (None, False)."""
    if not is_valid_conversation_id(conversation_id):
        return None, True
    params = {"org_id": org_id, "conversation_id": conversation_id}
    found = (await connection.execute(_READ_SHORT, params)).all()
    if len(found) > ITEMS_IN_A_SHORT_READ:
        return None, False
    return _assembled(found), True


def _assembled(found: Sequence[Row[Any]]) -> Conversation | None:
    if not found:
        return None
    items = [
        ConversationItem(
            role=row.item_role,
            text=row.item_text,
            created_at=row.item_created_at,
            tool_calls=tool_calls_from_json(row.item_tool_calls),
            id=row.item_id or "",
        )
        for row in found
        if row.item_role is not None
    ]
    return to_record(found[0], Joined.of(found[0]), items)


# Built once, with bound parameters, so its cache key is computed once (docs/performance.md).
_READ = (
    select(
        _CONVERSATIONS,
        _ORGS.c.name.label("workspace"),
        _AGENTS.c.name.label("agent_name"),
        _AGENTS.c.language.label("agent_language"),
        _AGENTS.c.audio_format.label("agent_format"),
        _AGENTS.c.additional_languages.label("agent_additional_languages"),
        _AGENTS.c.multilingual_mode.label("agent_multilingual_mode"),
        _ITEMS.c.item_id.label("item_id"),
        _ITEMS.c.role.label("item_role"),
        _ITEMS.c.text.label("item_text"),
        _ITEMS.c.created_at.label("item_created_at"),
        _ITEMS.c.tool_calls.label("item_tool_calls"),
    )
    .outerjoin(_AGENTS, _AGENTS.c.id == _CONVERSATIONS.c.agent_id)
    .outerjoin(_ORGS, _ORGS.c.id == _CONVERSATIONS.c.org_id)
    .outerjoin(
        _ITEMS,
        and_(
            _ITEMS.c.org_id == _CONVERSATIONS.c.org_id,
            _ITEMS.c.conversation_id == _CONVERSATIONS.c.id,
        ),
    )
    .where(
        _CONVERSATIONS.c.org_id == bindparam("org_id"),
        _CONVERSATIONS.c.id == bindparam("conversation_id"),
    )
    .order_by(_ITEMS.c.id)
)
ITEMS_IN_A_SHORT_READ = 100
"""A conversation with at most this many items is read in the event loop's own thread on
SQLite (services/conversations.py: `get_conversation`): 3 ms of the loop for 100 items,
measured, the records' assembly included (the loop does that part either way)."""
_READ_SHORT = _READ.limit(ITEMS_IN_A_SHORT_READ + 1)


_STATUS = select(_CONVERSATIONS.c.status).where(
    _CONVERSATIONS.c.org_id == bindparam("org_id"), _CONVERSATIONS.c.id == bindparam("id")
)


async def status_of(
    connection: StatementConnection, org_id: str, conversation_id: str
) -> str | None:
    """Return the conversation's status, or None: one Core statement, built once
    (`Database.statement()`: a WebSocket handshake reads nothing else, issue #23)."""
    if not is_valid_conversation_id(conversation_id):
        return None
    params = {"org_id": org_id, "id": conversation_id}
    status: str | None = (await connection.execute(_STATUS, params)).scalar()
    return status


async def load(session: AsyncSession, state: ConversationState) -> Conversation:
    """Return the record of a conversation, with its agent's name and its items."""
    # By the state's own agent (a change of it may not be written yet), in one statement.
    query = (
        select(*JOINED_COLUMNS)
        .select_from(OrganizationRow)
        .outerjoin(AgentRow, AgentRow.id == state.agent_id)
        .where(OrganizationRow.id == state.org_id)
    )
    found = (await session.execute(query)).first()
    joined = Joined.of(found) if found is not None else Joined()
    items = (await items_of(session, state.org_id, [state.id])).get(state.id, [])
    return to_record(state, joined, items)


async def items_of(
    session: AsyncSession, org_id: str, conversation_ids: Sequence[str]
) -> dict[str, list[ConversationItem]]:
    rows = await session.scalars(
        select(ConversationItemRow)
        .where(
            ConversationItemRow.org_id == org_id,
            ConversationItemRow.conversation_id.in_(conversation_ids),
        )
        .order_by(ConversationItemRow.id)
    )
    found: dict[str, list[ConversationItem]] = defaultdict(list)
    for item in rows:
        found[item.conversation_id].append(
            ConversationItem(
                role=item.role,
                text=item.text,
                created_at=item.created_at,
                tool_calls=tool_calls_from_json(item.tool_calls),
                id=item.item_id or "",
            )
        )
    return found


async def create(
    session: AsyncSession,
    *,
    org_id: str,
    conversation_id: str,
    agent_id: str,
    project: ProjectRef,
    at: datetime,
    call_info: CallInfo | None = None,
    call_settings: Mapping[str, Any] | None = None,
    replay_of: str | None = None,
    test_run_id: str | None = None,
    tool_overrides: Mapping[str, Any] | None = None,
) -> ConversationState:
    """Insert a `pending` conversation of an agent (of a phone call, given `call_info`; an
    outbound call's `config` overrides, given `call_settings`; the conversation whose
    recording it replays, given `replay_of`; a test run's, given `test_run_id`)."""
    state = ConversationState(
        org_id=org_id,
        id=conversation_id,
        agent_id=agent_id,
        project_id=project.id,
        project_name=project.name,
        status="pending",
        end_user=None,
        external_id=None,
        started_at=None,
        ended_at=None,
        created_at=at,
        instance_id=None,
        from_phone_number=call_info.from_phone_number if call_info else None,
        to_phone_number=call_info.to_phone_number if call_info else None,
        twilio_call_sid=call_info.twilio_call_sid if call_info else None,
        call_direction=call_info.direction if call_info else None,
        call_settings=dict(call_settings) if call_settings is not None else None,
        replay_of=replay_of,
        test_run_id=test_run_id,
        tool_overrides=dict(tool_overrides) if tool_overrides is not None else None,
    )
    await session.execute(insert(ConversationRow).values(**_columns(state)))
    return state


async def go_live(
    session: AsyncSession,
    state: ConversationState,
    *,
    agent_id: str,
    project: ProjectRef,
    instance_id: str,
    end_user: str | None,
    at: datetime,
    retention: RetentionPolicy | None = None,
    redacted: bool | None = None,
) -> ConversationState:
    """Make a conversation `live`, served by `instance_id`; keep a first start and end user,
    and the retention policy and redaction it goes live with (None: the ones it has).

    `state` is current (found with `for_update`, or just created): the new state follows
    from it, and nothing is written when nothing changes.
    """
    new = replace(
        state,
        agent_id=agent_id,
        project_id=project.id,
        project_name=project.name,
        status=Status.LIVE,
        instance_id=instance_id,
        started_at=state.started_at or at,
        end_user=state.end_user or end_user,
        retention=retention.to_json() if retention is not None else state.retention,
        redacted=redacted if redacted is not None else state.redacted,
    )
    await _write_changes(session, state, new)
    return new


async def end(
    session: AsyncSession,
    org_id: str,
    conversation_id: str,
    *,
    at: datetime,
    ended_by: EndedBy,
    measured: Outcome | None = None,
    due: tuple[datetime | None, datetime | None] = (None, None),
    post_call_at: datetime | None = None,
) -> bool:
    """Store the transition to `ended` at `at` by `ended_by` (with what its socket
    `measured`, and when its transcript and recording are `due` for deletion), unless the
    conversation has ended already; True if this statement ended it (of two racing, one
    does). Who ends a conversation, and what else follows, is services/endings.py's."""
    how = {} if measured is None else _analysis_columns(measured)
    how.update(transcripts_due_at=due[0], audio_due_at=due[1], post_call_due_at=post_call_at)
    result = await session.execute(
        update(ConversationRow)
        .where(
            ConversationRow.org_id == org_id,
            ConversationRow.id == conversation_id,
            ConversationRow.status != Status.ENDED,
        )
        .values(status=Status.ENDED, ended_at=at, ended_by=ended_by, **how)
        .returning(ConversationRow.started_at)
        .execution_options(synchronize_session=False)
    )
    ended = result.first()
    if ended is None:
        return False
    if ended.started_at is not None:  # stored for the list's duration filters
        elapsed = round((at - ended.started_at).total_seconds() * 1000)
        await session.execute(
            update(ConversationRow)
            .where(ConversationRow.org_id == org_id, ConversationRow.id == conversation_id)
            .values(duration_ms=elapsed)
            .execution_options(synchronize_session=False)
        )
    return True


async def set_external_id(
    session: AsyncSession, state: ConversationState, external_id: str
) -> None:
    await _write_changes(session, state, replace(state, external_id=external_id))


async def set_call_sid(session: AsyncSession, state: ConversationState, call_sid: str) -> None:
    """Record the carrier's SID of the call placed for a conversation (API.md section 15)."""
    await _write_changes(session, state, replace(state, twilio_call_sid=call_sid))


async def set_agent(session: AsyncSession, state: ConversationState, agent_id: str) -> None:
    """The conversation goes on with another agent (a transfer, API.md section 15)."""
    await _write_changes(session, state, replace(state, agent_id=agent_id))


async def set_transfer(
    session: AsyncSession,
    state: ConversationState,
    transfer: Mapping[str, Any] | None,
    *,
    at: datetime,
) -> ConversationState:
    """Record a phone transfer's state (None: none under way) as of `at`."""
    new = replace(
        state,
        transfer=dict(transfer) if transfer is not None else None,
        transfer_since=at if transfer is not None else None,
    )
    await _write_changes(session, state, new)
    return new


async def stale_transfers(
    session: AsyncSession, *, since_before: datetime
) -> list[tuple[str, str]]:
    """The (org, ID) pairs of live conversations whose transfer has not moved since."""
    result = await session.execute(
        select(ConversationRow.org_id, ConversationRow.id).where(
            ConversationRow.status == Status.LIVE,
            ConversationRow.transfer_since < since_before,
        )
    )
    return [(org_id, conversation_id) for org_id, conversation_id in result]


async def set_answered_by(
    session: AsyncSession, state: ConversationState, answered_by: str
) -> None:
    """Record the carrier's answering-machine verdict of an outbound call."""
    await _write_changes(session, state, replace(state, answered_by=answered_by))


async def set_analysis(session: AsyncSession, state: ConversationState, measured: Outcome) -> None:
    """Store how a conversation went (its socket measured it), whoever ended it."""
    await _write_changes(session, state, replace(state, **_analysis_columns(measured)))


async def set_recording(
    session: AsyncSession,
    org_id: str,
    conversation_id: str,
    *,
    key: str,
    policy_id: str | None,
    at: datetime,
) -> bool:
    """Record where the conversation's recording is kept; False when the conversation is
    gone (deleted with its organization meanwhile) or its audio was deleted meanwhile."""
    result = await session.execute(
        update(ConversationRow)
        .where(
            ConversationRow.org_id == org_id,
            ConversationRow.id == conversation_id,
            ConversationRow.audio_deleted_at.is_(None),
        )
        .values(recording_key=key, recording_policy_id=policy_id, recorded_at=at)
        .returning(ConversationRow.id)
        .execution_options(synchronize_session=False)
    )
    return result.first() is not None


async def delete_due(
    session: AsyncSession, due: Sequence[Due], *, at: datetime
) -> list[tuple[str, str, tuple[str, ...]]]:
    """Delete the transcripts (items, with their tool call records) and forget the
    recordings (their files are the caller's) of `due`, set-based, each part only if not
    deleted yet, stamping when (API.md section 16); of two instances racing, one deletes
    each. Return (organization, conversation, parts deleted) for each one changed."""
    done: dict[tuple[str, str], list[str]] = defaultdict(list)
    for part, column, wanted in (
        ("transcript", ConversationRow.transcripts_deleted_at, [d for d in due if d.transcript]),
        ("audio", ConversationRow.audio_deleted_at, [d for d in due if d.audio]),
    ):
        if not wanted:
            continue
        values: dict[str, Any] = {column.key: at}
        if part == "audio":
            values["recording_key"] = None
            values["recording_policy_id"] = None
        result = await session.execute(
            update(ConversationRow)
            .where(
                tuple_(ConversationRow.org_id, ConversationRow.id).in_(
                    [(d.org_id, d.id) for d in wanted]
                ),
                column.is_(None),
            )
            .values(**values)
            .returning(ConversationRow.org_id, ConversationRow.id)
            .execution_options(synchronize_session=False)
        )
        changed = [(row.org_id, row.id) for row in result.all()]
        for key in changed:
            done[key].append(part)
        if part == "audio" and changed:  # a recording not stored yet never will be
            await session.execute(
                delete(RecordingUploadRow).where(
                    tuple_(RecordingUploadRow.org_id, RecordingUploadRow.conversation_id).in_(
                        changed
                    )
                )
            )
        if part == "transcript" and changed:
            await _delete_transcripts(session, changed)
    return [
        (org_id, conversation_id, tuple(parts)) for (org_id, conversation_id), parts in done.items()
    ]


async def _delete_transcripts(session: AsyncSession, keys: list[tuple[str, str]]) -> None:
    """Delete what the conversations' words made (API.md section 16's "transcript"): the
    items with their tool call records, the summary and the extractions."""
    for table in (ConversationItemRow, ConversationExtractionRow):
        await session.execute(
            delete(table).where(tuple_(table.org_id, table.conversation_id).in_(keys))
        )
    await session.execute(
        update(ConversationRow)
        .where(tuple_(ConversationRow.org_id, ConversationRow.id).in_(keys))
        .values(summary=None)
        .execution_options(synchronize_session=False)
    )


async def set_summary(session: AsyncSession, org_id: str, conversation_id: str, text: str) -> bool:
    """Store a conversation's summary unless its transcript has been deleted; False when it
    was not stored (deleted, or the conversation is gone)."""
    result = await session.execute(
        update(ConversationRow)
        .where(
            ConversationRow.org_id == org_id,
            ConversationRow.id == conversation_id,
            ConversationRow.transcripts_deleted_at.is_(None),
        )
        .values(summary=text)
        .returning(ConversationRow.id)
        .execution_options(synchronize_session=False)
    )
    return result.first() is not None


@dataclass(frozen=True, slots=True)
class Due:
    """A conversation with something due for deletion."""

    org_id: str
    id: str
    transcript: bool
    audio: bool
    recording_key: str | None
    recording_policy_id: str | None = None


async def due_for_deletion(
    connection: StatementConnection, *, now: datetime, limit: int
) -> list[Due]:
    """Conversations whose transcript or recording is due and not deleted yet (the
    retention sweep), at most `limit`."""
    transcript_due = and_(
        ConversationRow.transcripts_due_at <= now,
        ConversationRow.transcripts_deleted_at.is_(None),
        ConversationRow.post_call_due_at.is_(None),  # `0` hours: once the post-call work read it
    )
    uploading = (
        select(RecordingUploadRow.conversation_id)
        .where(
            RecordingUploadRow.org_id == ConversationRow.org_id,
            RecordingUploadRow.conversation_id == ConversationRow.id,
        )
        .exists()
    )
    audio_due = and_(
        ConversationRow.audio_due_at <= now,
        ConversationRow.audio_deleted_at.is_(None),
        ~uploading,  # `0` hours: deleted once it is stored, not before
    )
    query = (
        select(
            ConversationRow.org_id,
            ConversationRow.id,
            ConversationRow.transcripts_due_at,
            ConversationRow.transcripts_deleted_at,
            ConversationRow.audio_due_at,
            ConversationRow.audio_deleted_at,
            ConversationRow.recording_key,
            ConversationRow.recording_policy_id,
            transcript_due.label("transcript_is_due"),
            audio_due.label("audio_is_due"),
        )
        .where(or_(transcript_due, audio_due))
        .limit(limit)
    )
    return [
        Due(
            org_id=row.org_id,
            id=row.id,
            transcript=bool(row.transcript_is_due),
            audio=bool(row.audio_is_due),
            recording_key=row.recording_key,
            recording_policy_id=row.recording_policy_id,
        )
        for row in (await connection.execute(query)).all()
    ]


async def recordings_named(
    connection: StatementConnection, conversation_id: str
) -> list[tuple[str, str]]:
    """(organization, recording key) of every recorded conversation with this ID: IDs are
    unique within an organization only, and a recording's URL names none."""
    if not is_valid_conversation_id(conversation_id):
        return []
    result = await connection.execute(
        select(ConversationRow.org_id, ConversationRow.recording_key).where(
            ConversationRow.id == conversation_id,
            ConversationRow.recording_key.is_not(None),
            ConversationRow.audio_deleted_at.is_(None),
        )
    )
    return [(row.org_id, row.recording_key) for row in result.all()]


def _analysis_columns(measured: Outcome) -> dict[str, Any]:
    return {
        "latencies_ms": tuple(measured.latencies_ms),
        "interruptions_count": measured.interruptions_count,
        "turn_timings": tuple(turn.to_json() for turn in measured.turns),
    }


async def set_template_variables(
    session: AsyncSession, state: ConversationState, values: Mapping[str, str]
) -> None:
    await _write_changes(session, state, replace(state, template_variables=dict(values)))


async def add_heard_language(
    session: AsyncSession, state: ConversationState, language: str
) -> None:
    """Add `language` to the heard languages (no statement when it is there already)."""
    if language not in state.heard_languages:
        heard = (*state.heard_languages, language)
        await _write_changes(session, state, replace(state, heard_languages=heard))


def _columns(state: ConversationState) -> dict[str, object]:
    return {name: getattr(state, name) for name in COLUMNS}


async def _write_changes(
    session: AsyncSession, old: ConversationState, new: ConversationState
) -> None:
    """UPDATE the columns that differ between `old` and `new` (no statement if none do)."""
    before = _columns(old)
    changes = {name: value for name, value in _columns(new).items() if before[name] != value}
    if changes:
        await session.execute(
            update(ConversationRow)
            .where(ConversationRow.org_id == old.org_id, ConversationRow.id == old.id)
            .values(**changes)
        )


async def item_owner(session: AsyncSession, org_id: str, item_id: str) -> str | None:
    """The ID of the conversation of the organization's item `item_id`, or None."""
    owner: str | None = await session.scalar(
        select(ConversationItemRow.conversation_id).where(
            ConversationItemRow.item_id == item_id, ConversationItemRow.org_id == org_id
        )
    )
    return owner


async def add_item(
    session: AsyncSession,
    *,
    org_id: str,
    conversation_id: str,
    role: str,
    text: str,
    tool_calls: Sequence[ToolCall] = (),
    at: datetime,
) -> str:
    """Add one item; return its `item_…` ID."""
    item_id = new_id("item")
    session.add(
        ConversationItemRow(
            item_id=item_id,
            org_id=org_id,
            conversation_id=conversation_id,
            role=role,
            text=text,
            tool_calls=[tool_call_to_json(call) for call in tool_calls],
            created_at=at,
        )
    )
    await session.flush()
    return item_id


async def replace_tool_call(
    session: AsyncSession, org_id: str, conversation_id: str, tool_call: ToolCall
) -> bool:
    """Replace the stored call with `tool_call`'s ID by `tool_call`; False if none has it.

    The newest items are searched first: a late output belongs to a recent turn.
    """
    rows = await session.scalars(
        select(ConversationItemRow)
        .where(
            ConversationItemRow.org_id == org_id,
            ConversationItemRow.conversation_id == conversation_id,
        )
        .order_by(ConversationItemRow.id.desc())
        .with_for_update()
    )
    for item in rows:
        calls = list(item.tool_calls or ())
        for index, stored in enumerate(calls):
            if stored.get("id") == tool_call.id:
                calls[index] = tool_call_to_json(tool_call)
                await session.execute(
                    update(ConversationItemRow)
                    .where(ConversationItemRow.id == item.id)
                    .values(tool_calls=calls)
                )
                return True
    return False


def tool_call_to_json(call: ToolCall) -> dict[str, Any]:
    """A ToolCall as stored (and shown: API.md section 12's ToolCall)."""
    return {
        "id": call.id,
        "tool": {"id": call.tool_id, "name": call.tool_name},
        "parameters": call.parameters,
        "output": call.output,
        "endpoint_url": call.endpoint_url,
        "response_status_code": call.response_status_code,
        "duration_ms": call.duration_ms,
        "timed_out": call.timed_out,
        "error_message": call.error_message,
    }


def tool_calls_from_json(stored: Sequence[Mapping[str, Any]] | None) -> tuple[ToolCall, ...]:
    return tuple(
        ToolCall(
            id=call["id"],
            tool_id=call["tool"]["id"],
            tool_name=call["tool"]["name"],
            parameters=call.get("parameters"),
            output=call.get("output"),
            endpoint_url=call.get("endpoint_url"),
            response_status_code=call.get("response_status_code"),
            duration_ms=call.get("duration_ms"),
            timed_out=bool(call.get("timed_out", False)),
            error_message=call.get("error_message"),
        )
        for call in stored or ()
    )


async def list_page(
    session: AsyncSession,
    org_id: str,
    *,
    project_id: str | None,
    agent_id: str | None,
    only_ids: Sequence[str] | None,
    cursor: str | None,
    limit: int,
    newest_first: bool = False,
) -> list[Conversation]:
    """Up to `limit` + 1 conversations after `cursor`, oldest first (the API's order) or
    newest first (the dashboard's)."""
    query = with_joined(select(ConversationRow, *JOINED_COLUMNS))
    query = query.where(ConversationRow.org_id == org_id)
    if project_id is not None:
        query = query.where(ConversationRow.project_id == project_id)
    if agent_id is not None:
        query = query.where(ConversationRow.agent_id == agent_id)
    if only_ids is not None:
        query = query.where(ConversationRow.id.in_(only_ids))
    if newest_first:
        query = _newest_first(query, cursor=cursor, limit=limit)
    else:
        query = paginate(
            query,
            created_at=ConversationRow.created_at,
            row_id=ConversationRow.id,
            cursor=cursor,
            limit=limit,
        )
    return await records_of(session, org_id, query)


async def records_of(session: AsyncSession, org_id: str, query: SelectT) -> list[Conversation]:
    """Run a query of (ConversationRow, *JOINED_COLUMNS) rows; return them as records, with
    their items (one more statement for all of them)."""
    rows = (await session.execute(query)).all()
    items = await items_of(session, org_id, [row[0].id for row in rows])
    return [to_record(row[0], Joined.of(row), items.get(row[0].id, [])) for row in rows]


def _newest_first(query: SelectT, *, cursor: str | None, limit: int) -> SelectT:
    """Order by (created_at, id) descending, start before `cursor`'s row, one extra row.

    The cursor is `paginate`'s (the last row of the page before), read the other way.
    """
    created_at, row_id = ConversationRow.created_at, ConversationRow.id
    if cursor is not None:
        before_created, before_id = decode_cursor(cursor)
        query = query.where(
            or_(created_at < before_created, and_(created_at == before_created, row_id < before_id))
        )
    return query.order_by(created_at.desc(), row_id.desc()).limit(limit + 1)


async def live_where(
    session: AsyncSession,
    *,
    owned_by: str | None = None,
    stale_before: datetime | None = None,
    sparing: str | None = None,
) -> list[tuple[str, str]]:
    """The (org, ID) pairs of live conversations of instance `owned_by`, and (given
    `stale_before`) of those whose owner has no heartbeat newer than `stale_before` or that
    have no owner; never those of `sparing`."""
    owner = ConversationRow.instance_id
    conditions = []
    if owned_by is not None:
        conditions.append(owner == owned_by)
    if stale_before is not None:
        fresh = select(InstanceRow.id).where(InstanceRow.heartbeat_at > stale_before)
        stale = or_(owner.is_(None), owner.not_in(fresh))
        conditions.append(
            stale if sparing is None else and_(stale, or_(owner.is_(None), owner != sparing))
        )
    if not conditions:
        return []
    statement = select(ConversationRow.org_id, ConversationRow.id).where(
        ConversationRow.status == Status.LIVE, or_(*conditions)
    )
    return [
        (org_id, conversation_id) for org_id, conversation_id in await session.execute(statement)
    ]


@dataclass(frozen=True, slots=True)
class PostCall:
    """An ended conversation whose work after the call this claim holds."""

    org_id: str
    id: str
    ended_at: datetime


async def claim_post_call(
    session: AsyncSession,
    *,
    now: datetime,
    until: datetime,
    conversation: tuple[str, str] | None = None,
) -> PostCall | None:
    """Claim a conversation's post-call work until `until`: this `conversation` whatever its
    due time (the instance that ended it), or the one due longest at `now` (the timer).
    None when there is none (done, or claimed by another instance)."""
    query = select(ConversationRow.org_id, ConversationRow.id, ConversationRow.ended_at)
    if conversation is not None:
        query = query.where(
            tuple_(ConversationRow.org_id, ConversationRow.id) == conversation,
            ConversationRow.post_call_due_at.is_not(None),
        )
    else:
        query = query.where(ConversationRow.post_call_due_at <= now).order_by(
            ConversationRow.post_call_due_at
        )
    found = (await session.execute(query.limit(1).with_for_update(skip_locked=True))).first()
    if found is None:
        return None
    await post_call_at(session, found.org_id, found.id, at=until)
    return PostCall(org_id=found.org_id, id=found.id, ended_at=found.ended_at or now)


async def post_call_at(
    session: AsyncSession, org_id: str, conversation_id: str, *, at: datetime
) -> None:
    """Make the conversation's post-call work due at `at`."""
    await session.execute(
        update(ConversationRow)
        .where(ConversationRow.org_id == org_id, ConversationRow.id == conversation_id)
        .values(post_call_due_at=at)
        .execution_options(synchronize_session=False)
    )


async def post_call_done(session: AsyncSession, org_id: str, conversation_id: str) -> bool:
    """The post-call work is done; False when it was already (another claimer finished)."""
    result = await session.execute(
        update(ConversationRow)
        .where(
            ConversationRow.org_id == org_id,
            ConversationRow.id == conversation_id,
            ConversationRow.post_call_due_at.is_not(None),
        )
        .values(post_call_due_at=None)
        .returning(ConversationRow.id)
        .execution_options(synchronize_session=False)
    )
    return result.first() is not None


async def activity_of(
    session: AsyncSession, keys: Sequence[tuple[str, str]]
) -> dict[tuple[str, str], tuple[str, str | None]]:
    """The status and owning instance of each (org, ID) pair found (services/
    active_conversations.py: which leases an instance still renews)."""
    if not keys:
        return {}
    statement = select(
        ConversationRow.org_id,
        ConversationRow.id,
        ConversationRow.status,
        ConversationRow.instance_id,
    ).where(tuple_(ConversationRow.org_id, ConversationRow.id).in_(list(keys)))
    return {
        (org_id, conversation_id): (status, instance_id)
        for org_id, conversation_id, status, instance_id in await session.execute(statement)
    }
