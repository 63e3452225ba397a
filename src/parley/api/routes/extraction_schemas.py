"""Extraction schemas (API.md section 16): what the language model extracts from a
project's conversations."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path

from parley.api.analysis_schemas import (
    ExtractionSchemaCreate,
    ExtractionSchemaCreated,
    ExtractionSchemaEnvelope,
    ExtractionSchemaList,
    ExtractionSchemaOut,
    ExtractionSchemaUpdate,
)
from parley.api.deps import (
    ApiKeyActor,
    ApiKeyPrincipal,
    Ctx,
    CursorParam,
    LimitParam,
    ProjectParam,
)
from parley.api.schemas import SuccessOut, error_responses
from parley.errors import ValidationFailed
from parley.services import extraction_schemas
from parley.text import Label

router = APIRouter(prefix="/v1/extraction_schemas", tags=["extraction schemas"])
NameOrId = Annotated[
    Label, Path(alias="nameOrId", description="Name or ID of the extraction schema.")
]


@router.get(
    "", response_model=ExtractionSchemaList, responses=error_responses(400, 401, 403, 404, 503)
)
async def list_extraction_schemas(
    ctx: Ctx,
    principal: ApiKeyPrincipal,
    project: ProjectParam = None,
    cursor: CursorParam = None,
    limit: LimitParam = 100,
) -> ExtractionSchemaList:
    """List the organization's extraction schemas (in one project when `project` is given)."""
    page = await extraction_schemas.list_schemas(
        ctx, org_id=principal.org_id, project=project, cursor=cursor, limit=limit
    )
    return ExtractionSchemaList(
        extraction_schemas=[ExtractionSchemaOut.of(s) for s in page.items],
        next_cursor=page.next_cursor,
    )


@router.post(
    "",
    response_model=ExtractionSchemaCreated,
    responses=error_responses(400, 401, 403, 404, 409, 413, 503),
)
async def create_extraction_schema(
    ctx: Ctx,
    principal: ApiKeyPrincipal,
    actor: ApiKeyActor,
    body: ExtractionSchemaCreate,
    project: ProjectParam = None,
) -> ExtractionSchemaCreated:
    """Create an extraction schema in a project (default `main`): 200 `{"id", "name"}`."""
    schema = await extraction_schemas.create_schema(
        ctx, org_id=principal.org_id, project=project, spec=body.spec(), actor=actor
    )
    return ExtractionSchemaCreated(id=schema.id, name=schema.name)


@router.get(
    "/{nameOrId}",
    response_model=ExtractionSchemaEnvelope,
    responses=error_responses(401, 403, 404, 503),
)
async def get_extraction_schema(
    ctx: Ctx, principal: ApiKeyPrincipal, name_or_id: NameOrId, project: ProjectParam = None
) -> ExtractionSchemaEnvelope:
    """Return one extraction schema."""
    schema = await extraction_schemas.get_schema(
        ctx, org_id=principal.org_id, ref=name_or_id, project=project
    )
    return ExtractionSchemaEnvelope(extraction_schema=ExtractionSchemaOut.of(schema))


@router.patch(
    "/{nameOrId}",
    response_model=SuccessOut,
    responses=error_responses(400, 401, 403, 404, 409, 413, 503),
)
async def update_extraction_schema(
    ctx: Ctx,
    principal: ApiKeyPrincipal,
    actor: ApiKeyActor,
    name_or_id: NameOrId,
    body: ExtractionSchemaUpdate,
    project: ProjectParam = None,
) -> SuccessOut:
    """Update some fields of an extraction schema; a new name follows into agents' lists."""
    if nulls := body.null_fields():
        raise ValidationFailed(param_errors=dict.fromkeys(nulls, "may not be null"))
    await extraction_schemas.update_schema(
        ctx,
        org_id=principal.org_id,
        ref=name_or_id,
        project=project,
        patch=body.patch(),
        actor=actor,
    )
    return SuccessOut(success=True)


@router.delete(
    "/{nameOrId}", response_model=SuccessOut, responses=error_responses(401, 403, 404, 409, 503)
)
async def delete_extraction_schema(
    ctx: Ctx,
    principal: ApiKeyPrincipal,
    actor: ApiKeyActor,
    name_or_id: NameOrId,
    project: ProjectParam = None,
) -> SuccessOut:
    """Delete an extraction schema; 409 `schema_in_use` while an agent lists it."""
    await extraction_schemas.delete_schema(
        ctx, org_id=principal.org_id, ref=name_or_id, project=project, actor=actor
    )
    return SuccessOut(success=True)
