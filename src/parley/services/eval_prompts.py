"""Evaluation prompts of a project (API.md section 16): what its conversations are judged
against.

Rules:
1. A name follows the rule of extraction schema names (services/extraction_schemas.py rule
   1), unique in the project (409 `name_taken`); `prompt` is 1-20,000 characters.
2. A prompt is made and listed; the official SDK has no call to change or delete one, and
   neither has Parley, so an agent's `eval_prompts` never names one that is gone.
3. Creating one is audited (`eval_prompt.create`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from parley.clock import utcnow
from parley.db.repos import eval_prompts as prompt_repo
from parley.db.repos import projects as project_repo
from parley.db.session import Session
from parley.errors import (
    EvalPromptNotFound,
    NameTaken,
    ProjectNotFound,
    UnknownEvalPrompt,
    ValidationFailed,
)
from parley.ids import looks_like_id, new_id
from parley.records import Actor, EvalPrompt, Page, ProjectRef
from parley.services import audit
from parley.services.context import Context
from parley.services.extraction_schemas import MAX_PROMPT, check_name
from parley.services.orgs import MAIN_PROJECT
from parley.services.paging import page_of

__all__ = [
    "check_eval_prompt_names",
    "create_eval_prompt",
    "find_eval_prompt",
    "list_eval_prompts",
]

UNIQUE_VIOLATIONS: Final = prompt_repo.UNIQUE_VIOLATIONS


async def create_eval_prompt(
    ctx: Context, *, org_id: str, project: str, name: str, prompt: str, actor: Actor
) -> EvalPrompt:
    """Create an evaluation prompt in a project (by name or ID)."""
    check_name(name)
    if not 1 <= len(prompt) <= MAX_PROMPT:
        raise ValidationFailed(param_errors={"prompt": f"must be 1-{MAX_PROMPT} characters"})
    async with ctx.db.transaction(UNIQUE_VIOLATIONS) as session:
        in_project = await project_repo.resolve(session, org_id, project)
        if await prompt_repo.name_taken(session, in_project.id, name):
            raise NameTaken("An evaluation prompt with this name already exists in the project.")
        made = await prompt_repo.insert(
            session,
            prompt_id=new_id("evalp"),
            org_id=org_id,
            project=ProjectRef(id=in_project.id, name=in_project.name),
            name=name,
            prompt=prompt,
            now=utcnow(ctx.clock),
        )
        await audit.record(
            session,
            ctx,
            org_id=org_id,
            actor=actor,
            action="eval_prompt.create",
            target=made.id,
            details={"name": name, "project": in_project.name},
        )
    return made


async def list_eval_prompts(
    ctx: Context, *, org_id: str, project: str, cursor: str | None, limit: int
) -> Page[EvalPrompt]:
    """List a project's evaluation prompts, oldest first."""
    async with ctx.db.read() as session:
        project_id = (await project_repo.resolve(session, org_id, project)).id
        found = await prompt_repo.list_page(session, project_id, cursor=cursor, limit=limit)
    return page_of(found, limit=limit)


async def find_eval_prompt(
    session: Session, org_id: str, ref: str, project: str | None
) -> EvalPrompt:
    """Find a prompt by ID, or by name in `project` (default `main`)."""
    project_id = None
    if not looks_like_id(ref, "evalp"):
        try:
            project_id = (await project_repo.resolve(session, org_id, project or MAIN_PROJECT)).id
        except ProjectNotFound:
            raise EvalPromptNotFound() from None
    return await prompt_repo.find(session, org_id, ref, project_id=project_id)


async def check_eval_prompt_names(session: Session, project_id: str, names: Sequence[str]) -> None:
    """Refuse (UnknownEvalPrompt) names that are no evaluation prompts of the project."""
    if len(set(names)) != len(names):
        raise ValidationFailed(param_errors={"eval_prompts": "must not repeat a name"})
    found = {
        p.name for p in await prompt_repo.by_names(session, project_id, names, for_update=True)
    }
    unknown = [name for name in names if name not in found]
    if unknown:
        raise UnknownEvalPrompt(
            f"Unknown evaluation prompt: {unknown[0]}. An agent may list the evaluation "
            "prompts of its own project.",
            param_errors={"eval_prompts": f"unknown evaluation prompt {unknown[0]!r}"},
        )
