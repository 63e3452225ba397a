"""Dashboard pages of the work after a call (API.md section 16): extraction schemas (list,
create, edit, delete, refused with `schema_in_use` while an agent lists one) and evaluation
prompts (list, create: the API has no call to change or delete one, nor has the dashboard).

Both are a project's (default `main`) and listed for every project of the organization,
with the agents that run each after their calls. Every change is audited by the services,
with the dashboard's actor (`dashboard key_…`), as the REST API's are with its key.
"""

from __future__ import annotations

from functools import partial
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request
from starlette.datastructures import FormData
from starlette.responses import Response

from parley.error_status import status_for
from parley.errors import ProjectNotFound, ValidationFailed
from parley.records import EvalPrompt, ExtractionSchema, ExtractionSchemaPatch, Page
from parley.services import eval_prompts, extraction_schemas, projects
from parley.services.context import Context
from parley.services.orgs import MAIN_PROJECT
from parley.text import TEXT_RULE, is_text
from parley.web import forms, schema_forms
from parley.web.form_state import FORM_ERRORS, FailedForm
from parley.web.render import PageRoute, done, notice, page
from parley.web.session import Visitor, checked_form, context_of, visitor
from parley.web.tools import agents_listing, every

router = APIRouter(prefix="/dashboard", route_class=PageRoute, include_in_schema=False)
SignedIn = Annotated[Visitor, Depends(visitor)]
SCHEMAS = "/dashboard/extraction-schemas"
PROMPTS = "/dashboard/eval-prompts"


async def _form(request: Request, signed_in: SignedIn) -> FormData:
    return await checked_form(request, signed_in)


CheckedForm = Annotated[FormData, Depends(_form)]


async def org_schemas(ctx: Context, org_id: str) -> list[ExtractionSchema]:
    """The organization's extraction schemas, every project's, oldest first."""
    return await every(
        lambda cursor: extraction_schemas.list_schemas(
            ctx, org_id=org_id, project=None, cursor=cursor, limit=100
        )
    )


async def org_eval_prompts(ctx: Context, org_id: str) -> list[EvalPrompt]:
    """The organization's evaluation prompts, project by project, oldest first in each."""
    found: list[EvalPrompt] = []
    listed = await every(
        lambda cursor: projects.list_projects(ctx, org_id=org_id, cursor=cursor, limit=100)
    )
    for project in listed:
        found += await every(partial(_prompts_of, ctx, org_id, project.id))
    return found


async def _prompts_of(
    ctx: Context, org_id: str, project_id: str, cursor: str | None
) -> Page[EvalPrompt]:
    return await eval_prompts.list_eval_prompts(
        ctx, org_id=org_id, project=project_id, cursor=cursor, limit=100
    )


# --- extraction schemas -----------------------------------------------------------------


async def _schemas_page(
    request: Request, signed_in: Visitor, *, status: int = 200, **extra: Any
) -> Response:
    ctx = context_of(request)
    return await page(
        request,
        signed_in,
        "extraction_schemas.html",
        status=status,
        schemas=await org_schemas(ctx, signed_in.org_id),
        users=await agents_listing(ctx, signed_in.org_id, lambda a: a.extraction_schemas),
        schema_field_rows=schema_forms.schema_field_rows,
        field_types=extraction_schemas.FIELD_TYPES,
        notice=notice(request),
        **extra,
    )


async def _schema_page(
    request: Request,
    signed_in: Visitor,
    schema: ExtractionSchema,
    *,
    status: int = 200,
    **extra: Any,
) -> Response:
    ctx = context_of(request)
    users = await agents_listing(ctx, signed_in.org_id, lambda a: a.extraction_schemas)
    return await page(
        request,
        signed_in,
        "extraction_schema.html",
        status=status,
        schema=schema,
        used_by=users.get((schema.project.id, schema.name), []),
        schema_field_rows=schema_forms.schema_field_rows,
        field_types=extraction_schemas.FIELD_TYPES,
        notice=notice(request),
        **extra,
    )


@router.get("/extraction-schemas")
async def schemas_page(request: Request, signed_in: SignedIn) -> Response:
    return await _schemas_page(request, signed_in)


