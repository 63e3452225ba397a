"""Custom tools of a project (API.md section 12): the resource and the rules of its fields.

Rules:
1. Names are 1-64 characters of `a-z 0-9 _`, unique in the project, neither shaped like a
   tool ID nor a built-in tool's name.
2. `custom_webhook` tools need `endpoint_url` (https on a public address unless the operator
   allows otherwise: `AddressPolicy.static_refusal`);
   `endpoint_method` is POST (default) or GET; `endpoint_timeout_ms` is 1000-180000 (default
   5000); `endpoint_headers` names no framing or routing header (`Host`, `Content-Length`,
   `Transfer-Encoding`, `Connection`, `Upgrade`, `TE`, `Trailer`, `Keep-Alive`,
   `Proxy-Connection`, in any case); `tool_call_output_timeout_ms` is not theirs.
3. `custom_websocket` tools have no endpoint fields and no `parameter_locations`;
   `tool_call_output_timeout_ms` is 1000-180000 (default 5000).
4. `parameters` is one of the two forms of services/tool_parameters.py.
5. A PATCH is checked as the whole tool it would make, as a creation is.
6. The signing secret (`whsec_` + base64 of 32 random bytes) is stored sealed
   (`ctx.secrets`), shown once at creation, and unsealed only for calls; the values of
   `endpoint_headers` (often the customer's credentials) are stored sealed too.
7. A tool that an agent lists cannot be deleted (409 `tool_in_use`); renaming it renames it
   in those agents' lists. The tool's row is locked first, as an agent naming it locks it.
8. Transfer tools (API.md section 15) have no endpoint, no parameters of their own (the
   model's are the service's), run `sync`, and take only their type's members (each other
   type takes none): `built_in_transfer_to_phone_number` a target (`phone_number`, E.164,
   or null: the model gives it), `dtmf` or `dynamic_dtmf`, the caller ID choice
   `use_agent_phone_number` (default false), `keep_listening` (default
   `use_agent_phone_number`'s value; false with it true is 400), `post_transfer_message`
   (a warm transfer's only), `on_transfer_no_answer` (default `return_to_assistant`);
   `detect_voicemail: true` is 400 `not_supported`. `built_in_transfer_to_agent` needs
   `agents_to_transfer_to`: 1-20 distinct agent names (whether they exist and are enabled is
   decided when the model calls it).
"""

from __future__ import annotations

import base64
import re
import secrets
from collections.abc import Mapping, Sequence
from dataclasses import fields, replace
from typing import Final, NoReturn

from parley.clock import utcnow
from parley.db.repos import agents as agent_repo
from parley.db.repos import projects as project_repo
from parley.db.repos import tools as tool_repo
from parley.db.session import Session
from parley.errors import (
    NameTaken,
    NotSupported,
    ProjectNotFound,
    ToolInUse,
    ToolNotFound,
    UnknownTool,
    ValidationFailed,
)
from parley.ids import looks_like_id, new_id
from parley.outbound import FRAMING_HEADERS, AddressPolicy
from parley.records import (
    Actor,
    IssuedTool,
    Page,
    Project,
    ProjectRef,
    Tool,
    ToolPatch,
    ToolSpec,
    Unset,
)
from parley.services import audit
from parley.services.context import Context
from parley.services.orgs import MAIN_PROJECT
from parley.services.paging import page_of
from parley.services.tool_parameters import (
    LOCATIONS,
    check_parameters,
    locations,
    model_schema,
    required_names,
    top_level_names,
)

__all__ = [
    "BUILT_IN_TOOLS",
    "create_tool",
    "delete_tool",
    "get_tool",
    "list_tools",
    "locations",
    "model_schema",
    "tools_for_conversation",
    "update_tool",
]

