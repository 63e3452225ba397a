"""What every use-case receives: the database, the clock and the shared stores.

`DatabaseContext` is the part the operator commands need (composition/database.py opens one
without the JWT runtime or the stores); `Context`, built by the composition root
(composition/context.py), is a `DatabaseContext` with everything else, so any service that
takes the former takes it too. Its adapters are typed by Protocols, so this module imports
no use case and no adapter.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from parley.clock import Clock
from parley.db.database import Database
from parley.services.credential_cache import CredentialCache
from parley.services.grace_uses import GraceUses
from parley.services.held_conversations import HeldConversations
from parley.services.outbox_bell import OutboxBell
from parley.services.read_model import ReadModel

DEFAULT_PUBLIC_URL = "http://127.0.0.1:8000"
"""PARLEY_PUBLIC_URL's default (parley/config.py)."""

if TYPE_CHECKING:
    # Annotations only: the operator commands import this module without loading them.
    from parley.engine import ModelAnswer, ToolDefinition, Turn
    from parley.jwt import (
        IssuerPolicy,
        IssuerResolver,
        JwksSource,
        KeySetStore,
        KeySetView,
        KeySource,
    )
    from parley.outbound import AddressPolicy, OutboundClient, TwilioCalls
    from parley.recordings import RecordingStore
    from parley.sealing import SecretBox
    from parley.stores.base import (
        CappedLeases,
        RateLimiter,
        ReplayGuard,
        Revocations,
        StoreHealth,
    )


class IssuerPolicies(Protocol):
    """Issuer -> policy, with this instance's copies (services/jwt_adapters.py)."""

    async def policy(self, iss: str) -> IssuerPolicy | None:
        """Return the policy of the organization that registered `iss`, or None."""
        ...

    def forget(self, org_id: str) -> None:
        """Drop this instance's copies of an organization's policies."""
        ...


class KeySets(Protocol):
    """The organizations' key sets as the configuration use cases see them (`jwt.KeyCache`)."""

    async def view(self, source: KeySource) -> KeySetView:
        """Describe the keys in force, loading them from the store if needed (never fetches)."""
        ...

    async def refresh(self, source: KeySource, *, store: KeySetStore | None = None) -> KeySetView:
        """Fetch the JWKS now (static keys are reloaded); `store` takes the outcome."""
        ...

    def invalidate(self, org_id: str) -> None:
        """Drop this instance's copy of an organization's keys."""
        ...


class LanguageModel(Protocol):
    """The configured language model (PARLEY_LLM_*), asked for one whole answer: the work
    after a call (API.md section 16). `engine.ChatCompletions` is the implementation."""

    async def complete(
        self,
        messages: Sequence[Mapping[str, str]],
        *,
        response_format: Mapping[str, Any] | None = None,
        max_tokens: int | None = None,
    ) -> str:
        """Return the text of the answer; raise Unavailable when the model cannot be reached
        or does not answer in time, an UpstreamError when it refuses the request."""
        ...

    async def respond(
        self,
        *,
        system_prompt: str,
        history: Sequence[Turn],
        tools: Sequence[ToolDefinition] = (),
        max_tokens: int | None = None,
    ) -> ModelAnswer:
        """Return the next turn's text and the tool calls it makes, offered `tools` (API.md
        section 17's replays); failures as `complete`'s."""
        ...


@dataclass(frozen=True, slots=True)
class JwtRuntime:
    """The JWT machinery of one instance (API.md section 7), built by the composition root."""

    fetcher: JwksSource
    key_cache: KeySets
    policies: IssuerPolicies
    issuers: IssuerResolver
    """What verification asks: `policies` for the issuer, `key_cache` for the key."""
    rate_limiter: RateLimiter
    replay_guard: ReplayGuard
    default_audience: str

    def forget(self, org_id: str) -> None:
        """Drop this instance's copies of an organization's policies and keys after its
        settings changed."""
        self.policies.forget(org_id)
        self.key_cache.invalidate(org_id)


@dataclass(frozen=True, slots=True)
class Instance:
    """This process as the owner of live conversations (services/instances.py)."""

    id: str
    lease_seconds: float
    """Live conversations of an instance silent this long are ended by the others."""


@dataclass(frozen=True, slots=True)
class DatabaseContext:
    """The database and the clock: all that organizations, API keys and the audit trail use."""

    db: Database
    clock: Clock


@dataclass(frozen=True, slots=True)
class Context(DatabaseContext):
    """The dependencies of the services, built once by the composition root (app.py)."""

    jwt: JwtRuntime
    revocations: Revocations
    sign_in_limiter: RateLimiter
    """Failed dashboard sign-ins per client address (services/dashboard.py)."""
    store_health: StoreHealth
    """Whether the stores shared by the instances answer (services/health.py)."""
    instance: Instance
    secrets: SecretBox
    """Seals secrets stored in the database (the carrier's auth token, API.md section 13)."""
    outbound: OutboundClient
    """The one way out to the internet (parley/outbound), shared with the JWKS fetcher."""
    outbound_policy: AddressPolicy
    """Where webhook tools and webhooks may call (PARLEY_OUTBOUND_ALLOW_*)."""
    carrier: TwilioCalls
    """The carrier's REST API (PARLEY_TWILIO_API_URL, API.md section 15): places and
    updates calls with an organization's credentials (`telephony.carrier_account`)."""
    active: CappedLeases
    """The active conversations of every project and organization, under their caps
    (services/active_conversations.py; API.md section 17)."""
    held: HeldConversations = field(default_factory=HeldConversations)
    """The active conversations whose leases this instance renews."""
    credential_cache: CredentialCache = field(default_factory=CredentialCache)
    """API keys and session tokens already seen (services/credential_cache.py)."""
    grace_uses: GraceUses = field(default_factory=GraceUses)
    """Uses of rotated API keys' replaced secrets, not yet in the audit trail
    (services/grace_uses.py)."""
    read_model: ReadModel = field(default_factory=ReadModel)
    """Read-mostly records served from memory (services/read_model.py); in a fleet the
    composition root gives it the Redis change feed."""
    outbox_bell: OutboxBell = field(default_factory=OutboxBell)
    """Rung after a commit that wrote webhook deliveries (services/webhook_delivery.py)."""
    run_bell: asyncio.Event = field(default_factory=asyncio.Event)
    """Set when this instance queued a test run: its runner looks at once rather than at
    its next poll (services/scenario_runner.py)."""
    background: set[asyncio.Task[Any]] = field(default_factory=set)
    """Work this instance started after a conversation's end (services/post_call.py: the
    recording kept, then the analysis), until it is done or the server drains it."""
    recordings: RecordingStore | None = None
    """Where recordings are kept (API.md section 16): PARLEY_RECORDINGS_DIR's directory;
    None where there is none (PostgreSQL without the setting)."""
    language_model: LanguageModel | None = None
    """The language model for summaries, extractions and evaluations (API.md section 16);
    None when PARLEY_LLM_BASE_URL is not set."""
    public_url: str = DEFAULT_PUBLIC_URL
    """The service's public URL (PARLEY_PUBLIC_URL, no trailing slash): carriers call it and
    sign their webhooks over it, whatever Host header a proxy passes on (API.md 13)."""