@router.post("/extraction-schemas")
async def create_schema(request: Request, signed_in: SignedIn, form: CheckedForm) -> Response:
    try:
        spec = schema_forms.schema_spec(form)
        project = forms.text(form, "project", max_length=64) or None
        made = await extraction_schemas.create_schema(
            context_of(request), org_id=signed_in.org_id, project=project, spec=spec,
            actor=signed_in.actor,
        )  # fmt: skip
    except (*FORM_ERRORS, ProjectNotFound) as error:  # an unknown project is a typo too
        failed = FailedForm.of("create-schema", form, schema_forms.on_fields_control(error))
        return await _schemas_page(request, signed_in, status=status_for(error), failed=failed)
    return done(f"{SCHEMAS}/{made.id}", "schema_created")


@router.get("/extraction-schemas/{schema_id}")
async def schema_page(request: Request, signed_in: SignedIn, schema_id: str) -> Response:
    schema = await extraction_schemas.get_schema(
        context_of(request), org_id=signed_in.org_id, ref=schema_id, project=None
    )
    return await _schema_page(request, signed_in, schema)


@router.post("/extraction-schemas/{schema_id}")
async def update_schema(
    request: Request, signed_in: SignedIn, form: CheckedForm, schema_id: str
) -> Response:
    ctx = context_of(request)
    current = await extraction_schemas.get_schema(
        ctx, org_id=signed_in.org_id, ref=schema_id, project=None
    )
    try:
        wanted = schema_forms.schema_spec(form)
        changed = {
            name: getattr(wanted, name)
            for name in ("name", "prompt", "fields")
            if getattr(wanted, name) != getattr(current, name)
        }
        await extraction_schemas.update_schema(
            ctx, org_id=signed_in.org_id, ref=current.id, project=None,
            patch=ExtractionSchemaPatch(**changed), actor=signed_in.actor,
        )  # fmt: skip
    except FORM_ERRORS as error:
        failed = FailedForm.of("edit-schema", form, schema_forms.on_fields_control(error))
        return await _schema_page(
            request, signed_in, current, status=status_for(error), failed=failed
        )
    return done(f"{SCHEMAS}/{current.id}", "schema_updated")


@router.post("/extraction-schemas/{schema_id}/delete")
async def delete_schema(
    request: Request, signed_in: SignedIn, form: CheckedForm, schema_id: str
) -> Response:
    ctx = context_of(request)
    current = await extraction_schemas.get_schema(
        ctx, org_id=signed_in.org_id, ref=schema_id, project=None
    )
    try:
        await extraction_schemas.delete_schema(
            ctx, org_id=signed_in.org_id, ref=current.id, project=None, actor=signed_in.actor
        )
    except FORM_ERRORS as error:  # schema_in_use: the page says which agents list it
        failed = FailedForm.of("delete-schema", form, error)
        return await _schema_page(
            request, signed_in, current, status=status_for(error), failed=failed
        )
    return done(SCHEMAS, "schema_deleted")


# --- evaluation prompts -----------------------------------------------------------------


async def _prompts_page(
    request: Request, signed_in: Visitor, *, status: int = 200, **extra: Any
) -> Response:
    ctx = context_of(request)
    return await page(
        request,
        signed_in,
        "eval_prompts.html",
        status=status,
        prompts=await org_eval_prompts(ctx, signed_in.org_id),
        users=await agents_listing(ctx, signed_in.org_id, lambda a: a.eval_prompts),
        notice=notice(request),
        **extra,
    )


@router.get("/eval-prompts")
async def prompts_page(request: Request, signed_in: SignedIn) -> Response:
    return await _prompts_page(request, signed_in)


@router.post("/eval-prompts")
async def create_prompt(request: Request, signed_in: SignedIn, form: CheckedForm) -> Response:
    try:
        name = forms.text(form, "name", max_length=100, required=True)
        prompt = forms.text(form, "prompt", max_length=schema_forms.MAX_PROMPT, required=True)
        if not is_text(prompt):
            raise ValidationFailed(param_errors={"prompt": TEXT_RULE})
        project = forms.text(form, "project", max_length=64) or MAIN_PROJECT
        await eval_prompts.create_eval_prompt(
            context_of(request), org_id=signed_in.org_id, project=project, name=name,
            prompt=prompt, actor=signed_in.actor,
        )  # fmt: skip
    except (*FORM_ERRORS, ProjectNotFound) as error:
        failed = FailedForm.of("create-eval-prompt", form, error)
        return await _prompts_page(request, signed_in, status=status_for(error), failed=failed)
    return done(PROMPTS, "eval_prompt_created")
