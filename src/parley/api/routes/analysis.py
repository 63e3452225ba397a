"""The work after a call (API.md section 16): extractions, evaluations and their prompts,
and a conversation's analysis."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path

from parley.api.analysis_schemas import EvalPromptCreate, EvalPromptList, EvalPromptOut
from parley.api.deps import ApiKeyActor, ApiKeyPrincipal, Ctx, CursorParam, LimitParam
from parley.api.schemas import error_responses
from parley.services import eval_prompts
from parley.text import Label

router = APIRouter(tags=["analysis"])
ProjectNameOrId = Annotated[Label, Path(alias="nameOrId", description="Name or ID of the project.")]


@router.post(
    "/v1/projects/{nameOrId}/conversation_eval_prompts",
    response_model=EvalPromptOut,
    responses=error_responses(400, 401, 403, 404, 409, 413, 503),
)
async def create_eval_prompt(
    ctx: Ctx,
    principal: ApiKeyPrincipal,
    actor: ApiKeyActor,
    project: ProjectNameOrId,
    body: EvalPromptCreate,
) -> EvalPromptOut:
    """Create an evaluation prompt in the project: 200 `{"id", "name", "prompt"}`."""
    made = await eval_prompts.create_eval_prompt(
        ctx,
        org_id=principal.org_id,
        project=project,
        name=body.name,
        prompt=body.prompt,
        actor=actor,
    )
    return EvalPromptOut.of(made)


@router.get(
    "/v1/projects/{nameOrId}/conversation_eval_prompts",
    response_model=EvalPromptList,
    responses=error_responses(400, 401, 403, 404, 503),
)
async def list_eval_prompts(
    ctx: Ctx,
    principal: ApiKeyPrincipal,
    project: ProjectNameOrId,
    cursor: CursorParam = None,
    limit: LimitParam = 100,
) -> EvalPromptList:
    """List the project's evaluation prompts, oldest first."""
    page = await eval_prompts.list_eval_prompts(
        ctx, org_id=principal.org_id, project=project, cursor=cursor, limit=limit
    )
    return EvalPromptList(
        conversation_eval_prompts=[EvalPromptOut.of(p) for p in page.items],
        next_cursor=page.next_cursor,
    )
