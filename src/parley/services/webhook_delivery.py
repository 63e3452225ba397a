"""The delivery worker of webhooks (API.md section 14; STYLE convention 23).

Each attempt is three small steps, each usable alone:

1. `claim`: lease due deliveries (PostgreSQL `FOR UPDATE SKIP LOCKED`, so each attempt is
   made by one instance; SQLite: the writer's turn). A lease outlives the longest send
   (15 s) by far; a claimer that died releases nothing, so its rows are claimed again once
   the lease ends, or at once when the instance restarts under its name.
2. `send`: one signed `POST` through the outbound client (the webhook tools' address rules,
   no redirects: a 3xx is a failure; 15 s; the answer's body capped at 64 KiB and ignored).
   `webhook-id` is the delivery's `msg_…` on every attempt, `webhook-timestamp` the time of
   this attempt; while a rotated secret still signs, the signature holds two entries.
3. `schedule`: what follows the attempt: a 2xx is `delivered`; a 410 disables the webhook
   and fails the delivery; any other outcome waits the next step of the retry schedule
   (5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 10 h, counted from the failed attempt; at least a
   429/503's `Retry-After`, capped at a day), and is `failed` past the last one.

`record` writes the attempt and its consequence in one transaction. `DeliveryWorker` runs
the steps for one `parley serve` process: woken by the outbox bell after a commit that wrote
deliveries, polling (0.5 s, one lock-free read) for rows other instances wrote and retries
that fell due, with at most 32 sends in flight and 4 per webhook, so a slow or dead endpoint
delays only its own deliveries. Delivered rows are pruned after 30 days.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from email.utils import parsedate_to_datetime
from typing import Final

from parley.clock import utcnow
from parley.db.repos import webhook_deliveries as delivery_repo
from parley.db.repos import webhooks as webhook_repo
from parley.errors import ParleyError
from parley.outbound import OutboundError, signature_headers
from parley.records import DueDelivery
from parley.services.context import Context
from parley.services.webhooks import previous_secret_valid

log = logging.getLogger(__name__)

DEFAULT_RETRY_SCHEDULE: Final = (5, 300, 1800, 7200, 18000, 36000, 36000)
"""Seconds to wait after each failed attempt (API.md section 14)."""
SEND_TIMEOUT_S: Final = 15.0
MAX_ANSWER_BYTES: Final = 64 * 1024
MAX_RETRY_AFTER_S: Final = 86_400
KEEP_DELIVERED: Final = timedelta(days=30)
RETRY_AFTER_STATUSES: Final = frozenset({429, 503})
GONE: Final = 410
PER_WEBHOOK: Final = 4
"""Sends in flight to one webhook from one process."""
LEASE_SECONDS: Final = 60.0


@dataclass(frozen=True, slots=True)
class WorkerOptions:
    """How the worker of one process runs."""

    retry_schedule: tuple[int, ...] = DEFAULT_RETRY_SCHEDULE
    poll_interval_s: float = 0.5
    max_in_flight: int = 32
    per_webhook: int = PER_WEBHOOK
    lease_s: float = LEASE_SECONDS
    """A claim's lease: far longer than a send (15 s), so a live claimer never loses one."""
    prune_interval_s: float = 600.0


@dataclass(frozen=True, slots=True)
class Attempt:
    """What one send gave: the answer's status (None when there was none)."""

    status_code: int | None
    retry_after_s: float | None = None
    error: str | None = None
    """Why there was no answer (time-out, refused address, too large...), for the log."""

    @property
    def succeeded(self) -> bool:
        return self.status_code is not None and 200 <= self.status_code < 300


@dataclass(frozen=True, slots=True)
class NextStep:
    """What an attempt leads to."""

    status: str
    """`delivered`, `pending` (with `next_attempt_at`) or `failed`."""
    next_attempt_at: datetime | None = None
    disable_webhook: bool = False


