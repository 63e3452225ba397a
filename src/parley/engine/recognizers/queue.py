"""The process's recognition queue: one worker thread, bounded, finals before partials.

Every conversation of the process shares one recognizer model, and the model runs one
decode at a time on all the cores it is given, which is the fastest way to finish each
turn on a small machine. Decodes wait in this queue: finals (a turn's words, which a reply
waits for) go before partials (an early look while the user is still speaking), and a
partial is only run when nothing else is waiting or running, so partials never delay a
final by more than the one partial already running. The queue holds at most `max_pending`
finals; past that, RecognizerOverloaded.

Written by hand because no library offers an asyncio priority queue in front of a single
worker thread that can refuse optional work; it is short.
"""

from __future__ import annotations

import asyncio
import functools
import heapq
import itertools
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from parley.engine.errors import RecognizerOverloaded

T = TypeVar("T")

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


class RecognitionQueue:
    """Runs decodes one at a time in a worker thread (see the module doc)."""

    def __init__(self, *, max_pending: int = 32) -> None:
        self._max_pending = max_pending
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
        if not partial and sum(j.priority == _FINAL for j in self._heap) >= self._max_pending:
            raise RecognizerOverloaded()
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Timed[Any]] = loop.create_future()
        priority = _PARTIAL if partial else _FINAL
        heapq.heappush(
            self._heap, _Job(priority, next(self._sequence), work, future, time.perf_counter())
        )
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
            self._running = True
            started = time.perf_counter()
            loop = job.future.get_loop()
            running = loop.run_in_executor(self._executor, _timed, job.work)
            running.add_done_callback(functools.partial(self._finished, job, started))

    def _finished(self, job: _Job, started: float, done: asyncio.Future[tuple[Any, float]]) -> None:
        self._running = False
        if not job.future.done():
            if done.cancelled():
                job.future.cancel()
            elif (error := done.exception()) is not None:
                job.future.set_exception(error)
            else:
                value, seconds = done.result()
                job.future.set_result(Timed(value, started - job.queued_at, seconds))
        self._start_next()


def _timed(work: Callable[[], T]) -> tuple[T, float]:
    began = time.perf_counter()
    value = work()
    return value, time.perf_counter() - began
