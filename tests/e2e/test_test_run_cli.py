"""`parley test run` (API.md section 19) as CI runs it: a real process against a real
server, its lines, its exit status and its JUnit XML read back by a parser."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path
from xml.etree import ElementTree

import pytest

from tests.e2e.conftest import Customer, Server

pytestmark = pytest.mark.anyio
SCENARIOS = "/v1/projects/main/test_scenarios"


async def parley_test_run(server: Server, key: str, *arguments: str) -> tuple[int, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PARLEY_")}
    env["PARLEY_API_KEY"] = key
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "parley",
        "test",
        "run",
        "--server",
        server.http,
        *arguments,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    output, _ = await asyncio.wait_for(process.communicate(), 300)
    assert process.returncode is not None
    return process.returncode, output.decode()


async def test_parley_test_run_prints_each_scenario_writes_junit_and_exits_1_on_a_failure(
    server: Server, customer: Customer, tmp_path: Path
) -> None:
    line = "Hello, I need help with my order."
    for name, said in (("hears-order", "order"), ("hears-chocolate", "chocolate")):
        body = {
            "name": name,
            "agent": customer.agent,
            "caller": {"lines": [line]},
            "expect": {"transcript_contains": [said]},
        }
        assert (await customer.api.post(SCENARIOS, json=body)).status_code == 201
    report = tmp_path / "junit.xml"
    status, output = await parley_test_run(
        server, customer.api_key, "--project", "main", "--junit", str(report)
    )
    assert status == 1, output
    assert "hears-order: passed" in output
    assert "hears-chocolate: failed: transcript_contains: 'chocolate' was never said" in output
    suite = ElementTree.fromstring(report.read_bytes())  # noqa: S314 - the test's own file
    assert (suite.tag, suite.get("tests"), suite.get("failures")) == ("testsuite", "2", "1")
    cases = {case.get("name"): case for case in suite.iter("testcase")}
    assert set(cases) == {"hears-order", "hears-chocolate"}
    assert cases["hears-order"].find("failure") is None
    failure = cases["hears-chocolate"].find("failure")
    assert failure is not None
    assert "'chocolate' was never said" in (failure.get("message") or "")
    status, output = await parley_test_run(
        server, customer.api_key, "--project", "main", "--scenario", "hears-order"
    )
    assert status == 0, output
    assert output.splitlines()[0] == "hears-order: passed"


async def test_parley_test_run_unknown_scenario_exits_2(server: Server, customer: Customer) -> None:
    status, output = await parley_test_run(
        server, customer.api_key, "--project", "main", "--scenario", "nope"
    )
    assert status == 2, output
    assert "400" in output
