"""The dashboard's extraction schemas and evaluation prompts pages (API.md section 16) over
the real app: list every project's, create, edit and delete a schema with the fields editor,
create a prompt; refused forms kept; the audit trail's actor is the dashboard's; CSRF."""

from __future__ import annotations

from typing import Any

import pytest

from tests.api.analysis_helpers import APPOINTMENT, create_prompt, create_schema
from tests.types import MakeAgent, Tenant
from tests.web.helpers import Browser, csrf_of, form_values, text_of

pytestmark = pytest.mark.anyio

SCHEMAS = "/dashboard/extraction-schemas"
PROMPTS = "/dashboard/eval-prompts"


async def signed_in(browser: Browser, tenant: Tenant) -> Browser:
    response = await browser.sign_in(tenant.api_key)
    assert response.status_code == 303, response.text
    return browser


def schema_form(
    rows: list[tuple[str, str, str]], *, blank_rows: int = 3, **fields: str
) -> dict[str, Any]:
    """The create form as a browser posts it: the rows, then the blank rows it drew."""
    drawn = rows + [("", "string", "")] * blank_rows
    return {
        "project": "main",
        "name": "Booking",
        "prompt": "Dates as 9 Apr 2025.",
        "field_name": [name for name, _, _ in drawn],
        "field_type": [kind for _, kind, _ in drawn],
        "field_description": [description for _, _, description in drawn],
        **fields,
    }


async def schemas_of(tenant: Tenant) -> list[dict[str, Any]]:
    listed: list[dict[str, Any]] = (await tenant.client.get("/v1/extraction_schemas")).json()[
        "extraction_schemas"
    ]
    return listed


async def audited(tenant: Tenant, action: str) -> list[tuple[str, str | None]]:
    response = await tenant.client.get("/v1/audit_events", params={"action": action})
    return [(e["actor"]["kind"], e["actor"]["id"]) for e in response.json()["audit_events"]]


# --- extraction schemas -----------------------------------------------------------------


async def test_schemas_page_lists_every_projects_schemas_fields_and_users(
    tenant: Tenant, browser: Browser, make_agent: MakeAgent
) -> None:
    await create_schema(tenant)
    assert (await tenant.client.post("/v1/projects", json={"name": "sales"})).status_code == 201
    other = {"name": "Lead", "prompt": "", "fields": [{"name": "budget", "type": "float"}]}
    made = await tenant.client.post("/v1/extraction_schemas?project=sales", json=other)
    assert made.status_code == 200, made.text
    agent = await make_agent(tenant, name="front", extraction_schemas=["Appointment details"])
    await signed_in(browser, tenant)

    page = await browser.http.get(SCHEMAS)

    assert page.status_code == 200
    rows = text_of(page.text, "extraction-schemas")
    assert "Appointment details" in rows
    assert "Guests int" in rows
    assert "Confirmed as booked bool" in rows
    assert "Lead" in rows
    assert "sales" in rows
    assert f'<a href="/dashboard/agents/{agent["id"]}">front</a>' in page.text
    nav = page.text[page.text.index("<nav>") : page.text.index("</nav>")]
    assert f'<a href="{SCHEMAS}" title="Extraction schemas">Schemas</a>' in nav
    assert f'<a href="{PROMPTS}" title="Evaluation prompts">Evals</a>' in nav


async def test_create_schema_from_rows_blank_ones_ignored_audited_as_the_dashboard(
    tenant: Tenant, browser: Browser
) -> None:
    await signed_in(browser, tenant)
    rows = [("Date", "string", " The day "), ("Guests", "int", ""), ("Vegan", "bool", "")]

    response = await browser.post(SCHEMAS, schema_form(rows))

    assert response.status_code == 303, response.text
    [schema] = await schemas_of(tenant)
    assert response.headers["location"] == f"{SCHEMAS}/{schema['id']}?done=schema_created"
    assert (schema["name"], schema["prompt"]) == ("Booking", "Dates as 9 Apr 2025.")
    assert schema["fields"] == [
        {"name": "Date", "type": "string", "description": "The day"},
        {"name": "Guests", "type": "int", "description": None},
        {"name": "Vegan", "type": "bool", "description": None},
    ]
    [(kind, key_id)] = await audited(tenant, "extraction_schema.create")
    assert kind == "dashboard"
    assert key_id is not None
    page = await browser.http.get(response.headers["location"])
    assert "Extraction schema created." in page.text
    drawn = form_values(page.text, "edit-schema")  # the rows, then three blank ones
    assert drawn["field_name"] == "Date,Guests,Vegan,,,"
    assert drawn["field_type"] == "string,int,bool,string,string,string"


