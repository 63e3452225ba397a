"""The suite under pytest-xdist: a crashed worker says why, and a stuck run ends.

- Each worker writes Python's fault handler output (a native crash's stack, every thread)
  and pytest-timeout's dump of a test past its limit to a file of its own; when a worker
  goes down, the controller prints that file, so the run's log names the crash.
- A crashed worker's test is reported failed once and not run again: pytest-xdist 3.8's
  group scheduler puts the crashed test back in its group's queue, where another worker
  ran it a second time (a second report, and a test that hangs hung twice) or, when every
  worker had been told it was done, nobody ran it and the run waited forever
  (`GroupScheduling`).
- The controller watches progress: if no test report arrives for `STALL_SECONDS` while
  tests remain (a worker that hung in a way no per-test limit catches, or a scheduler
  waiting on a worker that is gone), it prints what each worker was given and still holds,
  and exits with status 3. A stuck run then fails in minutes with its cause, instead of
  holding CI until its limit.
"""

from __future__ import annotations

import faulthandler
import os
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, TextIO

import pytest
import pytest_timeout
from xdist.scheduler import LoadGroupScheduling

STALL_SECONDS = float(os.environ.get("PARLEY_TEST_STALL_SECONDS", "600"))
"""No report for this long, with tests left: the run is stuck (the slowest test takes
about 50 s; a test past pytest-timeout's 120 s is ended by it)."""

_fault_file: TextIO | None = None


def fault_log(worker: str) -> Path:
    """Where a worker's crash stacks go (one run at a time per checkout's user)."""
    return Path(tempfile.gettempdir()) / f"parley-tests-{os.getuid()}-{worker}.faults"


def pytest_configure(config: pytest.Config) -> None:
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if worker is not None:
        global _fault_file
        _fault_file = fault_log(worker).open("w")
        faulthandler.enable(file=_fault_file, all_threads=True)
        # pytest-timeout's thread method dumps the stacks to the worker's terminal, which
        # xdist does not show, then exits the worker: dump them to the file instead.
        pytest_timeout.dump_stacks = _dump_stacks
    elif getattr(config.option, "dist", "no") != "no":  # the controller of an xdist run
        config.pluginmanager.register(_Watch(config), "parley-xdist-watch")


def pytest_unconfigure(config: pytest.Config) -> None:
    global _fault_file
    if _fault_file is not None:
        faulthandler.disable()
        _fault_file.close()
        _fault_file = None


def _dump_stacks(_terminal: object) -> None:
    if _fault_file is not None:
        _fault_file.write("\n+++ a test passed its time limit (pytest-timeout) +++\n")
        _fault_file.flush()
        faulthandler.dump_traceback(_fault_file, all_threads=True)


@pytest.hookimpl(optionalhook=True)  # a run with `-p no:xdist` has no such hook
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    if config.getvalue("dist") == "loadgroup":
        return GroupScheduling(config, log)
    return None


class GroupScheduling(LoadGroupScheduling):
    """`--dist loadgroup`, where a worker's crash neither runs its test again nor leaves the
    rest of its group waiting for a worker that was already told to stop."""

    def remove_node(self, node: Any) -> str | None:
        crashed: str | None = None
        for unit in self.assigned_work.get(node, {}).values():
            crashed = next((nodeid for nodeid, done in unit.items() if not done), None)
            if crashed is not None:
                break
        result: str | None = super().remove_node(node)
        if crashed is None:
            return result
        for scope, unit in list(self.workqueue.items()):
            if crashed in unit:
                unit[crashed] = True  # reported failed by the controller: not run again
            if all(unit.values()):
                del self.workqueue[scope]
        return result


class _Watch:
    """The controller's side: crashed workers' stacks printed, a stalled run ended."""

    def __init__(self, config: pytest.Config) -> None:
        self._config = config
        self._last = time.monotonic()
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="xdist-watch", daemon=True)

    def pytest_sessionstart(self) -> None:
        self._thread.start()

    def pytest_sessionfinish(self) -> None:
        self._done.set()

    def pytest_runtest_logreport(self) -> None:
        self._last = time.monotonic()

    def pytest_testnodedown(self, node: Any, error: object | None) -> None:
        if error is None:
            return
        worker = node.gateway.id
        path = fault_log(worker)
        text = path.read_text(errors="replace") if path.exists() else ""
        writer = self._config.get_terminal_writer()
        writer.line(f"\n[{worker}] went down ({error}); its fault log ({path}):", red=True)
        writer.line(text[-20_000:] or "(empty)")

    def _watch(self) -> None:
        while not self._done.wait(10):
            if time.monotonic() - self._last > STALL_SECONDS:
                self._report_stall()
                os._exit(3)

    def _report_stall(self) -> None:
        out = sys.__stdout__
        if out is None:
            return
        print(f"\nno test report for {STALL_SECONDS:.0f} s: the run is stuck.", file=out)
        session = self._config.pluginmanager.get_plugin("dsession")
        sched = getattr(session, "sched", None)
        for node, work in getattr(sched, "assigned_work", {}).items():
            pending = [
                nodeid for unit in work.values() for nodeid, done in unit.items() if not done
            ]
            print(f"  {node.gateway.id}: {len(pending)} pending {pending[:5]}", file=out)
        print(f"  not yet given out: {list(getattr(sched, 'workqueue', {}))[:10]}", file=out)
        out.flush()
