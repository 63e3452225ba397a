"""Dashboard pages of tools (API.md section 12): list, create (the secret shown once), edit,
delete (refused with `tool_in_use` while an agent lists the tool)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Awaitable, Callable, Iterable
from typing import Annotated, Any, Final, TypeVar

from fastapi import APIRouter, Depends, Request
from starlette.datastructures import FormData
from starlette.responses import Response

from parley.error_status import status_for
from parley.errors import ProjectNotFound
from parley.records import Agent, Page, Tool
from parley.services import agents, tools
from parley.services.context import Context
from parley.web import forms, tool_forms
from parley.web.form_state import FORM_ERRORS, FailedForm
from parley.web.render import PageRoute, done, notice, page
from parley.web.session import Visitor, checked_form, context_of, visitor

router = APIRouter(prefix="/dashboard", route_class=PageRoute, include_in_schema=False)
SignedIn = Annotated[Visitor, Depends(visitor)]
MAX_PAGES: Final = 50
"""Listings read at most this many pages of 100 (5000 tools or agents) for one page."""
T = TypeVar("T")


async def _form(request: Request, signed_in: SignedIn) -> FormData:
    return await checked_form(request, signed_in)


CheckedForm = Annotated[FormData, Depends(_form)]


async def every(fetch: Callable[[str | None], Awaitable[Page[T]]]) -> list[T]:
    """Read a listing page by page, up to MAX_PAGES pages."""
    found: list[T] = []
    cursor = None
    for _ in range(MAX_PAGES):
        listed = await fetch(cursor)
        found.extend(listed.items)
        cursor = listed.next_cursor
        if cursor is None:
            break
    return found


async def org_tools(ctx: Context, org_id: str, project: str | None = None) -> list[Tool]:
    """The organization's tools (of one project when given), oldest first."""
    return await every(
        lambda cursor: tools.list_tools(
            ctx, org_id=org_id, project=project, cursor=cursor, limit=100
        )
    )


async def users_of_tools(ctx: Context, org_id: str) -> dict[tuple[str, str], list[Agent]]:
    """The agents listing each tool, by (project ID, tool name)."""
    return await agents_listing(ctx, org_id, lambda agent: agent.tools)


async def agents_listing(
    ctx: Context, org_id: str, names: Callable[[Agent], Iterable[str]]
) -> dict[tuple[str, str], list[Agent]]:
    """The agents that list each name (a tool, an extraction schema, …) in `names(agent)`,
    by (project ID, name)."""
    found = await every(
        lambda cursor: agents.list_agents(
            ctx, org_id=org_id, project=None, cursor=cursor, limit=100
        )
    )
    users: defaultdict[tuple[str, str], list[Agent]] = defaultdict(list)
    for agent in found:
        for name in names(agent):
            users[(agent.project.id, name)].append(agent)
    return users


async def _tools_page(
    request: Request, signed_in: Visitor, *, status: int = 200, **extra: Any
) -> Response:
    ctx = context_of(request)
    return await page(
        request,
        signed_in,
        "tools.html",
        status=status,
        tools=await org_tools(ctx, signed_in.org_id),
        users=await users_of_tools(ctx, signed_in.org_id),
        notice=notice(request),
        **extra,
    )


async def _tool_page(
    request: Request, signed_in: Visitor, tool: Tool, *, status: int = 200, **extra: Any
) -> Response:
    users = await users_of_tools(context_of(request), signed_in.org_id)
    return await page(
        request,
        signed_in,
        "tool.html",
        status=status,
        tool=tool,
        used_by=users.get((tool.project.id, tool.name), []),
        notice=notice(request),
        **extra,
    )


@router.get("/tools")
async def tools_page(request: Request, signed_in: SignedIn) -> Response:
    return await _tools_page(request, signed_in)


@router.post("/tools")
async def create_tool(request: Request, signed_in: SignedIn, form: CheckedForm) -> Response:
    try:
        spec = tool_forms.tool_spec(form)
        project = forms.text(form, "project", max_length=64) or None
        issued = await tools.create_tool(
            context_of(request), org_id=signed_in.org_id, project=project, spec=spec,
            actor=signed_in.actor,
        )  # fmt: skip
    except (*FORM_ERRORS, ProjectNotFound) as error:  # an unknown project is a typo too
        failed = FailedForm.of("create-tool", form, error, secret_fields=tool_forms.SECRET_FIELDS)
        return await _tools_page(request, signed_in, status=status_for(error), failed=failed)
    # The one answer that shows the signing secret: rendered, never redirected to (API keys
    # do the same), so no later page can show it again.
    return await _tools_page(request, signed_in, created=issued)


@router.get("/tools/{tool_id}")
async def tool_page(request: Request, signed_in: SignedIn, tool_id: str) -> Response:
    tool = await tools.get_tool(
        context_of(request), org_id=signed_in.org_id, ref=tool_id, project=None
    )
    return await _tool_page(request, signed_in, tool)


@router.post("/tools/{tool_id}")
async def update_tool(
    request: Request, signed_in: SignedIn, form: CheckedForm, tool_id: str
) -> Response:
    ctx = context_of(request)
    current = await tools.get_tool(ctx, org_id=signed_in.org_id, ref=tool_id, project=None)
    try:
        patch = tool_forms.tool_patch(form, current)
        await tools.update_tool(
            ctx, org_id=signed_in.org_id, ref=current.id, project=None, patch=patch,
            actor=signed_in.actor,
        )  # fmt: skip
    except FORM_ERRORS as error:
        failed = FailedForm.of("edit-tool", form, error, secret_fields=tool_forms.SECRET_FIELDS)
        return await _tool_page(
            request, signed_in, current, status=status_for(error), failed=failed
        )
    return done(f"/dashboard/tools/{current.id}", "tool_updated")


@router.post("/tools/{tool_id}/delete")
async def delete_tool(
    request: Request, signed_in: SignedIn, form: CheckedForm, tool_id: str
) -> Response:
    ctx = context_of(request)
    current = await tools.get_tool(ctx, org_id=signed_in.org_id, ref=tool_id, project=None)
    try:
        await tools.delete_tool(
            ctx, org_id=signed_in.org_id, ref=current.id, project=None, actor=signed_in.actor
        )
    except FORM_ERRORS as error:  # tool_in_use: the page says which agents list it
        failed = FailedForm.of("delete-tool", form, error)
        return await _tool_page(
            request, signed_in, current, status=status_for(error), failed=failed
        )
    return done("/dashboard/tools", "tool_deleted")
