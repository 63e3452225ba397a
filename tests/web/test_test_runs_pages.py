"""The dashboard's test runs pages (API.md section 19) over the real app, on SQLite and
PostgreSQL: a project's scenarios and runs, the button that queues a run (CSRF-checked),
a run's results with each failure and a link to its conversation.

The app here starts no test runner (its engine factory hides the synthesizer, as a test's
may), so a queued run waits; the tests play it through the runner's own service calls
(claim, a result per scenario, finish) and read what the page shows of it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from fastapi import FastAPI

from parley.app import create_app
from parley.composition.options import engine_options
from parley.config import Settings
from parley.engine import build_engine_factory
from parley.records import ScenarioResult
from parley.services import scenario_runs
from parley.services.context import Context
from parley.web.test_runs import REFRESH_SECONDS, caller_summary
from tests.types import MakeAgent, Tenant
from tests.web.helpers import Browser, csrf_of, text_of

pytestmark = pytest.mark.anyio
SCENARIOS = "/v1/projects/main/test_scenarios"
FAILURE = "transcript_contains: '<b>chocolate</b>' was never said"


class WithoutRunner:
    """The default engine factory with its synthesizer hidden: the app starts no runner."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def __getattr__(self, name: str) -> Any:
        if name == "synthesizer":
            raise AttributeError(name)
        return getattr(self._inner, name)


@pytest.fixture
async def app(settings: Settings) -> AsyncIterator[FastAPI]:
    factory = WithoutRunner(build_engine_factory(engine_options(settings)))
    application = create_app(settings, engine_factory=factory)
    async with application.router.lifespan_context(application):
        assert application.state.scenario_runner is None
        yield application


async def signed_in(browser: Browser, tenant: Tenant) -> Browser:
    response = await browser.sign_in(tenant.api_key)
    assert response.status_code == 303, response.text
    return browser


async def make_scenarios(tenant: Tenant, make_agent: MakeAgent) -> str:
    agent = (await make_agent(tenant))["name"]
    bodies = [
        {"name": "books-a-table", "agent": agent,
         "caller": {"lines": ["Hello.", "A table for two.", "Thanks, bye."]},
         "expect": {"ended_by": ["user"]}},
        {"name": "asks-hours", "agent": agent, "caller": {"goal": "Ask for the opening hours."}},
    ]  # fmt: skip
    for body in bodies:
        made = await tenant.client.post(SCENARIOS, json=body)
        assert made.status_code == 201, made.text
    return agent


async def project_id(tenant: Tenant) -> str:
    found: str = (await tenant.client.get("/v1/projects/main")).json()["project"]["id"]
    return found


async def test_tests_page_links_every_project(tenant: Tenant, browser: Browser) -> None:
    await tenant.client.post("/v1/projects", json={"name": "billing"})
    page = await (await signed_in(browser, tenant)).http.get("/dashboard/tests")
    assert page.status_code == 200
    listed = text_of(page.text, "test-projects")
    assert "main" in listed
    assert "billing" in listed
    assert f"/dashboard/projects/{await project_id(tenant)}/tests" in page.text


async def test_project_tests_page_lists_scenarios_with_callers_and_expectations(
    tenant: Tenant, browser: Browser, make_agent: MakeAgent
) -> None:
    agent = await make_scenarios(tenant, make_agent)
    page = await (await signed_in(browser, tenant)).http.get("/dashboard/projects/main/tests")
    assert page.status_code == 200
    scripted = text_of(page.text, "scenario-books-a-table")
    assert agent in scripted
    assert "scripted, 3 lines" in scripted
    assert "A table for two." in scripted
    assert '"ended_by"' in scripted
    goal = text_of(page.text, "scenario-asks-hours")
    assert "goal, at most 5 turns" in goal
    assert "Ask for the opening hours." in goal
    assert "No runs yet." in text_of(page.text, "test-runs")


def test_caller_summary_counts_lines_or_turns() -> None:
    assert caller_summary({"lines": ["a"]}) == "scripted, 1 line"
    assert caller_summary({"goal": "g", "max_turns": 3}) == "goal, at most 3 turns"


async def test_run_button_queues_every_scenario_and_opens_the_run(
    tenant: Tenant, browser: Browser, make_agent: MakeAgent
) -> None:
    await make_scenarios(tenant, make_agent)
    signed = await signed_in(browser, tenant)
    page = await signed.http.get("/dashboard/projects/main/tests")
    response = await signed.http.post(
        f"/dashboard/projects/{await project_id(tenant)}/tests/runs",
        data={"csrf_token": csrf_of(page.text)},
    )
    assert response.status_code == 303, response.text
    location = response.headers["location"]
    assert location.startswith("/dashboard/test-runs/trun_")
    run_id = location.split("/")[-1].split("?")[0]
    run = (await tenant.client.get(f"/v1/test_runs/{run_id}")).json()["test_run"]
    assert run["status"] == "queued"
    assert sorted(run["scenarios"]) == ["asks-hours", "books-a-table"]
    shown = await signed.http.get(location)
    assert "Test run queued" in shown.text
    assert f'<meta http-equiv="refresh" content="{REFRESH_SECONDS}">' in shown.text
    assert "pending" in text_of(shown.text, "result-books-a-table")
    listed = await signed.http.get("/dashboard/projects/main/tests")
    assert "queued" in text_of(listed.text, f"run-{run_id}")


