"""`parley audit`: check the audit trail's hash chains."""

from __future__ import annotations

from typing import TYPE_CHECKING

import typer

from parley.cli.common import JsonOption, emit, load_settings, run_with_database

if TYPE_CHECKING:
    from parley.services import DatabaseContext, audit

app = typer.Typer(help="Check the audit trail.", no_args_is_help=True, rich_markup_mode=None)


@app.command("verify")
def verify(
    org: str | None = typer.Option(None, "--org", help="Organization ID or name (default: all)."),
    as_json: bool = JsonOption,
) -> None:
    """Recompute every event's hash; report the first bad event of each chain (exit 1)."""
    from parley.services import audit, orgs  # imported here: the CLI starts without them

    async def use(ctx: DatabaseContext) -> list[audit.ChainReport]:
        org_id = (await orgs.find_org(ctx, id_or_name=org)).id if org is not None else None
        return await audit.verify_chains(ctx, org_id=org_id)

    reports = run_with_database(load_settings(), use, as_json=as_json)
    ok = all(report.ok for report in reports)
    value = {
        "ok": ok,
        "chains": [
            {
                "org_id": report.org_id,
                "events": report.events,
                "ok": report.ok,
                "first_bad": None
                if report.first_bad is None
                else {
                    "seq": report.first_bad.seq,
                    "action": report.first_bad.action,
                    "reason": report.first_bad.reason,
                },
            }
            for report in reports
        ],
    }
    lines = []
    for report in reports:
        if report.first_bad is None:
            lines.append(f"{report.org_id}: ok ({report.events} events)")
        else:
            bad = report.first_bad
            lines.append(f"{report.org_id}: BROKEN at event {bad.seq}: {bad.reason}")
    emit(value, as_json=as_json, text="\n".join(lines) or "no audit events")
    if not ok:
        raise typer.Exit(1)
