"""Operator commands: `parley orgs create`, `parley api-keys create`, `parley migrate`."""

from __future__ import annotations

import json
import re

import pytest
from typer.testing import CliRunner

from parley.cli import app

runner = CliRunner()


@pytest.fixture
def cli_env(database_url: str, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("PARLEY_DATABASE_URL", database_url)
    monkeypatch.delenv("PARLEY_REDIS_URL", raising=False)
    return database_url


def test_orgs_create_json_prints_org_and_key(cli_env: str) -> None:
    result = runner.invoke(app, ["orgs", "create", "acme", "--json"])

    assert result.exit_code == 0, result.output
    body = json.loads(result.stdout)
    assert set(body) == {"org", "api_key"}
    assert set(body["org"]) == {"id", "name"}
    assert body["org"]["name"] == "acme"
    assert body["org"]["id"].startswith("org_")
    assert re.fullmatch(r"parley_sk_[A-Za-z0-9_-]{43}", body["api_key"])


def test_orgs_create_duplicate_name_fails(cli_env: str) -> None:
    runner.invoke(app, ["orgs", "create", "twice", "--json"])
    result = runner.invoke(app, ["orgs", "create", "twice", "--json"])
    assert result.exit_code == 1
    assert json.loads(result.stderr)["error"]["code"] == "name_taken"


def test_orgs_create_invalid_name_fails(cli_env: str) -> None:
    result = runner.invoke(app, ["orgs", "create", "Not Valid"])
    assert result.exit_code == 1
    assert "validation_error" in result.stderr


@pytest.mark.parametrize("by", ["id", "name"])
def test_api_keys_create_json_by_org_id_or_name(cli_env: str, by: str) -> None:
    org = json.loads(runner.invoke(app, ["orgs", "create", "keys-org", "--json"]).stdout)["org"]

    result = runner.invoke(
        app, ["api-keys", "create", "--org", org[by], "--name", "deploy", "--json"]
    )

    assert result.exit_code == 0, result.output
    body = json.loads(result.stdout)
    assert set(body) == {"api_key", "secret"}
    assert set(body["api_key"]) == {"id", "name", "prefix", "last4", "created_at"}
    assert body["api_key"]["name"] == "deploy"
    assert body["api_key"]["last4"] == body["secret"][-4:]


def test_api_keys_create_unknown_org_fails(cli_env: str) -> None:
    result = runner.invoke(app, ["api-keys", "create", "--org", "ghost", "--json"])
    assert result.exit_code == 1
    assert json.loads(result.stderr)["error"]["code"] == "organization_not_found"


@pytest.mark.parametrize("name", ["", "x" * 101, "a\tb"], ids=["empty", "101-chars", "tab"])
def test_api_keys_create_refuses_a_name_the_api_refuses(cli_env: str, name: str) -> None:
    """One rule for a key's name, whoever asks: REST, the dashboard or the CLI."""
    runner.invoke(app, ["orgs", "create", "named-keys", "--json"])
    result = runner.invoke(
        app, ["api-keys", "create", "--org", "named-keys", "--name", name, "--json"]
    )
    assert result.exit_code == 1
    body = json.loads(result.stderr)
    assert body["error"]["code"] == "validation_error"
    assert set(body["param_errors"]) == {"name"}


def test_migrate_is_idempotent(cli_env: str) -> None:
    assert runner.invoke(app, ["migrate"]).exit_code == 0
    assert runner.invoke(app, ["migrate"]).exit_code == 0


def test_serve_refuses_workers_without_redis(cli_env: str) -> None:
    result = runner.invoke(app, ["serve", "--workers", "2"])
    assert result.exit_code == 2
    assert "PARLEY_REDIS_URL" in result.stderr


def test_orgs_create_text_tells_how_to_replace_a_lost_key(cli_env: str) -> None:
    result = runner.invoke(app, ["orgs", "create", "lost-key-org"])
    assert result.exit_code == 0, result.output
    assert "shown once" in result.stdout
    assert "Lost it? Make another: parley api-keys create --org lost-key-org" in result.stdout
