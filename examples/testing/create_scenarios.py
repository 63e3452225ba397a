"""Create (or update) the test scenarios of a JSON file in a project of a Parley server.

    python examples/testing/create_scenarios.py examples/testing/scenarios.json \
        [--project main] [--server http://127.0.0.1:8000] [--api-key KEY]

The file is a JSON array of scenario bodies, each POSTed as it is to
`/v1/projects/{project}/test_scenarios` (docs/testing-an-agent.md). A scenario whose name is
taken in the project is updated instead (PATCH with the same body), so the file can be
applied again after an edit. The key is `--api-key`, else `PARLEY_API_KEY`. Prints one line
per scenario; exits 1 on the first refusal, with the server's error.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

import httpx


def apply(http: httpx.Client, project: str, scenario: dict[str, Any]) -> str:
    """Create the scenario, or update it when its name is taken; what was done."""
    path = f"/v1/projects/{project}/test_scenarios"
    created = http.post(path, json=scenario)
    if created.status_code == 201:
        return "created"
    if created.status_code == 409 and created.json()["error"]["code"] == "name_taken":
        changes = {key: value for key, value in scenario.items() if key != "name"}
        updated = http.patch(f"{path}/{scenario['name']}", json=changes)
        updated.raise_for_status()
        return "updated"
    created.raise_for_status()
    raise RuntimeError(f"unexpected answer {created.status_code}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("file", type=Path)
    parser.add_argument("--project", default="main")
    parser.add_argument("--server", default="http://127.0.0.1:8000")
    parser.add_argument("--api-key", default=os.environ.get("PARLEY_API_KEY"))
    args = parser.parse_args()
    if not args.api_key:
        parser.error("give --api-key or set PARLEY_API_KEY")
    scenarios = json.loads(args.file.read_text(encoding="utf-8"))
    headers = {"Authorization": f"Bearer {args.api_key}"}
    with httpx.Client(base_url=args.server, headers=headers, timeout=30) as http:
        for scenario in scenarios:
            try:
                done = apply(http, args.project, scenario)
            except httpx.HTTPStatusError as error:
                refusal = f"{scenario.get('name')}: refused: {error.response.text}"
                print(refusal, file=sys.stderr)  # noqa: T201
                return 1
            print(f"{scenario['name']}: {done}")  # noqa: T201 - the script reports
    return 0


if __name__ == "__main__":
    sys.exit(main())
