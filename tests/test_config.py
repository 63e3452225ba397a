"""Settings: the database time bounds are read from PARLEY_* variables and refuse nonsense."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from parley.composition.options import database_options, runtime_options
from parley.config import Settings

BOUND_VARIABLES = [
    "PARLEY_DATABASE_CONNECT_TIMEOUT_SECONDS",
    "PARLEY_DATABASE_STATEMENT_TIMEOUT_SECONDS",
    "PARLEY_DATABASE_POOL_TIMEOUT_SECONDS",
]


def test_database_timeouts_default_to_a_few_seconds(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in BOUND_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    settings = Settings(_env_file=None)  # type: ignore[call-arg]
    assert settings.database_connect_timeout_seconds == 3.0
    assert settings.database_statement_timeout_seconds == 5.0
    assert settings.database_pool_timeout_seconds == 3.0


def test_database_timeouts_read_from_environment_and_passed_down(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for n, name in enumerate(BOUND_VARIABLES, start=1):
        monkeypatch.setenv(name, str(n / 2))
    options = runtime_options(Settings(_env_file=None))  # type: ignore[call-arg]
    assert options.database_connect_timeout_seconds == 0.5
    assert options.database_statement_timeout_seconds == 1.0
    assert options.database_pool_timeout_seconds == 1.5


@pytest.mark.parametrize("name", BOUND_VARIABLES)
@pytest.mark.parametrize("value", ["0", "-1", "nope"])
def test_database_timeout_not_positive_refused(
    monkeypatch: pytest.MonkeyPatch, name: str, value: str
) -> None:
    monkeypatch.setenv(name, value)
    with pytest.raises(ValidationError):
        Settings(_env_file=None)  # type: ignore[call-arg]


def test_outbound_switches_default_off_and_passed_down(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PARLEY_OUTBOUND_ALLOW_HTTP", raising=False)
    monkeypatch.setenv("PARLEY_OUTBOUND_ALLOW_PRIVATE_NETWORKS", "true")
    settings = Settings(_env_file=None)  # type: ignore[call-arg]
    assert settings.outbound_allow_http is False
    options = runtime_options(settings)
    assert (options.outbound_allow_http, options.outbound_allow_private_networks) == (False, True)


def test_secret_key_fernet_key_accepted_and_never_shown(monkeypatch: pytest.MonkeyPatch) -> None:
    key = "Xk7-WCe3E0wC2C8NCjIqePJ-aopCsseSNxN4fm6vUl0="
    monkeypatch.setenv("PARLEY_SECRET_KEY", key)
    settings = Settings(_env_file=None)  # type: ignore[call-arg]
    options = runtime_options(settings)
    assert options.secret_key == key
    assert key not in repr(settings)
    assert key not in repr(options)


@pytest.mark.parametrize(
    "value", ["short", "Xk7-WCe3E0wC2C8NCjIqePJ-aopCsseSNxN4fm6vUl0", "%" * 44]
)
def test_secret_key_not_a_fernet_key_refused(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv("PARLEY_SECRET_KEY", value)
    with pytest.raises(ValidationError, match="must be a Fernet key") as caught:
        Settings(_env_file=None)  # type: ignore[call-arg]
    assert "Fernet.generate_key" in str(caught.value)


def test_secret_key_empty_means_unset(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PARLEY_SECRET_KEY", "")
    assert Settings(_env_file=None).secret_key is None  # type: ignore[call-arg]


def test_database_pool_size_defaults_to_20_and_passed_down(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("PARLEY_DATABASE_POOL_SIZE", raising=False)
    assert Settings(_env_file=None).database_pool_size == 20  # type: ignore[call-arg]
    monkeypatch.setenv("PARLEY_DATABASE_POOL_SIZE", "7")
    settings = Settings(_env_file=None)  # type: ignore[call-arg]
    assert runtime_options(settings).database_pool_size == 7
    assert database_options(settings).pool_size == 7


@pytest.mark.parametrize("value", ["0", "-1", "nope", "1001"])
def test_database_pool_size_out_of_range_refused(
    monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    monkeypatch.setenv("PARLEY_DATABASE_POOL_SIZE", value)
    with pytest.raises(ValidationError):
        Settings(_env_file=None)  # type: ignore[call-arg]