@pytest.mark.parametrize(
    ("rows", "problem"),
    [
        ([], "the schema must hold 1 to 50 fields"),
        ([("Date", "string", ""), ("Date", "int", "")], "field 2: repeats the field 'Date'"),
        ([("Date", "date", "")], "field 1: the type must be one of string, int, float, bool"),
        ([("", "string", "a description without a name")], "field 1: must be 1-64 characters"),
    ],
    ids=["no-field", "repeated-name", "unknown-type", "description-without-name"],
)
async def test_create_schema_bad_fields_400_beside_the_editor_typed_rows_kept(
    tenant: Tenant, browser: Browser, rows: list[tuple[str, str, str]], problem: str
) -> None:
    await signed_in(browser, tenant)

    response = await browser.post(SCHEMAS, schema_form(rows, name="Kept name"))

    assert response.status_code == 400, response.text
    assert text_of(response.text, "create-schema-field_name-error").startswith(problem)
    kept = form_values(response.text, "create-schema")
    assert kept["name"] == "Kept name"
    assert kept["prompt"] == "Dates as 9 Apr 2025."
    assert kept["field_name"].split(",")[: len(rows)] == [name for name, _, _ in rows]
    assert await schemas_of(tenant) == []


async def test_create_schema_more_than_50_fields_refused(tenant: Tenant, browser: Browser) -> None:
    await signed_in(browser, tenant)
    rows = [(f"f{n}", "string", "") for n in range(51)]

    response = await browser.post(SCHEMAS, schema_form(rows, blank_rows=0))

    assert response.status_code == 400
    problem = text_of(response.text, "create-schema-field_name-error")
    assert problem == "the schema must hold 1 to 50 fields"
    assert await schemas_of(tenant) == []


async def test_create_schema_name_taken_409_unknown_project_404_form_kept(
    tenant: Tenant, browser: Browser
) -> None:
    await create_schema(tenant)
    await signed_in(browser, tenant)
    rows = [("Date", "string", "")]

    taken = await browser.post(SCHEMAS, schema_form(rows, name=str(APPOINTMENT["name"])))
    unknown = await browser.post(SCHEMAS, schema_form(rows, project="nowhere"))

    assert taken.status_code == 409
    assert "name_taken" in text_of(taken.text, "create-schema-error")
    assert unknown.status_code == 404
    assert "project_not_found" in text_of(unknown.text, "create-schema-error")
    assert form_values(unknown.text, "create-schema")["project"] == "nowhere"
    assert [s["name"] for s in await schemas_of(tenant)] == ["Appointment details"]


async def test_edit_schema_saves_fields_and_name_renamed_in_agents(
    tenant: Tenant, browser: Browser, make_agent: MakeAgent
) -> None:
    schema = await create_schema(tenant)
    agent = await make_agent(tenant, extraction_schemas=["Appointment details"])
    await signed_in(browser, tenant)
    page = await browser.http.get(f"{SCHEMAS}/{schema['id']}")
    assert page.status_code == 200
    assert text_of(page.text, "used-by") == agent["name"]
    rows = [("Date", "string", "The date"), ("Party size", "int", "")]

    response = await browser.http.post(
        f"{SCHEMAS}/{schema['id']}",
        data={"csrf_token": csrf_of(page.text), **schema_form(rows, name="Booking details")},
    )

    assert response.status_code == 303, response.text
    assert response.headers["location"] == f"{SCHEMAS}/{schema['id']}?done=schema_updated"
    [saved] = await schemas_of(tenant)
    assert saved["name"] == "Booking details"
    assert [f["name"] for f in saved["fields"]] == ["Date", "Party size"]
    shown = (await tenant.client.get(f"/v1/agents/{agent['id']}")).json()["agent"]
    assert shown["extraction_schemas"] == ["Booking details"]
    assert [kind for kind, _ in await audited(tenant, "extraction_schema.update")] == ["dashboard"]


