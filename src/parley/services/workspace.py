"""The workspace: an organization's own settings, as the official SDK names them (API.md
section 17).

Rules:
1. `ip_allowlist` holds IPv4 and IPv6 addresses and networks (CIDR), each parsed strictly
   (no host bits set past the prefix, no spaces, at most `MAX_ENTRIES`): anything else is
   400 naming the entry. They are stored normalized (an address alone, else the network).
2. A non-empty allowlist refuses API-key and session-token requests (REST and the
   conversation socket) from any other client address, 403 `ip_not_allowed`; an unknown
   address is refused too. JWTs are not limited by it (end users are anywhere). The
   client address is the socket's peer, or, from a proxy PARLEY_TRUSTED_PROXIES names,
   its `X-Forwarded-For` (uvicorn's proxy headers, set by `parley serve`).
3. The check reads the allowlist from the read model (services/read_model.py): parsed
   once per organization and change, dropped on every instance by the change's audit
   record, so a request pays a dictionary look-up; the first request after a change of the
   organization reads it again (one point read, no transaction), as agent reads do.
4. A `PATCH` whose allowlist leaves out the address making it is 400 `would_lock_out`,
   and changes nothing.
5. `max_active_conversations` is at least 1, or null (no cap); `name` follows the
   organizations' name rule and stays unique; `logo_url` is an https URL ending in `.png`
   or `.svg` (the SDK's rule), or null; `invite_link_allowed_domains` are domain names,
   stored and shown (Parley has no invitations).
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final
from urllib.parse import urlsplit

from parley.db.repos import orgs as org_repo
from parley.errors import IpNotAllowed, NameTaken, ValidationFailed, WouldLockOut
from parley.records import Actor, Unset, Workspace, WorkspacePatch
from parley.services import active_conversations, audit
from parley.services.context import Context

MAX_ENTRIES: Final = 100
"""Entries of `ip_allowlist` and of `invite_link_allowed_domains`, each."""
MAX_CAP: Final = 1_000_000
MAX_REMEMBERED: Final = 4096
"""Client addresses whose answer an allowlist remembers (then it starts over)."""
_DOMAIN: Final = re.compile(
    r"(?=.{1,253}\Z)([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z]([a-z0-9-]{0,61}[a-z0-9])?"
)
_Network = ipaddress.IPv4Network | ipaddress.IPv6Network
_Address = ipaddress.IPv4Address | ipaddress.IPv6Address


@dataclass(frozen=True, slots=True)
class WorkspaceView:
    """The workspace with its count of active conversations."""

    workspace: Workspace
    active_conversations: int


class IpAllowlist:
    """An organization's parsed allowlist (rule 3): empty allows every address. Each
    client's answer is remembered (`MAX_REMEMBERED` of them), so a request from a known
    address pays one dictionary look-up however long the list."""

    __slots__ = ("_answers", "_networks")

    def __init__(self, entries: Sequence[str]) -> None:
        self._networks = tuple(ipaddress.ip_network(entry) for entry in entries)
        self._answers: dict[str | None, bool] = {}

    def allows(self, client: str | None) -> bool:
        """Whether requests from `client` (an IP address, None if unknown) may use keys."""
        if not self._networks:
            return True
        answer = self._answers.get(client)
        if answer is None:
            address = _address(client)
            answer = address is not None and any(address in net for net in self._networks)
            if len(self._answers) >= MAX_REMEMBERED:
                self._answers.clear()
            self._answers[client] = answer
        return answer


def _address(client: str | None) -> _Address | None:
    """The client's address (an IPv4-mapped IPv6 address as IPv4), None if not one."""
    if client is None:
        return None
    try:
        address = ipaddress.ip_address(client)
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


async def check_client(ctx: Context, *, org_id: str, client: str | None) -> None:
    """Refuse an API key's or session token's request from outside the organization's
    allowlist (rule 2): IpNotAllowed."""

    async def load() -> IpAllowlist:
        async with ctx.db.point_read() as connection:  # the organization's row, by its key
            return IpAllowlist(await org_repo.ip_allowlist_of(connection, org_id))

    allowlist: IpAllowlist = await ctx.read_model.get(ctx.db, org_id, ("ip_allowlist",), load)
    if not allowlist.allows(client):
        raise IpNotAllowed()


async def get_workspace(ctx: Context, *, org_id: str) -> WorkspaceView:
    """Return the organization's workspace and its count of active conversations."""
    async with ctx.db.read() as session:
        found = await org_repo.workspace(session, org_id)
    active = await active_conversations.count_workspace(ctx, org_id=org_id)
    return WorkspaceView(found, active)


