"""`parley audit verify`: passes on an untouched database, names the first bad event."""

from __future__ import annotations

import json

import pytest
from sqlalchemy import text
from tests import databases
from typer.testing import CliRunner

from parley.cli import app
from parley.db.engine import create_engine

runner = CliRunner()


@pytest.fixture
def cli_env(database_url: str, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("PARLEY_DATABASE_URL", database_url)
    monkeypatch.delenv("PARLEY_REDIS_URL", raising=False)
    return database_url


def create_org_with_keys(name: str) -> str:
    created = runner.invoke(app, ["orgs", "create", name, "--json"])
    assert created.exit_code == 0, created.output
    org_id: str = json.loads(created.stdout)["org"]["id"]
    for n in range(2):
        made = runner.invoke(app, ["api-keys", "create", "--org", name, "--name", f"k{n}"])
        assert made.exit_code == 0, made.output
    return org_id


def run_sql(url: str, statement: str, org_id: str) -> None:
    async def main() -> None:
        engine = create_engine(url)
        try:
            async with engine.begin() as connection:
                await connection.execute(text(statement), {"org": org_id})
        finally:
            await engine.dispose()

    databases.run_in_own_loop(main())


def test_audit_verify_untouched_passes(cli_env: str) -> None:
    org_id = create_org_with_keys("clean")

    result = runner.invoke(app, ["audit", "verify", "--json"])

    assert result.exit_code == 0, result.output
    body = json.loads(result.stdout)
    assert body == {
        "ok": True,
        "chains": [{"org_id": org_id, "events": 4, "ok": True, "first_bad": None}],
    }


def test_audit_verify_edited_event_reported_exit_1(cli_env: str) -> None:
    org_id = create_org_with_keys("edited")
    create_org_with_keys("bystander")
    run_sql(
        cli_env, "UPDATE audit_events SET details = '{}' WHERE org_id = :org AND seq = 3", org_id
    )

    result = runner.invoke(app, ["audit", "verify", "--org", "edited", "--json"])

    assert result.exit_code == 1, result.output
    [chain] = json.loads(result.stdout)["chains"]
    assert chain["first_bad"]["seq"] == 3
    assert chain["first_bad"]["action"] == "api_key.create"
    assert "edited" in chain["first_bad"]["reason"]


def test_audit_verify_deleted_event_reported_in_text(cli_env: str) -> None:
    org_id = create_org_with_keys("deleted")
    run_sql(cli_env, "DELETE FROM audit_events WHERE org_id = :org AND seq = 2", org_id)

    result = runner.invoke(app, ["audit", "verify"])

    assert result.exit_code == 1
    assert f"{org_id}: BROKEN at event 3: events 2 to 2 are missing" in result.stdout


def test_audit_verify_unknown_org_fails(cli_env: str) -> None:
    result = runner.invoke(app, ["audit", "verify", "--org", "nobody", "--json"])
    assert result.exit_code == 1
    assert json.loads(result.stderr)["error"]["code"] == "organization_not_found"
