"""GET /v1/conversations/{id} reads the conversation, its agent's name and its items with
one statement, items in order (issue #11: the fast request path)."""

from __future__ import annotations

import pytest
from tests.types import MakeAgent, Tenant

from parley.db.repos import conversations as conversation_repo
from parley.services import Context, conversations

pytestmark = pytest.mark.anyio


async def test_conversation_read_one_statement_items_in_order(
    ctx: Context, tenant: Tenant, make_agent: MakeAgent, statements: list[str]
) -> None:
    agent = await make_agent(tenant)
    created = await tenant.client.post("/v1/conversations", json={"agent": agent["name"]})
    assert created.status_code == 201, created.text
    conversation_id = created.json()["conversation"]["id"]
    said = [("user", "one"), ("assistant", "two"), ("user", "three")]
    for role, text in said:
        await conversations.add_item(
            ctx, org_id=tenant.org.id, conversation_id=conversation_id, role=role, text=text
        )
    assert (await tenant.client.get("/v1/agents")).status_code == 200  # the key is now known
    statements.clear()
    answer = await tenant.client.get(f"/v1/conversations/{conversation_id}")
    assert answer.status_code == 200, answer.text
    body = answer.json()["conversation"]
    assert [(i["role"], i["text"]) for i in body["items"]] == said
    assert body["agent"]["name"] == agent["name"]
    selects = [s for s in statements if s.lstrip().upper().startswith("SELECT")]
    assert len(selects) == 1, selects


async def test_conversation_read_without_items(tenant: Tenant, make_agent: MakeAgent) -> None:
    agent = await make_agent(tenant)
    created = await tenant.client.post("/v1/conversations", json={"agent": agent["name"]})
    conversation_id = created.json()["conversation"]["id"]
    answer = await tenant.client.get(f"/v1/conversations/{conversation_id}")
    assert answer.status_code == 200, answer.text
    assert answer.json()["conversation"]["items"] == []


async def test_authentication_and_conversation_read_need_no_transaction(
    ctx: Context,
    tenant: Tenant,
    make_agent: MakeAgent,
    statements: list[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Issue #11: authentication shares the request's transaction or needs none. A session
    token the process has not seen yet (as in a fleet, where nothing is cached) and the
    conversation are each read by one statement, outside any transaction."""
    agent = await make_agent(tenant)
    created = await tenant.client.post("/v1/conversations", json={"agent": agent["name"]})
    conversation_id = created.json()["conversation"]["id"]
    token = (await tenant.client.post("/v1/auth/session_token")).json()["session_token"]
    # The token's creation changed the organization: its read model (the IP allowlist
    # authentication checks, services/workspace.py) is read again by the next request.
    assert (await tenant.client.get("/v1/agents")).status_code == 200
    opened: list[str] = []
    for kind in ("read", "transaction"):
        real = getattr(ctx.db, kind)

        def counted(*args: object, _kind: str = kind, _real: object = real) -> object:
            opened.append(_kind)
            return _real(*args)  # type: ignore[operator]

        monkeypatch.setattr(ctx.db, kind, counted)
    statements.clear()
    answer = await tenant.client.get(
        f"/v1/conversations/{conversation_id}", headers={"Authorization": f"Bearer {token}"}
    )
    assert answer.status_code == 200, answer.text
    assert opened == []
    assert [s.split()[0].upper() for s in statements] == ["SELECT", "SELECT"], statements


@pytest.mark.parametrize("extra", [0, 1], ids=["short", "long"])
async def test_conversation_read_long_conversation_read_whole_outside_event_loop(
    ctx: Context,
    tenant: Tenant,
    make_agent: MakeAgent,
    monkeypatch: pytest.MonkeyPatch,
    extra: int,
    timer_stopped: None,
) -> None:
    """Up to `ITEMS_IN_A_SHORT_READ` items, SQLite reads the conversation in the event
    loop's thread (`point_read`); one more and it is read whole by `statement()` (a reading
    thread), so a long conversation never holds the loop."""
    agent = await make_agent(tenant)
    created = await tenant.client.post("/v1/conversations", json={"agent": agent["name"]})
    conversation_id = created.json()["conversation"]["id"]
    said = [f"item {n}" for n in range(conversation_repo.ITEMS_IN_A_SHORT_READ + extra)]
    for text in said:
        await conversations.add_item(
            ctx, org_id=tenant.org.id, conversation_id=conversation_id, role="user", text=text
        )
    hops = 0
    real = ctx.db.statement

    def counted() -> object:
        nonlocal hops
        hops += 1
        return real()

    monkeypatch.setattr(ctx.db, "statement", counted)
    answer = await tenant.client.get(f"/v1/conversations/{conversation_id}")
    assert answer.status_code == 200, answer.text
    assert [item["text"] for item in answer.json()["conversation"]["items"]] == said
    if ctx.db.dialect == "sqlite":
        assert hops == extra
