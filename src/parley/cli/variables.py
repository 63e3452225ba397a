"""Refuse `PARLEY_*` variables that are not settings: a misspelled name would otherwise be
ignored without a word (`PARLEY_DATABSE_URL` would serve a new SQLite database).

The real names come from the Settings class itself, so a new setting is known at once.
Variables of the test and benchmark tools (`PARLEY_TEST_*`, `PARLEY_BENCH_*`,
`PARLEY_COVERAGE_FLOOR`, `PARLEY_DOCS_SCREENSHOTS`) and of the client commands
(`PARLEY_API_KEY`: `parley test run`) belong to those and are left alone.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pydantic_settings import BaseSettings

PREFIX = "PARLEY_"
TOOL_PREFIXES = ("PARLEY_TEST_", "PARLEY_BENCH_")
TOOL_VARIABLES = frozenset({"PARLEY_API_KEY", "PARLEY_COVERAGE_FLOOR", "PARLEY_DOCS_SCREENSHOTS"})
"""`PARLEY_API_KEY` is a client setting (`parley test run`'s key), set in a CI job beside
`parley serve`: not the server's, and not refused."""
ABBREVIATIONS = {
    "DB": "DATABASE",
    "PG": "DATABASE",
    "POSTGRES": "DATABASE",
    "POSTGRESQL": "DATABASE",
}
"""Words written for `DATABASE` that difflib alone would match to `REDIS` (`DB_URL`)."""


def setting_variables(settings_class: type[BaseSettings]) -> frozenset[str]:
    """The variable name of every field of `settings_class` (its `env_prefix` + the name)."""
    prefix = str(settings_class.model_config.get("env_prefix") or "")
    return frozenset(f"{prefix}{name}".upper() for name in settings_class.model_fields)


def unknown_variables(
    sources: Mapping[str, Iterable[str]], known: frozenset[str]
) -> list[tuple[str, str, str | None]]:
    """Each `PARLEY_*` name of each source (e.g. "the environment": its names) that is not in
    `known`, as (name, source, closest known name or None), sorted by name."""
    found: list[tuple[str, str, str | None]] = []
    for source, names in sources.items():
        for name in names:
            upper = name.upper()  # pydantic-settings matches names case-insensitively
            if not upper.startswith(PREFIX) or upper in known or _is_tool_variable(upper):
                continue
            found.append((name, source, closest(upper, known)))
    return sorted(found)


def closest(name: str, known: Iterable[str]) -> str | None:
    """The known name most like `name` (difflib, on the words after the prefix, with the
    usual abbreviations spelled out), or None when none is close."""
    words = name.removeprefix(PREFIX).split("_")
    wanted = "_".join(ABBREVIATIONS.get(word, word) for word in words)
    by_suffix = {known_name.removeprefix(PREFIX): known_name for known_name in known}
    matches = difflib.get_close_matches(wanted, sorted(by_suffix), n=1, cutoff=0.6)
    return by_suffix[matches[0]] if matches else None


def refusal_lines(unknown: list[tuple[str, str, str | None]]) -> list[str]:
    """One line per unknown variable, naming it, where it was set and the closest name."""
    lines = []
    for name, source, nearest in unknown:
        hint = f"did you mean {nearest}?" if nearest else "`parley serve --help` lists them"
        lines.append(f"{name} (in {source}) is not a Parley setting: {hint}")
    return lines


def _is_tool_variable(name: str) -> bool:
    return name in TOOL_VARIABLES or name.startswith(TOOL_PREFIXES)