async def claim(
    ctx: Context,
    *,
    limit: int,
    per_webhook: int = PER_WEBHOOK,
    in_flight: dict[str, int] | None = None,
    lease_s: float = LEASE_SECONDS,
) -> list[DueDelivery]:
    """Lease up to `limit` due deliveries for this instance (step 1)."""
    now = utcnow(ctx.clock)
    async with ctx.db.transaction() as session:
        return await delivery_repo.claim_due(
            session,
            claimer=ctx.instance.id,
            now=now,
            lease_until=now + timedelta(seconds=lease_s),
            limit=limit,
            per_webhook=per_webhook,
            in_flight=in_flight or {},
        )


async def send(ctx: Context, due: DueDelivery, *, timeout_s: float = SEND_TIMEOUT_S) -> Attempt:
    """Make one attempt of a claimed delivery (step 2); never raises for the endpoint's
    failures, which are outcomes."""
    now = utcnow(ctx.clock)
    secrets = [ctx.secrets.unseal(due.secret_sealed)]
    if due.previous_secret_sealed and previous_secret_valid(due.previous_secret_expires_at, now):
        secrets.append(ctx.secrets.unseal(due.previous_secret_sealed))
    body = due.body.encode("utf-8")
    headers = signature_headers(
        secrets, msg_id=due.id, timestamp=int(now.timestamp()), body=body, svix=True
    )
    headers["Content-Type"] = "application/json"
    headers["User-Agent"] = "Parley-Webhooks"
    try:
        answer = await ctx.outbound.request(
            "POST",
            due.url,
            policy=ctx.outbound_policy,
            headers=headers,
            content=body,
            timeout_s=timeout_s,
            max_bytes=MAX_ANSWER_BYTES,
        )
    except OutboundError as error:
        return Attempt(status_code=None, error=str(error))
    retry_after = None
    if answer.status in RETRY_AFTER_STATUSES:
        retry_after = parse_retry_after(answer.headers.get("retry-after"), now)
    return Attempt(status_code=answer.status, retry_after_s=retry_after)


def schedule(
    attempt: Attempt, *, attempts_before: int, retry_schedule: Sequence[int], now: datetime
) -> NextStep:
    """Decide what follows an attempt (step 3); `attempts_before` excludes this one."""
    if attempt.succeeded:
        return NextStep("delivered")
    if attempt.status_code == GONE:
        return NextStep("failed", disable_webhook=True)
    made = attempts_before + 1
    if made > len(retry_schedule):
        return NextStep("failed")
    wait = float(retry_schedule[made - 1])
    if attempt.retry_after_s is not None:
        wait = max(wait, attempt.retry_after_s)
    return NextStep("pending", next_attempt_at=now + timedelta(seconds=wait))


async def record(
    ctx: Context, due: DueDelivery, attempt: Attempt, step: NextStep, *, at: datetime
) -> bool:
    """Write one attempt and its consequence; False if this instance had lost the claim."""
    async with ctx.db.transaction() as session:
        kept = await delivery_repo.record_attempt(
            session,
            due.id,
            claimer=ctx.instance.id,
            at=at,
            status_code=attempt.status_code,
            status=step.status,
            next_attempt_at=step.next_attempt_at,
        )
        if kept and step.disable_webhook:
            await webhook_repo.disable(session, due.webhook_id, at=at)
    return kept


async def deliver(ctx: Context, due: DueDelivery, *, retry_schedule: Sequence[int]) -> NextStep:
    """Send a claimed delivery, then schedule and record what follows."""
    attempt = await send(ctx, due)
    now = utcnow(ctx.clock)
    step = schedule(attempt, attempts_before=due.attempts, retry_schedule=retry_schedule, now=now)
    if not attempt.succeeded:
        log.info(
            "webhook %s delivery %s attempt %d: %s; %s",
            due.webhook_id,
            due.id,
            due.attempts + 1,
            attempt.status_code or attempt.error,
            step.status,
        )
    await record(ctx, due, attempt, step, at=now)
    return step


async def prune(ctx: Context) -> int:
    """Delete deliveries delivered more than 30 days ago; return how many."""
    async with ctx.db.transaction() as session:
        return await delivery_repo.prune_delivered(
            session, before=utcnow(ctx.clock) - KEEP_DELIVERED
        )


async def release_own_claims(ctx: Context) -> int:
    """Release this instance's claims: at start-up (its previous life's sends died with it)
    and at a clean shutdown (its cancelled sends)."""
    async with ctx.db.transaction() as session:
        return await delivery_repo.release_claims(session, ctx.instance.id)


