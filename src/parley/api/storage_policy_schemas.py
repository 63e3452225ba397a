"""Wire models of the external storage policy resource (API.md section 16), beside
api/schemas.py: the official SDK's `ExternalStoragePolicy` and its envelopes.

Types and sizes are checked here; the rules of the fields (names, the endpoint's address,
the bucket) are services/storage_policies.py's. No answer has a member for a credential.
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar

from pydantic import BaseModel, Field, StringConstraints

from parley.api.schemas import Input, ProjectRefOut, Timestamp
from parley.clock import isoformat
from parley.records import AddressingStyle, StoragePolicy, StoragePolicyPatch, StoragePolicySpec
from parley.text import Label

PolicyName = Annotated[Label, StringConstraints(min_length=1, max_length=64)]
EndpointUrl = Annotated[Label, StringConstraints(min_length=1, max_length=2048)]
Bucket = Annotated[Label, StringConstraints(max_length=63)]
Region = Annotated[Label, StringConstraints(max_length=64)]
KeyPrefix = Annotated[Label, StringConstraints(max_length=512)]
Credential = Annotated[Label, StringConstraints(min_length=1, max_length=256)]


class StoragePolicyCreate(Input):
    name: PolicyName = Field(description="snake_case: 1-64 of a-z, 0-9 and _, a letter first.")
    project: Annotated[Label, StringConstraints(max_length=64)] | None = Field(
        default=None, description="Project name or ID; default `main`."
    )
    endpoint_url: EndpointUrl = Field(description="The S3-compatible endpoint: https, public.")
    bucket: Bucket
    region: Region | None = None
    key_prefix: KeyPrefix | None = Field(
        default=None,
        description="Prepended to each object key: `{key_prefix}{conversation_id}.wav`.",
    )
    addressing_style: AddressingStyle | None = Field(
        default=None, description="`path` (the default) or `virtual`."
    )
    access_key_id: Credential = Field(description="Stored encrypted, never returned.")
    secret_access_key: Credential = Field(description="Stored encrypted, never returned.")

    def spec(self) -> StoragePolicySpec:
        return StoragePolicySpec(
            name=self.name,
            endpoint_url=self.endpoint_url,
            bucket=self.bucket,
            region=self.region,
            key_prefix=self.key_prefix,
            addressing_style=self.addressing_style or "path",
            access_key_id=self.access_key_id,
            secret_access_key=self.secret_access_key,
        )


class StoragePolicyUpdate(Input):
    """A partial update: only the fields present change; null clears `region` or
    `key_prefix`. The credentials change together."""

    name: PolicyName | None = None
    endpoint_url: EndpointUrl | None = None
    bucket: Bucket | None = None
    region: Region | None = None
    key_prefix: KeyPrefix | None = None
    addressing_style: AddressingStyle | None = None
    access_key_id: Credential | None = None
    secret_access_key: Credential | None = None

    NULLABLE: ClassVar[frozenset[str]] = frozenset({"region", "key_prefix"})

    def null_fields(self) -> list[str]:
        """Return the fields sent as null that may not be null."""
        return sorted(
            name for name in self.model_fields_set - self.NULLABLE if getattr(self, name) is None
        )

    def patch(self) -> StoragePolicyPatch:
        """The fields sent (null included), as the service's patch."""
        sent: dict[str, Any] = {name: getattr(self, name) for name in self.model_fields_set}
        return StoragePolicyPatch(**sent)


class StoragePolicyCreated(BaseModel):
    """The official SDK's `ExternalStoragePoliciesCreateResponse`."""

    id: str
    name: str


class StoragePolicyOut(BaseModel):
    """The official SDK's `ExternalStoragePolicy`, with the project and times as a tool has
    them; never a credential."""

    id: str
    name: str
    project: ProjectRefOut
    endpoint_url: str
    bucket: str
    region: str | None
    key_prefix: str | None
    addressing_style: AddressingStyle
    agent_count: int
    created_at: Timestamp
    updated_at: Timestamp

    @classmethod
    def of(cls, policy: StoragePolicy) -> StoragePolicyOut:
        return cls(
            id=policy.id,
            name=policy.name,
            project=ProjectRefOut.of(policy.project),
            endpoint_url=policy.endpoint_url,
            bucket=policy.bucket,
            region=policy.region,
            key_prefix=policy.key_prefix,
            addressing_style=policy.addressing_style,
            agent_count=policy.agent_count,
            created_at=isoformat(policy.created_at),
            updated_at=isoformat(policy.updated_at),
        )


class StoragePolicyEnvelope(BaseModel):
    external_storage_policy: StoragePolicyOut


class StoragePolicyList(BaseModel):
    external_storage_policies: list[StoragePolicyOut]
    next_cursor: str | None
