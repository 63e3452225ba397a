"""A test run interrupted by `kill -9` (API.md section 19; services/scenario_runs.py rule
3): once the server is restarted, the run is `error`, never left `running`, and its
conversation is ended."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from parley.services.scenario_runs import INTERRUPTED
from tests.faults.serve_process import ServeProcess
from tests.faults.ws_client import make_agent

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]

DATABASE_URL = "sqlite:///parley.db"
LINES = ["Hello there.", "I would like a table.", "For two people.", "Thank you."]


async def run_status(api: httpx.AsyncClient, run_id: str) -> dict[str, Any]:
    found: dict[str, Any] = (await api.get(f"/v1/test_runs/{run_id}")).json()["test_run"]
    return found


async def test_kill_9_mid_run_then_restart_ends_the_run_error(tmp_path: Path) -> None:
    serve = ServeProcess(tmp_path, PARLEY_DATABASE_URL=DATABASE_URL)
    try:
        serve.start()
        assert serve.first_key is not None
        key = serve.first_key
        agent = await make_agent(serve.http, key)
        headers = {"Authorization": f"Bearer {key}"}
        async with httpx.AsyncClient(base_url=serve.http, headers=headers) as api:
            scenario = {"name": "long", "agent": agent, "caller": {"lines": LINES}}
            made = await api.post("/v1/projects/main/test_scenarios", json=scenario)
            assert made.status_code == 201, made.text
            queued = await api.post("/v1/projects/main/test_runs", json={})
            run_id = queued.json()["test_run"]["id"]
            started = time.monotonic()
            while (await run_status(api, run_id))["status"] != "running":
                assert time.monotonic() - started < 30, "the run was never claimed"
                await asyncio.sleep(0.1)
            await asyncio.sleep(2.0)  # the caller is in the call
        serve.kill()
        serve.start()  # same host and port: the same instance, in its next life
        async with httpx.AsyncClient(base_url=serve.http, headers=headers) as api:
            run = await run_status(api, run_id)
            assert run["status"] == "error", run
            assert run["ended_at"] is not None
            (result,) = run["results"]
            assert (result["scenario"], result["passed"], result["failures"]) == (
                "long",
                False,
                [INTERRUPTED],
            )
            listed = (await api.get("/v1/conversations")).json()["conversations"]
            assert listed, "the run made no conversation"
            assert all(found["status"] == "ended" for found in listed), listed
    finally:
        serve.ensure_stopped()
