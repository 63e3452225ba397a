"""A conversation's page (API.md sections 5 and 16): its facts, the recording, the summary,
the transcript, the extractions and evaluations, and the forms that run one on demand.

Rules:
1. The recording plays from the conversation's `audio_url` (this server's signed URL, or
   the bucket's presigned GET) in an `<audio preload="none">`: nothing is fetched before the
   visitor presses play. The page's Content-Security-Policy lets media load from that URL's
   origin alone (web/security.py `csp`); every other page allows none.
2. Without a recording, the page says why when it is known: zero data retention, deleted
   (when), the conversation has not ended yet, or the storage policy that kept it is gone.
3. The transcript's redaction tags (`[PHONE_NUMBER]`, `[EMAIL]`, …) are marked; the rest
   of the text is escaped (web/render.py `redaction_marks`).
4. "Run extraction" and "Evaluate" offer the schemas and prompts of the conversation's
   project and call the services the REST API calls. A refusal comes back on the page,
   beside its form, with its status and nothing stored: nothing chosen (400), no language
   model or no transcript (409), the model's answer unusable twice (502
   `extraction_failed`), the model unreachable (503, with Retry-After). Other failures (the
   schema deleted meanwhile, another organization's) are pages of their own.
"""

from __future__ import annotations

from typing import Annotated, Final
from urllib.parse import quote

from fastapi import APIRouter, Depends, Request
from starlette.datastructures import FormData
from starlette.responses import Response

from parley.error_status import status_for
from parley.errors import ParleyError, ProjectNotFound, Unavailable, UpstreamError
from parley.records import Conversation, EvalPrompt, ExtractionSchema
from parley.services import (
    conversations,
    eval_prompts,
    evaluations,
    extraction_schemas,
    extractions,
)
from parley.services.context import Context
from parley.services.orgs import MAIN_PROJECT
from parley.web import forms
from parley.web.form_state import FORM_ERRORS, FailedForm
from parley.web.render import PageRoute, done, notice, page
from parley.web.security import csp, media_origin
from parley.web.session import Visitor, checked_form, context_of, visitor
from parley.web.tools import every

router = APIRouter(prefix="/dashboard", route_class=PageRoute, include_in_schema=False)
SignedIn = Annotated[Visitor, Depends(visitor)]
RUN_ERRORS: Final = (*FORM_ERRORS, UpstreamError, Unavailable)
"""The refusals of a run on demand shown beside its form (rule 4)."""


async def _form(request: Request, signed_in: SignedIn) -> FormData:
    return await checked_form(request, signed_in)


CheckedForm = Annotated[FormData, Depends(_form)]


def _path(conversation_id: str) -> str:
    return "/dashboard/conversations/" + quote(conversation_id, safe="")


async def _conversation_page(
    request: Request,
    signed_in: Visitor,
    conversation_id: str,
    *,
    status: int = 200,
    failed: FailedForm | None = None,
    retry_after: int | None = None,
) -> Response:
    ctx, org_id = context_of(request), signed_in.org_id
    found = await conversations.get_conversation(
        ctx, org_id=org_id, conversation_id=conversation_id
    )
    made = await every(
        lambda cursor: extractions.list_extractions(
            ctx, org_id=org_id, conversation_id=found.id, cursor=cursor, limit=100
        )
    )
    judged = await every(
        lambda cursor: evaluations.list_evaluations(
            ctx, org_id=org_id, conversation_id=found.id, cursor=cursor, limit=100
        )
    )
    schemas, prompts = await _choices(ctx, org_id, found)
    headers: dict[str, str] = {}
    media = media_origin(found.audio_url)
    if media is not None:  # rule 1: this page's <audio> may load from there, and only there
        headers["Content-Security-Policy"] = csp(media=media)
    if retry_after is not None:
        headers["Retry-After"] = str(retry_after)
    return await page(
        request,
        signed_in,
        "conversation.html",
        status=status,
        headers=headers,
        conversation=found,
        extractions=made,
        evaluations=judged,
        schemas=schemas,
        prompts=prompts,
        project_name=found.project.name if found.project else MAIN_PROJECT,
        notice=notice(request),
        failed=failed,
    )


async def _choices(
    ctx: Context, org_id: str, conversation: Conversation
) -> tuple[list[ExtractionSchema], list[EvalPrompt]]:
    """The schemas and prompts of the conversation's project (none once it is deleted)."""
    project = conversation.project.id if conversation.project else MAIN_PROJECT
    try:
        schemas = await every(
            lambda cursor: extraction_schemas.list_schemas(
                ctx, org_id=org_id, project=project, cursor=cursor, limit=100
            )
        )
        prompts = await every(
            lambda cursor: eval_prompts.list_eval_prompts(
                ctx, org_id=org_id, project=project, cursor=cursor, limit=100
            )
        )
    except ProjectNotFound:
        return [], []
    return schemas, prompts


async def _refused(
    request: Request,
    signed_in: Visitor,
    conversation_id: str,
    form_id: str,
    form: FormData,
    error: ParleyError,
) -> Response:
    return await _conversation_page(
        request,
        signed_in,
        conversation_id,
        status=status_for(error),
        failed=FailedForm.of(form_id, form, error),
        retry_after=error.retry_after,
    )


@router.get("/conversations/{conversation_id}")
async def conversation_page(
    request: Request, signed_in: SignedIn, conversation_id: str
) -> Response:
    return await _conversation_page(request, signed_in, conversation_id)


@router.post("/conversations/{conversation_id}/end")
async def end_conversation(
    request: Request, signed_in: SignedIn, _form: CheckedForm, conversation_id: str
) -> Response:
    await conversations.end_conversation(
        context_of(request),
        org_id=signed_in.org_id,
        conversation_id=conversation_id,
        actor=signed_in.actor,
    )
    return done(_path(conversation_id), "conversation_ended")


@router.post("/conversations/{conversation_id}/extractions")
async def run_extraction(
    request: Request, signed_in: SignedIn, form: CheckedForm, conversation_id: str
) -> Response:
    """Extract a schema's fields from the conversation now (rule 4)."""
    try:
        schema = forms.text(form, "schema_id", max_length=100, required=True)
        await extractions.extract(
            context_of(request),
            org_id=signed_in.org_id,
            conversation_id=conversation_id,
            schema_ref=schema,
        )
    except RUN_ERRORS as error:
        return await _refused(request, signed_in, conversation_id, "run-extraction", form, error)
    return done(_path(conversation_id), "extraction_made")


@router.post("/conversations/{conversation_id}/evaluations")
async def run_evaluation(
    request: Request, signed_in: SignedIn, form: CheckedForm, conversation_id: str
) -> Response:
    """Judge the conversation against an evaluation prompt now (rule 4)."""
    try:
        prompt = forms.text(form, "prompt_id", max_length=100, required=True)
        await evaluations.evaluate(
            context_of(request),
            org_id=signed_in.org_id,
            conversation_id=conversation_id,
            prompt_ref=prompt,
        )
    except RUN_ERRORS as error:
        return await _refused(request, signed_in, conversation_id, "run-evaluation", form, error)
    return done(_path(conversation_id), "evaluation_made")
