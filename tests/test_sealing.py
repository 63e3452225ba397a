"""Secrets sealed at rest (API.md section 13): Fernet round trip, refusal of tampered or
foreign values, and where the key comes from (PARLEY_SECRET_KEY, else a 0600 key file)."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest
from cryptography.fernet import Fernet

from parley.sealing import (
    SECRET_FILE_NAME,
    SecretBox,
    SecretKeyUnavailable,
    SecretUnreadable,
    key_file_path,
    load_or_create_key_file,
    open_secret_box,
)
from tests.cli.test_startup_errors import assert_clear_refusal, free_port, parley

TOKEN = "twilio-auth-token-0123456789abcdef"


def test_seal_unseal_round_trip_hides_plain_text() -> None:
    box = SecretBox(Fernet.generate_key())
    sealed = box.seal(TOKEN)
    assert TOKEN not in sealed
    assert box.unseal(sealed) == TOKEN
    assert box.seal(TOKEN) != sealed  # a fresh IV each time


def test_unseal_tampered_value_raises_secret_unreadable() -> None:
    box = SecretBox(Fernet.generate_key())
    sealed = box.seal(TOKEN)
    flipped = sealed[:-6] + ("A" if sealed[-6] != "A" else "B") + sealed[-5:]
    with pytest.raises(SecretUnreadable) as caught:
        box.unseal(flipped)
    assert TOKEN not in str(caught.value)
    with pytest.raises(SecretUnreadable):
        box.unseal("not sealed at all")


def test_unseal_with_wrong_key_raises_without_naming_secret() -> None:
    key = Fernet.generate_key()
    sealed = SecretBox(key).seal(TOKEN)
    with pytest.raises(SecretUnreadable) as caught:
        SecretBox(Fernet.generate_key()).unseal(sealed)
    assert TOKEN not in caught.value.message
    assert key.decode() not in caught.value.message


def test_secret_box_invalid_key_raises_value_error() -> None:
    with pytest.raises(ValueError, match="not a Fernet key"):
        SecretBox("too-short")


def test_key_file_created_beside_sqlite_database_with_mode_0600(tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path}/data/parley.db"
    (tmp_path / "data").mkdir()
    opened = open_secret_box(None, database_url=url)
    path = tmp_path / "data" / SECRET_FILE_NAME
    assert opened.key_file == path
    assert opened.warning is None
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert opened.box.unseal(SecretBox(path.read_bytes().strip()).seal(TOKEN)) == TOKEN
    assert [p.name for p in (tmp_path / "data").iterdir()] == [SECRET_FILE_NAME]


def test_key_file_reused_on_restart_never_overwritten(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/parley.db"
    sealed = open_secret_box(None, database_url=url).box.seal(TOKEN)
    written = (tmp_path / SECRET_FILE_NAME).read_bytes()
    again = open_secret_box(None, database_url=url)
    assert again.box.unseal(sealed) == TOKEN
    assert (tmp_path / SECRET_FILE_NAME).read_bytes() == written


def test_key_file_relative_sqlite_url_resolves_against_working_directory(tmp_path: Path) -> None:
    path, warn = key_file_path("sqlite+aiosqlite:///db/parley.db", cwd=tmp_path)
    assert path == tmp_path / "db" / SECRET_FILE_NAME
    assert warn is False


def test_postgres_without_secret_key_uses_working_directory_and_warns(tmp_path: Path) -> None:
    opened = open_secret_box(
        None, database_url="postgresql+asyncpg://postgres@127.0.0.1/test", cwd=tmp_path
    )
    assert opened.key_file == tmp_path / SECRET_FILE_NAME
    assert opened.warning is not None
    assert "every instance of a fleet must share one PARLEY_SECRET_KEY" in opened.warning.replace(
        "Every", "every"
    )


def test_configured_secret_key_wins_and_writes_no_file(tmp_path: Path) -> None:
    key = Fernet.generate_key()
    opened = open_secret_box(key.decode(), database_url=f"sqlite:///{tmp_path}/parley.db")
    assert opened.key_file is None
    assert opened.box.unseal(SecretBox(key).seal(TOKEN)) == TOKEN
    assert list(tmp_path.iterdir()) == []


def test_key_file_unreadable_raises_naming_file(tmp_path: Path) -> None:
    path = tmp_path / SECRET_FILE_NAME
    path.mkdir()  # unreadable as a file, even for root
    with pytest.raises(SecretKeyUnavailable) as caught:
        load_or_create_key_file(path)
    assert str(path) in caught.value.message


def test_key_file_with_garbage_raises_naming_file(tmp_path: Path) -> None:
    path = tmp_path / SECRET_FILE_NAME
    path.write_text("garbage\n")
    with pytest.raises(SecretKeyUnavailable, match="does not hold a Fernet key"):
        load_or_create_key_file(path)
    assert path.read_text() == "garbage\n"


def test_serve_invalid_secret_key_exits_2_naming_variable(tmp_path: Path) -> None:
    result = parley(
        "serve",
        "--port",
        str(free_port()),
        cwd=tmp_path,
        PARLEY_DATABASE_URL=f"sqlite:///{tmp_path}/parley.db",
        PARLEY_SECRET_KEY="s3cret-pw-not-a-fernet-key",
        PARLEY_STT="none",
    )
    assert_clear_refusal(result, 2, "PARLEY_SECRET_KEY='****'", "must be a Fernet key")
    assert "not-a-fernet-key" not in result.stderr


def test_serve_unreadable_key_file_exits_3_naming_file(tmp_path: Path) -> None:
    (tmp_path / SECRET_FILE_NAME).mkdir()
    result = parley(
        "serve",
        "--port",
        str(free_port()),
        cwd=tmp_path,
        PARLEY_DATABASE_URL=f"sqlite:///{tmp_path}/parley.db",
        PARLEY_STT="none",
    )
    assert_clear_refusal(result, 3, str(tmp_path / SECRET_FILE_NAME), "PARLEY_SECRET_KEY")