BUILT_IN_TOOLS: Final = frozenset(
    {"natural_conversation_ending", "keypad_input", "choose_not_to_respond"}
)
"""The tools the engine handles itself (engine.BUILT_IN_TOOL_NAMES): any agent may list them."""
NAME: Final = re.compile(r"[a-z0-9_]{1,64}")
NAME_RULE: Final = "must be 1-64 characters of a-z, 0-9 and '_', and not have the shape of an ID"
TIMEOUT_MS_RANGE: Final = (1000, 180_000)
DEFAULT_TIMEOUT_MS: Final = 5000
WEBHOOK_ONLY: Final = ("endpoint_url", "endpoint_method", "endpoint_headers", "endpoint_timeout_ms")
PHONE_TRANSFER: Final = "built_in_transfer_to_phone_number"
AGENT_TRANSFER: Final = "built_in_transfer_to_agent"
PHONE_TRANSFER_ONLY: Final = ("phone_number", "dtmf", "dynamic_dtmf", "use_agent_phone_number",
                              "keep_listening", "post_transfer_message", "on_transfer_no_answer",
                              "detect_voicemail")  # fmt: skip
AGENT_TRANSFER_ONLY: Final = ("agents_to_transfer_to",)
AGENT_NAME: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
FRAMING_NAMES: Final = ("Host", "Content-Length", "Transfer-Encoding", "Connection", "Upgrade",
                        "TE", "Trailer", "Keep-Alive", "Proxy-Connection")  # fmt: skip
_URL_PLACEHOLDER: Final = re.compile(r"\{([^{}]*)\}")
UNIQUE_VIOLATIONS = tool_repo.UNIQUE_VIOLATIONS


def new_signing_secret() -> str:
    """Return a fresh `whsec_…` secret: 32 random bytes, base64 (Standard Webhooks)."""
    return "whsec_" + base64.b64encode(secrets.token_bytes(32)).decode()


async def create_tool(
    ctx: Context, *, org_id: str, project: str | None, spec: ToolSpec, actor: Actor
) -> IssuedTool:
    """Create a tool in a project (default `main`); its secret is returned this once."""
    spec = checked(spec, ctx.outbound_policy)
    secret = new_signing_secret()
    async with ctx.db.transaction(UNIQUE_VIOLATIONS) as session:
        in_project = await project_repo.resolve(session, org_id, project or MAIN_PROJECT)
        if await tool_repo.name_taken(session, in_project.id, spec.name):
            raise NameTaken("A tool with this name already exists in the project.")
        tool = await tool_repo.insert(
            session,
            tool_id=new_id("tool"),
            org_id=org_id,
            project=_ref(in_project),
            spec=replace(spec, endpoint_headers=_seal_headers(ctx, spec.endpoint_headers)),
            sealed_secret=ctx.secrets.seal(secret),
            now=utcnow(ctx.clock),
        )
        await _record(session, ctx, tool, actor, "tool.create", project=in_project.name)
    made = replace(tool, signing_secret=secret, endpoint_headers=spec.endpoint_headers)
    return IssuedTool(tool=made, signing_secret=secret)


async def get_tool(ctx: Context, *, org_id: str, ref: str, project: str | None) -> Tool:
    """Return the tool named (in `project`, default `main`) or identified by `ref`."""
    async with ctx.db.read() as session:
        return _readable(ctx, await find_tool(session, org_id, ref, project))


async def list_tools(
    ctx: Context, *, org_id: str, project: str | None, cursor: str | None, limit: int
) -> Page[Tool]:
    """List the organization's tools, in one project or (`project` empty or None) in all."""
    async with ctx.db.read() as session:
        project_id = None
        if project:
            project_id = (await project_repo.resolve(session, org_id, project)).id
        found = await tool_repo.list_page(
            session, org_id, project_id=project_id, cursor=cursor, limit=limit
        )
    return page_of([_readable(ctx, tool) for tool in found], limit=limit)


async def update_tool(
    ctx: Context, *, org_id: str, ref: str, project: str | None, patch: ToolPatch, actor: Actor
) -> None:
    """Apply a partial update, checked as the whole tool it makes (rule 5)."""
    async with ctx.db.transaction(UNIQUE_VIOLATIONS) as session:
        tool = _readable(ctx, await find_tool(session, org_id, ref, project, for_update=True))
        merged = checked(_merge(tool, patch), ctx.outbound_policy)
        merged = replace(merged, endpoint_headers=_seal_headers(ctx, merged.endpoint_headers))
        now = utcnow(ctx.clock)
        if merged.name != tool.name:
            if await tool_repo.name_taken(session, tool.project.id, merged.name):
                raise NameTaken("A tool with this name already exists in the project.")
            await agent_repo.rename_tool(session, tool.project.id, tool.name, merged.name, now=now)
        complete = ToolPatch(**{f.name: getattr(merged, f.name) for f in fields(ToolSpec)})
        await tool_repo.apply_patch(session, tool.id, complete, now=now)
        sent = sorted(f.name for f in fields(ToolPatch) if not _unset(patch, f.name))
        await _record(session, ctx, tool, actor, "tool.update", fields=sent)


