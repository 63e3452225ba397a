"""Projects over HTTP (API.md section 3)."""

from __future__ import annotations

import pytest
from tests.api.helpers import assert_error
from tests.types import MakeAgent, Tenant

pytestmark = pytest.mark.anyio


async def test_new_org_has_main_project(tenant: Tenant) -> None:
    body = (await tenant.client.get("/v1/projects")).json()
    assert [p["name"] for p in body["projects"]] == ["main"]
    assert body["projects"][0]["id"].startswith("proj_")


async def test_create_and_get_project_by_name_and_id(tenant: Tenant) -> None:
    created = await tenant.client.post("/v1/projects", json={"name": "sales"})
    assert created.status_code == 201
    project = created.json()["project"]
    assert set(project) == {
        "id",
        "name",
        "default_agent",
        "active_conversations",
        "max_active_conversations",
        "created_at",
    }
    assert (await tenant.client.get("/v1/projects/sales")).json() == {"project": project}
    assert (await tenant.client.get(f"/v1/projects/{project['id']}")).json() == {"project": project}


async def test_create_project_name_taken_409(tenant: Tenant) -> None:
    assert_error(await tenant.client.post("/v1/projects", json={"name": "main"}), 409, "name_taken")


@pytest.mark.parametrize(
    "name", ["", "Bad", "proj_" + "1" * 32, "x" * 65], ids=["empty", "upper", "id-shape", "long"]
)
async def test_create_project_invalid_name_400(tenant: Tenant, name: str) -> None:
    response = await tenant.client.post("/v1/projects", json={"name": name})
    assert "name" in assert_error(response, 400, "validation_error")["param_errors"]


async def test_delete_main_project_409(tenant: Tenant) -> None:
    assert_error(await tenant.client.delete("/v1/projects/main"), 409, "project_protected")


async def test_delete_project_with_agents_409(tenant: Tenant, make_agent: MakeAgent) -> None:
    await tenant.client.post("/v1/projects", json={"name": "busy"})
    await make_agent(tenant, project="busy")
    assert_error(await tenant.client.delete("/v1/projects/busy"), 409, "project_not_empty")


async def test_delete_empty_project_succeeds(tenant: Tenant) -> None:
    await tenant.client.post("/v1/projects", json={"name": "empty"})
    assert (await tenant.client.delete("/v1/projects/empty")).json() == {"success": True}
    assert_error(await tenant.client.get("/v1/projects/empty"), 404, "project_not_found")


async def test_project_of_other_org_by_id_403(tenant: Tenant, other_tenant: Tenant) -> None:
    theirs = (await other_tenant.client.post("/v1/projects", json={"name": "x"})).json()["project"]
    assert_error(await tenant.client.get(f"/v1/projects/{theirs['id']}"), 403, "forbidden")
    assert_error(await tenant.client.delete(f"/v1/projects/{theirs['id']}"), 403, "forbidden")


async def test_agents_query_with_other_orgs_project_id_403(
    tenant: Tenant, other_tenant: Tenant
) -> None:
    theirs = (await other_tenant.client.post("/v1/projects", json={"name": "x"})).json()["project"]
    response = await tenant.client.get("/v1/agents", params={"project": theirs["id"]})
    assert_error(response, 403, "forbidden")
