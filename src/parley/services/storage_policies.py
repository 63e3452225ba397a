"""External storage policies of a project (API.md section 16): the S3-compatible buckets
that agents' recordings go to.

Rules (each refusal is 400 `validation_error` naming the field):
1. Names are 1-64 characters of `a-z 0-9 _` starting with a lowercase letter (the official
   SDK's snake_case), unique in the project (409 `name_taken`), not shaped like an ID.
2. `endpoint_url` follows the outbound address rules of webhooks and webhook tools
   (`AddressPolicy.static_refusal`: https unless PARLEY_OUTBOUND_ALLOW_HTTP, no literal
   private, loopback or link-local address and no `localhost` unless
   PARLEY_OUTBOUND_ALLOW_PRIVATE_NETWORKS, no credentials in it); it is a base URL, so it
   has no query and no fragment. Creating a policy does not contact the endpoint.
3. `bucket` follows S3's naming rules: 3-63 characters of `a-z 0-9 . -`, starting and
   ending with a letter or digit, no `..`, not shaped like an IPv4 address. `virtual`
   addressing puts the bucket in the host name, so a bucket with a dot cannot use it over
   https (the endpoint's certificate cannot cover the name).
4. `region` is null or 1-64 characters of letters, digits, `-` and `_`; `key_prefix` is
   null or at most 512 characters (an empty string is stored as null, as is an empty
   region). `addressing_style` is `path` (the default) or `virtual`.
5. Both credentials are sealed (`ctx.secrets`) before they are stored, and never returned,
   logged or audited; `policy_store_settings` unseals them for the recording uploader. A
   PATCH changes them only together (the official SDK's rule).
6. A PATCH is checked as the whole policy it makes, as a creation is.
7. Agents store a policy's ID: a renamed policy stays theirs. A policy an agent names
   cannot be deleted (409 `policy_in_use`, naming the agents); the policy's row is locked
   first, as an agent naming it locks it (for share), so neither overtakes the other.
8. Creating, changing and deleting a policy are audited (`external_storage_policy.create`,
   `.update` with the names of the fields sent, `.delete`).
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import fields, replace
from typing import Any, Final, NoReturn
from urllib.parse import urlsplit

from parley.clock import utcnow
from parley.db.repos import projects as project_repo
from parley.db.repos import storage_policies as policy_repo
from parley.db.session import Session
from parley.errors import (
    NameTaken,
    ProjectNotFound,
    StoragePolicyInUse,
    StoragePolicyNotFound,
    ValidationFailed,
)
from parley.ids import looks_like_id, new_id
from parley.outbound import AddressPolicy
from parley.records import (
    Actor,
    Page,
    ProjectRef,
    StoragePolicy,
    StoragePolicyPatch,
    StoragePolicySpec,
    StorageSettings,
    Unset,
)
from parley.services import audit
from parley.services.context import Context
from parley.services.orgs import MAIN_PROJECT
from parley.services.paging import page_of

__all__ = [
    "StorageSettings",
    "check_spec",
    "create_policy",
    "delete_policy",
    "get_policy",
    "list_policies",
    "policy_for_agent",
    "policy_id_named",
    "policy_store_settings",
    "update_policy",
]

NAME: Final = re.compile(r"[a-z][a-z0-9_]{0,63}")
NAME_RULE: Final = (
    "must be 1-64 characters of a-z, 0-9 and '_', start with a lowercase letter, "
    "and not have the shape of an ID"
)
BUCKET: Final = re.compile(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]")
BUCKET_RULE: Final = (
    "must be 3-63 characters of a-z, 0-9, '.' and '-', start and end with a letter or "
    "digit, and not be shaped like an IP address"
)
REGION: Final = re.compile(r"[A-Za-z0-9_-]{1,64}")
MAX_KEY_PREFIX: Final = 512
CREDENTIALS: Final = ("access_key_id", "secret_access_key")
UNIQUE_VIOLATIONS = policy_repo.UNIQUE_VIOLATIONS
_NAME_TAKEN = "An external storage policy with this name already exists in the project."


async def create_policy(
    ctx: Context, *, org_id: str, project: str | None, spec: StoragePolicySpec, actor: Actor
) -> StoragePolicy:
    """Create a policy in a project (default `main`), its credentials sealed."""
    spec = check_spec(spec, ctx.outbound_policy)
    async with ctx.db.transaction(UNIQUE_VIOLATIONS) as session:
        in_project = await project_repo.resolve(session, org_id, project or MAIN_PROJECT)
        if await policy_repo.name_taken(session, in_project.id, spec.name):
            raise NameTaken(_NAME_TAKEN)
        policy = await policy_repo.insert(
            session,
            policy_id=new_id("storage"),
            org_id=org_id,
            project=ProjectRef(id=in_project.id, name=in_project.name),
            spec=spec,
            sealed_access_key_id=ctx.secrets.seal(spec.access_key_id),
            sealed_secret_access_key=ctx.secrets.seal(spec.secret_access_key),
            now=utcnow(ctx.clock),
        )
        await _record(session, ctx, policy, actor, "create", project=in_project.name)
    return policy


async def get_policy(ctx: Context, *, org_id: str, ref: str, project: str | None) -> StoragePolicy:
    """Return the policy named (in `project`, default `main`) or identified by `ref`."""
    async with ctx.db.read() as session:
        return await find_policy(session, org_id, ref, project)


async def list_policies(
    ctx: Context, *, org_id: str, project: str | None, cursor: str | None, limit: int
) -> Page[StoragePolicy]:
    """List the organization's policies, in one project or (`project` empty or None) in all."""
    async with ctx.db.read() as session:
        project_id = None
        if project:
            project_id = (await project_repo.resolve(session, org_id, project)).id
        found = await policy_repo.list_page(
            session, org_id, project_id=project_id, cursor=cursor, limit=limit
        )
    return page_of(found, limit=limit)


