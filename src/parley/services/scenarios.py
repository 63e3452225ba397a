"""Test scenarios of a project (API.md section 19): a caller and what it expects of an agent.

Rules (the shape of each member is the wire model's, api/scenario_schemas.py):
1. A name follows the rule of extraction schema names (services/extraction_schemas.py rule
   1), unique in the project (409 `name_taken`).
2. `agent` is an agent of the project, by name or ID (400 `agent`).
3. `caller` is `{"lines"}` or `{"goal", "max_turns"}`; `max_turns` defaults to
   `DEFAULT_MAX_TURNS`.
4. `expect.eval_prompts` names evaluation prompts of the project (400
   `expect.eval_prompts`); `expect.extraction.schema` names an extraction schema of the
   project or gives its fields inline (checked as a schema's are), and the keys of
   `expect.extraction.result` are fields of it (400 `expect.extraction.result`).
5. A PATCH replaces the members it sends and the whole is checked again.
6. Creating, changing and deleting one is audited (`test_scenario.create|update|delete`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from parley.clock import utcnow
from parley.db.repos import projects as project_repo
from parley.db.repos import scenarios as scenario_repo
from parley.db.session import Session
from parley.errors import (
    AgentNotFound,
    ExtractionSchemaNotFound,
    Forbidden,
    NameTaken,
    UnknownEvalPrompt,
    ValidationFailed,
)
from parley.ids import new_id
from parley.records import Actor, ExtractionField, ExtractionSchemaSpec, Page, ProjectRef, Scenario
from parley.services import audit, eval_prompts, extraction_schemas
from parley.services.agents import find_agent
from parley.services.context import Context
from parley.services.paging import page_of

__all__ = [
    "DEFAULT_MAX_TURNS",
    "INLINE_PROMPT",
    "create_scenario",
    "delete_scenario",
    "get_scenario",
    "list_scenarios",
    "scenarios_for_run",
    "update_scenario",
]

DEFAULT_MAX_TURNS: Final = 5
INLINE_PROMPT: Final = "Extract the fields from the conversation."
"""The prompt of an inline extraction schema that gives none."""
UNIQUE_VIOLATIONS = scenario_repo.UNIQUE_VIOLATIONS


async def create_scenario(
    ctx: Context, *, org_id: str, project: str, name: str, spec: Mapping[str, Any], actor: Actor
) -> Scenario:
    """Create a scenario in a project (by name or ID), rules 1-4."""
    extraction_schemas.check_name(name)
    async with ctx.db.transaction(UNIQUE_VIOLATIONS) as session:
        in_project = await project_repo.resolve(session, org_id, project)
        checked = await _checked(session, org_id, in_project.name, in_project.id, spec)
        if await scenario_repo.name_taken(session, in_project.id, name):
            raise NameTaken("A test scenario with this name already exists in the project.")
        made = await scenario_repo.insert(
            session,
            scenario_id=new_id("tscn"),
            org_id=org_id,
            project=ProjectRef(id=in_project.id, name=in_project.name),
            name=name,
            spec=checked,
            now=utcnow(ctx.clock),
        )
        await _audit(session, ctx, made, actor, "create")
    return made


async def list_scenarios(
    ctx: Context, *, org_id: str, project: str, cursor: str | None, limit: int
) -> Page[Scenario]:
    """List a project's scenarios, oldest first."""
    async with ctx.db.read() as session:
        project_id = (await project_repo.resolve(session, org_id, project)).id
        found = await scenario_repo.list_page(session, project_id, cursor=cursor, limit=limit)
    return page_of(found, limit=limit)


async def get_scenario(ctx: Context, *, org_id: str, project: str, ref: str) -> Scenario:
    """A scenario of the project, by name or ID."""
    async with ctx.db.read() as session:
        project_id = (await project_repo.resolve(session, org_id, project)).id
        return await scenario_repo.find(session, org_id, ref, project_id=project_id)


async def update_scenario(
    ctx: Context,
    *,
    org_id: str,
    project: str,
    ref: str,
    name: str | None,
    spec: Mapping[str, Any],
    actor: Actor,
) -> None:
    """Replace the members sent (rule 5), checked again as a whole."""
    if name is not None:
        extraction_schemas.check_name(name)
    async with ctx.db.transaction(UNIQUE_VIOLATIONS) as session:
        in_project = await project_repo.resolve(session, org_id, project)
        found = await scenario_repo.find(
            session, org_id, ref, project_id=in_project.id, for_update=True
        )
        merged = {**found.spec, **spec}
        checked = await _checked(session, org_id, in_project.name, in_project.id, merged)
        new_name = name or found.name
        if await scenario_repo.name_taken(session, in_project.id, new_name, sparing=found.id):
            raise NameTaken("A test scenario with this name already exists in the project.")
        await scenario_repo.replace(
            session, found.id, name=new_name, spec=checked, now=utcnow(ctx.clock)
        )
        await _audit(session, ctx, found, actor, "update")


