"""`parley token`: mint a JWT with a private key, as a customer backend would (API.md 11).

`parley token mint --key private_key.pem [--kid KID] --iss ISS --aud AUD --sub SUB
--conversation-id ID [--ttl 900]` prints one compact JWT with a fresh `jti`, ready for
`Authorization: Bearer …` or `wss://…/v1/sts/ws?jwt=…`. Without `--kid`, the kid is read
from the `jwks.json` that `parley keys generate` wrote beside the key. Needs no configuration
and no database: it only uses `parley.jwt.mint`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import NoReturn

import typer

DEFAULT_TTL_SECONDS = 900
"""The spec's recommended lifetime: 15 minutes (parley.jwt.mint uses the same)."""

app = typer.Typer(help="Mint customer-signed JWTs.", no_args_is_help=True, rich_markup_mode=None)


@app.callback()
def token() -> None:
    """Mint customer-signed JWTs."""


@app.command("mint")
def mint(
    key: Path = typer.Option(..., "--key", help="PEM private key file.", dir_okay=False),
    kid: str | None = typer.Option(
        None,
        "--kid",
        help="Key ID published in the JWKS (default: the one in jwks.json beside --key).",
    ),
    iss: str = typer.Option(..., "--iss", help="Issuer registered with Parley."),
    aud: str = typer.Option(..., "--aud", help="Audience registered with Parley."),
    sub: str = typer.Option(..., "--sub", help="Opaque end-user ID (no personal data)."),
    conversation_id: str = typer.Option(..., "--conversation-id", help="The one conversation."),
    ttl: int = typer.Option(DEFAULT_TTL_SECONDS, "--ttl", min=1, help="Lifetime in seconds."),
) -> None:
    """Print a signed JWT for one end user and one conversation."""
    from parley.jwt.mint import mint_token

    if kid is None:
        kid = kid_beside(key)
    try:
        pem = key.read_bytes()
        jwt = mint_token(
            pem, kid=kid, iss=iss, aud=aud, sub=sub, conversation_id=conversation_id, ttl=ttl
        )
    except OSError as error:
        typer.echo(f"error: cannot read {key}: {error.strerror}", err=True)
        raise typer.Exit(1) from None
    except (ValueError, TypeError) as error:  # TypeError: an encrypted key needs a password
        typer.echo(f"error: unusable private key: {error}", err=True)
        raise typer.Exit(1) from None
    typer.echo(jwt)


def kid_beside(key: Path) -> str:
    """The kid of the one key in the `jwks.json` beside `key` (as `parley keys generate`
    writes them), or exit 1 saying to pass `--kid`."""
    from parley.cli.keys import JWKS_FILE

    jwks_path = key.parent / JWKS_FILE
    try:
        document = json.loads(jwks_path.read_text(encoding="utf-8"))
    except OSError as error:
        _refuse(f"no --kid given and {jwks_path} cannot be read ({error.strerror}): pass --kid")
    except ValueError:
        _refuse(f"no --kid given and {jwks_path} is not JSON: pass --kid")
    keys = document.get("keys") if isinstance(document, dict) else None
    kids = [k.get("kid") for k in keys if isinstance(k, dict)] if isinstance(keys, list) else []
    if len(kids) != 1 or not isinstance(kids[0], str) or not kids[0]:
        _refuse(
            f"no --kid given and {jwks_path} does not hold exactly one key with a kid: pass --kid"
        )
    return kids[0]


def _refuse(message: str) -> NoReturn:
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(1)
