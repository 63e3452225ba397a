"""Extraction schemas of a project (API.md section 16): what the language model is asked to
extract from a conversation, field by field.

Rules:
1. A name is 1-100 characters, no control character, no `/`, not with its ends blank and
   not shaped like an ID (the official SDK's own example is "Appointment details"); unique
   in the project (409 `name_taken`).
2. `prompt` is at most 20,000 characters; `fields` holds 1-50 fields, each a distinct name
   (1-64 characters, no control character, not blank) and a type, `string`, `int`,
   `float` or `bool`, with an optional `description` (at most 1,000 characters).
3. A PATCH is checked as the whole schema it would make.
4. A schema that an agent lists (its `extraction_schemas`) cannot be deleted (409
   `schema_in_use`); renaming it renames it in those agents' lists. The schema's row is
   locked first, as an agent naming it locks it.
5. Every change is audited (`extraction_schema.create`, `.update`, `.delete`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final, NoReturn, TypeVar

from parley.clock import utcnow
from parley.db.repos import agents as agent_repo
from parley.db.repos import extraction_schemas as schema_repo
from parley.db.repos import projects as project_repo
from parley.db.session import Session
from parley.errors import (
    ExtractionSchemaNotFound,
    NameTaken,
    ProjectNotFound,
    SchemaInUse,
    UnknownExtractionSchema,
    ValidationFailed,
)
from parley.ids import looks_like_id, new_id
from parley.records import (
    Actor,
    ExtractionField,
    ExtractionSchema,
    ExtractionSchemaPatch,
    ExtractionSchemaSpec,
    Page,
    ProjectRef,
    Unset,
)
from parley.services import audit
from parley.services.context import Context
from parley.services.orgs import MAIN_PROJECT
from parley.services.paging import page_of
from parley.text import is_label

__all__ = [
    "FIELD_TYPES",
    "check_name",
    "check_schema_names",
    "check_spec",
    "create_schema",
    "delete_schema",
    "find_schema",
    "get_schema",
    "list_schemas",
    "update_schema",
]

FIELD_TYPES: Final = ("string", "int", "float", "bool")
MAX_NAME: Final = 100
MAX_FIELD_NAME: Final = 64
MAX_FIELDS: Final = 50
MAX_PROMPT: Final = 20_000
MAX_DESCRIPTION: Final = 1_000
NAME_RULE: Final = (
    f"must be 1-{MAX_NAME} characters without control characters or '/', not start or end "
    "with a space, and not have the shape of an ID"
)
UNIQUE_VIOLATIONS = schema_repo.UNIQUE_VIOLATIONS
T = TypeVar("T")


async def create_schema(
    ctx: Context, *, org_id: str, project: str | None, spec: ExtractionSchemaSpec, actor: Actor
) -> ExtractionSchema:
    """Create a schema in a project (default `main`)."""
    check_spec(spec)
    async with ctx.db.transaction(UNIQUE_VIOLATIONS) as session:
        in_project = await project_repo.resolve(session, org_id, project or MAIN_PROJECT)
        if await schema_repo.name_taken(session, in_project.id, spec.name):
            raise NameTaken("An extraction schema with this name already exists in the project.")
        schema = await schema_repo.insert(
            session,
            schema_id=new_id("schema"),
            org_id=org_id,
            project=ProjectRef(id=in_project.id, name=in_project.name),
            spec=spec,
            now=utcnow(ctx.clock),
        )
        await _record(session, ctx, schema, actor, "create", project=in_project.name)
    return schema


async def get_schema(
    ctx: Context, *, org_id: str, ref: str, project: str | None
) -> ExtractionSchema:
    """Return the schema named (in `project`, default `main`) or identified by `ref`."""
    async with ctx.db.read() as session:
        return await find_schema(session, org_id, ref, project)


async def list_schemas(
    ctx: Context, *, org_id: str, project: str | None, cursor: str | None, limit: int
) -> Page[ExtractionSchema]:
    """List the organization's schemas, in one project or (`project` empty or None) in all."""
    async with ctx.db.read() as session:
        project_id = None
        if project:
            project_id = (await project_repo.resolve(session, org_id, project)).id
        found = await schema_repo.list_page(
            session, org_id, project_id=project_id, cursor=cursor, limit=limit
        )
    return page_of(found, limit=limit)


async def update_schema(
    ctx: Context,
    *,
    org_id: str,
    ref: str,
    project: str | None,
    patch: ExtractionSchemaPatch,
    actor: Actor,
) -> None:
    """Apply a partial update, checked as the whole schema it makes (rule 3)."""
    async with ctx.db.transaction(UNIQUE_VIOLATIONS) as session:
        schema = await find_schema(session, org_id, ref, project, for_update=True)
        merged = ExtractionSchemaSpec(
            name=_pick(patch.name, schema.name),
            prompt=_pick(patch.prompt, schema.prompt),
            fields=_pick(patch.fields, schema.fields),
        )
        check_spec(merged)
        now = utcnow(ctx.clock)
        if merged.name != schema.name:
            if await schema_repo.name_taken(session, schema.project.id, merged.name):
                raise NameTaken(
                    "An extraction schema with this name already exists in the project."
                )
            await agent_repo.rename_extraction_schema(
                session, schema.project.id, schema.name, merged.name, now=now
            )
        await schema_repo.apply_patch(session, schema.id, patch, now=now)
        sent = [name for name in ("name", "prompt", "fields") if not _unset(patch, name)]
        await _record(session, ctx, schema, actor, "update", fields=sent)