async def delete_tool(
    ctx: Context, *, org_id: str, ref: str, project: str | None, actor: Actor
) -> None:
    """Delete a tool; refused with ToolInUse while an agent lists it."""
    async with ctx.db.transaction() as session:
        tool = await find_tool(session, org_id, ref, project, for_update=True)
        users = await agent_repo.listing_tool(session, tool.project.id, tool.name)
        if users:
            raise ToolInUse("Agents list this tool: " + ", ".join(users) + ".")
        await _record(session, ctx, tool, actor, "tool.delete")
        await tool_repo.delete_row(session, tool.id)


async def tools_for_conversation(
    ctx: Context, *, org_id: str, project_id: str, names: Sequence[str]
) -> list[Tool]:
    """Return the project's custom tools among `names`, in that order, secrets unsealed.

    Built-in names are skipped (the session knows them); any other name that is no tool of
    the project raises UnknownTool.
    """
    async with ctx.db.read() as session:
        found = await tool_repo.by_names(session, project_id, names)
    by_name = {tool.name: tool for tool in found if tool.org_id == org_id}
    unknown = [n for n in names if n not in by_name and n not in BUILT_IN_TOOLS]
    if unknown:
        raise UnknownTool(f"Unknown tool: {unknown[0]}.", param_errors={"tools": unknown[0]})
    return [_unsealed(ctx, by_name[n]) for n in names if n in by_name]


async def check_tool_names(session: Session, project_id: str, names: Sequence[str]) -> None:
    """Refuse (UnknownTool) names that are neither tools of the project nor built-ins; lock
    the named tools' rows so none is deleted before the caller's transaction ends."""
    if len(set(names)) != len(names):
        raise ValidationFailed(param_errors={"tools": "must not repeat a tool"})
    custom = [name for name in names if name not in BUILT_IN_TOOLS]
    found = {t.name for t in await tool_repo.by_names(session, project_id, custom, for_update=True)}
    unknown = [name for name in custom if name not in found]
    if unknown:
        raise UnknownTool(
            f"Unknown tool: {unknown[0]}. An agent may list the tools of its own project and "
            + ", ".join(sorted(BUILT_IN_TOOLS))
            + ".",
            param_errors={"tools": f"unknown tool {unknown[0]!r}"},
        )


async def find_tool(
    session: Session, org_id: str, ref: str, project: str | None, *, for_update: bool = False
) -> Tool:
    """Find a tool by ID, or by name in `project` (default `main`); secret still sealed."""
    project_id = None
    if not looks_like_id(ref, "tool"):
        try:
            project_id = (await project_repo.resolve(session, org_id, project or MAIN_PROJECT)).id
        except ProjectNotFound:
            raise ToolNotFound() from None
    return await tool_repo.find(session, org_id, ref, project_id=project_id, for_update=for_update)


