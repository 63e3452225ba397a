"""Protocol types of the factory fixtures."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

import httpx

from parley.records import Organization


@dataclass(frozen=True)
class Tenant:
    """An organization as a test sees it: the record, its API key and a client using it."""

    org: Organization
    api_key: str
    client: httpx.AsyncClient

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.api_key}"}


class MakeTenant(Protocol):
    async def __call__(self, name: str | None = None) -> Tenant: ...


class MakeAgent(Protocol):
    async def __call__(self, tenant: Tenant, **fields: Any) -> dict[str, Any]: ...
