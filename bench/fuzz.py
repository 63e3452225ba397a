"""Fuzz a live `parley serve` with schemathesis over its whole OpenAPI document.

Run: `scripts/fuzz [--database sqlite|postgres] [--max-examples N] [--seed S]` (it installs
schemathesis into `.fuzz-venv`, apart from the project's dependencies, and calls this file).

It serves a fresh database on a free loopback port (SQLite in a temporary directory, or a
PostgreSQL cluster of its own, started with the fault tests' helper and removed after),
takes the first API key `parley serve` prints, and runs every schemathesis phase (examples,
coverage, fuzzing, stateful) with the checks `not_a_server_error`,
`response_schema_conformance`, `status_code_conformance` and `content_type_conformance`.
It prints schemathesis's summary, then how many tracebacks the server logged, and exits
non-zero when schemathesis found a failure or the server logged an unhandled error.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.faults.pg_cluster import PostgresCluster, free_port  # noqa: E402

CHECKS = (
    "not_a_server_error,response_schema_conformance,status_code_conformance,"
    "content_type_conformance"
)
SCHEMATHESIS = ROOT / ".fuzz-venv" / "bin" / "schemathesis"


@contextlib.contextmanager
def database(kind: str, directory: Path) -> Iterator[str]:
    """Yield the URL of a fresh database of `kind`."""
    if kind == "sqlite":
        yield f"sqlite:///{directory / 'fuzz.db'}"
        return
    cluster = PostgresCluster()
    try:
        cluster.start()
        yield cluster.url
    finally:
        cluster.destroy()


@contextlib.contextmanager
def serving(url: str, directory: Path) -> Iterator[tuple[str, str, Path]]:
    """Run `parley serve`; yield its base URL, first API key and error log."""
    port = free_port()
    out, err = directory / "serve.out", directory / "serve.err"
    env = {**os.environ, "PARLEY_DATABASE_URL": url, "PARLEY_REDIS_URL": ""}
    with out.open("w") as stdout, err.open("w") as stderr:
        process = subprocess.Popen(  # noqa: S603 (our own CLI)
            [sys.executable, "-m", "parley", "serve", "--port", str(port)],
            cwd=directory,
            env=env,
            stdout=stdout,
            stderr=stderr,
        )
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(600):  # bounded: 60 s
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{base}/health", timeout=1).status_code == 200:
                    break
            time.sleep(0.1)
        else:
            raise RuntimeError(f"parley serve did not come up: {err.read_text()[-2000:]}")
        key = re.search(r"parley_sk_[A-Za-z0-9_-]{43}", out.read_text())
        if key is None:
            raise RuntimeError("parley serve printed no API key")
        yield base, key.group(0), err
    finally:
        process.terminate()
        try:
            process.wait(15)
        except subprocess.TimeoutExpired:
            process.kill()


ACCESS_LINE = re.compile(r'"(?P<request>[A-Z]+ [^"]*)" (?P<status>\d{3}) (?P<ms>[\d.]+)ms')


def report_durations(log: str) -> None:
    """Print the status counts and the slowest requests of the server's access log."""
    answers = [(float(m["ms"]), m["status"], m["request"]) for m in ACCESS_LINE.finditer(log)]
    statuses: dict[str, int] = {}
    for _, status, _ in answers:
        statuses[status] = statuses.get(status, 0) + 1
    print(f"server answers: {len(answers)}; by status: {dict(sorted(statuses.items()))}")
    for ms, status, request in sorted(answers, reverse=True)[:5]:
        print(f"  slowest: {ms:8.1f} ms {status} {request[:100]}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--database", choices=["sqlite", "postgres"], default="sqlite")
    parser.add_argument("--max-examples", type=int, default=150, help="per operation and phase")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--workers", default="2")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="parley-fuzz-") as tmp:
        directory = Path(tmp)
        with database(args.database, directory) as url, serving(url, directory) as served:
            base, key, errors = served
            command = [
                str(SCHEMATHESIS), "run", f"{base}/openapi.json",
                "--header", f"Authorization: Bearer {key}",
                "--checks", CHECKS,
                "--max-examples", str(args.max_examples),
                "--seed", str(args.seed),
                "--workers", args.workers,
                "--request-timeout", "30",
                "--no-color",
            ]  # fmt: skip
            print(f"database: {args.database}; {' '.join(command[:3])} --checks {CHECKS} "
                  f"--max-examples {args.max_examples} --seed {args.seed}", flush=True)  # fmt: skip
            status = subprocess.run(command, cwd=directory, check=False).returncode  # noqa: S603
            log = errors.read_text()
        tracebacks = log.count("Traceback (most recent call last)")
        unhandled = log.count("unhandled error")
        print(f"server log: {tracebacks} tracebacks, {unhandled} unhandled errors")
        report_durations(log)
        if tracebacks or unhandled:
            print(log[-4000:])
    return status or int(bool(tracebacks or unhandled))


if __name__ == "__main__":
    sys.exit(main())