def parse_retry_after(value: str | None, now: datetime) -> float | None:
    """Seconds a `Retry-After` asks for (delta-seconds or an HTTP date), capped at a day;
    None when absent or unreadable."""
    if not value:
        return None
    value = value.strip()
    if value.isascii() and value.isdigit():
        return float(min(int(value[:12]), MAX_RETRY_AFTER_S))
    try:
        moment = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return min(max((moment - now).total_seconds(), 0.0), float(MAX_RETRY_AFTER_S))


class DeliveryWorker:
    """Runs claims and sends for one process (see the module's docstring)."""

    def __init__(self, ctx: Context, options: WorkerOptions | None = None) -> None:
        self._ctx = ctx
        self._options = options or WorkerOptions()
        self._in_flight: Counter[str] = Counter()
        self._tasks: set[asyncio.Task[None]] = set()

    async def run(self) -> None:
        """Claim and send until cancelled; each failure of a step is logged and retried."""
        loop = asyncio.get_running_loop()
        next_prune = loop.time()
        while True:
            if loop.time() >= next_prune:
                next_prune = loop.time() + self._options.prune_interval_s
                await _step("prune delivered webhooks", prune(self._ctx))
            full = False
            try:
                full = await self.tick()
            except ParleyError as error:
                log.warning("webhook worker could not claim deliveries: %s", error.code)
            except Exception:
                # The worker must outlive a bug in one tick: log it and poll again.
                log.exception("webhook worker failed to claim deliveries")
            if not full:
                await self._ctx.outbox_bell.wait(self._options.poll_interval_s)
            else:
                await self._ctx.outbox_bell.wait(self._options.poll_interval_s / 10)

    async def tick(self) -> bool:
        """Claim what fits and start sending it; True when the claim was full (more may be
        due at once)."""
        room = self._options.max_in_flight - len(self._tasks)
        if room <= 0:
            return False
        async with self._ctx.db.statement() as connection:
            if not await delivery_repo.any_due(connection, now=utcnow(self._ctx.clock)):
                return False
        claimed = await claim(
            self._ctx,
            limit=room,
            per_webhook=self._options.per_webhook,
            in_flight=dict(self._in_flight),
            lease_s=self._options.lease_s,
        )
        for due in claimed:
            self._in_flight[due.webhook_id] += 1
            task = asyncio.create_task(self._deliver(due), name=f"webhook-{due.id}")
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        return len(claimed) == room

    async def _deliver(self, due: DueDelivery) -> None:
        try:
            await deliver(self._ctx, due, retry_schedule=self._options.retry_schedule)
        except ParleyError as error:
            # Not recorded: the lease runs out and the attempt is made again (at least once).
            log.warning("webhook delivery %s not recorded: %s", due.id, error.code)
        except Exception:
            log.exception("webhook delivery %s failed", due.id)
        finally:
            self._in_flight[due.webhook_id] -= 1
            if self._in_flight[due.webhook_id] <= 0:
                del self._in_flight[due.webhook_id]
            self._ctx.outbox_bell.ring()  # room for the next claim

    async def cancel_sends(self) -> None:
        """Cancel the sends in flight (their claims are released by the caller)."""
        for task in list(self._tasks):
            task.cancel()
        for task in list(self._tasks):
            with contextlib.suppress(asyncio.CancelledError):
                await task


@contextlib.asynccontextmanager
async def delivery_worker(
    ctx: Context, options: WorkerOptions | None = None
) -> AsyncIterator[None]:
    """Run this instance's webhook worker for the duration of the block (the lifespan)."""
    await _step("release this instance's earlier claims", release_own_claims(ctx))
    worker = DeliveryWorker(ctx, options)
    task = asyncio.create_task(worker.run(), name="parley-webhooks")
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await worker.cancel_sends()
        await _step("release this instance's claims", release_own_claims(ctx))


async def _step(what: str, step: Awaitable[object]) -> None:
    try:
        await step
    except ParleyError as error:
        log.warning("webhook worker could not %s: %s", what, error.code)
    except Exception:
        log.exception("webhook worker failed to %s", what)
