"""docs/testing-an-agent.md's example, run as written against a real server (uvicorn, the
rule-based replies, no language model): the agent of examples/testing/agent.json, the
scenarios of examples/testing/scenarios.json applied by examples/testing/create_scenarios.py
(twice: the second time updates them), a run of all of them, and every scenario passes."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.e2e.conftest import Customer, Server
from tests.e2e.test_test_runs import finished_run

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.e2e,
    # The example's run once: the rules of runs are tested on both databases in tests/api.
    pytest.mark.parametrize("database_url", ["sqlite"], indirect=True),
]
EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "testing"


def example(name: str) -> Any:
    return json.loads((EXAMPLES / name).read_text(encoding="utf-8"))


async def apply_scenarios(server: Server, api_key: str) -> list[str]:
    """Run the guide's create_scenarios.py command; its output lines."""
    process = await asyncio.create_subprocess_exec(
        sys.executable, str(EXAMPLES / "create_scenarios.py"), str(EXAMPLES / "scenarios.json"),
        "--server", server.http, "--api-key", api_key,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    out, err = await process.communicate()
    assert process.returncode == 0, err.decode()
    return out.decode().splitlines()


@pytest.mark.timeout(300)
async def test_testing_guide_example_scenarios_pass_against_a_real_server(
    customer: Customer, server: Server
) -> None:
    customer.api.timeout = httpx.Timeout(30)  # the server plays the run beside this test
    made = await customer.api.post("/v1/agents", json=example("agent.json"))
    assert made.status_code == 201, made.text
    scenarios = example("scenarios.json")
    names = [scenario["name"] for scenario in scenarios]
    assert await apply_scenarios(server, customer.api_key) == [f"{n}: created" for n in names]
    assert await apply_scenarios(server, customer.api_key) == [f"{n}: updated" for n in names]
    listed = (await customer.api.get("/v1/projects/main/test_scenarios")).json()
    assert sorted(s["name"] for s in listed["test_scenarios"]) == sorted(names)

    queued = await customer.api.post("/v1/projects/main/test_runs", json={})
    assert queued.status_code == 202, queued.text
    run = await finished_run(customer, queued.json()["test_run"]["id"], seconds=240)
    results = {result["scenario"]: result for result in run["results"]}
    assert sorted(results) == sorted(names)
    for name, result in results.items():
        assert result["passed"], (name, result["failures"])
        assert result["conversation_id"], name
    assert run["status"] == "passed", run