def checked(spec: ToolSpec, policy: AddressPolicy) -> ToolSpec:
    """Check every field of a tool (rules 1-4); return it with the defaults of its type.

    The endpoint URL is checked by the outbound policy without resolving it (https, and no
    literal private address, unless the operator allows them); its resolved addresses are
    checked again at each call (services/webhook_tools.py)."""
    if not NAME.fullmatch(spec.name) or looks_like_id(spec.name):
        _refuse("name", NAME_RULE)
    if spec.name in BUILT_IN_TOOLS:
        _refuse("name", "is the name of a built-in tool")
    if spec.type in (PHONE_TRANSFER, AGENT_TRANSFER):
        return _checked_transfer(spec)
    for name in (*PHONE_TRANSFER_ONLY, *AGENT_TRANSFER_ONLY):
        if getattr(spec, name) is not None:
            _refuse(name, "is only for transfer tools")
    webhook = spec.type == "custom_webhook"
    check_parameters(spec.parameters, webhook=webhook)
    if not webhook:
        for name in (*WEBHOOK_ONLY, "parameter_locations"):
            if getattr(spec, name) is not None:
                _refuse(name, "is only for custom_webhook tools")
        timeout = _timeout(spec.tool_call_output_timeout_ms, "tool_call_output_timeout_ms")
        return replace(spec, tool_call_output_timeout_ms=timeout)
    if spec.tool_call_output_timeout_ms is not None:
        _refuse("tool_call_output_timeout_ms", "is only for custom_websocket tools")
    if spec.endpoint_url is None:
        _refuse("endpoint_url", "is required for custom_webhook tools")
    if refusal := policy.static_refusal(spec.endpoint_url):
        _refuse("endpoint_url", refusal)
    _check_headers(spec.endpoint_headers)
    method = spec.endpoint_method or "POST"
    _check_locations(spec, method, spec.endpoint_url)
    return replace(
        spec,
        endpoint_method=method,
        endpoint_timeout_ms=_timeout(spec.endpoint_timeout_ms, "endpoint_timeout_ms"),
    )


def _checked_transfer(spec: ToolSpec) -> ToolSpec:
    """Rule 8: a transfer tool's members, with its type's defaults."""
    for name in (*WEBHOOK_ONLY, "parameter_locations", "tool_call_output_timeout_ms"):
        if getattr(spec, name) is not None:
            _refuse(name, "is not for transfer tools")
    if spec.parameters not in ([], {}, {"type": "object", "properties": {}}):
        _refuse("parameters", "a transfer tool's parameters are the service's: leave them out")
    if spec.execution_mode != "sync":
        _refuse("execution_mode", "a transfer tool runs sync")
    if spec.type == AGENT_TRANSFER:
        for name in PHONE_TRANSFER_ONLY:
            if getattr(spec, name) is not None:
                _refuse(name, f"is only for {PHONE_TRANSFER} tools")
        names = spec.agents_to_transfer_to or ()
        if not names:
            _refuse("agents_to_transfer_to", "is required: the agents the model may transfer to")
        if len(set(names)) != len(names):
            _refuse("agents_to_transfer_to", "must not repeat an agent")
        for agent in names:
            if not AGENT_NAME.fullmatch(agent) or looks_like_id(agent):
                _refuse("agents_to_transfer_to", f"{agent[:64]!r} is not an agent name")
        return replace(spec, parameters=[])
    if spec.agents_to_transfer_to is not None:
        _refuse("agents_to_transfer_to", f"is only for {AGENT_TRANSFER} tools")
    if spec.detect_voicemail:
        raise NotSupported(
            "Parley does not listen in on a transfer for voicemail (detect_voicemail).",
            param_errors={"detect_voicemail": "is not supported: leave it out or false"},
        )
    use_agent = bool(spec.use_agent_phone_number)
    keep = spec.keep_listening if spec.keep_listening is not None else use_agent
    if use_agent and not keep:
        _refuse("keep_listening", "must be true when use_agent_phone_number is true")
    if spec.post_transfer_message and not keep:
        _refuse(
            "post_transfer_message", "is spoken to a warm transfer's target: set keep_listening"
        )
    return replace(
        spec,
        parameters=[],
        dynamic_dtmf=bool(spec.dynamic_dtmf),
        use_agent_phone_number=use_agent,
        keep_listening=keep,
        on_transfer_no_answer=spec.on_transfer_no_answer or "return_to_assistant",
        detect_voicemail=False,
    )


def _check_headers(headers: Mapping[str, str] | None) -> None:
    """Refuse a header that frames or routes the request: the service sets those."""
    for name in headers or {}:
        if name.lower() in FRAMING_HEADERS:
            _refuse(
                "endpoint_headers",
                f"may not name {name}: framing and routing headers ("
                + ", ".join(FRAMING_NAMES)
                + ") are the service's",
            )


