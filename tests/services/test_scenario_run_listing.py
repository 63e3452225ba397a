"""services/scenario_runs.py's reads for the dashboard: a project's latest runs, newest
first; and rule 5, the address a run's caller dials (the API's and the dashboard's)."""

from __future__ import annotations

import pytest

from parley.errors import Forbidden, ProjectNotFound
from parley.services import scenario_runs
from parley.services.context import Context
from tests.types import MakeAgent, Tenant
from tests.web.test_test_runs_pages import app, make_scenarios

__all__ = ["app"]  # an app that starts no runner: the runs stay as queued
pytestmark = pytest.mark.anyio


@pytest.mark.parametrize(
    ("server", "public_url", "dialled"),
    [
        (("127.0.0.1", 8123), "https://voice.example.com", "ws://127.0.0.1:8123"),
        (("::1", 8000), "https://voice.example.com", "ws://[::1]:8000"),
        (None, "https://voice.example.com", "wss://voice.example.com"),
        (("testserver", None), "http://127.0.0.1:8000", "ws://127.0.0.1:8000"),
    ],
    ids=["ipv4", "ipv6-bracketed", "no-socket-public-url", "no-port-public-url"],
)
def test_socket_url_is_the_requests_local_address_else_the_public_url(
    server: tuple[str, int | None] | None, public_url: str, dialled: str
) -> None:
    assert scenario_runs.socket_url(server, public_url=public_url) == dialled


async def test_latest_runs_newest_first_limited(
    tenant: Tenant, make_agent: MakeAgent, ctx: Context
) -> None:
    await make_scenarios(tenant, make_agent)
    made = []
    for _ in range(3):
        queued = await tenant.client.post("/v1/projects/main/test_runs", json={})
        made.append(queued.json()["test_run"]["id"])
    project, runs = await scenario_runs.latest_runs(
        ctx, org_id=tenant.org.id, project="main", limit=2
    )
    assert project.name == "main"
    assert [run.id for run in runs] == [made[2], made[1]]


async def test_latest_runs_of_another_organizations_project_refused(
    tenant: Tenant, other_tenant: Tenant, ctx: Context
) -> None:
    other = (await other_tenant.client.get("/v1/projects/main")).json()["project"]["id"]
    with pytest.raises(Forbidden):
        await scenario_runs.latest_runs(ctx, org_id=tenant.org.id, project=other, limit=10)
    with pytest.raises(ProjectNotFound):
        await scenario_runs.latest_runs(ctx, org_id=tenant.org.id, project="nope", limit=10)
