"""Dashboard routes: sign-in and sign-out, agents; `install_dashboard` wires the rest."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Annotated

from fastapi import APIRouter, Depends, FastAPI, Request
from starlette.datastructures import FormData
from starlette.responses import RedirectResponse, Response
from starlette.staticfiles import StaticFiles

from parley.error_status import status_for
from parley.errors import CarrierError, ProjectNotFound, ValidationFailed
from parley.records import UNSET, Agent, AgentPatch, AgentSpec, OutboundCallRequest
from parley.services import agents, outbound_calls
from parley.services import dashboard as dashboard_service
from parley.services.voices import cached_catalog, list_voices
from parley.web import (
    agent_forms,
    analysis,
    conversation,
    forms,
    overview,
    pages,
    phone,
    test_runs,
    tools,
    webhooks,
)
from parley.web.form_state import FORM_ERRORS, FailedForm
from parley.web.render import (
    HERE,
    SIGN_IN_PATH,
    PageRoute,
    done,
    error_page,
    notice,
    page,
)
from parley.web.render import templates as page_templates
from parley.web.security import DashboardHeadersMiddleware
from parley.web.session import (
    SESSION_COOKIE,
    SIGN_IN_COOKIE,
    Visitor,
    checked_form,
    clear_cookie,
    client_actor,
    context_of,
    set_cookie,
    sign_in_form_ok,
    sign_in_token,
    visitor,
)

router = APIRouter(prefix="/dashboard", route_class=PageRoute, include_in_schema=False)
SignedIn = Annotated[Visitor, Depends(visitor)]


@dataclass(frozen=True, slots=True)
class DashboardOptions:
    secure_cookies: bool


def install_dashboard(app: FastAPI, *, secure_cookies: bool) -> None:
    """Serve the dashboard under /dashboard: pages, static files, security headers."""
    app.state.dashboard = DashboardOptions(secure_cookies=secure_cookies)
    app.include_router(router)
    app.include_router(pages.router)
    app.include_router(overview.router)
    app.include_router(conversation.router)
    app.include_router(analysis.router)
    app.include_router(tools.router)
    app.include_router(webhooks.router)
    app.include_router(phone.router)
    app.include_router(test_runs.router)
    app.mount("/dashboard/static", StaticFiles(directory=HERE / "static"), name="dashboard")
    # Browsers ask every page's origin for /favicon.ico: answer it (an SVG) rather than 404.
    app.add_api_route("/favicon.ico", _favicon, methods=["GET"], include_in_schema=False)
    app.add_middleware(DashboardHeadersMiddleware)


def _secure(request: Request) -> bool:
    """Secure cookies when the public URL is https, or when this request came over https:
    directly, or through a proxy of PARLEY_TRUSTED_PROXIES saying so (X-Forwarded-Proto)."""
    options: DashboardOptions = request.app.state.dashboard
    return options.secure_cookies or request.url.scheme == "https"


async def Form(request: Request, signed_in: SignedIn) -> FormData:
    """The posted form, once its CSRF token is checked."""
    return await checked_form(request, signed_in)


CheckedForm = Annotated[FormData, Depends(Form)]


# --- signing in and out -----------------------------------------------------------------


@router.get("")
@router.get("/")  # the app redirects no trailing slash (app.py), so the home answers both
async def home() -> Response:
    return RedirectResponse("/dashboard/agents", status_code=303)


@router.get("/sign-in")
async def sign_in_page(request: Request) -> Response:
    """The one dashboard page that needs no credential."""
    return _sign_in_form(request)


def _sign_in_form(request: Request, *, status: int = 200, error: str | None = None) -> Response:
    token = sign_in_token(request)
    response = page_templates.TemplateResponse(
        request, "sign_in.html", {"csrf": token, "error": error}, status_code=status
    )
    set_cookie(response, SIGN_IN_COOKIE, token, secure=_secure(request), max_age=3600)
    return response


@router.post("/sign-in")
async def sign_in(request: Request) -> Response:
    form = await request.form()
    if not sign_in_form_ok(request, form):
        message = "The sign-in form expired. Reload the page and try again."
        return error_page(request, 403, "csrf_failed", message)
    api_key = form.get("api_key")
    try:
        signed = await dashboard_service.sign_in(
            context_of(request),
            api_key=api_key if isinstance(api_key, str) else "",
            client=client_actor(request),
        )
    except dashboard_service.SignInThrottled as error:
        return error_page(request, 429, error.code, error.message, retry_after=error.retry_after)
    except dashboard_service.SignInRefused as error:
        return _sign_in_form(request, status=401, error=error.message)
    response = RedirectResponse("/dashboard/agents", status_code=303)
    max_age = dashboard_service.ABSOLUTE_SECONDS
    set_cookie(
        response, SESSION_COOKIE, signed.session_id, secure=_secure(request), max_age=max_age
    )
    clear_cookie(response, SIGN_IN_COOKIE, secure=_secure(request))
    return response


@router.post("/sign-out")
async def sign_out(request: Request, signed_in: SignedIn, _form: CheckedForm) -> Response:
    await dashboard_service.sign_out(
        context_of(request), session_id=signed_in.session_id, client=signed_in.actor
    )
    response = RedirectResponse(SIGN_IN_PATH, status_code=303)
    clear_cookie(response, SESSION_COOKIE, secure=_secure(request))
    return response


@cache
def _favicon_bytes() -> bytes:
    return (HERE / "static" / "favicon.svg").read_bytes()


async def _favicon() -> Response:
    return Response(
        _favicon_bytes(),
        media_type="image/svg+xml",
        headers={"Cache-Control": "public, max-age=86400"},
    )


# --- agents -----------------------------------------------------------------------------


async def _agents_page(
    request: Request, signed_in: Visitor, *, status: int = 200, failed: FailedForm | None = None
) -> Response:
    ctx = context_of(request)
    listed = await agents.list_agents(
        ctx, org_id=signed_in.org_id, project=None, cursor=None, limit=100
    )
    return await page(
        request,
        signed_in,
        "agents.html",
        status=status,
        agents=listed.items,
        audio_formats=forms.AUDIO_FORMATS,
        voices=list_voices(cached_catalog(request.app.state)),
        voice_choices=agent_forms.voice_choices,
        tools=await tools.org_tools(ctx, signed_in.org_id),
        built_ins=agent_forms.BUILT_INS,
        notice=notice(request),
        failed=failed,
    )


async def _agent_page(
    request: Request,
    signed_in: Visitor,
    agent: Agent,
    *,
    status: int = 200,
    failed: FailedForm | None = None,
) -> Response:
    project_tools = await tools.org_tools(context_of(request), signed_in.org_id, agent.project.id)
    return await page(
        request,
        signed_in,
        "agent.html",
        status=status,
        agent=agent,
        audio_formats=forms.AUDIO_FORMATS,
        voices=list_voices(cached_catalog(request.app.state)),
        voice_choices=agent_forms.voice_choices,
        tools=project_tools,
        built_ins=agent_forms.BUILT_INS,
        notice=notice(request),
        failed=failed,
    )


@router.get("/agents")
async def agents_page(request: Request, signed_in: SignedIn) -> Response:
    return await _agents_page(request, signed_in)


@router.post("/agents")
async def create_agent(request: Request, signed_in: SignedIn, form: CheckedForm) -> Response:
    try:
        silence = agent_forms.silence(form)
        spec = AgentSpec(
            name=forms.name(form),
            voice_id=forms.text(form, "voice_id", max_length=100) or agents.DEFAULT_VOICE_ID,
            system_prompt=forms.text(form, "system_prompt", max_length=20_000)
            or agents.DEFAULT_SYSTEM_PROMPT,
            welcome_message=forms.text(form, "welcome_message", max_length=2_000) or None,
            language=agents.DEFAULT_LANGUAGE,
            audio_format=forms.audio_format(form),
            phone_numbers=forms.phone_numbers(form),
            tools=agent_forms.tool_names(form),
            template_variables=agent_forms.template_variables(form),
            boosted_keywords=agent_forms.boosted_keywords(form),
            no_input_poke_sec=silence.poke_sec,
            no_input_poke_text=silence.poke_text,
            no_input_end_conversation_sec=silence.end_sec,
            voicemail_message=forms.text(form, "voicemail_message", max_length=2_000) or None,
        )
        project = forms.text(form, "project", max_length=64) or None
        agent = await agents.create_agent(
            context_of(request), org_id=signed_in.org_id, project=project, spec=spec,
            actor=signed_in.actor, speech=cached_catalog(request.app.state),
        )  # fmt: skip
    except (*FORM_ERRORS, ProjectNotFound) as error:  # an unknown project is a typo too
        failed = FailedForm.of("create-agent", form, error)
        return await _agents_page(request, signed_in, status=status_for(error), failed=failed)
    return done(f"/dashboard/agents/{agent.id}", "agent_created")


@router.get("/agents/{agent_id}")
async def agent_page(request: Request, signed_in: SignedIn, agent_id: str) -> Response:
    agent = await agents.get_agent(
        context_of(request), org_id=signed_in.org_id, ref=agent_id, project=None
    )
    return await _agent_page(request, signed_in, agent)


@router.post("/agents/{agent_id}")
async def update_agent(
    request: Request, signed_in: SignedIn, form: CheckedForm, agent_id: str
) -> Response:
    ctx = context_of(request)
    current = await agents.get_agent(ctx, org_id=signed_in.org_id, ref=agent_id, project=None)
    try:
        wanted = {
            "name": forms.name(form),
            "voice_id": forms.text(form, "voice_id", max_length=100, required=True),
            "system_prompt": forms.text(form, "system_prompt", max_length=20_000),
            "welcome_message": forms.text(form, "welcome_message", max_length=2_000) or None,
            "audio_format": forms.audio_format(form),
            "phone_numbers": forms.phone_numbers(form),
            "tools": agent_forms.tool_names(form),
            "template_variables": agent_forms.template_variables(form),
            "boosted_keywords": agent_forms.boosted_keywords(form),
            **agent_forms.silence_fields(agent_forms.silence(form)),
            "voicemail_message": forms.text(form, "voicemail_message", max_length=2_000) or None,
        }
        changed = {k: v for k, v in wanted.items() if getattr(current, k) != v}
        patch = AgentPatch(**changed)  # type: ignore[arg-type]
        if not changed:
            patch = AgentPatch(name=UNSET)
        await agents.update_agent(
            ctx, org_id=signed_in.org_id, ref=current.id, project=None, patch=patch,
            actor=signed_in.actor, speech=cached_catalog(request.app.state),
        )  # fmt: skip
    except FORM_ERRORS as error:
        failed = FailedForm.of("edit-agent", form, error)
        return await _agent_page(
            request, signed_in, current, status=status_for(error), failed=failed
        )
    return done(f"/dashboard/agents/{current.id}", "agent_updated")


@router.post("/agents/{agent_id}/{operation}")
async def agent_operation(
    request: Request, signed_in: SignedIn, form: CheckedForm, agent_id: str, operation: str
) -> Response:
    ctx, org_id, actor = context_of(request), signed_in.org_id, signed_in.actor
    path = f"/dashboard/agents/{agent_id}"
    if operation == "disable":
        await agents.disable_agent(ctx, org_id=org_id, ref=agent_id, project=None, actor=actor)
        return done(path, "agent_disabled")
    if operation == "enable":
        await agents.enable_agent(ctx, org_id=org_id, ref=agent_id, project=None, actor=actor)
        return done(path, "agent_enabled")
    if operation == "delete":
        await agents.delete_agent(ctx, org_id=org_id, ref=agent_id, project=None, actor=actor)
        return done("/dashboard/agents", "agent_deleted")
    if operation == "release":
        return await _release_numbers(request, signed_in, form, agent_id)
    if operation == "call":
        return await _call_a_number(request, signed_in, form, agent_id)
    return error_page(request, 404, "not_found", "Not found.")


async def _call_a_number(
    request: Request, signed_in: Visitor, form: FormData, agent_id: str
) -> Response:
    """The agent page's "Call a number" (API.md section 15): place the call, then show its
    conversation; a refusal is shown beside the form."""
    ctx = context_of(request)
    try:
        to = forms.text(form, "to_phone_number", max_length=16, required=True)
        if not forms.E164.fullmatch(to):
            raise ValidationFailed(
                param_errors={"to_phone_number": "must be an E.164 number such as +14155550123"}
            )
        request_ = OutboundCallRequest(
            to_phone_number=to,
            agent=agent_id,
            project=None,
            from_phone_number=forms.text(form, "from_phone_number", max_length=16) or None,
            settings={},
        )
        placed = await outbound_calls.place_call(
            ctx, org_id=signed_in.org_id, request=request_, actor=signed_in.actor,
            speech=cached_catalog(request.app.state),
        )  # fmt: skip
    except (*FORM_ERRORS, CarrierError) as error:  # the carrier's refusal is shown too
        agent = await agents.get_agent(ctx, org_id=signed_in.org_id, ref=agent_id, project=None)
        failed = FailedForm.of("call-number", form, error)
        return await _agent_page(request, signed_in, agent, status=status_for(error), failed=failed)
    return done(f"/dashboard/conversations/{placed}", "call_placed")


async def _release_numbers(
    request: Request, signed_in: Visitor, form: FormData, agent_id: str
) -> Response:
    ctx = context_of(request)
    chosen = [n for n in form.getlist("phone_numbers") if isinstance(n, str)]
    numbers = None if forms.checked(form, "all") else chosen
    try:
        if numbers == []:
            raise ValidationFailed(param_errors={"phone_numbers": "choose the numbers to release"})
        await agents.release_phone_numbers(
            ctx, org_id=signed_in.org_id, ref=agent_id, project=None, numbers=numbers,
            actor=signed_in.actor,
        )  # fmt: skip
    except FORM_ERRORS as error:
        agent = await agents.get_agent(ctx, org_id=signed_in.org_id, ref=agent_id, project=None)
        failed = FailedForm.of("release-numbers", form, error)
        return await _agent_page(request, signed_in, agent, status=status_for(error), failed=failed)
    return done(f"/dashboard/agents/{agent_id}", "numbers_released")