async def test_run_button_runs_only_the_scenarios_ticked(
    tenant: Tenant, browser: Browser, make_agent: MakeAgent
) -> None:
    await make_scenarios(tenant, make_agent)
    signed = await signed_in(browser, tenant)
    response = await signed.post(
        "/dashboard/projects/main/tests/runs", {"scenarios": ["asks-hours"]}
    )
    assert response.status_code == 303, response.text
    run_id = response.headers["location"].split("/")[-1].split("?")[0]
    run = (await tenant.client.get(f"/v1/test_runs/{run_id}")).json()["test_run"]
    assert run["scenarios"] == ["asks-hours"]


async def test_run_button_without_csrf_token_refused_and_nothing_queued(
    tenant: Tenant, browser: Browser, make_agent: MakeAgent, ctx: Context
) -> None:
    await make_scenarios(tenant, make_agent)
    signed = await signed_in(browser, tenant)
    response = await signed.http.post("/dashboard/projects/main/tests/runs", data={})
    assert response.status_code == 403
    assert "csrf_failed" in response.text
    assert await scenario_runs.claim_next(ctx) is None


async def test_run_button_of_project_without_scenarios_says_so(
    tenant: Tenant, browser: Browser
) -> None:
    signed = await signed_in(browser, tenant)
    response = await signed.post("/dashboard/projects/main/tests/runs")
    assert response.status_code == 400
    error = text_of(response.text, "start-run-error")
    assert "the project has no test scenarios" in error


async def test_run_button_of_unknown_scenario_keeps_the_form_and_says_which(
    tenant: Tenant, browser: Browser, make_agent: MakeAgent
) -> None:
    await make_scenarios(tenant, make_agent)
    signed = await signed_in(browser, tenant)
    response = await signed.post(
        "/dashboard/projects/main/tests/runs", {"scenarios": ["asks-hours", "gone"]}
    )
    assert response.status_code == 400
    assert "Some fields are invalid." in text_of(response.text, "start-run-error")
    assert "unknown test scenario 'gone'" in text_of(response.text, "start-run-scenarios-error")
    assert 'value="asks-hours" aria-label="Run asks-hours" checked' in response.text


async def test_run_page_shows_each_failure_and_links_its_conversation(
    tenant: Tenant, browser: Browser, make_agent: MakeAgent, ctx: Context
) -> None:
    await make_scenarios(tenant, make_agent)
    queued = await tenant.client.post("/v1/projects/main/test_runs", json={})
    run_id = queued.json()["test_run"]["id"]
    claimed = await scenario_runs.claim_next(ctx)
    assert claimed is not None
    assert claimed.id == run_id
    passed = ScenarioResult("books-a-table", True, (), "conv_" + "1" * 32, (640, 702))
    failed = ScenarioResult("asks-hours", False, (FAILURE, "ended_by: x"), "conv_" + "2" * 32, ())
    await scenario_runs.add_result(ctx, run_id, passed)
    signed = await signed_in(browser, tenant)
    running = await signed.http.get(f"/dashboard/test-runs/{run_id}")
    assert "running" in text_of(running.text, "run-status")
    assert "pending" in text_of(running.text, "result-asks-hours")
    await scenario_runs.add_result(ctx, run_id, failed)
    await scenario_runs.finish_run(ctx, run_id)

    page = await signed.http.get(f"/dashboard/test-runs/{run_id}")
    assert page.status_code == 200
    assert "http-equiv" not in page.text  # a finished run's page stays put
    after = await signed.http.get(f"/dashboard/test-runs/{run_id}?done=test_run_queued")
    assert "Test run queued" not in after.text  # nor says it is queued
    assert text_of(page.text, "run-status").startswith("failed 1 passed, 1 failed of 2")
    ok = text_of(page.text, "result-books-a-table")
    assert "passed" in ok
    assert "640, 702" in ok
    assert f'href="/dashboard/conversations/{passed.conversation_id}"' in page.text
    bad = text_of(page.text, "result-asks-hours")
    assert FAILURE in bad
    assert "ended_by: x" in bad
    assert "<b>chocolate</b>" not in page.text  # escaped
    assert f'href="/dashboard/conversations/{failed.conversation_id}"' in page.text
    listed = await signed.http.get("/dashboard/projects/main/tests")
    assert "1 passed, 1 failed of 2" in text_of(listed.text, f"run-{run_id}")


async def test_run_page_of_another_organizations_run_forbidden(
    tenant: Tenant, other_tenant: Tenant, browser: Browser, make_agent: MakeAgent
) -> None:
    await make_scenarios(other_tenant, make_agent)
    queued = await other_tenant.client.post("/v1/projects/main/test_runs", json={})
    run_id = queued.json()["test_run"]["id"]
    signed = await signed_in(browser, tenant)
    page = await signed.http.get(f"/dashboard/test-runs/{run_id}")
    assert page.status_code == 403
    assert "books-a-table" not in page.text


async def test_project_tests_page_of_unknown_project_not_found(
    tenant: Tenant, browser: Browser
) -> None:
    signed = await signed_in(browser, tenant)
    page = await signed.http.get("/dashboard/projects/nope/tests")
    assert page.status_code == 404
    assert "project_not_found" in page.text


async def test_test_runs_pages_need_sign_in(browser: Browser) -> None:
    for path in ("/dashboard/tests", "/dashboard/projects/main/tests"):
        response = await browser.http.get(path)
        assert response.status_code == 303
        assert response.headers["location"] == "/dashboard/sign-in"
