"""The delivery worker of webhooks (API.md section 14; STYLE convention 23).

Each attempt is three small steps, each usable alone:

1. `claim`: lease due deliveries (PostgreSQL `FOR UPDATE SKIP LOCKED`, so each attempt is
   made by one instance; SQLite: the writer's turn). A lease outlives the longest send
   (15 s) by far; a claimer that died releases nothing, so its rows are claimed again once
   the lease ends, or at once when the instance restarts under its name.
2. `send`: one signed `POST` through the outbound client (the webhook tools' address rules,
   no redirects: a 3xx is a failure; 15 s). The answer's body is ignored, whatever its
   size or encoding: what of it arrives within 64 KiB and a second is read and dropped (so
   the connection is kept), the rest abandoned; only the status counts.
   `webhook-id` is the delivery's `msg_…` on every attempt, `webhook-timestamp` the time of
   this attempt; while a rotated secret still signs, the signature holds two entries.
3. `schedule`: what follows the attempt: a 2xx is `delivered`; a 410 disables the webhook
   and fails the delivery; any other outcome waits the next step of the retry schedule
   (5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 10 h, counted from the failed attempt; at least a
   429/503's `Retry-After`, capped at a day), and is `failed` past the last one.

`record` writes the attempt and its consequence in one transaction. `DeliveryWorker` runs
the steps for one instance: it sends at once what a commit claimed for it and handed over
(services/outbox_bell.py: no claim transaction, the lowest lag), polls (0.5 s, one
lock-free read) for rows other instances wrote, retries that fell due and hand-overs that
overflowed, keeps at most 32 sends in flight and 4 per webhook, so a slow or dead endpoint
delays only its own deliveries, and records finished attempts in groups. Delivered rows are
pruned after 30 days. It runs in the serving process (`create_app` alone, as the tests
build it), or, under `parley serve`, in the instance's webhook sender, a process of its own
(`picks_up`: the serving workers' commits claim rows in its name and ring it; it reads
them from the database, composition/webhook_sender.py), so that sending costs the serving
process nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import Counter, deque
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
from parley.services.events import LEASE_SECONDS
from parley.services.outbox_bell import HANDOFF_BACKLOG
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
RECORD_GROUP_S: Final = 0.2
"""Finished attempts are recorded together, at most this long after the first of them (the
lag is measured to the receipt; the record only follows, in one write for the group)."""
PICK_UP_GATHER_S: Final = 0.005
"""How long a pick-up waits after its ring for more (the lag allows it; a read per commit
cost the sender more than the sends)."""
PICK_UP_LIMIT: Final = 256
RECORDED_MEMORY_S: Final = 10.0
"""How long a recorded delivery is remembered, far longer than a pick-up's read."""
SEND_TIME_WEIGHT: Final = 0.2
"""The weight of the newest send in a webhook's moving average of send times."""
"""Deliveries one pick-up reads at most (the rest at the next ring or poll)."""
PER_WEBHOOK: Final = 4
"""Sends in flight to one webhook from one process."""


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
    picks_up: bool = False
    """Hand-overs arrive as claims in this worker's name, committed by other processes,
    read from the database when the bell rings with `pick_up` and at each poll (the
    webhook sender process); False: in memory, through the bell (the serving process)."""


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
            ignore_body=True,  # any 2xx is success, whatever its body (API.md section 14)
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
    return (await record_many(ctx, [(due, attempt, step, at)]))[0]


async def record_many(
    ctx: Context, finished: Sequence[tuple[DueDelivery, Attempt, NextStep, datetime]]
) -> list[bool]:
    """Write attempts and their consequences in one transaction (`record`, grouped): one
    statement for all the rows, and one per webhook that answered 410."""
    rows = [
        delivery_repo.AttemptRow(
            msg_id=due.id,
            at=at,
            status_code=attempt.status_code,
            status=step.status,
            next_attempt_at=step.next_attempt_at,
        )
        for due, attempt, step, at in finished
    ]
    async with ctx.db.transaction() as session:
        held = await delivery_repo.record_attempts(session, rows, claimer=ctx.instance.id)
        gone = {
            due.webhook_id: at
            for due, _, step, at in finished
            if step.disable_webhook and due.id in held
        }
        for webhook_id, at in gone.items():
            await webhook_repo.disable(session, webhook_id, at=at)
    return [due.id in held for due, _, _, _ in finished]


