"""Evaluation prompts of projects (API.md section 16)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from parley.db.pagination import paginate
from parley.db.tables import EvalPromptRow, ProjectRow
from parley.errors import EvalPromptNotFound, Forbidden, NameTaken
from parley.ids import looks_like_id
from parley.records import EvalPrompt, ProjectRef

UNIQUE_VIOLATIONS = {
    "uq_conversation_eval_prompts_project_id_name": NameTaken,
    "conversation_eval_prompts.project_id, conversation_eval_prompts.name": NameTaken,
}


def to_record(row: EvalPromptRow, project_name: str) -> EvalPrompt:
    return EvalPrompt(
        id=row.id,
        org_id=row.org_id,
        project=ProjectRef(id=row.project_id, name=project_name),
        name=row.name,
        prompt=row.prompt,
        created_at=row.created_at,
    )


def _with_project() -> Any:
    return select(EvalPromptRow, ProjectRow.name).join(
        ProjectRow, ProjectRow.id == EvalPromptRow.project_id
    )


async def find(
    session: AsyncSession, org_id: str, name_or_id: str, *, project_id: str | None
) -> EvalPrompt:
    """Return the prompt named `name_or_id` in a project, or identified by it in any project.

    Raises EvalPromptNotFound, or Forbidden for another organization's prompt ID.
    """
    query = _with_project()
    if looks_like_id(name_or_id, "evalp"):
        query = query.where(EvalPromptRow.id == name_or_id)
    elif project_id is None:
        raise EvalPromptNotFound()
    else:
        query = query.where(
            EvalPromptRow.project_id == project_id, EvalPromptRow.name == name_or_id
        )
    found = (await session.execute(query)).first()
    if found is None:
        raise EvalPromptNotFound()
    row, project_name = found
    if row.org_id != org_id:
        raise Forbidden()
    return to_record(row, project_name)


async def by_names(
    session: AsyncSession, project_id: str, names: Sequence[str], *, for_update: bool = False
) -> list[EvalPrompt]:
    """Return the project's prompts with these names (those that exist), by name."""
    if not names:
        return []
    query = (
        _with_project()
        .where(EvalPromptRow.project_id == project_id, EvalPromptRow.name.in_(sorted(set(names))))
        .order_by(EvalPromptRow.name)
    )
    if for_update:
        query = query.with_for_update(of=EvalPromptRow)
    rows = (await session.execute(query)).all()
    return [to_record(row, project_name) for row, project_name in rows]


async def insert(
    session: AsyncSession,
    *,
    prompt_id: str,
    org_id: str,
    project: ProjectRef,
    name: str,
    prompt: str,
    now: datetime,
) -> EvalPrompt:
    row = EvalPromptRow(
        id=prompt_id,
        org_id=org_id,
        project_id=project.id,
        name=name,
        prompt=prompt,
        created_at=now,
    )
    session.add(row)
    await session.flush()
    return to_record(row, project.name)


async def name_taken(session: AsyncSession, project_id: str, name: str) -> bool:
    query = select(EvalPromptRow.id).where(
        EvalPromptRow.project_id == project_id, EvalPromptRow.name == name
    )
    return (await session.scalar(query)) is not None


async def list_page(
    session: AsyncSession, project_id: str, *, cursor: str | None, limit: int
) -> list[EvalPrompt]:
    query = paginate(
        _with_project().where(EvalPromptRow.project_id == project_id),
        created_at=EvalPromptRow.created_at,
        row_id=EvalPromptRow.id,
        cursor=cursor,
        limit=limit,
    )
    return [to_record(row, project_name) for row, project_name in await session.execute(query)]
