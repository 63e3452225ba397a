"""Agents and the rules of a disabled agent (spec section 3; API.md section 4).

Rules:
1. A disabled agent cannot start conversations (enforced where conversations start).
2. A disabled agent cannot be updated, except to release its phone numbers.
3. Disable and enable are idempotent.
4. Disable wins every race: every read-modify-write of an agent locks its row first, so no
   update can land after a disable has answered.
5. A phone number belongs to at most one agent.
6. `tools` names tools of the agent's own project or built-ins (400 `unknown_tool`); the
   named tools' rows are locked, so none is deleted while the agent is being saved. So
   do `extraction_schemas` (400 `unknown_extraction_schema`) and `eval_prompts` (400
   `unknown_eval_prompt`), with the project's extraction schemas and evaluation prompts.
7. `system_prompt` and `welcome_message` use only the `{{name}}` placeholders the agent
   declares in `template_variables` (400 `undeclared_template_variable`); a PATCH is checked
   as the agent it makes.
8. Each change is announced to the organization's webhooks in its own transaction
   (services/events.py): agent.created, .updated (release of numbers included), .disabled,
   .enabled (only when the state changes), .deleted (the agent as it was).
9. The silence settings are in range (services/silence.py; 400 `validation_error` naming
   the field).
10. `external_storage_policy` names a policy of the agent's own project or is null (400
   `validation_error` naming the field); the agent stores the policy's ID, and the policy's
   row is locked for share, so it is not deleted while the agent is being saved
   (services/storage_policies.py rule 7).
11. `configuration_endpoint` follows services/configuration_endpoints.py (checked, sealed,
   its secret made when it is first set and returned this once on the record).
12. The delivery's members follow services/delivery.py (400 `validation_error` naming each).
13. An upsert (services/agent_upsert.py) inserts with `insert_agent` or replaces with
   `update_locked`: the rules of a create or of an update.
14. Its languages follow services/languages.py (a PATCH is checked as the agent it makes).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Final, TypeVar

from parley.clock import utcnow
from parley.db.repos import agents as agent_repo
from parley.db.repos import projects as project_repo
from parley.db.repos.agents import AgentState
from parley.db.session import Session
from parley.engine.audio import AudioFormat
from parley.errors import (
    AgentDisabled,
    AgentNotFound,
    NameTaken,
    PhoneNumberTaken,
    ProjectNotFound,
    UndeclaredTemplateVariable,
    ValidationFailed,
)
from parley.ids import looks_like_id, new_id
from parley.records import (
    UNSET,
    Actor,
    Agent,
    AgentPatch,
    AgentSpec,
    ConfigurationEndpoint,
    Delivery,
    Page,
    Project,
    TemplateVariable,
    Unset,
)
from parley.services import audit, configuration_endpoints, events, templates
from parley.services.context import Context
from parley.services.delivery import check_delivery
from parley.services.eval_prompts import check_eval_prompt_names
from parley.services.event_payloads import agent_json
from parley.services.extraction_schemas import check_schema_names
from parley.services.languages import check_languages
from parley.services.orgs import MAIN_PROJECT
from parley.services.paging import page_of
from parley.services.silence import DEFAULT_POKE_TEXT, check_silence
from parley.services.storage_policies import policy_for_agent
from parley.services.tools import check_tool_names
from parley.services.voices import SpeechCatalog, check_speech

T = TypeVar("T")

UNIQUE_VIOLATIONS = agent_repo.UNIQUE_VIOLATIONS

# The defaults of an agent created without these fields, for the API and the dashboard alike.
DEFAULT_VOICE_ID = "us_female"
"""A voice alias every synthesizer knows (services/voices.py)."""
DEFAULT_LANGUAGE: Final = "en"
DEFAULT_SYSTEM_PROMPT = ""
DEFAULT_AUDIO_FORMAT: str = AudioFormat.PCM_16000.value


async def create_agent(
    ctx: Context,
    *,
    org_id: str,
    project: str | None,
    spec: AgentSpec,
    actor: Actor,
    speech: SpeechCatalog | None = None,
) -> Agent:
    """Create an agent in a project (default `main`); its voice and language must be ones
    `speech` (the engine's catalog; None: not checked) can use."""
    check_spec(spec, speech)
    async with ctx.db.transaction(UNIQUE_VIOLATIONS) as session:
        in_project = await project_repo.resolve(session, org_id, project or MAIN_PROJECT)
        if await agent_repo.name_taken(session, in_project.id, spec.name):
            raise NameTaken("An agent with this name already exists in the project.")
        return await insert_agent(session, ctx, org_id, in_project, spec, actor)


def check_spec(spec: AgentSpec, speech: SpeechCatalog | None) -> None:
    """The checks of a new agent's fields that need no database (create and upsert)."""
    check_speech(speech, voice_id=spec.voice_id, language=None)
    check_languages(speech, default=spec.language, additional=spec.additional_languages)
    check_silence(
        poke_sec=spec.no_input_poke_sec,
        poke_text=spec.no_input_poke_text,
        end_sec=spec.no_input_end_conversation_sec,
    )
    check_delivery(spec.delivery)


async def insert_agent(
    session: Session, ctx: Context, org_id: str, in_project: Project, spec: AgentSpec, actor: Actor
) -> Agent:
    """Insert a new agent under rules 5, 6, 7, 10 and 11, announce and record it (its name is
    known to be free in the project)."""
    await _refuse_taken_numbers(session, spec.phone_numbers, agent_id=None)
    _refuse_undeclared(spec.system_prompt, spec.welcome_message, spec.template_variables)
    await check_tool_names(session, in_project.id, spec.tools)
    named = spec.external_storage_policy
    storage = await policy_for_agent(session, in_project.id, named) if named else None
    await check_schema_names(session, in_project.id, spec.extraction_schemas)
    await check_eval_prompt_names(session, in_project.id, spec.eval_prompts)
    given_endpoint = spec.configuration_endpoint
    endpoint = (
        configuration_endpoints.issue(ctx, given_endpoint, current=None) if given_endpoint else None
    )
    agent = await agent_repo.insert(
        session,
        agent_id=new_id("agent"),
        org_id=org_id,
        project=in_project,
        spec=spec,
        now=utcnow(ctx.clock),
        storage_policy=storage,
        configuration_endpoint=endpoint,
    )
    await _record(session, ctx, agent, actor, "agent.create", project=in_project.name)
    await _announce(session, ctx, agent, "agent.created")
    return _with_issued(agent, endpoint)


async def get_agent(ctx: Context, *, org_id: str, ref: str, project: str | None) -> Agent:
    """Return the agent named (in `project`, default `main`) or identified by `ref`: from
    this process's read model while the organization is unchanged (services/read_model.py)."""
    key = ("agent", ref) if looks_like_id(ref, "agent") else ("agent", project or MAIN_PROJECT, ref)

    async def load() -> Agent:
        async with ctx.db.read() as session:
            found = await find_agent(session, org_id, ref, project)
            return await agent_repo.load(session, found.id)

    return await ctx.read_model.get(ctx.db, org_id, key, load)


async def list_agents(
    ctx: Context, *, org_id: str, project: str | None, cursor: str | None, limit: int
) -> Page[Agent]:
    """List the organization's agents, in one project or (`project` empty or None) in all:
    each page from the read model while the organization is unchanged."""

    async def load() -> Page[Agent]:
        return await _list_page(ctx, org_id=org_id, project=project, cursor=cursor, limit=limit)

    return await ctx.read_model.get(ctx.db, org_id, ("agents", project, cursor, limit), load)


async def _list_page(
    ctx: Context, *, org_id: str, project: str | None, cursor: str | None, limit: int
) -> Page[Agent]:
    if not project:  # one statement: no transaction needed
        async with ctx.db.statement() as connection:
            agents = await agent_repo.list_page(
                connection, org_id, project_id=None, cursor=cursor, limit=limit
            )
        return page_of(agents, limit=limit)
    async with ctx.db.read() as session:
        project_id = (await project_repo.resolve(session, org_id, project)).id
        agents = await agent_repo.list_page(
            session, org_id, project_id=project_id, cursor=cursor, limit=limit
        )
    return page_of(agents, limit=limit)


async def update_agent(
    ctx: Context,
    *,
    org_id: str,
    ref: str,
    project: str | None,
    patch: AgentPatch,
    actor: Actor,
    speech: SpeechCatalog | None = None,
) -> Agent:
    """Apply a partial update; refused with AgentDisabled while the agent is disabled, and
    when a new voice or language is one `speech` cannot use."""
    async with ctx.db.transaction(UNIQUE_VIOLATIONS) as session:
        agent = await find_agent(session, org_id, ref, project, for_update=True)
        return await update_locked(session, ctx, agent, patch, actor, speech=speech)


async def update_locked(
    session: Session,
    ctx: Context,
    agent: AgentState,
    patch: AgentPatch,
    actor: Actor,
    *,
    speech: SpeechCatalog | None = None,
) -> Agent:
    """Apply `patch` to the agent (its row locked: `find_agent(..., for_update=True)`) under
    rules 2, 5-7 and 9-12, announce and record it."""
    if agent.disabled_at is not None:
        raise AgentDisabled("The agent is disabled: it cannot be updated.")
    check_speech(
        speech,
        voice_id=None if isinstance(patch.voice_id, Unset) else patch.voice_id,
        language=None,
    )
    _check_silence_patch(patch)
    if not isinstance(patch.name, Unset) and patch.name != agent.name:
        if await agent_repo.name_taken(session, agent.project_id, patch.name):
            raise NameTaken("An agent with this name already exists in the project.")
    if not isinstance(patch.phone_numbers, Unset):
        await _refuse_taken_numbers(session, patch.phone_numbers, agent_id=agent.id)
    await _check_merged(session, agent, patch)
    await _check_languages(session, agent, patch, speech)
    endpoint = await _endpoint_of(session, ctx, agent, patch)
    await agent_repo.apply_patch(
        session,
        agent.id,
        patch,
        now=utcnow(ctx.clock),
        storage_policy_id=await _storage_policy_id(session, agent, patch),
        configuration_endpoint=endpoint,
        delivery=await _delivery(session, agent, patch),
    )
    updated = await agent_repo.load(session, agent.id)
    await _record(session, ctx, updated, actor, "agent.update", fields=_changed_fields(patch))
    await _announce(session, ctx, updated, "agent.updated")
    return _with_issued(updated, endpoint)


def _changed_fields(patch: AgentPatch) -> list[str]:
    """The fields a patch sets, the delivery's by their own names (the audit's details)."""
    names = {name for name in AgentPatch.__slots__ if not _unset(patch, name)} - {"delivery"}
    if not isinstance(patch.delivery, Unset):
        names |= set(patch.delivery.given())
    return sorted(names)


async def _delivery(session: Session, agent: AgentState, patch: AgentPatch) -> Delivery | Unset:
    """Rule 11: the agent's delivery with the patch's members applied (UNSET: none)."""
    if isinstance(patch.delivery, Unset) or not patch.delivery.given():
        return UNSET
    merged = patch.delivery.applied_to((await agent_repo.load(session, agent.id)).delivery)
    check_delivery(merged)
    return merged


async def delete_agent(
    ctx: Context, *, org_id: str, ref: str, project: str | None, actor: Actor
) -> None:
    """Delete an agent and release its phone numbers."""
    async with ctx.db.transaction() as session:
        agent = await find_agent(session, org_id, ref, project)
        await _record(session, ctx, agent, actor, "agent.delete")
        await _announce(session, ctx, agent, "agent.deleted")  # as it was: before the delete
        await agent_repo.delete_row(session, agent.id)


async def disable_agent(
    ctx: Context, *, org_id: str, ref: str, project: str | None, actor: Actor
) -> None:
    """Disable an agent (idempotent): it starts no conversation and takes no update.

    One unit of work that awaits nothing but its session, so on SQLite it is one thread
    hop (`Database.transact`); so is `enable_agent`. Where the database can, an agent
    already disabled is noted in one statement (`_note_unchanged`)."""
    if await _note_unchanged(ctx, org_id, ref, project, actor, "agent.disable", disabled=True):
        return

    async def disable(session: Session) -> None:
        agent = await find_agent(session, org_id, ref, project, for_update=True)
        changed = agent.disabled_at is None
        if changed:
            await agent_repo.set_disabled(session, agent.id, at=utcnow(ctx.clock))
            await _announce(session, ctx, agent, "agent.disabled")
        await _record(session, ctx, agent, actor, "agent.disable", changed=changed)

    await ctx.db.transact(disable)


async def enable_agent(
    ctx: Context, *, org_id: str, ref: str, project: str | None, actor: Actor
) -> None:
    """Enable an agent again (idempotent); one already enabled as `disable_agent` says."""
    if await _note_unchanged(ctx, org_id, ref, project, actor, "agent.enable", disabled=False):
        return

    async def enable(session: Session) -> None:
        agent = await find_agent(session, org_id, ref, project, for_update=True)
        changed = agent.disabled_at is not None
        if changed:
            await agent_repo.set_enabled(session, agent.id, at=utcnow(ctx.clock))
            await _announce(session, ctx, agent, "agent.enabled")
        await _record(session, ctx, agent, actor, "agent.enable", changed=changed)

    await ctx.db.transact(enable)


async def release_phone_numbers(
    ctx: Context,
    *,
    org_id: str,
    ref: str,
    project: str | None,
    numbers: Sequence[str] | None,
    actor: Actor,
) -> Agent:
    """Release some (or, with None, all) of an agent's numbers; allowed while disabled."""
    async with ctx.db.transaction() as session:
        agent = await find_agent(session, org_id, ref, project, for_update=True)
        current = (await agent_repo.phone_numbers_of(session, [agent.id])).get(agent.id, [])
        if numbers is None:
            keep: list[str] = []
        else:
            foreign = sorted(set(numbers) - set(current))
            if foreign:
                message = "not assigned to this agent: " + ", ".join(foreign)
                raise ValidationFailed(param_errors={"phone_numbers": message})
            keep = [number for number in current if number not in set(numbers)]
        if keep != current:
            await agent_repo.apply_patch(
                session, agent.id, AgentPatch(phone_numbers=tuple(keep)), now=utcnow(ctx.clock)
            )
            await _announce(session, ctx, agent, "agent.updated")
        released = [number for number in current if number not in keep]
        await _record(session, ctx, agent, actor, "agent.release_numbers", phone_numbers=released)
        return await agent_repo.load(session, agent.id)


async def find_agent(
    session: Session,
    org_id: str,
    ref: str,
    project: str | None,
    *,
    for_update: bool = False,
) -> AgentState:
    """Find an agent by ID, or by name in `project` (default `main`).

    The project is consulted only for names (spec section 4.1); a name in a project that
    does not exist is an agent that does not exist.
    """
    if looks_like_id(ref, "agent"):
        return await agent_repo.find(session, org_id, ref, project_id=None, for_update=for_update)
    project_name = project or MAIN_PROJECT
    if looks_like_id(project_name, "proj"):  # a project named by its ID
        try:
            project_name = (await project_repo.resolve(session, org_id, project_name)).name
        except ProjectNotFound:
            raise AgentNotFound() from None
    return await agent_repo.find_named(session, org_id, project_name, ref, for_update=for_update)


async def _note_unchanged(
    ctx: Context,
    org_id: str,
    ref: str,
    project: str | None,
    actor: Actor,
    action: str,
    *,
    disabled: bool,
) -> bool:
    """Record a disable (or enable) of an agent already in that state in a transaction of
    its own that checks the state under the chain's lock (`audit.record_guarded`): on
    PostgreSQL one statement, so no lock is held across a round trip and repeated calls
    do not queue behind each other; on SQLite one thread hop of Core statements, without
    the ORM session of the locking path (docs/performance.md). An agent named by ID is
    read first for its name (the event's details); one named by name needs no read.

    False, with nothing written, when the agent is not found in that state (absent, in
    another state, another organization's, or the chain has no head yet): the caller then
    takes its locking path, which decides."""
    project_name = project or MAIN_PROJECT
    if looks_like_id(ref, "agent"):
        async with ctx.db.statement() as connection:
            found = await agent_repo.name_of(connection, org_id, ref)
        if found is None:
            return False
        name = found
        guard = agent_repo.in_state(org_id, ref, disabled=disabled)
    elif looks_like_id(project_name, "proj"):
        return False  # a project named by its ID: the locking path resolves it
    else:
        name = ref
        guard = agent_repo.named_in_state(org_id, project_name, ref, disabled=disabled)
    event = await audit.record_guarded(
        ctx,
        org_id=org_id,
        actor=actor,
        action=action,
        details={"name": name, "changed": False},
        guard=guard,
    )
    return event is not None


async def _record(
    session: Session,
    ctx: Context,
    agent: Agent | AgentState,
    actor: Actor,
    action: str,
    **details: object,
) -> None:
    await audit.record(
        session,
        ctx,
        org_id=agent.org_id,
        actor=actor,
        action=action,
        target=agent.id,
        details={"name": agent.name, **details},
    )


async def _announce(
    session: Session, ctx: Context, agent: Agent | AgentState, event_type: str
) -> None:
    """Write the event in the change's transaction; the agent is shown as it stands now
    (a record the caller has just read or written is current: it is not read again)."""

    async def data() -> dict[str, object]:
        current = agent if isinstance(agent, Agent) else await agent_repo.load(session, agent.id)
        return {"agent": agent_json(current)}

    await events.emit(session, ctx, org_id=agent.org_id, event_type=event_type, data=data)


async def _check_languages(
    session: Session, agent: AgentState, patch: AgentPatch, speech: SpeechCatalog | None
) -> None:
    """Rule 14 on the agent the patch makes (only when it touches its languages)."""
    if _unset(patch, "language") and _unset(patch, "additional_languages"):
        return
    current = await agent_repo.load(session, agent.id)
    check_languages(
        speech,
        default=_pick(patch.language, current.language),
        additional=_pick(patch.additional_languages, current.additional_languages),
    )


async def _check_merged(session: Session, agent: AgentState, patch: AgentPatch) -> None:
    """Check rules 6 and 7 on the agent the patch makes (only when it touches them)."""
    touched = ("system_prompt", "welcome_message", "template_variables")
    if any(not _unset(patch, name) for name in touched):
        current = await agent_repo.load(session, agent.id)
        _refuse_undeclared(
            _pick(patch.system_prompt, current.system_prompt),
            _pick(patch.welcome_message, current.welcome_message),
            _pick(patch.template_variables, current.template_variables),
        )
    if not isinstance(patch.tools, Unset):
        await check_tool_names(session, agent.project_id, patch.tools)
    if not isinstance(patch.extraction_schemas, Unset):
        await check_schema_names(session, agent.project_id, patch.extraction_schemas)
    if not isinstance(patch.eval_prompts, Unset):
        await check_eval_prompt_names(session, agent.project_id, patch.eval_prompts)


async def _storage_policy_id(
    session: Session, agent: AgentState, patch: AgentPatch
) -> str | Unset | None:
    """Rule 10: the ID of the policy the patch names (UNSET when it names none)."""
    name = patch.external_storage_policy
    if name is None or isinstance(name, Unset):
        return name
    return (await policy_for_agent(session, agent.project_id, name)).id


async def _endpoint_of(
    session: Session, ctx: Context, agent: AgentState, patch: AgentPatch
) -> ConfigurationEndpoint | Unset | None:
    """Rule 11: the sealed endpoint the patch makes (UNSET when it names none)."""
    given = patch.configuration_endpoint
    if given is None or isinstance(given, Unset):
        return given
    current = (await agent_repo.load(session, agent.id)).configuration_endpoint
    return configuration_endpoints.issue(ctx, given, current=current)


def _with_issued(agent: Agent, endpoint: ConfigurationEndpoint | Unset | None) -> Agent:
    """The agent as its change returns it: a secret made by this change shown this once."""
    if not isinstance(endpoint, ConfigurationEndpoint) or endpoint.issued_secret is None:
        return agent
    if agent.configuration_endpoint is None:
        return agent
    issued = replace(agent.configuration_endpoint, issued_secret=endpoint.issued_secret)
    return replace(agent, configuration_endpoint=issued)


def _check_silence_patch(patch: AgentPatch) -> None:
    """Rule 9: the silence settings a patch sets are in range (each alone: they are
    independent)."""
    check_silence(
        poke_sec=None if isinstance(patch.no_input_poke_sec, Unset) else patch.no_input_poke_sec,
        poke_text=_pick(patch.no_input_poke_text, DEFAULT_POKE_TEXT),
        end_sec=(
            None
            if isinstance(patch.no_input_end_conversation_sec, Unset)
            else patch.no_input_end_conversation_sec
        ),
    )


def _pick(value: T | Unset, current: T) -> T:
    return current if isinstance(value, Unset) else value


def _refuse_undeclared(
    system_prompt: str, welcome_message: str | None, declared: Mapping[str, TemplateVariable]
) -> None:
    for field, text in (("system_prompt", system_prompt), ("welcome_message", welcome_message)):
        undeclared = sorted(templates.placeholders(text or "") - set(declared))
        if undeclared:
            raise UndeclaredTemplateVariable(
                f"{field} uses the template variable {undeclared[0]!r}, which the agent does "
                "not declare in template_variables.",
                param_errors={field: f"uses undeclared template variable {undeclared[0]!r}"},
            )


def _unset(patch: AgentPatch, name: str) -> bool:
    return isinstance(getattr(patch, name), Unset)


async def _refuse_taken_numbers(
    session: Session, numbers: Sequence[str], *, agent_id: str | None
) -> None:
    taken = await agent_repo.numbers_owned_elsewhere(session, numbers, agent_id)
    if taken:
        raise PhoneNumberTaken(
            "Phone number already assigned to another agent: " + ", ".join(sorted(taken))
        )
