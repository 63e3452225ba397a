"""JWT settings per organization, registered issuers, and the stored JWKS copy."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import delete, select
from sqlalchemy.ext.asyncio import AsyncSession

from parley.db.tables import JwtConfigRow, JwtIssuerRow
from parley.errors import IssuerTaken
from parley.records import JwtConfig

UNIQUE_VIOLATIONS = {"pk_jwt_issuers": IssuerTaken, "jwt_issuers.issuer": IssuerTaken}


def to_record(row: JwtConfigRow) -> JwtConfig:
    return JwtConfig(
        org_id=row.org_id,
        audience=row.audience,
        jwks_url=row.jwks_url,
        static_keys=tuple(row.static_keys),
        require_jti=row.require_jti,
        jwks_document=row.jwks_document,
        jwks_document_url=row.jwks_document_url,
        jwks_fetched_at=row.jwks_fetched_at,
        jwks_max_age=row.jwks_max_age,
        jwks_error=row.jwks_error,
    )


async def get(session: AsyncSession, org_id: str) -> JwtConfig | None:
    row = await _row(session, org_id)
    return to_record(row) if row is not None else None


async def _row(session: AsyncSession, org_id: str) -> JwtConfigRow | None:
    return await session.get(JwtConfigRow, org_id, populate_existing=True)


async def issuers_of(session: AsyncSession, org_id: str) -> list[str]:
    rows = await session.scalars(
        select(JwtIssuerRow.issuer)
        .where(JwtIssuerRow.org_id == org_id)
        .order_by(JwtIssuerRow.issuer)
    )
    return list(rows)


async def org_of_issuer(session: AsyncSession, issuer: str) -> str | None:
    """Return the organization that registered `issuer` (exact match), or None."""
    return await session.scalar(select(JwtIssuerRow.org_id).where(JwtIssuerRow.issuer == issuer))


async def issuers_taken_elsewhere(
    session: AsyncSession, issuers: Sequence[str], org_id: str
) -> list[str]:
    rows = await session.scalars(
        select(JwtIssuerRow.issuer).where(
            JwtIssuerRow.issuer.in_(issuers), JwtIssuerRow.org_id != org_id
        )
    )
    return sorted(rows)


async def replace(
    session: AsyncSession,
    *,
    org_id: str,
    issuers: Sequence[str],
    audience: str,
    jwks_url: str | None,
    static_keys: Sequence[Mapping[str, str]],
    require_jti: bool,
    jwks_document: Mapping[str, Any] | None,
    jwks_fetched_at: float | None,
    jwks_max_age: int | None,
    now: datetime,
) -> None:
    """Store the whole configuration of an organization, replacing what was there."""
    await session.execute(delete(JwtIssuerRow).where(JwtIssuerRow.org_id == org_id))
    await session.flush()
    session.add_all(JwtIssuerRow(issuer=issuer, org_id=org_id) for issuer in issuers)
    row = await _row(session, org_id)
    if row is None:
        row = JwtConfigRow(org_id=org_id)
        session.add(row)
    row.audience = audience
    row.jwks_url = jwks_url
    row.static_keys = [dict(key) for key in static_keys]
    row.require_jti = require_jti
    row.jwks_document = dict(jwks_document) if jwks_document is not None else None
    row.jwks_document_url = jwks_url if jwks_document is not None else None
    row.jwks_fetched_at = jwks_fetched_at
    row.jwks_max_age = jwks_max_age
    row.jwks_error = None
    row.updated_at = now
    await session.flush()


async def save_jwks(
    session: AsyncSession,
    org_id: str,
    *,
    url: str,
    document: Mapping[str, Any],
    fetched_at: float,
    max_age: int,
) -> None:
    """Store a good JWKS fetch, if the organization still uses that URL."""
    row = await _row(session, org_id)
    if row is None or row.jwks_url != url:
        return
    row.jwks_document = dict(document)
    row.jwks_document_url = url
    row.jwks_fetched_at = fetched_at
    row.jwks_max_age = max_age
    row.jwks_error = None
    await session.flush()


async def save_jwks_error(session: AsyncSession, org_id: str, *, url: str, error: str) -> None:
    row = await _row(session, org_id)
    if row is None or row.jwks_url != url:
        return
    row.jwks_error = error
    await session.flush()