async def update_workspace(
    ctx: Context, *, org_id: str, patch: WorkspacePatch, actor: Actor, client: str | None
) -> None:
    """Change the members given (rules 1, 4 and 5), audited; `client` is the address of
    the request, which the new allowlist must allow."""
    values: dict[str, object] = {}
    if not isinstance(patch.ip_allowlist, Unset):
        allowlist = parse_allowlist(patch.ip_allowlist)
        if not IpAllowlist(allowlist).allows(client):
            raise WouldLockOut()
        values["ip_allowlist"] = list(allowlist)
    if not isinstance(patch.invite_link_allowed_domains, Unset):
        values["invite_link_allowed_domains"] = list(
            parse_domains(patch.invite_link_allowed_domains)
        )
    if not isinstance(patch.logo_url, Unset):
        values["logo_url"] = check_logo_url(patch.logo_url)
    if not isinstance(patch.max_active_conversations, Unset):
        values["max_active_conversations"] = check_cap(
            "max_active_conversations", patch.max_active_conversations
        )
    if not isinstance(patch.name, Unset):
        values["name"] = patch.name
    async with ctx.db.transaction(_UNIQUE_VIOLATIONS) as session:
        current = await org_repo.workspace(session, org_id, for_update=True)
        if "name" in values and values["name"] != current.name:
            if await org_repo.find(session, str(values["name"])) is not None:
                raise NameTaken("An organization with this name already exists.")
        await org_repo.change(session, org_id, values)
        await audit.record(
            session,
            ctx,
            org_id=org_id,
            actor=actor,
            action="workspace.update",
            target=org_id,
            details={"fields": sorted(values)},
        )


_UNIQUE_VIOLATIONS = {"uq_organizations_name": NameTaken, "organizations.name": NameTaken}


def parse_allowlist(entries: Sequence[str]) -> tuple[str, ...]:
    """Parse and normalize an allowlist (rule 1), or raise ValidationFailed naming the entry."""
    if len(entries) > MAX_ENTRIES:
        raise ValidationFailed(param_errors={"ip_allowlist": f"at most {MAX_ENTRIES} entries"})
    normalized: list[str] = []
    for index, entry in enumerate(entries):
        try:
            if entry != entry.strip() or len(entry) > 64:
                raise ValueError(entry)
            network = ipaddress.ip_network(entry, strict=True)
        except ValueError:
            raise ValidationFailed(
                param_errors={
                    f"ip_allowlist[{index}]": "must be an IP address or a network in CIDR "
                    "notation with no host bits set (such as 203.0.113.0/24)"
                }
            ) from None
        shown = _shown(network)
        if shown not in normalized:
            normalized.append(shown)
    return tuple(normalized)


def _shown(network: _Network) -> str:
    if network.prefixlen == network.max_prefixlen:
        return str(network.network_address)
    return str(network)


def parse_domains(entries: Sequence[str]) -> tuple[str, ...]:
    """Check the invite domains: lowercase domain names, at most `MAX_ENTRIES`."""
    if len(entries) > MAX_ENTRIES:
        raise ValidationFailed(
            param_errors={"invite_link_allowed_domains": f"at most {MAX_ENTRIES} entries"}
        )
    for index, entry in enumerate(entries):
        if not _DOMAIN.fullmatch(entry):
            raise ValidationFailed(
                param_errors={
                    f"invite_link_allowed_domains[{index}]": "must be a lowercase domain name"
                }
            )
    return tuple(dict.fromkeys(entries))


def check_logo_url(url: str | None) -> str | None:
    """An https URL ending in .png or .svg (the SDK's rule), at most 2,048 characters."""
    if url is None:
        return None
    parts = urlsplit(url)
    if (
        len(url) > 2048
        or parts.scheme != "https"
        or not parts.hostname
        or not parts.path.lower().endswith((".png", ".svg"))
        or any(c.isspace() for c in url)
    ):
        raise ValidationFailed(
            param_errors={"logo_url": "must be an https URL ending in .png or .svg, or null"}
        )
    return url


def check_cap(field: str, cap: int | None) -> int | None:
    """A cap on active conversations: at least 1 (at most `MAX_CAP`), or None for none."""
    if cap is not None and not 1 <= cap <= MAX_CAP:
        raise ValidationFailed(param_errors={field: f"must be from 1 to {MAX_CAP}, or null"})
    return cap