async def delete_scenario(
    ctx: Context, *, org_id: str, project: str, ref: str, actor: Actor
) -> None:
    """Delete a scenario; runs made with it keep their copy."""
    async with ctx.db.transaction() as session:
        project_id = (await project_repo.resolve(session, org_id, project)).id
        found = await scenario_repo.find(
            session, org_id, ref, project_id=project_id, for_update=True
        )
        await scenario_repo.remove(session, found.id)
        await _audit(session, ctx, found, actor, "delete")


async def scenarios_for_run(
    session: Session, *, project_id: str, names: Sequence[str] | None
) -> list[Scenario]:
    """The scenarios a run is made with: those named (each must exist: 400 `scenarios`),
    else all of the project's (400 when it has none)."""
    every = {
        scenario.name: scenario for scenario in await scenario_repo.all_of(session, project_id)
    }
    if names is None:
        if not every:
            raise ValidationFailed(param_errors={"scenarios": "the project has no test scenarios"})
        return list(every.values())
    unknown = [name for name in names if name not in every]
    if unknown:
        raise ValidationFailed(param_errors={"scenarios": f"unknown test scenario {unknown[0]!r}"})
    return [every[name] for name in dict.fromkeys(names)]


# --- the rules that need the project --------------------------------------------------


async def _checked(
    session: Session, org_id: str, project_name: str, project_id: str, spec: Mapping[str, Any]
) -> dict[str, Any]:
    checked = dict(spec)
    try:  # rule 2
        agent = await find_agent(session, org_id, str(spec["agent"]), project_name)
    except (AgentNotFound, Forbidden):
        raise ValidationFailed(param_errors={"agent": "is not an agent of the project"}) from None
    if agent.project_id != project_id:
        raise ValidationFailed(param_errors={"agent": "is not an agent of the project"})
    caller = dict(spec["caller"])  # rule 3
    if "goal" in caller:
        caller.setdefault("max_turns", DEFAULT_MAX_TURNS)
    checked["caller"] = caller
    expect = dict(spec.get("expect") or {})
    names = list(expect.get("eval_prompts") or [])
    try:  # rule 4
        await eval_prompts.check_eval_prompt_names(session, project_id, names)
    except (UnknownEvalPrompt, ValidationFailed) as error:
        message = next(iter((error.param_errors or {}).values()), error.message)
        raise ValidationFailed(param_errors={"expect.eval_prompts": message}) from None
    if "extraction" in expect:
        await _check_extraction(session, org_id, project_name, expect["extraction"])
    return checked


async def _check_extraction(
    session: Session, org_id: str, project_name: str, extraction: Mapping[str, Any]
) -> None:
    schema = extraction["schema"]
    if isinstance(schema, str):
        try:
            found = await extraction_schemas.find_schema(session, org_id, schema, project_name)
        except (ExtractionSchemaNotFound, Forbidden):
            raise ValidationFailed(
                param_errors={
                    "expect.extraction.schema": "is not an extraction schema of the project"
                }
            ) from None
        fields = found.fields
    else:
        fields = tuple(ExtractionField(**field) for field in schema["fields"])
        try:
            extraction_schemas.check_spec(
                ExtractionSchemaSpec(
                    name="inline", prompt=schema.get("prompt") or INLINE_PROMPT, fields=fields
                )
            )
        except ValidationFailed as error:
            raise ValidationFailed(
                param_errors={
                    f"expect.extraction.schema.{key}": value
                    for key, value in (error.param_errors or {}).items()
                }
            ) from None
    known = {field.name for field in fields}
    unknown = [key for key in extraction["result"] if key not in known]
    if unknown:
        raise ValidationFailed(
            param_errors={"expect.extraction.result": f"{unknown[0]!r} is no field of the schema"}
        )


async def _audit(
    session: Session, ctx: Context, scenario: Scenario, actor: Actor, verb: str
) -> None:
    await audit.record(
        session,
        ctx,
        org_id=scenario.org_id,
        actor=actor,
        action=f"test_scenario.{verb}",
        target=scenario.id,
        details={"name": scenario.name, "project": scenario.project.name},
    )
