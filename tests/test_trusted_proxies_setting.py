"""PARLEY_TRUSTED_PROXIES: addresses or networks, comma-separated; anything else refused."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from parley.config import Settings, trusted_proxy_list


def test_trusted_proxies_unset_by_default_trusts_none() -> None:
    settings = Settings(_env_file=None)
    assert trusted_proxy_list(settings.trusted_proxies) == []


def test_trusted_proxies_addresses_and_networks_listed() -> None:
    settings = Settings(_env_file=None, trusted_proxies=" 127.0.0.1, 10.0.0.0/8,,::1 ")
    assert trusted_proxy_list(settings.trusted_proxies) == ["127.0.0.1", "10.0.0.0/8", "::1"]


@pytest.mark.parametrize("value", ["*", "proxy.example.com", "10.0.0.0/33", "127.0.0.1; rm"])
def test_trusted_proxies_not_an_address_refused(value: str) -> None:
    with pytest.raises(ValidationError, match="not an IP address or network"):
        Settings(_env_file=None, trusted_proxies=value)
