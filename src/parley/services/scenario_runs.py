"""Test runs (API.md section 19): queued in the database, run by the server, never lost.

Rules:
1. A run is made with the scenarios named (default: all the project's), copied as they are
   then: a scenario changed or deleted later does not change the run. It starts `queued`.
2. An instance claims the oldest queued run (one statement: of two instances exactly one
   gets it) and runs it; the claim lasts as long as the instance's own lease
   (services/instances.py): its heartbeat is the run's.
3. A run whose instance stopped or lost its lease is never left `running`: every instance,
   at start (its previous life's runs included) and on its timer, ends such runs `error`,
   each scenario that had no result reported failed with `INTERRUPTED`. A run is not taken
   over: a scenario half played cannot be resumed, and a run that killed its instance
   would kill the next one too.
4. A run that ends is `passed` when every scenario passed, else `failed`; `test_run.completed`
   is sent in the transaction that ends it, whichever way it ended.
5. The runner dials the server on the address the run was asked for on (`socket_url`), so
   that a run made through the API or the dashboard reaches the instance's own socket.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import timedelta
from typing import Any, Final

from parley.clock import utcnow
from parley.db.repos import projects as project_repo
from parley.db.repos import scenario_runs as run_repo
from parley.ids import new_id
from parley.records import Project, RunStatus, ScenarioResult, ScenarioRun
from parley.services import events
from parley.services.context import Context
from parley.services.event_payloads import test_run_data
from parley.services.scenarios import scenarios_for_run

__all__ = [
    "INTERRUPTED",
    "add_result",
    "claim_next",
    "create_run",
    "end_orphaned_runs",
    "finish_run",
    "get_run",
    "latest_runs",
    "socket_url",
]

log = logging.getLogger(__name__)

INTERRUPTED: Final = "not run to the end: the instance running the test run stopped"


async def create_run(
    ctx: Context, *, org_id: str, project: str, names: Sequence[str] | None, server_url: str
) -> ScenarioRun:
    """Queue a run of the project's scenarios (rule 1)."""
    async with ctx.db.transaction() as session:
        in_project = await project_repo.resolve(session, org_id, project)
        scenarios = await scenarios_for_run(session, project_id=in_project.id, names=names)
        specs = [
            {"id": s.id, "name": s.name, "project": in_project.name, **s.spec} for s in scenarios
        ]
        made = await run_repo.insert(
            session,
            run_id=new_id("trun"),
            org_id=org_id,
            project_id=in_project.id,
            scenarios=specs,
            server_url=server_url,
            now=utcnow(ctx.clock),
        )
    ctx.run_bell.set()  # committed: this instance's runner may claim it now
    return made


async def get_run(ctx: Context, *, org_id: str, run_id: str) -> ScenarioRun:
    """A run of the organization, with its results so far."""
    async with ctx.db.read() as session:
        return await run_repo.get(session, org_id, run_id)


async def latest_runs(
    ctx: Context, *, org_id: str, project: str, limit: int
) -> tuple[Project, list[ScenarioRun]]:
    """A project of the organization (by name or ID) and its `limit` latest runs, newest
    first."""
    async with ctx.db.read() as session:
        found = await project_repo.resolve(session, org_id, project)
        return found, await run_repo.latest(session, found.id, limit=limit)


def socket_url(server: tuple[str, int | None] | None, *, public_url: str) -> str:
    """Where a run's caller dials (rule 5): the local address (`host`, `port`) the request
    that made it came in on, the socket's and not a header the client chose; the public URL
    when the server listens on no TCP address."""
    if server and server[1] is not None:
        host, port = server
        host = f"[{host}]" if ":" in host else host
        return f"ws://{host}:{port}"
    return public_url.replace("https://", "wss://", 1).replace("http://", "ws://", 1)


async def claim_next(ctx: Context) -> ScenarioRun | None:
    """Claim the oldest queued run for this instance (rule 2); None when none waits. An
    idle poll is one read: no write transaction unless a run waits."""
    async with ctx.db.statement() as connection:
        run_id = await run_repo.oldest_queued(connection)
    if run_id is None:
        return None
    async with ctx.db.transaction() as session:
        if not await run_repo.claim(
            session, run_id, instance_id=ctx.instance.id, at=utcnow(ctx.clock)
        ):
            return None
        return await run_repo.get_any(session, run_id)


async def add_result(ctx: Context, run_id: str, result: ScenarioResult) -> None:
    """Store one scenario's result as soon as it is known."""
    async with ctx.db.transaction() as session:
        await run_repo.add_result(session, run_id, result)


async def finish_run(ctx: Context, run_id: str) -> ScenarioRun | None:
    """End a run that played every scenario (rule 4); None if it had ended already."""
    async with ctx.db.transaction() as session:
        current = await run_repo.get_any(session, run_id)
        passed = all(result.passed for result in current.results)
        status = RunStatus.PASSED if passed else RunStatus.FAILED
        return await _finish(session, ctx, run_id, status=status, extra=())


async def end_orphaned_runs(ctx: Context, *, including_own: bool = False) -> int:
    """End `error` the running runs whose instance is gone (rule 3); return how many."""
    now = utcnow(ctx.clock)
    stale_before = now - timedelta(seconds=ctx.instance.lease_seconds)
    ended = 0
    async with ctx.db.statement() as connection:
        orphans = await run_repo.orphaned(
            connection, stale_before=stale_before, own=ctx.instance.id if including_own else None
        )
    for run_id in orphans:
        async with ctx.db.transaction() as session:
            run = await run_repo.get_any(session, run_id)
            done = {result.scenario for result in run.results}
            extra = [
                ScenarioResult(
                    scenario=str(spec["name"]),
                    passed=False,
                    failures=(INTERRUPTED,),
                    conversation_id=None,
                    latencies_ms=(),
                )
                for spec in run.scenarios
                if spec["name"] not in done
            ]
            if await _finish(session, ctx, run_id, status=RunStatus.ERROR, extra=extra):
                ended += 1
    if ended:
        log.warning("ended %d test run(s) whose instance is gone", ended)
    return ended


async def _finish(
    session: Any,
    ctx: Context,
    run_id: str,
    *,
    status: RunStatus,
    extra: Sequence[ScenarioResult],
) -> ScenarioRun | None:
    finished = await run_repo.finish(
        session, run_id, status=status, extra_results=extra, at=utcnow(ctx.clock)
    )
    if finished is not None:

        async def data() -> dict[str, Any]:
            return test_run_data(finished)

        await events.emit(
            session, ctx, org_id=finished.org_id, event_type="test_run.completed", data=data
        )
    return finished