async def test_edit_schema_bad_fields_400_schema_unchanged(
    tenant: Tenant, browser: Browser
) -> None:
    schema = await create_schema(tenant)
    await signed_in(browser, tenant)

    response = await browser.post(
        f"{SCHEMAS}/{schema['id']}", schema_form([("A", "int", ""), ("A", "bool", "")])
    )

    assert response.status_code == 400
    assert "field 2: repeats" in text_of(response.text, "edit-schema-field_name-error")
    assert f"<h1>{APPOINTMENT['name']}</h1>" in response.text  # the schema's page
    [unchanged] = await schemas_of(tenant)
    assert unchanged["name"] == "Appointment details"
    assert len(unchanged["fields"]) == 4


async def test_delete_schema_in_use_409_names_the_agent_then_deleted(
    tenant: Tenant, browser: Browser, make_agent: MakeAgent
) -> None:
    schema = await create_schema(tenant)
    agent = await make_agent(tenant, name="front", extraction_schemas=["Appointment details"])
    await signed_in(browser, tenant)

    refused = await browser.post(f"{SCHEMAS}/{schema['id']}/delete")

    assert refused.status_code == 409
    assert "schema_in_use" in text_of(refused.text, "delete-schema-error")
    assert "front" in text_of(refused.text, "delete-schema-error")
    assert len(await schemas_of(tenant)) == 1

    await tenant.client.patch(f"/v1/agents/{agent['id']}", json={"extraction_schemas": []})
    deleted = await browser.post(f"{SCHEMAS}/{schema['id']}/delete")

    assert deleted.status_code == 303
    assert deleted.headers["location"] == f"{SCHEMAS}?done=schema_deleted"
    assert await schemas_of(tenant) == []
    assert [kind for kind, _ in await audited(tenant, "extraction_schema.delete")] == ["dashboard"]


async def test_other_org_schema_by_id_403_shows_nothing_changes_nothing(
    tenant: Tenant, other_tenant: Tenant, browser: Browser
) -> None:
    theirs = await create_schema(other_tenant)
    await signed_in(browser, tenant)
    token = csrf_of((await browser.http.get(SCHEMAS)).text)
    path = f"{SCHEMAS}/{theirs['id']}"

    responses = [
        await browser.http.get(path),
        await browser.http.post(
            path, data={"csrf_token": token, **schema_form([("x", "int", "")], name="Taken")}
        ),
        await browser.http.post(f"{path}/delete", data={"csrf_token": token}),
    ]

    assert [r.status_code for r in responses] == [403, 403, 403]
    for response in responses:
        assert "Appointment details" not in response.text
    [kept] = await schemas_of(other_tenant)
    assert kept["name"] == "Appointment details"


# --- evaluation prompts -----------------------------------------------------------------


async def test_prompts_page_lists_every_projects_prompts_and_users(
    tenant: Tenant, browser: Browser, make_agent: MakeAgent
) -> None:
    made = await create_prompt(tenant)
    assert (await tenant.client.post("/v1/projects", json={"name": "sales"})).status_code == 201
    other = await tenant.client.post(
        "/v1/projects/sales/conversation_eval_prompts",
        json={"name": "closed_the_deal", "prompt": "The caller agreed to buy."},
    )
    assert other.status_code == 200, other.text
    agent = await make_agent(tenant, name="front", eval_prompts=["used_chocolate"])
    await signed_in(browser, tenant)

    page = await browser.http.get(PROMPTS)

    assert page.status_code == 200
    row = text_of(page.text, f"eval-prompt-{made['id']}")
    assert "used_chocolate" in row
    assert "The agent said chocolate." in row
    assert "front" in row
    assert f'<a href="/dashboard/agents/{agent["id"]}">front</a>' in page.text
    sales = text_of(page.text, f"eval-prompt-{other.json()['id']}")
    assert "closed_the_deal" in sales
    assert "sales" in sales


