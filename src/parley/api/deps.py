"""The HTTP layer's vocabulary: Annotated aliases that resolve values and decide nothing;
every principal comes from services/authn.py."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Path, Query, Request
from starlette.requests import HTTPConnection

from parley.records import Actor, Principal
from parley.services import Context, authenticate
from parley.services.authn import OPAQUE_KINDS, presented_credential
from parley.services.paging import MAX_PAGE_SIZE
from parley.services.speech import SpeechMaker, speech_maker
from parley.services.voices import SpeechCatalog, cached_catalog
from parley.text import Label


def context_of(connection: HTTPConnection) -> Context:
    """Return the services' context built by the app's lifespan."""
    context: Context = connection.app.state.context
    return context


async def get_context(connection: HTTPConnection) -> Context:
    """The context as a dependency: `async` because FastAPI runs a plain `def` dependency
    in its thread pool, a thread hop per request for an attribute read."""
    return context_of(connection)


Ctx = Annotated[Context, Depends(get_context)]


async def get_speech(connection: HTTPConnection) -> SpeechCatalog | None:
    """The voices and languages of the engine the app's lifespan built (read once)."""
    return cached_catalog(connection.app.state)


Speech = Annotated[SpeechCatalog | None, Depends(get_speech)]


async def get_speech_maker(connection: HTTPConnection) -> SpeechMaker | None:
    """The synthesizer of the engine the app's lifespan built, for speech outside a
    conversation (made once)."""
    return speech_maker(connection.app.state)


Synthesis = Annotated[SpeechMaker | None, Depends(get_speech_maker)]


def client_address(connection: HTTPConnection) -> str | None:
    """The client's address: the peer, or what a trusted proxy forwarded (uvicorn's proxy
    headers, PARLEY_TRUSTED_PROXIES); None when the server does not know it."""
    client = connection.client
    return client.host if client else None


async def get_principal(request: Request, ctx: Ctx) -> Principal:
    """An API key or a session token (query strings are ignored on REST)."""
    credential = presented_credential(request.headers.getlist("authorization"))
    return await authenticate(ctx, credential, accepts=OPAQUE_KINDS, client=client_address(request))


AnyPrincipal = Annotated[Principal, Depends(get_principal)]


async def get_api_key_principal(request: Request, ctx: Ctx) -> Principal:
    """Require an API key (API.md section 1: only API keys manage the organization)."""
    credential = presented_credential(request.headers.getlist("authorization"))
    return await authenticate(
        ctx, credential, accepts=frozenset({"api_key"}), client=client_address(request)
    )


ApiKeyPrincipal = Annotated[Principal, Depends(get_api_key_principal)]


def actor_of(request: Request, principal: Principal) -> Actor:
    """Describe who makes a change for the audit trail: credential, client, request ID."""
    client = client_address(request)
    request_id = getattr(request.state, "request_id", None)
    return Actor(
        kind=principal.kind, id=principal.credential_id, client=client, request_id=request_id
    )


async def get_api_key_actor(request: Request, principal: ApiKeyPrincipal) -> Actor:
    """The audit actor of a request made with an API key."""
    return actor_of(request, principal)


ApiKeyActor = Annotated[Actor, Depends(get_api_key_actor)]

ConversationId = Annotated[Label, Path(alias="id", description="The conversation's ID.")]


async def get_credential(request: Request) -> str:
    """The one credential of a REST request, unproven (`Authorization: Bearer`)."""
    return presented_credential(request.headers.getlist("authorization"))


Credential = Annotated[str, Depends(get_credential)]


async def get_conversation_principal(
    request: Request, ctx: Ctx, conversation_id: ConversationId
) -> Principal:
    """Authenticate a request to one conversation: a JWT must name it (API.md section 7)."""
    credential = presented_credential(request.headers.getlist("authorization"))
    return await authenticate(
        ctx, credential, conversation_id=conversation_id, client=client_address(request)
    )


ConversationPrincipal = Annotated[Principal, Depends(get_conversation_principal)]


async def get_conversation_manager(
    request: Request, ctx: Ctx, conversation_id: ConversationId
) -> Principal:
    """Who may end a conversation: an API key, or a JWT that names it (API.md section 1: a
    JWT acts on the REST endpoints under `/v1/conversations/{id}`); a session token only
    opens and reads."""
    credential = presented_credential(request.headers.getlist("authorization"))
    return await authenticate(
        ctx,
        credential,
        accepts=frozenset({"api_key", "jwt"}),
        conversation_id=conversation_id,
        client=client_address(request),
    )


ConversationManager = Annotated[Principal, Depends(get_conversation_manager)]

ProjectParam = Annotated[
    Label | None,
    Query(description="Project name or ID (default `main`); used only when nameOrId is a name."),
]
CursorParam = Annotated[
    str | None, Query(description="`next_cursor` of the previous page.", max_length=512)
]
LimitParam = Annotated[int, Query(ge=1, le=MAX_PAGE_SIZE, description="Page size, 1..100.")]