async def update_policy(
    ctx: Context,
    *,
    org_id: str,
    ref: str,
    project: str | None,
    patch: StoragePolicyPatch,
    actor: Actor,
) -> None:
    """Apply a partial update, checked as the whole policy it makes (rule 6); new
    credentials are sealed anew (rule 5)."""
    sent = sorted(f.name for f in fields(StoragePolicyPatch) if _is_set(patch, f.name))
    given = [name for name in CREDENTIALS if name in sent]
    if len(given) == 1:
        missing = next(name for name in CREDENTIALS if name not in given)
        _refuse(missing, f"must be sent together with {given[0]}: credentials change together")
    async with ctx.db.transaction(UNIQUE_VIOLATIONS) as session:
        policy = await find_policy(session, org_id, ref, project, for_update=True)
        merged = check_spec(_merge(policy, patch), ctx.outbound_policy, credentials=bool(given))
        changes: dict[str, Any] = {
            column: getattr(merged, column) for column in policy_repo.SETTINGS_COLUMNS
        }
        if given:
            changes["access_key_id_sealed"] = ctx.secrets.seal(merged.access_key_id)
            changes["secret_access_key_sealed"] = ctx.secrets.seal(merged.secret_access_key)
        if merged.name != policy.name and await policy_repo.name_taken(
            session, policy.project.id, merged.name
        ):
            raise NameTaken(_NAME_TAKEN)
        await policy_repo.apply_patch(session, policy.id, changes, now=utcnow(ctx.clock))
        await _record(session, ctx, policy, actor, "update", fields=sent)


async def delete_policy(
    ctx: Context, *, org_id: str, ref: str, project: str | None, actor: Actor
) -> None:
    """Delete a policy; refused with StoragePolicyInUse while an agent names it (rule 7)."""
    async with ctx.db.transaction() as session:
        policy = await find_policy(session, org_id, ref, project, for_update=True)
        users = await policy_repo.agents_naming(session, policy.id)
        if users:
            raise StoragePolicyInUse(
                "Agents name this external storage policy: " + ", ".join(users) + "."
            )
        await _record(session, ctx, policy, actor, "delete")
        await policy_repo.delete_row(session, policy.id)


async def policy_store_settings(
    ctx: Context, org_id: str, policy_id: str
) -> StorageSettings | None:
    """Return what an uploader needs to write to the organization's policy `policy_id`,
    its credentials unsealed; None when there is no such policy (deleted meanwhile)."""
    async with ctx.db.read() as session:
        found = await policy_repo.sealed_credentials(session, org_id, policy_id)
    if found is None:
        return None
    policy, access_key_id, secret_access_key = found
    return StorageSettings(
        policy_id=policy.id,
        endpoint_url=policy.endpoint_url,
        bucket=policy.bucket,
        region=policy.region,
        key_prefix=policy.key_prefix,
        addressing_style=policy.addressing_style,
        access_key_id=ctx.secrets.unseal(access_key_id),
        secret_access_key=ctx.secrets.unseal(secret_access_key),
    )


