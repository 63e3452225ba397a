"""The work after a call (API.md section 16): extractions, evaluations and their prompts,
and a conversation's analysis."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Request

from parley.api.analysis_schemas import (
    ConversationAnalysisEnvelope,
    ConversationAnalysisOut,
    EvalPromptCreate,
    EvalPromptList,
    EvalPromptOut,
    EvaluationCreate,
    EvaluationEnvelope,
    EvaluationList,
    EvaluationOut,
    ExtractionCreate,
    ExtractionList,
    ExtractionMade,
    ExtractionOut,
)
from parley.api.deps import (
    ApiKeyActor,
    ApiKeyPrincipal,
    ConversationId,
    Credential,
    Ctx,
    CursorParam,
    LimitParam,
    client_address,
)
from parley.api.schemas import error_responses
from parley.services import conversation_read, eval_prompts, evaluations, extractions
from parley.text import Label

router = APIRouter(tags=["analysis"])
ProjectNameOrId = Annotated[Label, Path(alias="nameOrId", description="Name or ID of the project.")]
ASKS_THE_MODEL = error_responses(400, 401, 403, 404, 409, 413, 502, 503)


@router.post(
    "/v1/conversations/{id}/extractions", response_model=ExtractionMade, responses=ASKS_THE_MODEL
)
async def extract_data(
    ctx: Ctx, principal: ApiKeyPrincipal, conversation_id: ConversationId, body: ExtractionCreate
) -> ExtractionMade:
    """Extract a schema's fields from the conversation with the language model and keep the
    result; 409 `no_language_model` without one, 502 `extraction_failed` after two bad
    answers, 503 when the model cannot be reached."""
    made = await extractions.extract(
        ctx, org_id=principal.org_id, conversation_id=conversation_id, schema_ref=body.schema_id
    )
    shown = ExtractionOut.of(made)
    return ExtractionMade(result=shown.result, extraction=shown)


@router.get(
    "/v1/conversations/{id}/extractions",
    response_model=ExtractionList,
    responses=error_responses(400, 401, 403, 404, 503),
)
async def list_extractions(
    ctx: Ctx,
    principal: ApiKeyPrincipal,
    conversation_id: ConversationId,
    cursor: CursorParam = None,
    limit: LimitParam = 100,
) -> ExtractionList:
    """List the conversation's extractions, oldest first."""
    page = await extractions.list_extractions(
        ctx, org_id=principal.org_id, conversation_id=conversation_id, cursor=cursor, limit=limit
    )
    return ExtractionList(
        extractions=[ExtractionOut.of(e) for e in page.items], next_cursor=page.next_cursor
    )


@router.post(
    "/v1/conversations/{id}/evals", response_model=EvaluationEnvelope, responses=ASKS_THE_MODEL
)
async def evaluate(
    ctx: Ctx, principal: ApiKeyPrincipal, conversation_id: ConversationId, body: EvaluationCreate
) -> EvaluationEnvelope:
    """Judge the conversation against an evaluation prompt with the language model; two bad
    answers give the result `error` (kept)."""
    judged = await evaluations.evaluate(
        ctx, org_id=principal.org_id, conversation_id=conversation_id, prompt_ref=body.prompt_id
    )
    return EvaluationEnvelope(evaluation=EvaluationOut.of(judged))


@router.get(
    "/v1/conversations/{id}/evals",
    response_model=EvaluationList,
    responses=error_responses(400, 401, 403, 404, 503),
)
async def list_evaluations(
    ctx: Ctx,
    principal: ApiKeyPrincipal,
    conversation_id: ConversationId,
    cursor: CursorParam = None,
    limit: LimitParam = 100,
) -> EvaluationList:
    """List the conversation's evaluations, oldest first."""
    page = await evaluations.list_evaluations(
        ctx, org_id=principal.org_id, conversation_id=conversation_id, cursor=cursor, limit=limit
    )
    return EvaluationList(
        evals=[EvaluationOut.of(e) for e in page.items], next_cursor=page.next_cursor
    )


@router.get(
    "/v1/conversations/{id}/analysis",
    response_model=ConversationAnalysisEnvelope,
    responses=error_responses(401, 403, 404, 409, 429, 503),
)
async def get_analysis(
    request: Request, ctx: Ctx, credential: Credential, conversation_id: ConversationId
) -> ConversationAnalysisEnvelope:
    """Return the conversation's figures: reply latencies, interruptions, per-turn timings
    (whoever may read the conversation may read them)."""
    _principal, conversation = await conversation_read.read_conversation(
        ctx, credential, conversation_id, client=client_address(request)
    )
    return ConversationAnalysisEnvelope(analysis=ConversationAnalysisOut.of(conversation))


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


@router.get(
    "/v1/projects/{nameOrId}/conversation_evals",
    response_model=EvaluationList,
    responses=error_responses(400, 401, 403, 404, 503),
)
async def list_project_evaluations(
    ctx: Ctx,
    principal: ApiKeyPrincipal,
    project: ProjectNameOrId,
    cursor: CursorParam = None,
    limit: LimitParam = 100,
) -> EvaluationList:
    """List the evaluations made with the project's prompts, oldest first."""
    page = await evaluations.list_project_evaluations(
        ctx, org_id=principal.org_id, project=project, cursor=cursor, limit=limit
    )
    return EvaluationList(
        evals=[EvaluationOut.of(e) for e in page.items], next_cursor=page.next_cursor
    )
