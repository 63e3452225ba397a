"""The dashboard's test runs in headless Chromium against a real uvicorn server (API.md
section 19): sign in, open Tests and the project, press Run, watch the run's page follow the
run to its end (it reloads itself), read the failed scenario's failures and open its
conversation, with its transcript. The runner plays the scenarios for real: the guide's
example file and a scenario that expects what the rule-based agent never says."""

from __future__ import annotations

import re

import httpx
import pytest
from fastapi import FastAPI
from playwright.async_api import Browser, expect

from tests.e2e.conftest import Customer, Server
from tests.e2e.test_dashboard_browser import app, chromium, database_url, shot, sign_in
from tests.e2e.test_testing_guide import example

__all__ = ["app", "chromium", "database_url"]  # the fixtures of the dashboard's story
pytestmark = [pytest.mark.anyio, pytest.mark.e2e]
FAILING = {
    "name": "expects-chocolate",
    "agent": "bistro",
    "caller": {"lines": ["Thank you, goodbye."]},
    "expect": {"transcript_contains": ["chocolate"], "ended_by": ["user"]},
}


@pytest.mark.timeout(300)
async def test_dashboard_run_button_shows_failures_and_links_the_conversation(
    app: FastAPI, server: Server, customer: Customer, chromium: Browser
) -> None:
    customer.api.timeout = httpx.Timeout(30)  # the server plays the run beside this test
    assert (await customer.api.post("/v1/agents", json=example("agent.json"))).status_code == 201
    goodbye = next(s for s in example("scenarios.json") if s["name"] == "says-goodbye")
    for body in (goodbye, FAILING):
        made = await customer.api.post("/v1/projects/main/test_scenarios", json=body)
        assert made.status_code == 201, made.text
    page = await (await chromium.new_context()).new_page()
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    await sign_in(page, server, customer.api_key)

    await page.click("nav >> text=Tests")
    await page.click("#test-projects >> text=main")
    await expect(page.locator("#scenario-says-goodbye")).to_contain_text("scripted, 2 lines")
    await expect(page.locator("#scenario-expects-chocolate")).to_contain_text("chocolate")
    await page.click("#start-run-button")
    await page.wait_for_url(re.compile(r"/dashboard/test-runs/trun_\w+"))
    await expect(page.locator("main")).to_contain_text("Test run queued")
    status = page.locator("#run-status")
    # The page reloads itself until the run ends.
    await expect(status.locator(".badge")).to_have_text("failed", timeout=240_000)
    await expect(status).to_contain_text("1 passed, 1 failed of 2")
    await expect(page.locator("#result-says-goodbye")).to_contain_text("passed")
    failed = page.locator("#result-expects-chocolate")
    await expect(failed).to_contain_text("transcript_contains: 'chocolate' was never said")
    await shot(page, "test-run")

    await failed.locator("a[href^='/dashboard/conversations/conv_']").click()
    await page.wait_for_url(re.compile(r"/dashboard/conversations/conv_\w+"))
    await expect(page.locator("main")).to_contain_text("Goodbye, and thank you for calling")
    await page.go_back()
    await page.click("text=main")
    await expect(page.locator("#test-runs")).to_contain_text("1 passed, 1 failed of 2")
    assert errors == []