async def policy_for_agent(session: Session, project_id: str, name: str) -> StoragePolicy:
    """The project's policy an agent names, its row locked for share until the caller's
    transaction ends (rule 7); an unknown name is 400 naming `external_storage_policy`."""
    found = await policy_repo.named_for_agent(session, project_id, name)
    if found is None:
        _unknown(name)
    return found


async def policy_id_named(ctx: Context, *, project_id: str, name: str) -> str:
    """The ID of the project's policy named `name` (a conversation's `config` option); an
    unknown name is 400 naming `external_storage_policy`."""
    async with ctx.db.read() as session:
        found = await policy_repo.id_named(session, project_id, name)
    if found is None:
        _unknown(name)
    return found


async def find_policy(
    session: Session, org_id: str, ref: str, project: str | None, *, for_update: bool = False
) -> StoragePolicy:
    """Find a policy by ID, or by name in `project` (default `main`)."""
    project_id = None
    if not looks_like_id(ref, "storage"):
        try:
            project_id = (await project_repo.resolve(session, org_id, project or MAIN_PROJECT)).id
        except ProjectNotFound:
            raise StoragePolicyNotFound() from None
    return await policy_repo.find(
        session, org_id, ref, project_id=project_id, for_update=for_update
    )


def check_spec(
    spec: StoragePolicySpec, policy: AddressPolicy, *, credentials: bool = True
) -> StoragePolicySpec:
    """Check every field of a policy (rules 1-5; the credentials only with `credentials`);
    return it with empty optionals as None."""
    if not NAME.fullmatch(spec.name) or looks_like_id(spec.name):
        _refuse("name", NAME_RULE)
    if refusal := policy.static_refusal(spec.endpoint_url):
        _refuse("endpoint_url", refusal)
    parts = urlsplit(spec.endpoint_url)
    if parts.query or parts.fragment or spec.endpoint_url.endswith(("?", "#")):
        _refuse("endpoint_url", "must have no query and no fragment: it is the store's base URL")
    if not BUCKET.fullmatch(spec.bucket) or ".." in spec.bucket or _is_ipv4(spec.bucket):
        _refuse("bucket", BUCKET_RULE)
    if spec.addressing_style not in ("path", "virtual"):
        _refuse("addressing_style", "must be path or virtual")
    if spec.addressing_style == "virtual" and "." in spec.bucket and parts.scheme == "https":
        _refuse(
            "addressing_style",
            "virtual addressing puts the bucket in the host name, and an https certificate "
            "cannot cover a bucket name with dots: use path",
        )
    region = spec.region or None
    if region is not None and not REGION.fullmatch(region):
        _refuse("region", "must be 1-64 characters of letters, digits, '-' and '_', or null")
    key_prefix = spec.key_prefix or None
    if key_prefix is not None and len(key_prefix) > MAX_KEY_PREFIX:
        _refuse("key_prefix", f"must be at most {MAX_KEY_PREFIX} characters")
    for name in CREDENTIALS if credentials else ():
        if not getattr(spec, name):
            _refuse(name, "must not be empty")
    return replace(spec, region=region, key_prefix=key_prefix)


def _is_ipv4(bucket: str) -> bool:
    try:
        ipaddress.IPv4Address(bucket)
    except ValueError:
        return False
    return True


def _merge(policy: StoragePolicy, patch: StoragePolicyPatch) -> StoragePolicySpec:
    """The policy a patch would make; credentials not sent are empty here (the stored,
    sealed ones stay as they are)."""
    current: dict[str, Any] = {name: getattr(policy, name) for name in policy_repo.SETTINGS_COLUMNS}
    current |= dict.fromkeys(CREDENTIALS, "")
    changes = {f.name: getattr(patch, f.name) for f in fields(patch) if _is_set(patch, f.name)}
    return StoragePolicySpec(**(current | changes))


def _is_set(patch: StoragePolicyPatch, name: str) -> bool:
    return not isinstance(getattr(patch, name), Unset)


def _unknown(name: str) -> NoReturn:
    _refuse(
        "external_storage_policy",
        f"unknown external storage policy {name!r}: name one of the agent's project",
    )


def _refuse(field: str, message: str) -> NoReturn:
    raise ValidationFailed(param_errors={field: message})


async def _record(
    session: Session,
    ctx: Context,
    policy: StoragePolicy,
    actor: Actor,
    verb: str,
    **details: object,
) -> None:
    """Audit a change (rule 8): the policy's name and non-secret details, never a credential."""
    await audit.record(
        session,
        ctx,
        org_id=policy.org_id,
        actor=actor,
        action=f"external_storage_policy.{verb}",
        target=policy.id,
        details={"name": policy.name, **details},
    )
