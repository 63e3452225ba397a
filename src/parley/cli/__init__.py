"""The `parley` command."""

from __future__ import annotations

import typer

from parley.cli import agent_tests, api_keys, audit, keys, orgs, serve, tokens, webhook_sender
from parley.cli.environment import serve_epilog

app = typer.Typer(
    name="parley",
    help="Parley: self-hostable voice conversations.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,  # plain help: rendering it with rich costs 0.2 s of start-up
)
app.command("serve", epilog=serve_epilog())(serve.serve)
app.command("migrate")(serve.migrate)
app.command("webhook-sender", hidden=True)(webhook_sender.webhook_sender)
app.add_typer(orgs.app, name="orgs")
app.add_typer(api_keys.app, name="api-keys")
app.add_typer(keys.app, name="keys")
app.add_typer(tokens.app, name="token")
app.add_typer(audit.app, name="audit")
app.add_typer(agent_tests.app, name="test")


def main() -> None:
    """Run the command line."""
    app()
