"""Wire models of a project's settings and of the workspace (API.md section 17, the
official SDK's `ProjectsCreateResponse`, `projects.update`, `WorkspaceGetResponse` and
`workspace.update`)."""

from __future__ import annotations

from typing import Annotated, ClassVar

from pydantic import BaseModel, Field, StringConstraints

from parley.api.schemas import Input, Name, ProjectOut
from parley.records import UNSET, ProjectPatch, WorkspacePatch
from parley.services.workspace import WorkspaceView
from parley.text import Label

Cap = Annotated[
    int | None,
    Field(
        description="Most conversations active at once (at least 1), or null for no cap.",
    ),
]
Entry = Annotated[Label, StringConstraints(min_length=1, max_length=253)]


class ProjectCreatedOut(BaseModel):
    """`POST /v1/projects`: the SDK reads `id` and `name` at the top level."""

    id: str
    name: str
    project: ProjectOut


class ProjectUpdate(Input):
    """A partial update: only the members present change; `null` clears the two that may
    be null."""

    name: Name | None = None
    default_agent: Label | None = Field(
        default=None, description="An agent of the project (name or ID), or null to clear it."
    )
    max_active_conversations: Cap = None

    def null_fields(self) -> list[str]:
        """The members sent as null that may not be null."""
        return [n for n in self.model_fields_set if n == "name" and self.name is None]

    def patch(self) -> ProjectPatch:
        given = self.model_fields_set
        return ProjectPatch(
            name=self.name if "name" in given and self.name is not None else UNSET,
            default_agent=self.default_agent if "default_agent" in given else UNSET,
            max_active_conversations=(
                self.max_active_conversations if "max_active_conversations" in given else UNSET
            ),
        )


class WorkspaceOut(BaseModel):
    """`GET /v1/workspace`: the SDK's members at the top level."""

    id: str
    name: str
    active_conversations: int
    max_active_conversations: int | None
    ip_allowlist: list[str]
    invite_link_allowed_domains: list[str]
    logo_url: str | None

    @classmethod
    def of(cls, view: WorkspaceView) -> WorkspaceOut:
        workspace = view.workspace
        return cls(
            id=workspace.id,
            name=workspace.name,
            active_conversations=view.active_conversations,
            max_active_conversations=workspace.max_active_conversations,
            ip_allowlist=list(workspace.ip_allowlist),
            invite_link_allowed_domains=list(workspace.invite_link_allowed_domains),
            logo_url=workspace.logo_url,
        )


class WorkspaceUpdate(Input):
    """A partial update of the workspace: only the members present change."""

    name: Name | None = None
    max_active_conversations: Cap = None
    ip_allowlist: list[Entry] | None = Field(
        default=None,
        description="IP addresses and CIDR networks allowed to use the API keys; [] for any.",
    )
    invite_link_allowed_domains: list[Entry] | None = None
    logo_url: Annotated[Label, StringConstraints(max_length=2048)] | None = Field(
        default=None, description="An https URL ending in .png or .svg, or null."
    )

    NULLABLE: ClassVar[frozenset[str]] = frozenset({"max_active_conversations", "logo_url"})

    def null_fields(self) -> list[str]:
        """The members sent as null that may not be null."""
        return [
            n for n in self.model_fields_set if getattr(self, n) is None and n not in self.NULLABLE
        ]

    def patch(self) -> WorkspacePatch:
        given = self.model_fields_set
        return WorkspacePatch(
            name=self.name if self.name is not None else UNSET,
            max_active_conversations=(
                self.max_active_conversations if "max_active_conversations" in given else UNSET
            ),
            ip_allowlist=tuple(self.ip_allowlist) if self.ip_allowlist is not None else UNSET,
            invite_link_allowed_domains=(
                tuple(self.invite_link_allowed_domains)
                if self.invite_link_allowed_domains is not None
                else UNSET
            ),
            logo_url=self.logo_url if "logo_url" in given else UNSET,
        )
