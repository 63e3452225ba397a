"""The process's recognition queue: one worker thread, bounded, finals before partials.

Every conversation of the process shares one recognizer model, and the model runs one
decode at a time on all the cores it is given, which is the fastest way to finish each
turn on a small machine. Decodes wait in this queue: finals (a turn's words, which a reply
waits for) go before partials (an early look while the user is still speaking), and a
partial is only run when nothing else is waiting or running, so partials never delay a
final by more than the one partial already running. The queue holds at most `max_pending`
finals; past that, RecognizerOverloaded.

Finals submitted with `run_batched` that wait together (same `batch` function, same `key`)
run as one call of `batch` over all their items, at most `max_batch` of them: a batch of 4
of Whisper's decodes takes 0.6 of the time of 4 one after another on two cores, a batch
of 8 0.4 (docs/performance.md), so under load the queue drains faster and the last in
line waits less.

Written by hand because no library offers an asyncio priority queue in front of a single
worker thread that can refuse optional work and batch what waits; it is short.
"""

from __future__ import annotations

import asyncio
import functools
import heapq
import itertools
import time
from collections.abc import Callable, Hashable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from parley.engine.errors import RecognizerOverloaded

T = TypeVar("T")
I = TypeVar("I")  # noqa: E741 - an item of a batch

_FINAL, _PARTIAL = 0, 1


@dataclass(frozen=True)
class Timed(Generic[T]):
    """A decode's result with the time it waited in the queue and the time it ran."""

    value: T
    queue_seconds: float
    compute_seconds: float


@dataclass(order=True)
class _Job:
    priority: int
    sequence: int
    work: Callable[[], Any] = field(compare=False)
    future: asyncio.Future[Timed[Any]] = field(compare=False)
    queued_at: float = field(compare=False)
    batch: Callable[[list[Any]], Sequence[Any]] | None = field(compare=False, default=None)
    key: Hashable = field(compare=False, default=None)
    item: Any = field(compare=False, default=None)

    def joins(self, first: _Job) -> bool:
        """True when this waiting job can run in the same batch call as `first`."""
        return (
            self.batch is not None
            and self.batch == first.batch
            and self.key == first.key
            and self.priority == _FINAL
            and not self.future.done()
        )


class RecognitionQueue:
    """Runs decodes one at a time in a worker thread (see the module doc)."""

    def __init__(self, *, max_pending: int = 32, max_batch: int = 8) -> None:
        self._max_pending = max_pending
        self._max_batch = max_batch
        self._heap: list[_Job] = []
        self._sequence = itertools.count()
        self._running = False
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="parley-stt")

    @property
    def busy(self) -> bool:
        """True while a decode runs or waits."""
        return self._running or bool(self._heap)

    async def run(self, work: Callable[[], T], *, partial: bool = False) -> Timed[T] | None:
        """Run `work` in the worker thread; None when a partial is skipped (queue busy)."""
        if partial and self.busy:
            return None
        return await self._submit(_PARTIAL if partial else _FINAL, work)

    async def run_batched(
        self, batch: Callable[[list[I]], Sequence[T]], item: I, *, key: Hashable = None
    ) -> Timed[T]:
        """Run a final as `batch([item])`, or in one call with the finals that wait with it
        (same `batch`, same `key`); `batch` returns one result per item, in order."""
        return await self._submit(_FINAL, lambda: batch([item])[0], batch=batch, key=key, item=item)

    async def _submit(self, priority: int, work: Callable[[], T], **batching: Any) -> Timed[T]:
        if (
            priority == _FINAL
            and sum(j.priority == _FINAL for j in self._heap) >= self._max_pending
        ):
            raise RecognizerOverloaded()
        future: asyncio.Future[Timed[Any]] = asyncio.get_running_loop().create_future()
        job = _Job(priority, next(self._sequence), work, future, time.perf_counter(), **batching)
        heapq.heappush(self._heap, job)
        self._start_next()
        result: Timed[T] = await future
        return result

    def close(self) -> None:
        """Stop the worker thread once the decode in progress ends."""
        for job in self._heap:
            job.future.cancel()
        self._heap.clear()
        self._executor.shutdown(wait=False, cancel_futures=True)

    def _start_next(self) -> None:
        while not self._running and self._heap:
            job = heapq.heappop(self._heap)
            if job.future.done():  # its caller went away
                continue
            jobs = [job, *self._take_batch(job)]
            self._running = True
            started = time.perf_counter()
            loop = job.future.get_loop()
            running = loop.run_in_executor(self._executor, _timed, _work_of(jobs))
            running.add_done_callback(functools.partial(self._finished, jobs, started))

    def _take_batch(self, first: _Job) -> list[_Job]:
        """Remove and return the waiting finals that run in one call with `first`."""
        if first.batch is None or self._max_batch < 2:
            return []
        joining = [j for j in sorted(self._heap) if j.joins(first)][: self._max_batch - 1]
        if joining:
            taken = {id(j) for j in joining}
            self._heap = [j for j in self._heap if id(j) not in taken]
            heapq.heapify(self._heap)
        return joining

    def _finished(
        self, jobs: list[_Job], started: float, done: asyncio.Future[tuple[list[Any], float]]
    ) -> None:
        self._running = False
        for index, job in enumerate(jobs):
            if job.future.done():
                continue
            if done.cancelled():
                job.future.cancel()
            elif (error := done.exception()) is not None:
                job.future.set_exception(error)
            else:
                values, seconds = done.result()
                job.future.set_result(Timed(values[index], started - job.queued_at, seconds))
        self._start_next()


def _work_of(jobs: list[_Job]) -> Callable[[], list[Any]]:
    """One call that returns the results of `jobs`, in order."""
    first = jobs[0]
    if len(jobs) == 1 or first.batch is None:
        return lambda: [first.work()]
    batch, items = first.batch, [job.item for job in jobs]
    return lambda: list(batch(items))


def _timed(work: Callable[[], T]) -> tuple[T, float]:
    began = time.perf_counter()
    value = work()
    return value, time.perf_counter() - began
