"""Agents (API.md section 4; the disable operation is spec section 4.1)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Body, Path

from parley.api.agent_sdk_schemas import DeliveryUpdate
from parley.api.deps import (
    ApiKeyActor,
    ApiKeyPrincipal,
    Ctx,
    CursorParam,
    LimitParam,
    ProjectParam,
    Speech,
)
from parley.api.schemas import (
    AgentChanged,
    AgentCreate,
    AgentCreated,
    AgentEnvelope,
    AgentList,
    AgentOut,
    AgentUpdate,
    AgentUpsert,
    AgentUpserted,
    PhoneNumbersRelease,
    SuccessOut,
    TemplateVariableIn,
    error_responses,
    retention_policy,
)
from parley.errors import ValidationFailed
from parley.records import (
    UNSET,
    AgentPatch,
    AgentSpec,
    ConfigurationEndpointSpec,
    TemplateVariable,
    Unset,
)
from parley.services import agent_upsert, agents, languages
from parley.text import Label

router = APIRouter(prefix="/v1/agents", tags=["agents"])
NameOrId = Annotated[Label, Path(alias="nameOrId", description="Name or ID of the agent.")]
ONE_AGENT_ERRORS = error_responses(400, 401, 403, 404, 503)


@router.get("", response_model=AgentList, responses=error_responses(400, 401, 403, 404, 503))
async def list_agents(
    ctx: Ctx,
    principal: ApiKeyPrincipal,
    project: ProjectParam = None,
    cursor: CursorParam = None,
    limit: LimitParam = 100,
) -> AgentList:
    """List the organization's agents (in one project when `project` is given)."""
    page = await agents.list_agents(
        ctx, org_id=principal.org_id, project=project, cursor=cursor, limit=limit
    )
    return AgentList(agents=[AgentOut.of(a) for a in page.items], next_cursor=page.next_cursor)


@router.post(
    "",
    status_code=201,
    response_model=AgentCreated,
    responses=error_responses(400, 401, 403, 404, 409, 413, 503),
)
async def create_agent(
    ctx: Ctx,
    principal: ApiKeyPrincipal,
    actor: ApiKeyActor,
    body: AgentCreate,
    speech: Speech,
    project: ProjectParam = None,
) -> AgentCreated:
    """Create an agent in a project (body `project`, else `?project=`, else `main`)."""
    agent = await agents.create_agent(
        ctx,
        org_id=principal.org_id,
        project=_project_of(body, project),
        spec=_spec_of(body),
        actor=actor,
        speech=speech,
    )
    return AgentCreated.of(agent)


@router.put(
    "/upsert",
    response_model=AgentUpserted,
    responses=error_responses(400, 401, 403, 404, 409, 413, 503),
)
async def upsert_agent(
    ctx: Ctx,
    principal: ApiKeyPrincipal,
    actor: ApiKeyActor,
    body: AgentUpsert,
    speech: Speech,
    project: ProjectParam = None,
) -> AgentUpserted:
    """Create the agent named `name`, or replace every field of the one of that name (the
    fields not given take their defaults); 409 `agent_disabled` if it is disabled."""
    agent, inserted = await agent_upsert.upsert_agent(
        ctx,
        org_id=principal.org_id,
        project=_project_of(body, project),
        spec=_spec_of(body),
        actor=actor,
        speech=speech,
    )
    return AgentUpserted.upserted(agent, inserted=inserted)


def _project_of(body: AgentCreate, project: str | None) -> str | None:
    """The project a body names (`project`), else `?project=`; refused when they differ."""
    if body.project and project and body.project != project:
        raise ValidationFailed(param_errors={"project": "differs from the ?project= parameter"})
    return body.project or project


def _spec_of(body: AgentCreate) -> AgentSpec:
    return AgentSpec(
        name=body.name,
        voice_id=body.voice_id,
        system_prompt=body.system_prompt,
        welcome_message=body.welcome_message,
        language=languages.default_of(body.language, body.default_language) or body.language,
        additional_languages=tuple(body.additional_languages),
        multilingual_mode=body.multilingual_mode,
        audio_format=body.audio_format,
        phone_numbers=tuple(body.phone_numbers),
        tools=tuple(body.tools),
        template_variables=_defaults(body.template_variables),
        boosted_keywords=tuple(body.boosted_keywords),
        no_input_poke_sec=body.no_input_poke_sec,
        no_input_poke_text=body.no_input_poke_text,
        no_input_end_conversation_sec=body.no_input_end_conversation_sec,
        voicemail_message=body.voicemail_message,
        data_retention_policy=retention_policy(body.data_retention_policy),
        external_storage_policy=body.external_storage_policy,
        extraction_schemas=tuple(body.extraction_schemas),
        eval_prompts=tuple(body.eval_prompts),
        enable_redaction=body.enable_redaction,
        configuration_endpoint=(
            body.configuration_endpoint.spec() if body.configuration_endpoint else None
        ),
        delivery=body.delivery(),
    )


@router.get("/{nameOrId}", response_model=AgentEnvelope, responses=ONE_AGENT_ERRORS)
async def get_agent(
    ctx: Ctx, principal: ApiKeyPrincipal, name_or_id: NameOrId, project: ProjectParam = None
) -> AgentEnvelope:
    """Return one agent."""
    agent = await agents.get_agent(ctx, org_id=principal.org_id, ref=name_or_id, project=project)
    return AgentEnvelope(agent=AgentOut.of(agent))


