"""`parley test run`: run a project's agent test scenarios on a Parley server, for CI
(API.md section 19).

`parley test run --project P [--scenario S …] [--junit FILE] [--server URL] [--api-key KEY]`
queues a run (`POST /v1/projects/P/test_runs`), waits for it, prints one line per scenario
(`name: passed`, or `name: failed: ` and its failures), writes JUnit XML when asked (one
`testcase` per scenario, a `failure` element for each failed one) and exits 1 when a
scenario failed or the run ended `error`, 0 when every one passed, 2 when the server could
not be asked. The key is also read from `PARLEY_API_KEY`. A client of the REST API only: no
configuration, no database.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

if TYPE_CHECKING:  # imported when the command runs: `parley --help` stays light
    import httpx

DEFAULT_SERVER = "http://127.0.0.1:8000"
POLL_SECONDS = 1.0
FINISHED = ("passed", "failed", "error")

app = typer.Typer(help="Run agent test scenarios.", no_args_is_help=True, rich_markup_mode=None)


@app.callback()
def test() -> None:
    """Run agent test scenarios."""


@app.command("run")
def run(
    project: str = typer.Option(..., "--project", help="The project (name or ID)."),
    scenario: list[str] | None = typer.Option(
        None, "--scenario", help="A scenario to run (repeat; default: all of the project's)."
    ),
    junit: Path | None = typer.Option(
        None, "--junit", help="Write JUnit XML here.", dir_okay=False
    ),
    server: str = typer.Option(DEFAULT_SERVER, "--server", help="The Parley server's URL."),
    api_key: str = typer.Option(
        ..., "--api-key", envvar="PARLEY_API_KEY", help="An API key (or PARLEY_API_KEY)."
    ),
    timeout: float = typer.Option(1800.0, "--timeout", min=1, help="Seconds to wait for the run."),
) -> None:
    """Run the project's scenarios and wait; exit 1 if one failed."""
    import httpx

    headers = {"Authorization": f"Bearer {api_key}"}
    try:
        with httpx.Client(base_url=server.rstrip("/"), headers=headers, timeout=30) as client:
            finished = _run(client, project, scenario or None, timeout)
    except httpx.HTTPError as error:
        typer.echo(f"error: cannot reach {server}: {error}", err=True)
        raise typer.Exit(2) from None
    for result in finished["results"]:
        state = "passed" if result["passed"] else "failed: " + "; ".join(result["failures"])
        typer.echo(f"{result['scenario']}: {state}")
    typer.echo(f"test run {finished['id']}: {finished['status']}")
    if junit is not None:
        junit.write_bytes(junit_xml(project, finished))
    raise typer.Exit(0 if finished["status"] == "passed" else 1)


def _run(client: httpx.Client, project: str, scenarios: list[str] | None, timeout: float) -> Any:
    body = {"scenarios": scenarios} if scenarios else {}
    queued = client.post(f"/v1/projects/{project}/test_runs", json=body)
    if queued.status_code != 202:
        _refused(queued)
    run_id = queued.json()["test_run"]["id"]
    deadline = time.monotonic() + timeout
    while True:
        answer = client.get(f"/v1/test_runs/{run_id}")
        if answer.status_code != 200:
            _refused(answer)
        found = answer.json()["test_run"]
        if found["status"] in FINISHED:
            return found
        if time.monotonic() > deadline:
            typer.echo(f"error: test run {run_id} did not finish in {timeout:.0f} s", err=True)
            raise typer.Exit(2)
        time.sleep(POLL_SECONDS)


def _refused(answer: httpx.Response) -> None:
    try:
        error = answer.json()
    except ValueError:
        error = answer.text
    typer.echo(f"error: the server answered {answer.status_code}: {error}", err=True)
    raise typer.Exit(2)


def junit_xml(project: str, finished: dict[str, Any]) -> bytes:
    """The run as JUnit XML: one `testcase` per scenario, a `failure` for each failed one."""
    from xml.etree import ElementTree

    results = finished["results"]
    failed = [result for result in results if not result["passed"]]
    suite = ElementTree.Element(
        "testsuite",
        name=f"parley.{project}",
        tests=str(len(results)),
        failures=str(len(failed)),
        errors="0",
    )
    for result in results:
        case = ElementTree.SubElement(
            suite, "testcase", classname=f"parley.{project}", name=result["scenario"]
        )
        if not result["passed"]:
            failure = ElementTree.SubElement(case, "failure", message="; ".join(result["failures"]))
            failure.text = "\n".join(result["failures"])
            if result.get("conversation_id"):
                failure.text += f"\nconversation: {result['conversation_id']}"
    written: bytes = ElementTree.tostring(suite, encoding="utf-8", xml_declaration=True)
    return written