async def deliver(ctx: Context, due: DueDelivery, *, retry_schedule: Sequence[int]) -> NextStep:
    """Send a claimed delivery, then schedule and record what follows."""
    attempt = await send(ctx, due)
    now = utcnow(ctx.clock)
    step = schedule(attempt, attempts_before=due.attempts, retry_schedule=retry_schedule, now=now)
    _log_failure(due, attempt, step)
    await record(ctx, due, attempt, step, at=now)
    return step


def _log_failure(due: DueDelivery, attempt: Attempt, step: NextStep) -> None:
    if not attempt.succeeded:
        log.info(
            "webhook %s delivery %s attempt %d: %s; %s",
            due.webhook_id,
            due.id,
            due.attempts + 1,
            attempt.status_code or attempt.error,
            step.status,
        )


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
    """Runs claims and sends for one process (see the module's docstring).

    Deliveries held here (handed over by a commit, or claimed) wait in one queue per
    webhook; at most `per_webhook` of a webhook's and `max_in_flight` in all are being
    sent. Finished attempts are recorded in groups, one transaction for all that finished
    meanwhile (on SQLite each write waits for the writer's turn: one turn per attempt
    would slow the requests down).
    """

    def __init__(self, ctx: Context, options: WorkerOptions | None = None) -> None:
        self._ctx = ctx
        self._options = options or WorkerOptions()
        self._waiting: dict[str, deque[DueDelivery]] = {}
        self._sending: Counter[str] = Counter()
        self._handed: set[str] = set()
        self._known: dict[str, float] = {}
        """Deliveries this worker holds (waiting, sending, or sent and not yet recorded),
        with when it took them: a pick-up skips them."""
        self._send_seconds: dict[str, float] = {}
        """Each webhook's recent send time (moving average): the pick-up's bound."""
        self._recorded: dict[str, float] = {}
        """Deliveries recorded lately, with when: a pick-up whose read began before the
        record committed still sees them claimed, and must not take them again."""
        self._tasks: set[asyncio.Task[None]] = set()
        self._finished: list[tuple[DueDelivery, Attempt, NextStep, datetime]] = []
        self._flush_wanted = asyncio.Event()
        self._stopping = False

    async def run(self) -> None:
        """Claim, send and record until cancelled; a failing step is logged and retried."""
        loop = asyncio.get_running_loop()
        next_prune = next_poll = loop.time()
        flusher = asyncio.create_task(self._flush_loop(), name="parley-webhooks-records")
        try:
            while True:
                if loop.time() >= next_prune:
                    next_prune = loop.time() + self._options.prune_interval_s
                    await _step("prune delivered webhooks", prune(self._ctx))
                self._hold(self._ctx.outbox_bell.take())
                if self._ctx.outbox_bell.take_pick_up():
                    # The rings of the commits meanwhile join this pick-up: one read for all.
                    await asyncio.sleep(PICK_UP_GATHER_S)
                    self._ctx.outbox_bell.take_pick_up()
                    await _step("pick up handed-over webhook deliveries", self.pick_up())
                # A ring for a hand-over needs no look at the database: the outbox is
                # polled on the timer, or at once when a ring asks for it (a retry).
                if loop.time() < next_poll and not self._ctx.outbox_bell.take_poll():
                    await self._ctx.outbox_bell.wait(next_poll - loop.time())
                    continue
                next_poll = loop.time() + self._options.poll_interval_s
                try:
                    await self.tick()
                except ParleyError as error:
                    log.warning("webhook worker could not claim deliveries: %s", error.code)
                except Exception:
                    # The worker must outlive a bug in one tick: log it and poll again.
                    log.exception("webhook worker failed to claim deliveries")
                await self._ctx.outbox_bell.wait(max(0.0, next_poll - loop.time()))
        finally:
            flusher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await flusher

    async def tick(self) -> int:
        """Claim what fits from the shared outbox and start sending; return how many."""
        if self._options.picks_up:
            await self.pick_up()  # a ring that was lost
        # Room is counted in sends: the rows a slow webhook holds waiting (at most
        # HANDOFF_BACKLOG) take no room from the other webhooks.
        room = self._options.max_in_flight - len(self._tasks)
        if room <= 0:
            return 0
        async with self._ctx.db.statement() as connection:
            if not await delivery_repo.any_due(connection, now=utcnow(self._ctx.clock)):
                return 0
        claimed = await claim(
            self._ctx,
            limit=room,
            per_webhook=HANDOFF_BACKLOG,
            in_flight=dict(self._held()),
            lease_s=self._options.lease_s,
        )
        self._hold(claimed, handed=False)
        return len(claimed)

    async def pick_up(self) -> int:
        """Take the deliveries claimed in this worker's name that it does not hold yet;
        past `HANDOFF_BACKLOG` of one webhook, release them to the shared outbox (as the
        in-memory hand-over does), so a slow endpoint's rows wait for any instance's claim
        rather than here past their lease. Return how many were taken."""
        ctx = self._ctx
        self._forget_stale()
        async with ctx.db.statement() as connection:
            found = await delivery_repo.claimed_for(
                connection,
                claimer=ctx.instance.id,
                now=utcnow(ctx.clock),
                excluding=self._known.keys(),
                limit=PICK_UP_LIMIT,
            )
        held = self._held()
        taken: list[DueDelivery] = []
        released: list[str] = []
        for due in found:
            if due.id in self._known or due.id in self._recorded:
                continue  # taken, or recorded, while the read ran
            if held[due.webhook_id] >= self._backlog_bound(due.webhook_id):
                released.append(due.id)
            else:
                held[due.webhook_id] += 1
                taken.append(due)
        if released:
            async with ctx.db.transaction() as session:
                await delivery_repo.release(session, released, claimer=ctx.instance.id)
        self._hold(taken, handed=False)
        return len(taken)

    def _backlog_bound(self, webhook_id: str) -> int:
        """How many deliveries of `webhook_id` a pick-up may hold: as many as its sends
        clear within a quarter of a lease, judged by how long its recent sends took, and
        never fewer than `HANDOFF_BACKLOG`. A fast endpoint's burst stays here (released,
        it would wait for the 0.5 s polls, a few at a time); a slow one's rows go back to
        the outbox long before their lease runs out."""
        seconds = self._send_seconds.get(webhook_id)
        if seconds is None:
            return HANDOFF_BACKLOG
        clears = self._options.per_webhook * (self._options.lease_s / 4) / max(seconds, 0.001)
        return max(HANDOFF_BACKLOG, min(int(clears), PICK_UP_LIMIT))

    def _forget_stale(self) -> None:
        """Forget what was taken a lease ago and is still not recorded (a send that died, or
        whose record failed): its claim has run out, so it may be taken again."""
        now = asyncio.get_running_loop().time()
        stale = now - self._options.lease_s
        for msg_id in [msg_id for msg_id, taken in self._known.items() if taken < stale]:
            del self._known[msg_id]
        old = now - RECORDED_MEMORY_S
        for msg_id in [msg_id for msg_id, at in self._recorded.items() if at < old]:
            del self._recorded[msg_id]

    def _held(self) -> Counter[str]:
        held = Counter(self._sending)
        for webhook_id, queue in self._waiting.items():
            held[webhook_id] += len(queue)
        return held

    def _hold(self, deliveries: list[DueDelivery], *, handed: bool = True) -> None:
        """Queue deliveries leased to this process, and start what the limits allow."""
        if self._stopping:
            return  # their claims are released at the shutdown
        now = asyncio.get_running_loop().time()
        for due in deliveries:
            self._known[due.id] = now
            self._waiting.setdefault(due.webhook_id, deque()).append(due)
            if handed:
                self._handed.add(due.id)
        for webhook_id in list(self._waiting):
            queue = self._waiting[webhook_id]
            while (
                queue
                and len(self._tasks) < self._options.max_in_flight
                and self._sending[webhook_id] < self._options.per_webhook
            ):
                self._start(queue.popleft())
            if not queue:
                del self._waiting[webhook_id]

    def _start(self, due: DueDelivery) -> None:
        self._sending[due.webhook_id] += 1
        task = asyncio.create_task(self._send(due), name=f"webhook-{due.id}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _send(self, due: DueDelivery) -> None:
        try:
            started = asyncio.get_running_loop().time()
            attempt = await send(self._ctx, due)
            took = asyncio.get_running_loop().time() - started
            before = self._send_seconds.get(due.webhook_id, took)
            self._send_seconds[due.webhook_id] = before + SEND_TIME_WEIGHT * (took - before)
            now = utcnow(self._ctx.clock)
            step = schedule(
                attempt,
                attempts_before=due.attempts,
                retry_schedule=self._options.retry_schedule,
                now=now,
            )
            _log_failure(due, attempt, step)
            self._finished.append((due, attempt, step, now))
            self._flush_wanted.set()
        except Exception:
            # Not recorded: the lease runs out and the attempt is made again (at least once).
            log.exception("webhook delivery %s failed", due.id)
        finally:
            self._sending[due.webhook_id] -= 1
            if self._sending[due.webhook_id] <= 0:
                del self._sending[due.webhook_id]
            if due.id in self._handed:
                self._handed.discard(due.id)
                self._ctx.outbox_bell.done(due.webhook_id)
            self._hold([])  # the next of this webhook's queue

    async def _flush_loop(self) -> None:
        while True:
            await self._flush_wanted.wait()
            # Attempts finishing meanwhile join this group: one write for all of them.
            await asyncio.sleep(RECORD_GROUP_S)
            self._flush_wanted.clear()
            await self.flush()

    async def flush(self) -> None:
        """Record every attempt finished since the last flush, in one transaction."""
        finished, self._finished = self._finished, []
        if not finished:
            return
        await _step("record webhook attempts", record_many(self._ctx, finished))
        # Recorded (or, if that failed, left to run out their lease and be taken again).
        now = asyncio.get_running_loop().time()
        for due, _, _, _ in finished:
            if self._known.pop(due.id, None) is not None:
                self._recorded[due.id] = now
        self._forget_stale()

    async def stop(self) -> None:
        """Cancel the sends in flight and record what finished (claims are the caller's)."""
        self._stopping = True
        for task in list(self._tasks):
            task.cancel()
        for task in list(self._tasks):
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await self.flush()


class RunningWorker:
    """This instance's webhook worker while its block runs: `stop` ends it early (the
    block's end stops it too; stopping twice is harmless)."""

    def __init__(self, ctx: Context, worker: DeliveryWorker) -> None:
        self._ctx = ctx
        self._worker = worker
        self._task = asyncio.create_task(worker.run(), name="parley-webhooks")
        self._stopped = False

    async def stop(self) -> None:
        """Stop polling and sending; release this instance's claims."""
        if self._stopped:
            return
        self._stopped = True
        ctx = self._ctx
        ctx.outbox_bell.stop_taking()
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task
        await self._worker.stop()
        ctx.outbox_bell.take()  # handed over too late: released below, as the rest
        await _step("release this instance's claims", release_own_claims(ctx))


@contextlib.asynccontextmanager
async def delivery_worker(
    ctx: Context, options: WorkerOptions | None = None
) -> AsyncIterator[RunningWorker]:
    """Run this instance's webhook worker for the duration of the block (the lifespan)."""
    await _step("release this instance's earlier claims", release_own_claims(ctx))
    running = RunningWorker(ctx, DeliveryWorker(ctx, options))
    ctx.outbox_bell.take_here(ctx.instance.id)
    try:
        yield running
    finally:
        await running.stop()


async def _step(what: str, step: Awaitable[object]) -> None:
    try:
        await step
    except ParleyError as error:
        log.warning("webhook worker could not %s: %s", what, error.code)
    except Exception:
        log.exception("webhook worker failed to %s", what)