async def test_create_prompt_listed_and_audited_as_the_dashboard(
    tenant: Tenant, browser: Browser
) -> None:
    await signed_in(browser, tenant)
    form = {"project": "main", "name": "booked", "prompt": "The agent booked a table."}

    response = await browser.post(PROMPTS, form)

    assert response.status_code == 303, response.text
    assert response.headers["location"] == f"{PROMPTS}?done=eval_prompt_created"
    listed = await tenant.client.get("/v1/projects/main/conversation_eval_prompts")
    [made] = listed.json()["conversation_eval_prompts"]
    assert (made["name"], made["prompt"]) == ("booked", "The agent booked a table.")
    [(kind, _)] = await audited(tenant, "eval_prompt.create")
    assert kind == "dashboard"
    page = await browser.http.get(response.headers["location"])
    assert "Evaluation prompt created." in page.text
    assert "The agent booked a table." in text_of(page.text, f"eval-prompt-{made['id']}")


@pytest.mark.parametrize(
    ("form", "status", "field", "problem"),
    [
        ({"name": "booked", "prompt": ""}, 400, "prompt", "is required"),
        ({"name": "evalp_" + "0" * 32, "prompt": "x"}, 400, "name", "must be 1-100 characters"),
        ({"name": "booked", "prompt": "x", "project": "nowhere"}, 404, None, "project_not_found"),
        ({"name": "used_chocolate", "prompt": "x"}, 409, None, "name_taken"),
    ],
    ids=["no-prompt", "name-shaped-like-an-id", "unknown-project", "name-taken"],
)
async def test_create_prompt_refused_form_kept(
    tenant: Tenant,
    browser: Browser,
    form: dict[str, str],
    status: int,
    field: str | None,
    problem: str,
) -> None:
    await create_prompt(tenant)
    await signed_in(browser, tenant)

    response = await browser.post(PROMPTS, form)

    assert response.status_code == status, response.text
    where = f"create-eval-prompt-{field}-error" if field else "create-eval-prompt-error"
    assert problem in text_of(response.text, where)
    assert form_values(response.text, "create-eval-prompt")["name"] == form["name"]
    listed = await tenant.client.get("/v1/projects/main/conversation_eval_prompts")
    assert [p["name"] for p in listed.json()["conversation_eval_prompts"]] == ["used_chocolate"]


# --- attacks ----------------------------------------------------------------------------


async def test_analysis_forms_without_csrf_token_refused_nothing_changed(
    tenant: Tenant, browser: Browser
) -> None:
    schema = await create_schema(tenant)
    await signed_in(browser, tenant)
    posts = [
        (SCHEMAS, schema_form([("x", "int", "")], name="Forged")),
        (f"{SCHEMAS}/{schema['id']}", schema_form([("x", "int", "")], name="Forged")),
        (f"{SCHEMAS}/{schema['id']}/delete", {}),
        (PROMPTS, {"name": "forged", "prompt": "x"}),
    ]

    for path, data in posts:
        for token in [None, "0" * 64]:
            sent = data if token is None else {**data, "csrf_token": token}
            response = await browser.http.post(path, data=sent)
            assert response.status_code == 403, path
            assert "csrf_failed" in response.text

    assert [s["name"] for s in await schemas_of(tenant)] == ["Appointment details"]
    listed = await tenant.client.get("/v1/projects/main/conversation_eval_prompts")
    assert listed.json()["conversation_eval_prompts"] == []


async def test_script_in_schema_and_prompt_rendered_inert(tenant: Tenant, browser: Browser) -> None:
    payload = "<script>alert(1)</script>"
    tag = "<img src=x onerror=alert(1)>"  # a name may not hold '/'
    schema = await create_schema(
        tenant,
        {
            "name": f"x {tag}",
            "prompt": payload,
            "fields": [{"name": f"f {payload}", "type": "string", "description": payload}],
        },
    )
    await create_prompt(tenant, name=f"p {tag}", prompt=payload)
    await signed_in(browser, tenant)

    pages = [
        await browser.http.get(SCHEMAS),
        await browser.http.get(f"{SCHEMAS}/{schema['id']}"),
        await browser.http.get(PROMPTS),
    ]

    for page in pages:
        assert page.status_code == 200
        assert "<script" not in page.text.lower()
        assert "<img" not in page.text.lower()
        assert "&lt;img src=x onerror=alert(1)&gt;" in page.text
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page.text
