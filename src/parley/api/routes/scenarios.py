"""Agent test runs (API.md section 19): a project's scenarios, and runs of them."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Request
from fastapi.responses import JSONResponse

from parley.api.deps import ApiKeyActor, ApiKeyPrincipal, Ctx, CursorParam, LimitParam
from parley.api.scenario_schemas import (
    RunCreate,
    RunEnvelope,
    RunOut,
    ScenarioCreate,
    ScenarioEnvelope,
    ScenarioList,
    ScenarioOut,
    ScenarioUpdate,
)
from parley.api.schemas import SuccessOut, error_responses
from parley.services import scenario_runs, scenarios
from parley.text import Label

router = APIRouter(tags=["test runs"])
ProjectNameOrId = Annotated[Label, Path(alias="nameOrId", description="Name or ID of the project.")]
ScenarioRef = Annotated[Label, Path(alias="scenario", description="Name or ID of the scenario.")]
SCENARIOS = "/v1/projects/{nameOrId}/test_scenarios"


@router.post(
    SCENARIOS,
    status_code=201,
    response_model=ScenarioEnvelope,
    responses=error_responses(400, 401, 403, 404, 409, 413, 503),
)
async def create_test_scenario(
    ctx: Ctx,
    principal: ApiKeyPrincipal,
    actor: ApiKeyActor,
    project: ProjectNameOrId,
    body: ScenarioCreate,
) -> ScenarioEnvelope:
    """Create a test scenario in the project: 201 `{"test_scenario"}`."""
    made = await scenarios.create_scenario(
        ctx, org_id=principal.org_id, project=project, name=body.name, spec=body.spec(), actor=actor
    )
    return ScenarioEnvelope(test_scenario=ScenarioOut.of(made))


@router.get(
    SCENARIOS, response_model=ScenarioList, responses=error_responses(400, 401, 403, 404, 503)
)
async def list_test_scenarios(
    ctx: Ctx,
    principal: ApiKeyPrincipal,
    project: ProjectNameOrId,
    cursor: CursorParam = None,
    limit: LimitParam = 100,
) -> ScenarioList:
    """List the project's test scenarios, oldest first."""
    page = await scenarios.list_scenarios(
        ctx, org_id=principal.org_id, project=project, cursor=cursor, limit=limit
    )
    return ScenarioList(
        test_scenarios=[ScenarioOut.of(s) for s in page.items], next_cursor=page.next_cursor
    )


@router.get(
    SCENARIOS + "/{scenario}",
    response_model=ScenarioEnvelope,
    responses=error_responses(401, 403, 404, 503),
)
async def get_test_scenario(
    ctx: Ctx, principal: ApiKeyPrincipal, project: ProjectNameOrId, scenario: ScenarioRef
) -> ScenarioEnvelope:
    """A test scenario of the project, by name or ID."""
    found = await scenarios.get_scenario(
        ctx, org_id=principal.org_id, project=project, ref=scenario
    )
    return ScenarioEnvelope(test_scenario=ScenarioOut.of(found))


@router.patch(
    SCENARIOS + "/{scenario}",
    response_model=SuccessOut,
    responses=error_responses(400, 401, 403, 404, 409, 413, 503),
)
async def update_test_scenario(
    ctx: Ctx,
    principal: ApiKeyPrincipal,
    actor: ApiKeyActor,
    project: ProjectNameOrId,
    scenario: ScenarioRef,
    body: ScenarioUpdate,
) -> SuccessOut:
    """Replace the members sent; the scenario is checked again as a whole."""
    await scenarios.update_scenario(
        ctx,
        org_id=principal.org_id,
        project=project,
        ref=scenario,
        name=body.name,
        spec=body.spec(),
        actor=actor,
    )
    return SuccessOut(success=True)


@router.delete(
    SCENARIOS + "/{scenario}",
    response_model=SuccessOut,
    responses=error_responses(401, 403, 404, 503),
)
async def delete_test_scenario(
    ctx: Ctx,
    principal: ApiKeyPrincipal,
    actor: ApiKeyActor,
    project: ProjectNameOrId,
    scenario: ScenarioRef,
) -> SuccessOut:
    """Delete a test scenario; runs made with it keep their copy."""
    await scenarios.delete_scenario(
        ctx, org_id=principal.org_id, project=project, ref=scenario, actor=actor
    )
    return SuccessOut(success=True)


@router.post(
    "/v1/projects/{nameOrId}/test_runs",
    status_code=202,
    response_model=RunEnvelope,
    responses=error_responses(400, 401, 403, 404, 413, 503),
)
async def create_test_run(
    ctx: Ctx,
    principal: ApiKeyPrincipal,
    project: ProjectNameOrId,
    request: Request,
    body: RunCreate | None = None,
) -> JSONResponse:
    """Queue a run of the project's scenarios (default: all): 202 `{"test_run"}`."""
    run = await scenario_runs.create_run(
        ctx,
        org_id=principal.org_id,
        project=project,
        names=body.scenarios if body is not None else None,
        server_url=scenario_runs.socket_url(request.scope.get("server"), public_url=ctx.public_url),
    )
    return JSONResponse(
        RunEnvelope(test_run=RunOut.of(run)).model_dump(mode="json"), status_code=202
    )


@router.get(
    "/v1/test_runs/{id}", response_model=RunEnvelope, responses=error_responses(401, 403, 404, 503)
)
async def get_test_run(
    ctx: Ctx,
    principal: ApiKeyPrincipal,
    run_id: Annotated[Label, Path(alias="id", description="The test run's ID.")],
) -> RunEnvelope:
    """A test run: its status and each finished scenario's result."""
    run = await scenario_runs.get_run(ctx, org_id=principal.org_id, run_id=run_id)
    return RunEnvelope(test_run=RunOut.of(run))
