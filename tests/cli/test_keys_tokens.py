"""`parley keys generate` and `parley token mint`, mounted as the main app mounts them."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest
import typer
import typer.testing
from tests.jwt.kit import AUD, ISS, InMemoryIssuers
from typer.testing import CliRunner

from parley.cli import keys, tokens
from parley.clock import SystemClock
from parley.jwt import Algorithm, KeySet, load_jwks, verify

ORG = "org_00000000000000000000000000000001"

cli = typer.Typer()
cli.add_typer(keys.app, name="keys")
cli.add_typer(tokens.app, name="token")
runner = CliRunner()


def generate(out: Path, *args: str) -> dict[str, str]:
    result = runner.invoke(cli, ["keys", "generate", "--out", str(out), "--json", *args])
    assert result.exit_code == 0, result.output
    parsed: dict[str, str] = json.loads(result.stdout)
    return parsed


def read_jwks(path: str) -> KeySet:
    return load_jwks(json.loads(Path(path).read_text()))


def mint(key_file: str, kid: str, *extra: str) -> str:
    result = runner.invoke(
        cli,
        [
            "token", "mint", "--key", key_file, "--kid", kid, "--iss", ISS, "--aud", AUD,
            "--sub", "user_42", "--conversation-id", "conv-1", *extra,
        ],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    return result.stdout.strip()


@pytest.mark.anyio
@pytest.mark.parametrize("alg", ["EdDSA", "ES256", "RS256"])
async def test_keys_generate_then_token_mint_verifies(alg: Algorithm, tmp_path: Path) -> None:
    made = generate(tmp_path, "--alg", alg)
    assert made["alg"] == alg
    key_set = read_jwks(made["jwks"])
    issuers = InMemoryIssuers()
    issuers.register(ISS, ORG, list(key_set.keys))
    token = mint(made["private_key"], made["kid"], "--ttl", "600")
    verified = await verify(token, issuers=issuers, clock=SystemClock())  # minted at real time
    assert (verified.alg, verified.kid, verified.exp - verified.iat) == (alg, made["kid"], 600)
    assert verified.jti


def test_keys_generate_private_key_owner_only(tmp_path: Path) -> None:
    made = generate(tmp_path / "new-dir")
    mode = stat.S_IMODE(Path(made["private_key"]).stat().st_mode)
    assert mode == 0o600
    assert Path(made["private_key"]).name == "private_key.pem"
    assert Path(made["jwks"]).name == "jwks.json"


def test_keys_generate_text_output_names_kid_and_paths(tmp_path: Path) -> None:
    result = runner.invoke(cli, ["keys", "generate", "--out", str(tmp_path), "--kid", "k1"])
    assert result.exit_code == 0, result.output
    assert "kid k1" in result.stdout
    assert str(tmp_path / "jwks.json") in result.stdout


def test_keys_generate_existing_files_kept_without_force(tmp_path: Path) -> None:
    first = generate(tmp_path)
    result = runner.invoke(cli, ["keys", "generate", "--out", str(tmp_path)])
    assert result.exit_code == 1
    assert "--force" in result.stderr
    assert json.loads(Path(first["jwks"]).read_text())["keys"][0]["kid"] == first["kid"]
    assert generate(tmp_path, "--force")["kid"] != first["kid"]


def test_keys_generate_unknown_alg_refused(tmp_path: Path) -> None:
    result = runner.invoke(cli, ["keys", "generate", "--out", str(tmp_path), "--alg", "HS256"])
    assert result.exit_code == 2
    assert not (tmp_path / "private_key.pem").exists()


def test_token_mint_prints_one_compact_jwt(tmp_path: Path) -> None:
    made = generate(tmp_path)
    first, second = mint(made["private_key"], made["kid"]), mint(made["private_key"], made["kid"])
    assert first.count(".") == 2
    assert "\n" not in first
    assert first != second  # a fresh jti each time


def test_token_mint_missing_key_file_fails(tmp_path: Path) -> None:
    result = runner.invoke(
        cli,
        [
            "token", "mint", "--key", str(tmp_path / "absent.pem"), "--kid", "k", "--iss", ISS,
            "--aud", AUD, "--sub", "u", "--conversation-id", "c",
        ],
    )  # fmt: skip
    assert result.exit_code == 1
    assert "cannot read" in result.stderr


def test_token_mint_public_key_file_refused(tmp_path: Path) -> None:
    made = generate(tmp_path)
    result = runner.invoke(
        cli,
        [
            "token", "mint", "--key", made["jwks"], "--kid", made["kid"], "--iss", ISS,
            "--aud", AUD, "--sub", "u", "--conversation-id", "c",
        ],
    )  # fmt: skip
    assert result.exit_code == 1
    assert "unusable private key" in result.stderr


def mint_without_kid(key_file: Path) -> typer.testing.Result:
    return runner.invoke(
        cli,
        [
            "token", "mint", "--key", str(key_file), "--iss", ISS, "--aud", AUD,
            "--sub", "user_42", "--conversation-id", "conv-1",
        ],
    )  # fmt: skip


@pytest.mark.anyio
async def test_token_mint_without_kid_reads_it_from_the_key_folder(tmp_path: Path) -> None:
    made = generate(tmp_path, "--alg", "ES256")
    result = mint_without_kid(Path(made["private_key"]))
    assert result.exit_code == 0, result.output
    issuers = InMemoryIssuers()
    issuers.register(ISS, ORG, list(read_jwks(made["jwks"]).keys))
    verified = await verify(result.stdout.strip(), issuers=issuers, clock=SystemClock())
    assert verified.kid == made["kid"]


def test_token_mint_without_kid_and_without_jwks_says_to_pass_kid(tmp_path: Path) -> None:
    made = generate(tmp_path)
    Path(made["jwks"]).unlink()
    result = mint_without_kid(Path(made["private_key"]))
    assert result.exit_code == 1
    assert "pass --kid" in result.stderr
    assert "Traceback" not in result.output
