"""`parley test run`'s key beside `parley serve` (API.md section 19): `PARLEY_API_KEY` is a
client setting, not refused as an unknown server setting."""

from __future__ import annotations

from parley.cli.variables import setting_variables, unknown_variables
from parley.config import Settings


def test_parley_api_key_is_not_refused_beside_parley_serve() -> None:
    known = setting_variables(Settings)
    assert unknown_variables({"the environment": ["PARLEY_API_KEY"]}, known) == []
    assert unknown_variables({"the environment": ["PARLEY_API_KEYS"]}, known) != []