def _check_locations(spec: ToolSpec, method: str, url: str) -> None:
    """Where each parameter goes must fit the method and the URL's `{name}` placeholders."""
    where = locations(spec.parameters, spec.parameter_locations, method=method)
    if spec.parameter_locations is not None:
        if isinstance(spec.parameters, list):
            _refuse("parameter_locations", "is only for parameters given as a JSON Schema")
        names = set(top_level_names(spec.parameters))
        for name, place in spec.parameter_locations.items():
            if name not in names:
                _refuse(f"parameter_locations.{name}", "names no top-level parameter")
            if place not in LOCATIONS:
                _refuse(
                    f"parameter_locations.{name}", "must be one of " + ", ".join(sorted(LOCATIONS))
                )
    placeholders = set(_URL_PLACEHOLDER.findall(url))
    required = required_names(spec.parameters)
    for name, place in where.items():
        if method == "GET" and place == "request_body":
            _refuse(_location_field(spec, name), "GET calls have no request body")
        if place == "url_path" and (name not in placeholders or name not in required):
            _refuse(
                _location_field(spec, name),
                "a url_path parameter must be required and fill a {name} of endpoint_url",
            )
    unfilled = sorted(placeholders - {name for name, p in where.items() if p == "url_path"})
    if unfilled:
        _refuse("endpoint_url", f"has the placeholder {{{unfilled[0]}}} but no url_path parameter")


def _location_field(spec: ToolSpec, name: str) -> str:
    if isinstance(spec.parameters, list):
        index = next(i for i, item in enumerate(spec.parameters) if item["name"] == name)
        return f"parameters[{index}].location"
    return f"parameter_locations.{name}"


def _timeout(value: int | None, field: str) -> int:
    low, high = TIMEOUT_MS_RANGE
    if value is None:
        return DEFAULT_TIMEOUT_MS
    if not low <= value <= high:
        _refuse(field, f"must be between {low} and {high} milliseconds")
    return value


def _merge(tool: Tool, patch: ToolPatch) -> ToolSpec:
    """The tool a patch would make: set fields replace, the others stay.

    Switching the type drops the defaults the old type filled in, so a webhook tool made a
    WebSocket tool (or the reverse) does not fail on values the client never chose.
    """
    current = {f.name: getattr(tool, f.name) for f in fields(ToolSpec)}
    changes = {
        f.name: v for f in fields(ToolPatch) if not isinstance(v := getattr(patch, f.name), Unset)
    }
    if changes.get("type", tool.type) != tool.type:
        reset = ("endpoint_method", "endpoint_timeout_ms", "tool_call_output_timeout_ms")
        for name in (*reset, *PHONE_TRANSFER_ONLY, *AGENT_TRANSFER_ONLY):
            current[name] = None
    return ToolSpec(**(current | changes))


def _refuse(field: str, message: str) -> NoReturn:
    raise ValidationFailed(param_errors={field: message})


def _unset(patch: ToolPatch, name: str) -> bool:
    return isinstance(getattr(patch, name), Unset)


def _unsealed(ctx: Context, tool: Tool) -> Tool:
    """The tool as a call needs it: its signing secret and header values in clear."""
    return replace(_readable(ctx, tool), signing_secret=ctx.secrets.unseal(tool.signing_secret))


def _readable(ctx: Context, tool: Tool) -> Tool:
    """The tool as its owner reads it: header values in clear, no signing secret (it was
    shown once, at creation)."""
    headers = tool.endpoint_headers
    opened = (
        {name: ctx.secrets.unseal(value) for name, value in headers.items()} if headers else headers
    )
    return replace(tool, endpoint_headers=opened, signing_secret="")


def _seal_headers(ctx: Context, headers: Mapping[str, str] | None) -> dict[str, str] | None:
    """Header values carry the customer's credentials (API keys): stored sealed."""
    if headers is None:
        return None
    return {name: ctx.secrets.seal(value) for name, value in headers.items()}


def _ref(project: Project) -> ProjectRef:
    return ProjectRef(id=project.id, name=project.name)


async def _record(
    session: Session, ctx: Context, tool: Tool, actor: Actor, action: str, **details: object
) -> None:
    await audit.record(
        session,
        ctx,
        org_id=tool.org_id,
        actor=actor,
        action=action,
        target=tool.id,
        details={"name": tool.name, **details},
    )
