"""External storage policies over REST (API.md section 16), on SQLite and PostgreSQL: the
official SDK's shapes, credentials sealed and never shown, `agent_count`, `policy_in_use`,
and the agent field that names a policy."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from sqlalchemy import text
from tests.api.helpers import assert_error
from tests.types import MakeAgent, Tenant

from parley.db.engine import create_engine
from parley.services import Context, storage_policies

pytestmark = pytest.mark.anyio

ACCESS_KEY_ID = "AKIAPARLEYTEST0000001"
SECRET_ACCESS_KEY = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYparleySECRET"
PATH = "/v1/external_storage_policies"
SHOWN = {
    "id",
    "name",
    "project",
    "endpoint_url",
    "bucket",
    "region",
    "key_prefix",
    "addressing_style",
    "agent_count",
    "created_at",
    "updated_at",
}


def policy(name: str = "archive", **fields: Any) -> dict[str, Any]:
    return {
        "name": name,
        "endpoint_url": "https://s3.example.com",
        "bucket": "parley-recordings",
        "access_key_id": ACCESS_KEY_ID,
        "secret_access_key": SECRET_ACCESS_KEY,
        **fields,
    }


async def create(tenant: Tenant, body: dict[str, Any], **params: str) -> dict[str, Any]:
    response = await tenant.client.post(PATH, json=body, params=params or None)
    assert response.status_code == 200, response.text
    created: dict[str, Any] = response.json()
    return created


async def get(tenant: Tenant, ref: str, **params: str) -> dict[str, Any]:
    response = await tenant.client.get(f"{PATH}/{ref}", params=params or None)
    assert response.status_code == 200, response.text
    found: dict[str, Any] = response.json()["external_storage_policy"]
    return found


async def stored_row(database_url: str, policy_id: str) -> dict[str, Any]:
    engine = create_engine(database_url)
    try:
        async with engine.connect() as connection:
            row = (
                await connection.execute(
                    text("SELECT * FROM external_storage_policies WHERE id = :id"),
                    {"id": policy_id},
                )
            ).one()
    finally:
        await engine.dispose()
    return dict(row._mapping)


# --- create and read -------------------------------------------------------------------


async def test_create_storage_policy_answers_200_id_and_name_and_reads_back(
    tenant: Tenant,
) -> None:
    created = await create(tenant, policy())

    assert set(created) == {"id", "name"}
    assert created["id"].startswith("storage_")
    assert created["name"] == "archive"
    shown = await get(tenant, "archive")
    assert set(shown) == SHOWN
    assert shown["id"] == created["id"]
    assert shown["project"]["name"] == "main"
    assert (shown["endpoint_url"], shown["bucket"]) == (
        "https://s3.example.com",
        "parley-recordings",
    )
    assert (shown["region"], shown["key_prefix"]) == (None, None)
    assert shown["addressing_style"] == "path"  # the default (docs/decisions.md)
    assert shown["agent_count"] == 0
    assert await get(tenant, created["id"]) == shown


async def test_storage_policy_credentials_never_in_an_answer(tenant: Tenant) -> None:
    created = await tenant.client.post(
        PATH, json=policy(region="eu-west-1", key_prefix="calls/", addressing_style="virtual")
    )
    answers = [
        created,
        await tenant.client.get(f"{PATH}/archive"),
        await tenant.client.get(PATH),
        await tenant.client.patch(f"{PATH}/archive", json={"region": "eu-central-1"}),
        await tenant.client.get(f"{PATH}/archive"),
    ]
    for answer in answers:
        assert answer.status_code == 200, answer.text
        assert ACCESS_KEY_ID not in answer.text
        assert SECRET_ACCESS_KEY not in answer.text
        assert "access_key" not in answer.text
    shown = answers[-1].json()["external_storage_policy"]
    assert (shown["region"], shown["key_prefix"], shown["addressing_style"]) == (
        "eu-central-1",
        "calls/",
        "virtual",
    )


async def test_storage_policy_credentials_stored_sealed_and_unsealed_for_the_uploader(
    tenant: Tenant, ctx: Context, database_url: str
) -> None:
    created = await create(tenant, policy(key_prefix="calls/"))
    row = await stored_row(database_url, created["id"])
    for column in ("access_key_id_sealed", "secret_access_key_sealed"):
        assert row[column]
        assert ACCESS_KEY_ID not in row[column]
        assert SECRET_ACCESS_KEY not in row[column]
    assert ACCESS_KEY_ID not in str(row)
    assert SECRET_ACCESS_KEY not in str(row)

    settings = await storage_policies.policy_store_settings(ctx, tenant.org.id, created["id"])

    assert settings is not None
    assert settings.policy_id == created["id"]
    assert (settings.endpoint_url, settings.bucket) == (
        "https://s3.example.com",
        "parley-recordings",
    )
    assert (settings.region, settings.key_prefix, settings.addressing_style) == (
        None,
        "calls/",
        "path",
    )
    assert (settings.access_key_id, settings.secret_access_key) == (
        ACCESS_KEY_ID,
        SECRET_ACCESS_KEY,
    )
    assert SECRET_ACCESS_KEY not in repr(settings)
    assert await storage_policies.policy_store_settings(ctx, "org_other", created["id"]) is None


async def test_update_storage_policy_credentials_sealed_anew(
    tenant: Tenant, ctx: Context, database_url: str
) -> None:
    created = await create(tenant, policy())
    before = await stored_row(database_url, created["id"])
    response = await tenant.client.patch(
        f"{PATH}/archive",
        json={"access_key_id": "AKIAROTATED000000002", "secret_access_key": "rotated-secret-2"},
    )
    assert response.json() == {"success": True}
    after = await stored_row(database_url, created["id"])
    assert after["secret_access_key_sealed"] != before["secret_access_key_sealed"]
    assert "rotated-secret-2" not in str(after)
    settings = await storage_policies.policy_store_settings(ctx, tenant.org.id, created["id"])
    assert settings is not None
    assert (settings.access_key_id, settings.secret_access_key) == (
        "AKIAROTATED000000002",
        "rotated-secret-2",
    )


async def test_list_storage_policies_in_project_with_agent_counts_in_one_statement(
    tenant: Tenant, make_agent: MakeAgent, statements: list[str]
) -> None:
    await tenant.client.post("/v1/projects", json={"name": "other"})
    await create(tenant, policy("first"))
    await create(tenant, policy("second"))
    await create(tenant, policy("elsewhere"), project="other")
    for _ in range(2):
        await make_agent(tenant, external_storage_policy="second")
    await make_agent(tenant, external_storage_policy="first")

    statements.clear()
    listed = (await tenant.client.get(PATH, params={"project": "main"})).json()
    reads = [s for s in statements if "external_storage_policies" in s]

    assert set(listed) == {"external_storage_policies", "next_cursor"}
    assert [(p["name"], p["agent_count"]) for p in listed["external_storage_policies"]] == [
        ("first", 1),
        ("second", 2),
    ]
    assert len(reads) == 1, reads  # the counts in the page's statement: no query per policy
    every = (await tenant.client.get(PATH)).json()["external_storage_policies"]
    assert [p["name"] for p in every] == ["first", "second", "elsewhere"]
    assert (await get(tenant, "second"))["agent_count"] == 2


# --- the rules of the fields ----------------------------------------------------------------

REFUSED = [
    ({"name": "Archive"}, "name"),
    ({"name": "1archive"}, "name"),
    ({"name": "my-archive"}, "name"),
    ({"name": "a" * 65}, "name"),
    ({"name": "storage_" + "0" * 32}, "name"),
    ({"bucket": "ab"}, "bucket"),
    ({"bucket": "b" * 64}, "bucket"),
    ({"bucket": "Parley"}, "bucket"),
    ({"bucket": "parley_recordings"}, "bucket"),
    ({"bucket": "-parley"}, "bucket"),
    ({"bucket": "parley..recordings"}, "bucket"),
    ({"bucket": "192.168.1.1"}, "bucket"),
    ({"addressing_style": "auto"}, "addressing_style"),
    ({"addressing_style": "virtual", "bucket": "parley.recordings"}, "addressing_style"),
    ({"region": "eu west"}, "region"),
    ({"key_prefix": "k" * 513}, "key_prefix"),
    ({"endpoint_url": "https://s3.example.com/?x=1"}, "endpoint_url"),
    ({"endpoint_url": "https://key:secret@s3.example.com"}, "endpoint_url"),
    ({"endpoint_url": "ftp://s3.example.com"}, "endpoint_url"),
    ({"access_key_id": ""}, "access_key_id"),
    ({"secret_access_key": None}, "secret_access_key"),
    ({"secret_access_key": "a\nb"}, "secret_access_key"),
    ({"unknown": 1}, "unknown"),
]


async def test_create_storage_policy_field_rules_400_naming_the_field(tenant: Tenant) -> None:
    for change, field in REFUSED:
        response = await tenant.client.post(PATH, json=policy() | change)
        body = assert_error(response, 400, "validation_error")
        assert set(body["param_errors"]) == {field}, (change, body)
        assert SECRET_ACCESS_KEY not in response.text
    assert (await tenant.client.get(PATH)).json()["external_storage_policies"] == []


async def test_create_storage_policy_empty_region_and_prefix_stored_as_null(
    tenant: Tenant,
) -> None:
    await create(tenant, policy(region="", key_prefix="", addressing_style=None))
    shown = await get(tenant, "archive")
    assert (shown["region"], shown["key_prefix"], shown["addressing_style"]) == (None, None, "path")


async def test_create_storage_policy_name_taken_409_unknown_project_404(tenant: Tenant) -> None:
    await create(tenant, policy())
    assert_error(await tenant.client.post(PATH, json=policy()), 409, "name_taken")
    assert_error(
        await tenant.client.post(PATH, json=policy(), params={"project": "nowhere"}),
        404,
        "project_not_found",
    )


# --- errors of every route ------------------------------------------------------------------


async def test_storage_policy_routes_without_credential_401(
    client: httpx.AsyncClient, tenant: Tenant
) -> None:
    await create(tenant, policy())
    answers = [
        await client.get(PATH),
        await client.post(PATH, json=policy("other")),
        await client.get(f"{PATH}/archive"),
        await client.patch(f"{PATH}/archive", json={"bucket": "abc"}),
        await client.delete(f"{PATH}/archive"),
    ]
    for answer in answers:
        assert_error(answer, 401, "unauthorized")
        assert answer.headers["www-authenticate"] == "Bearer"
    assert (await get(tenant, "archive"))["bucket"] == "parley-recordings"


async def test_storage_policy_not_found_404_and_another_organizations_403(
    tenant: Tenant, other_tenant: Tenant
) -> None:
    theirs = await create(other_tenant, policy())
    missing = "storage_" + "0" * 32
    for ref in ("archive", missing):
        assert_error(
            await tenant.client.get(f"{PATH}/{ref}"), 404, "external_storage_policy_not_found"
        )
        assert_error(
            await tenant.client.patch(f"{PATH}/{ref}", json={"bucket": "abc"}),
            404,
            "external_storage_policy_not_found",
        )
        assert_error(
            await tenant.client.delete(f"{PATH}/{ref}"), 404, "external_storage_policy_not_found"
        )
    assert_error(
        await tenant.client.get(f"{PATH}/archive", params={"project": "nowhere"}),
        404,
        "external_storage_policy_not_found",
    )
    assert_error(await tenant.client.get(f"{PATH}/{theirs['id']}"), 403, "forbidden")
    assert_error(await tenant.client.delete(f"{PATH}/{theirs['id']}"), 403, "forbidden")
    assert_error(
        await tenant.client.get(PATH, params={"project": "nowhere"}), 404, "project_not_found"
    )


# --- update -----------------------------------------------------------------------------------


async def test_update_storage_policy_partial_and_checked_as_a_whole(tenant: Tenant) -> None:
    await create(tenant, policy(region="us-east-1", key_prefix="calls/"))

    changed = await tenant.client.patch(
        f"{PATH}/archive", json={"bucket": "other-bucket", "region": None}
    )

    assert changed.json() == {"success": True}
    shown = await get(tenant, "archive")
    assert (shown["bucket"], shown["region"], shown["key_prefix"]) == (
        "other-bucket",
        None,
        "calls/",
    )
    refusals = [
        ({"name": None}, "name", "may not be null"),
        ({"access_key_id": "AKIAONLYONE"}, "secret_access_key", "together"),
        ({"secret_access_key": "only-one"}, "access_key_id", "together"),
        ({"bucket": "a.b", "addressing_style": "virtual"}, "addressing_style", "dots"),
        ({"endpoint_url": "http://s3.example.com"}, "endpoint_url", "PARLEY_OUTBOUND_ALLOW_HTTP"),
    ]
    for change, field, words in refusals:
        body = assert_error(
            await tenant.client.patch(f"{PATH}/archive", json=change), 400, "validation_error"
        )
        assert words in body["param_errors"][field], body
    assert await get(tenant, "archive") == shown


async def test_update_storage_policy_rename_keeps_its_agents(
    tenant: Tenant, make_agent: MakeAgent
) -> None:
    await create(tenant, policy())
    await create(tenant, policy("spare"))
    agent = await make_agent(tenant, external_storage_policy="archive")

    assert_error(
        await tenant.client.patch(f"{PATH}/archive", json={"name": "spare"}), 409, "name_taken"
    )
    renamed = await tenant.client.patch(f"{PATH}/archive", json={"name": "vault"})

    assert renamed.json() == {"success": True}
    again = (await tenant.client.get(f"/v1/agents/{agent['id']}")).json()["agent"]
    assert again["external_storage_policy"] == "vault"
    assert (await get(tenant, "vault"))["agent_count"] == 1


# --- delete -----------------------------------------------------------------------------------


async def test_delete_storage_policy_an_agent_names_409_policy_in_use(
    tenant: Tenant, make_agent: MakeAgent
) -> None:
    await create(tenant, policy())
    agent = await make_agent(tenant, external_storage_policy="archive")

    body = assert_error(await tenant.client.delete(f"{PATH}/archive"), 409, "policy_in_use")
    assert agent["name"] in body["error"]["message"]

    await tenant.client.patch(f"/v1/agents/{agent['id']}", json={"external_storage_policy": None})
    assert (await tenant.client.delete(f"{PATH}/archive")).json() == {"success": True}
    assert_error(
        await tenant.client.get(f"{PATH}/archive"), 404, "external_storage_policy_not_found"
    )


async def test_storage_policy_changes_audited_without_credentials(tenant: Tenant) -> None:
    created = await create(tenant, policy())
    await tenant.client.patch(
        f"{PATH}/archive", json={"access_key_id": "AKIANEW", "secret_access_key": "new-secret"}
    )
    await tenant.client.delete(f"{PATH}/archive")

    answer = await tenant.client.get("/v1/audit_events", params={"target": created["id"]})

    events = sorted(answer.json()["audit_events"], key=lambda event: event["seq"])
    assert [e["action"] for e in events] == [
        "external_storage_policy.create",
        "external_storage_policy.update",
        "external_storage_policy.delete",
    ]
    assert events[1]["details"]["fields"] == ["access_key_id", "secret_access_key"]
    for secret in (ACCESS_KEY_ID, SECRET_ACCESS_KEY, "AKIANEW", "new-secret"):
        assert secret not in answer.text


# --- the agent field --------------------------------------------------------------------------


async def test_agent_external_storage_policy_round_trip(
    tenant: Tenant, make_agent: MakeAgent
) -> None:
    await create(tenant, policy())
    await create(tenant, policy("vault"))
    plain = await make_agent(tenant)
    assert plain["external_storage_policy"] is None

    agent = await make_agent(tenant, external_storage_policy="archive")
    assert agent["external_storage_policy"] == "archive"
    listed = (await tenant.client.get("/v1/agents")).json()["agents"]
    assert {a["name"]: a["external_storage_policy"] for a in listed} == {
        plain["name"]: None,
        agent["name"]: "archive",
    }
    moved = await tenant.client.patch(
        f"/v1/agents/{agent['id']}", json={"external_storage_policy": "vault"}
    )
    assert moved.json()["agent"]["external_storage_policy"] == "vault"
    untouched = await tenant.client.patch(
        f"/v1/agents/{agent['id']}", json={"system_prompt": "Be kind."}
    )
    assert untouched.json()["agent"]["external_storage_policy"] == "vault"
    cleared = await tenant.client.patch(
        f"/v1/agents/{agent['id']}", json={"external_storage_policy": None}
    )
    assert cleared.json()["agent"]["external_storage_policy"] is None
    got = (await tenant.client.get(f"/v1/agents/{agent['id']}")).json()["agent"]
    assert got["external_storage_policy"] is None
    assert [
        (p["name"], p["agent_count"])
        for p in (await tenant.client.get(PATH)).json()["external_storage_policies"]
    ] == [("archive", 0), ("vault", 0)]


async def test_agent_external_storage_policy_unknown_or_other_project_400_naming_field(
    tenant: Tenant, make_agent: MakeAgent
) -> None:
    await tenant.client.post("/v1/projects", json={"name": "other"})
    await create(tenant, policy("elsewhere"), project="other")
    agent = await make_agent(tenant)
    for name in ("nowhere", "elsewhere"):
        created = await tenant.client.post(
            "/v1/agents", json={"name": "stored", "external_storage_policy": name}
        )
        body = assert_error(created, 400, "validation_error")
        assert set(body["param_errors"]) == {"external_storage_policy"}
        patched = await tenant.client.patch(
            f"/v1/agents/{agent['id']}", json={"external_storage_policy": name}
        )
        body = assert_error(patched, 400, "validation_error")
        assert set(body["param_errors"]) == {"external_storage_policy"}
    assert_error(await tenant.client.get("/v1/agents/stored"), 404, "agent_not_found")
    assert (await get(tenant, "elsewhere", project="other"))["agent_count"] == 0
