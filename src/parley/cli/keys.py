"""`parley keys`: the customer's JWT signing keys (API.md sections 7 and 11).

`parley keys generate --alg EdDSA --out DIR` writes `DIR/private_key.pem` (mode 0600: keep it
on the backend that mints tokens) and `DIR/jwks.json` (publish it at the JWKS URL registered
with `PUT /v1/auth/jwt`, or register its key as a static key). Needs no configuration and no
database: it only uses `parley.jwt.mint`.
"""

from __future__ import annotations

import json
import os
from enum import StrEnum
from pathlib import Path

import typer

app = typer.Typer(
    help="Make signing keys for customer-minted JWTs.", no_args_is_help=True, rich_markup_mode=None
)

PRIVATE_KEY_FILE = "private_key.pem"
JWKS_FILE = "jwks.json"


class Alg(StrEnum):
    """The algorithms Parley verifies (spec section 5.3); EdDSA is recommended."""

    EDDSA = "EdDSA"
    ES256 = "ES256"
    RS256 = "RS256"


@app.callback()
def keys() -> None:
    """Make signing keys for customer-minted JWTs."""


@app.command("generate")
def generate(
    alg: Alg = typer.Option(Alg.EDDSA, "--alg", help="Signing algorithm."),
    out: Path = typer.Option(..., "--out", help="Directory for private_key.pem and jwks.json."),
    kid: str | None = typer.Option(None, "--kid", help="Key ID (default: RFC 7638 thumbprint)."),
    force: bool = typer.Option(False, "--force", help="Overwrite existing files."),
    as_json: bool = typer.Option(False, "--json", help="Print the result as JSON."),
) -> None:
    """Generate a key pair: a private key to keep and the JWKS to publish."""
    from parley.jwt.mint import generate_key_pair

    private_path, jwks_path = out / PRIVATE_KEY_FILE, out / JWKS_FILE
    existing = [str(p) for p in (private_path, jwks_path) if p.exists()]
    if existing and not force:
        typer.echo(f"error: {', '.join(existing)} exists; pass --force to replace", err=True)
        raise typer.Exit(1)
    try:
        pair = generate_key_pair(alg.value, kid=kid)
    except ValueError as error:
        typer.echo(f"error: {error}", err=True)
        raise typer.Exit(1) from None
    out.mkdir(parents=True, exist_ok=True)
    _write_private(private_path, pair.private_key_pem)
    jwks_path.write_text(json.dumps(pair.jwks, indent=2) + "\n", encoding="utf-8")
    if as_json:
        result = {
            "alg": pair.alg,
            "kid": pair.kid,
            "private_key": str(private_path),
            "jwks": str(jwks_path),
        }
        typer.echo(json.dumps(result))
        return
    typer.echo(f"Generated an {pair.alg} key with kid {pair.kid}.")
    typer.echo(f"  private key (keep secret): {private_path}")
    typer.echo(f"  JWKS (publish it):         {jwks_path}")


def _write_private(path: Path, pem: str) -> None:
    """Write the private key readable by its owner only, whatever the umask."""
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w", encoding="ascii") as handle:
        handle.write(pem)
    path.chmod(0o600)
