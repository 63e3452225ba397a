"""Secrets encrypted at rest (API.md section 13: a carrier's auth token is stored sealed).

`SecretBox` seals text with Fernet (AES-128-CBC + HMAC-SHA256, `cryptography`): a sealed
value carries its own authentication, so a tampered value, or one sealed under another key,
is refused rather than decrypted into garbage.

Where the key comes from (`open_secret_box`), first match wins:

1. `PARLEY_SECRET_KEY` (a Fernet key: 32 url-safe base64 bytes);
2. embedded mode (SQLite): the file `parley.secret` beside the database, created on the first
   start with mode 0600 and never overwritten (a new key would orphan every sealed value);
3. otherwise (PostgreSQL without `PARLEY_SECRET_KEY`): `parley.secret` in the working
   directory, with a warning, since every instance of a fleet must share one key.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from cryptography.fernet import Fernet, InvalidToken

from parley.errors import Unavailable

SECRET_FILE_NAME: Final = "parley.secret"  # noqa: S105 - a file name, not a secret
FLEET_WARNING: Final = (
    "PARLEY_SECRET_KEY is not set: stored secrets are sealed with the key in {path}. Every "
    "instance of a fleet must share one PARLEY_SECRET_KEY (make one with `python -c "
    '"from cryptography.fernet import Fernet; print(Fernet.generate_key().decode())"`).'
)


class SecretUnreadable(Unavailable):
    """A sealed value was tampered with or sealed under another key (names no secret)."""

    code = "secret_unreadable"
    message = (
        "A stored secret could not be decrypted: it was changed, or sealed under another "
        "PARLEY_SECRET_KEY."
    )


class SecretKeyUnavailable(Unavailable):
    """The key file cannot be read or created; the message names the file, never the key."""

    code = "secret_key_unavailable"
    message = "The secret key file cannot be used."


class SecretBox:
    """Seal and unseal short secrets with one Fernet key."""

    def __init__(self, key: bytes | str) -> None:
        """Use `key`, a Fernet key; raise ValueError (naming no key) if it is not one."""
        try:
            self._fernet = Fernet(key)
            self._key = base64.urlsafe_b64decode(key)
            self._derived: dict[str, bytes] = {}
        except (ValueError, TypeError):  # binascii.Error is a ValueError
            raise ValueError("not a Fernet key (32 url-safe base64-encoded bytes)") from None

    def derive(self, purpose: str) -> bytes:
        """A key of its own for `purpose` (HMAC-SHA256 of the purpose under this key): one
        secret setting, a fleet-wide key per use (the recordings' signed URLs)."""
        derived = self._derived.get(purpose)
        if derived is None:
            message = b"parley:" + purpose.encode("ascii")
            derived = self._derived[purpose] = hmac.new(self._key, message, hashlib.sha256).digest()
        return derived

    def seal(self, plain: str) -> str:
        """Return `plain` encrypted and authenticated, as ASCII text."""
        return self._fernet.encrypt(plain.encode("utf-8")).decode("ascii")

    def unseal(self, sealed: str) -> str:
        """Return the text `seal` was given; raise SecretUnreadable for any other value."""
        try:
            return self._fernet.decrypt(sealed.encode("ascii")).decode("utf-8")
        except (InvalidToken, UnicodeError, ValueError):
            raise SecretUnreadable() from None


@dataclass(frozen=True, slots=True)
class OpenedBox:
    """A SecretBox and, when its key came from a file, where and what to warn about."""

    box: SecretBox
    key_file: Path | None
    warning: str | None


def is_fernet_key(value: str) -> bool:
    """Tell whether `value` is a usable Fernet key."""
    try:
        SecretBox(value)
    except ValueError:
        return False
    return True


def key_file_path(database_url: str, *, cwd: Path | None = None) -> tuple[Path, bool]:
    """Where the key file lives for `database_url`, and whether a fleet warning is due.

    SQLite: beside the database file. Anything else: the working directory (warned about).
    """
    beside = embedded_directory(database_url, cwd=cwd)
    if beside is not None:
        return beside / SECRET_FILE_NAME, False
    return (cwd or Path.cwd()) / SECRET_FILE_NAME, True


def embedded_directory(database_url: str, *, cwd: Path | None = None) -> Path | None:
    """The directory of an SQLite database file (where embedded mode keeps its files: the
    key, the recordings); None for another database."""
    scheme, _, rest = database_url.partition("://")
    if not scheme.startswith("sqlite"):
        return None
    # "sqlite:///parley.db" is relative, "sqlite:////srv/parley.db" absolute.
    database = Path(rest.removeprefix("/").partition("?")[0])
    return ((cwd or Path.cwd()) / database).parent


def load_or_create_key_file(path: Path) -> bytes:
    """Read the key in `path`, creating it (mode 0600) if absent; never overwrite it.

    Raises SecretKeyUnavailable naming the file when it cannot be read, created or used.
    """
    if path.exists():
        return _read_key_file(path)
    key = Fernet.generate_key()
    # Written whole to a private temporary file, then linked into place: os.link fails if
    # the name exists, so of two processes starting together one key wins, and no reader
    # ever sees a half-written file.
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        temporary.unlink(missing_ok=True)  # a leftover of a crashed start
        descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(descriptor, "wb") as stream:
            stream.write(key + b"\n")
        try:
            os.link(temporary, path)
        except FileExistsError:
            return _read_key_file(path)
        finally:
            temporary.unlink(missing_ok=True)
    except OSError as error:
        raise SecretKeyUnavailable(f"{path}: cannot be created ({error.strerror})") from None
    return key


def _read_key_file(path: Path) -> bytes:
    try:
        key = path.read_bytes().strip()
    except OSError as error:
        raise SecretKeyUnavailable(f"{path}: cannot be read ({error.strerror})") from None
    if not is_fernet_key(key.decode("ascii", "replace")):
        raise SecretKeyUnavailable(f"{path}: does not hold a Fernet key")
    return key


def open_secret_box(
    secret_key: str | None, *, database_url: str, cwd: Path | None = None
) -> OpenedBox:
    """Build the SecretBox from `PARLEY_SECRET_KEY`, else from the key file (see above)."""
    if secret_key:
        return OpenedBox(box=SecretBox(secret_key), key_file=None, warning=None)
    path, warn = key_file_path(database_url, cwd=cwd)
    box = SecretBox(load_or_create_key_file(path))
    return OpenedBox(
        box=box, key_file=path, warning=FLEET_WARNING.format(path=path) if warn else None
    )
