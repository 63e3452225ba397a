"""How long the `parley` command takes to answer, beside `python -c pass`.

Runs each command that does not serve N times (default 7) as a fresh process of this
interpreter, against a temporary SQLite database (migrated before the first timing, so the
database commands find the schema current, as they usually do), and prints the median and
the best wall time of each as a Markdown table (on a machine shared with other jobs the
median moves with their load; the best run is close to what the command itself costs):

    .venv/bin/python bench/cli_start.py [--runs N]

The commands are the documented ones: `--help`, `keys generate`, `token mint`,
`orgs create`, `api-keys create --org default` and `migrate`. The database commands do real
work (a transaction that inserts an organization or a key), so their figure is start-up
plus that work.

One more row is no Parley command: a process that only imports the libraries every
database command needs before any Parley code runs (typer, pydantic-settings, SQLAlchemy's
asyncio extension and the SQLite driver), with the collector tuned as `parley` tunes it.
It is the floor of those commands on the machine at hand; the table ends with Parley's own
share of `orgs create` and `api-keys create` (each median minus the floor's).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from parley.__main__ import COMMAND_GC_THRESHOLD

TARGET_SECONDS = 0.5
PARLEY = [sys.executable, "-m", "parley"]
LIBRARIES = "libraries of a database command, imported only"
IMPORT_LIBRARIES = (
    "import gc; gc.set_threshold({threshold}); "
    "import typer, pydantic_settings, sqlalchemy.ext.asyncio, aiosqlite, "
    "sqlalchemy.dialects.sqlite.aiosqlite; gc.freeze()"
)
DATABASE_COMMANDS = ("parley orgs create", "parley api-keys create")
"""The commands that run a service on the database (`migrate` on a current schema needs
neither the ORM nor the asyncio extension)."""


def timed(argv: list[str], env: dict[str, str], cwd: Path) -> float:
    """Run argv once; return its wall time in seconds; fail loudly if it fails."""
    started = time.perf_counter()
    result = subprocess.run(  # noqa: S603 - this interpreter, fixed arguments
        argv, env=env, cwd=cwd, capture_output=True, text=True, check=False
    )
    elapsed = time.perf_counter() - started
    if result.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed ({result.returncode}):\n{result.stderr}")
    return elapsed


def times_of(
    runs: int, make_argv: Callable[[int], list[str]], env: dict[str, str], cwd: Path
) -> list[float]:
    return [timed(make_argv(i), env, cwd) for i in range(runs)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7, help="runs per command (median)")
    runs = parser.parse_args().runs
    with tempfile.TemporaryDirectory() as scratch:
        work = Path(scratch)
        env = {**os.environ, "PARLEY_DATABASE_URL": f"sqlite:///{work / 'bench.db'}"}
        env.pop("PARLEY_REDIS_URL", None)
        subprocess.run([*PARLEY, "migrate"], env=env, cwd=work, check=True, capture_output=True)  # noqa: S603
        subprocess.run(  # noqa: S603
            [*PARLEY, "orgs", "create", "default"],
            env=env,
            cwd=work,
            check=True,
            capture_output=True,
        )
        made = subprocess.run(  # noqa: S603
            [*PARLEY, "keys", "generate", "--out", "keys", "--json"],
            env=env, cwd=work, check=True, capture_output=True, text=True,
        )  # fmt: skip
        kid = json.loads(made.stdout)["kid"]
        threshold = ", ".join(map(str, COMMAND_GC_THRESHOLD))
        import_libraries = IMPORT_LIBRARIES.format(threshold=threshold)
        mint = ["token", "mint", "--key", "keys/private_key.pem", "--kid", kid, "--iss", "i",
                "--aud", "a", "--sub", "s", "--conversation-id", "c"]  # fmt: skip
        commands: list[tuple[str, Callable[[int], list[str]]]] = [
            ("python -c pass", lambda _: [sys.executable, "-c", "pass"]),
            (LIBRARIES, lambda _: [sys.executable, "-c", import_libraries]),
            ("parley --help", lambda _: [*PARLEY, "--help"]),
            ("parley keys generate", lambda i: [*PARLEY, "keys", "generate", "--out", f"k{i}"]),
            ("parley token mint", lambda _: [*PARLEY, *mint]),
            ("parley orgs create", lambda i: [*PARLEY, "orgs", "create", f"bench-{i}"]),
            (
                "parley api-keys create",
                lambda _: [*PARLEY, "api-keys", "create", "--org", "default"],
            ),
            ("parley migrate", lambda _: [*PARLEY, "migrate"]),
        ]
        print(f"| command | median of {runs} runs | best run | over `python -c pass` |")
        print("|---|---|---|---|")
        medians: dict[str, float] = {}
        for name, make_argv in commands:
            times = times_of(runs, make_argv, env, work)
            seconds = medians[name] = statistics.median(times)
            baseline = medians["python -c pass"]
            extra = "" if name == "python -c pass" else f"+{seconds - baseline:.2f} s"
            flag = (
                " (over target)" if name.startswith("parley") and seconds > TARGET_SECONDS else ""
            )
            print(f"| `{name}` | {seconds:.2f} s{flag} | {min(times):.2f} s | {extra} |")
        floor = medians[LIBRARIES]
        shares = ", ".join(f"`{name}` {medians[name] - floor:+.2f} s" for name in DATABASE_COMMANDS)
        print(f"\nParley's own share over the libraries alone ({floor:.2f} s): {shares}")


if __name__ == "__main__":
    main()