@router.patch(
    "/{nameOrId}",
    response_model=AgentChanged,
    responses=error_responses(400, 401, 403, 404, 409, 413, 503),
)
async def update_agent(
    ctx: Ctx,
    principal: ApiKeyPrincipal,
    actor: ApiKeyActor,
    name_or_id: NameOrId,
    body: AgentUpdate,
    speech: Speech,
    project: ProjectParam = None,
) -> AgentChanged:
    """Update some fields of an agent; refused with 409 `agent_disabled` while disabled."""
    if nulls := body.null_fields():
        raise ValidationFailed(param_errors=dict.fromkeys(nulls, "may not be null"))
    sent = body.model_fields_set - set(DeliveryUpdate.model_fields)
    lists = {
        "phone_numbers",
        "tools",
        "boosted_keywords",
        "template_variables",
        "data_retention_policy",
        "extraction_schemas",
        "eval_prompts",
        "configuration_endpoint",
        "language",
        "default_language",
        "additional_languages",
    }
    default_language = languages.default_of(body.language, body.default_language)
    patch = AgentPatch(
        **{name: getattr(body, name) for name in sent - lists},
        language=default_language if default_language is not None else UNSET,
        additional_languages=_tuple_or_unset(body.additional_languages),
        phone_numbers=_tuple_or_unset(body.phone_numbers),
        tools=_tuple_or_unset(body.tools),
        extraction_schemas=_tuple_or_unset(body.extraction_schemas),
        eval_prompts=_tuple_or_unset(body.eval_prompts),
        boosted_keywords=_tuple_or_unset(body.boosted_keywords),
        template_variables=(
            _defaults(body.template_variables) if body.template_variables is not None else UNSET
        ),
        data_retention_policy=(
            retention_policy(body.data_retention_policy)
            if body.data_retention_policy is not None
            else UNSET
        ),
        configuration_endpoint=_endpoint_patch(body),
        delivery=body.delivery_patch(),
    )
    agent = await agents.update_agent(
        ctx,
        org_id=principal.org_id,
        ref=name_or_id,
        project=project,
        patch=patch,
        actor=actor,
        speech=speech,
    )
    return AgentChanged.of(agent)


@router.delete("/{nameOrId}", response_model=SuccessOut, responses=ONE_AGENT_ERRORS)
async def delete_agent(
    ctx: Ctx,
    principal: ApiKeyPrincipal,
    actor: ApiKeyActor,
    name_or_id: NameOrId,
    project: ProjectParam = None,
) -> SuccessOut:
    """Delete an agent; its phone numbers are released."""
    await agents.delete_agent(
        ctx, org_id=principal.org_id, ref=name_or_id, project=project, actor=actor
    )
    return SuccessOut(success=True)


@router.post("/{nameOrId}/disable", response_model=SuccessOut, responses=ONE_AGENT_ERRORS)
async def disable_agent(
    ctx: Ctx,
    principal: ApiKeyPrincipal,
    actor: ApiKeyActor,
    name_or_id: NameOrId,
    project: ProjectParam = None,
) -> SuccessOut:
    """Disable an agent (spec section 4.1). Disabling a disabled agent succeeds again."""
    await agents.disable_agent(
        ctx, org_id=principal.org_id, ref=name_or_id, project=project, actor=actor
    )
    return SuccessOut(success=True)


@router.post("/{nameOrId}/enable", response_model=SuccessOut, responses=ONE_AGENT_ERRORS)
async def enable_agent(
    ctx: Ctx,
    principal: ApiKeyPrincipal,
    actor: ApiKeyActor,
    name_or_id: NameOrId,
    project: ProjectParam = None,
) -> SuccessOut:
    """Enable a disabled agent. Enabling an enabled agent succeeds again."""
    await agents.enable_agent(
        ctx, org_id=principal.org_id, ref=name_or_id, project=project, actor=actor
    )
    return SuccessOut(success=True)


@router.post(
    "/{nameOrId}/phone_numbers/release",
    response_model=AgentEnvelope,
    responses=error_responses(400, 401, 403, 404, 413, 503),
)
async def release_phone_numbers(
    ctx: Ctx,
    principal: ApiKeyPrincipal,
    actor: ApiKeyActor,
    name_or_id: NameOrId,
    project: ProjectParam = None,
    body: Annotated[PhoneNumbersRelease | None, Body()] = None,
) -> AgentEnvelope:
    """Release some or all of an agent's phone numbers; allowed while disabled."""
    numbers = body.phone_numbers if body is not None else None
    agent = await agents.release_phone_numbers(
        ctx,
        org_id=principal.org_id,
        ref=name_or_id,
        project=project,
        numbers=numbers,
        actor=actor,
    )
    return AgentEnvelope(agent=AgentOut.of(agent))


def _defaults(variables: dict[str, TemplateVariableIn]) -> dict[str, TemplateVariable]:
    return {name: TemplateVariable(default_value=v.default_value) for name, v in variables.items()}


def _endpoint_patch(body: AgentUpdate) -> ConfigurationEndpointSpec | Unset | None:
    """The configuration endpoint a PATCH sets (None: removed; UNSET: not sent)."""
    if "configuration_endpoint" not in body.model_fields_set:
        return UNSET
    given = body.configuration_endpoint
    return given.spec() if given is not None else None


def _tuple_or_unset(values: list[str] | None) -> tuple[str, ...] | Unset:
    return tuple(values) if values is not None else UNSET