async def delete_schema(
    ctx: Context, *, org_id: str, ref: str, project: str | None, actor: Actor
) -> None:
    """Delete a schema; refused with SchemaInUse while an agent lists it. The extractions
    made with it stay (their `schema.isDeleted` becomes true)."""
    async with ctx.db.transaction() as session:
        schema = await find_schema(session, org_id, ref, project, for_update=True)
        users = await agent_repo.listing_extraction_schema(session, schema.project.id, schema.name)
        if users:
            raise SchemaInUse("Agents list this extraction schema: " + ", ".join(users) + ".")
        await _record(session, ctx, schema, actor, "delete")
        await schema_repo.delete_row(session, schema.id)


async def find_schema(
    session: Session, org_id: str, ref: str, project: str | None, *, for_update: bool = False
) -> ExtractionSchema:
    """Find a schema by ID, or by name in `project` (default `main`)."""
    project_id = None
    if not looks_like_id(ref, "schema"):
        try:
            project_id = (await project_repo.resolve(session, org_id, project or MAIN_PROJECT)).id
        except ProjectNotFound:
            raise ExtractionSchemaNotFound() from None
    return await schema_repo.find(
        session, org_id, ref, project_id=project_id, for_update=for_update
    )


async def check_schema_names(session: Session, project_id: str, names: Sequence[str]) -> None:
    """Refuse (UnknownExtractionSchema) names that are no schemas of the project; lock the
    named schemas' rows so none is deleted before the caller's transaction ends."""
    if len(set(names)) != len(names):
        raise ValidationFailed(param_errors={"extraction_schemas": "must not repeat a name"})
    found = {
        s.name for s in await schema_repo.by_names(session, project_id, names, for_update=True)
    }
    unknown = [name for name in names if name not in found]
    if unknown:
        raise UnknownExtractionSchema(
            f"Unknown extraction schema: {unknown[0]}. An agent may list the extraction "
            "schemas of its own project.",
            param_errors={"extraction_schemas": f"unknown extraction schema {unknown[0]!r}"},
        )


def check_spec(spec: ExtractionSchemaSpec) -> None:
    """Check every field of a schema (rules 1 and 2); 400 naming the first field at fault."""
    check_name(spec.name)
    if len(spec.prompt) > MAX_PROMPT:
        _refuse("prompt", f"must be at most {MAX_PROMPT} characters")
    if not 1 <= len(spec.fields) <= MAX_FIELDS:
        _refuse("fields", f"must hold 1 to {MAX_FIELDS} fields")
    seen: set[str] = set()
    for index, field in enumerate(spec.fields):
        _check_field(index, field, seen)


def check_name(name: str, *, field: str = "name") -> None:
    """Rule 1: the name of a schema (or of an evaluation prompt, which follows it)."""
    if not _is_name(name, MAX_NAME) or "/" in name or looks_like_id(name):
        _refuse(field, NAME_RULE)


def _check_field(index: int, field: ExtractionField, seen: set[str]) -> None:
    where = f"fields[{index}]"
    if not _is_name(field.name, MAX_FIELD_NAME):
        _refuse(
            f"{where}.name",
            f"must be 1-{MAX_FIELD_NAME} characters without control characters, not "
            "starting or ending with a space",
        )
    if field.name in seen:
        _refuse(f"{where}.name", f"repeats the field {field.name!r}: names must be unique")
    seen.add(field.name)
    if field.type not in FIELD_TYPES:
        _refuse(f"{where}.type", "must be one of " + ", ".join(FIELD_TYPES))
    if field.description is not None and len(field.description) > MAX_DESCRIPTION:
        _refuse(f"{where}.description", f"must be at most {MAX_DESCRIPTION} characters")


def _is_name(value: str, longest: int) -> bool:
    return 1 <= len(value) <= longest and value == value.strip() and is_label(value)


def _refuse(field: str, message: str) -> NoReturn:
    raise ValidationFailed(param_errors={field: message})


def _pick(value: T | Unset, current: T) -> T:
    return current if isinstance(value, Unset) else value


def _unset(patch: ExtractionSchemaPatch, name: str) -> bool:
    return isinstance(getattr(patch, name), Unset)


async def _record(
    session: Session,
    ctx: Context,
    schema: ExtractionSchema,
    actor: Actor,
    verb: str,
    **details: object,
) -> None:
    await audit.record(
        session,
        ctx,
        org_id=schema.org_id,
        actor=actor,
        action=f"extraction_schema.{verb}",
        target=schema.id,
        details={"name": schema.name, **details},
    )
