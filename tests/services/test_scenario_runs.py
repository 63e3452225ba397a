"""Test runs' lifecycle in the database (services/scenario_runs.py rules 1-4): queued,
claimed by exactly one instance, ended with `test_run.completed`, and a dead instance's run
ended `error`, never left `running`; on SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

from parley.records import OPERATOR, RunStatus, ScenarioResult
from parley.services import Context, instances, scenario_runs, scenarios
from parley.services.context import Instance
from parley.services.webhook_delivery import claim
from tests.factories import make_agent, make_org
from tests.services.webhook_helpers import local_context, make_webhook

pytestmark = pytest.mark.anyio


@pytest.fixture
async def ctx(database_url: str) -> AsyncIterator[Context]:
    async with local_context(database_url, instance_id="runs-test") as context:
        yield context


def as_instance(ctx: Context, name: str, lease: float = 15.0) -> Context:
    return dataclasses.replace(ctx, instance=Instance(id=name, lease_seconds=lease))


async def queued_run(ctx: Context, names: tuple[str, ...] = ("one", "two")) -> tuple[str, str]:
    """An organization with a webhook on `test_run.completed` and a queued run: (org, run)."""
    org = (await make_org(ctx)).org
    agent = await make_agent(ctx, org.id)
    await make_webhook(ctx, org.id, "http://127.0.0.1:9/never-called", ["test_run.completed"])
    for name in names:
        await scenarios.create_scenario(
            ctx,
            org_id=org.id,
            project="main",
            name=name,
            spec={"agent": agent.name, "caller": {"lines": ["Hello."]}, "expect": {}},
            actor=OPERATOR,
        )
    run = await scenario_runs.create_run(
        ctx, org_id=org.id, project="main", names=None, server_url="ws://127.0.0.1:9"
    )
    assert run.status == RunStatus.QUEUED
    return org.id, run.id


def result(name: str, *, passed: bool) -> ScenarioResult:
    failures = () if passed else ("ended_by: expected one of assistant; it ended by user",)
    return ScenarioResult(name, passed, failures, None, ())


async def events(ctx: Context) -> list[dict[str, Any]]:
    return [json.loads(due.body) for due in await claim(ctx, limit=100, per_webhook=100)]


async def test_run_claimed_by_exactly_one_of_two_instances(ctx: Context) -> None:
    _org, run_id = await queued_run(ctx)
    first, second = as_instance(ctx, "runner-a"), as_instance(ctx, "runner-b")
    claims = await asyncio.gather(scenario_runs.claim_next(first), scenario_runs.claim_next(second))
    claimed = [run for run in claims if run is not None]
    assert [run.id for run in claimed] == [run_id]
    assert claimed[0].status == RunStatus.RUNNING
    assert claimed[0].claimed_by in ("runner-a", "runner-b")
    assert await scenario_runs.claim_next(first) is None


async def test_run_with_a_failed_scenario_ends_failed_and_sends_the_event(ctx: Context) -> None:
    org_id, run_id = await queued_run(ctx)
    await scenario_runs.claim_next(ctx)
    await scenario_runs.add_result(ctx, run_id, result("one", passed=True))
    await scenario_runs.add_result(ctx, run_id, result("two", passed=False))
    finished = await scenario_runs.finish_run(ctx, run_id)
    assert finished is not None
    assert finished.status == RunStatus.FAILED
    assert await scenario_runs.finish_run(ctx, run_id) is None  # ended once
    sent = await events(ctx)
    assert [body["event_type"] for body in sent] == ["test_run.completed"]
    data = sent[0]["data"]["test_run"]
    assert (data["id"], data["status"]) == (run_id, "failed")
    assert [r["passed"] for r in data["results"]] == [True, False]
    read = await scenario_runs.get_run(ctx, org_id=org_id, run_id=run_id)
    assert read.ended_at is not None


async def test_run_all_passed_ends_passed(ctx: Context) -> None:
    _org, run_id = await queued_run(ctx, names=("only",))
    await scenario_runs.claim_next(ctx)
    await scenario_runs.add_result(ctx, run_id, result("only", passed=True))
    finished = await scenario_runs.finish_run(ctx, run_id)
    assert finished is not None
    assert finished.status == RunStatus.PASSED


async def test_run_of_a_dead_instance_ended_error_by_another(ctx: Context) -> None:
    org_id, run_id = await queued_run(ctx)
    dead, alive = as_instance(ctx, "runner-dead", lease=3.0), as_instance(ctx, "runner-alive", 3.0)
    await instances.start(dead)
    await scenario_runs.claim_next(dead)
    await scenario_runs.add_result(ctx, run_id, result("one", passed=True))
    assert await scenario_runs.end_orphaned_runs(alive) == 0  # its lease still runs
    await asyncio.sleep(3.2)
    await instances.start(alive)
    assert await scenario_runs.end_orphaned_runs(alive) == 1
    run = await scenario_runs.get_run(ctx, org_id=org_id, run_id=run_id)
    assert run.status == RunStatus.ERROR
    assert [(r.scenario, r.passed, r.failures) for r in run.results] == [
        ("one", True, ()),
        ("two", False, (scenario_runs.INTERRUPTED,)),
    ]
    assert [body["data"]["test_run"]["status"] for body in await events(ctx)] == ["error"]


async def test_run_of_this_instance_previous_life_ended_error_at_start(ctx: Context) -> None:
    org_id, run_id = await queued_run(ctx)
    await instances.start(ctx)
    await scenario_runs.claim_next(ctx)
    assert await scenario_runs.end_orphaned_runs(ctx) == 0  # alive: not an orphan
    assert await scenario_runs.end_orphaned_runs(ctx, including_own=True) == 1
    run = await scenario_runs.get_run(ctx, org_id=org_id, run_id=run_id)
    assert run.status == RunStatus.ERROR
