"""The address policy of every call leaving the service (STYLE convention 22)."""

from __future__ import annotations

import pytest

from parley.outbound import AddressPolicy, is_public_address, literal_address

STRICT = AddressPolicy()
RELAXED = AddressPolicy(allow_http=True, allow_private_networks=True)


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("http://hooks.example.com/x", "PARLEY_OUTBOUND_ALLOW_HTTP=true"),
        ("ftp://hooks.example.com/x", "must use https."),
        ("file:///etc/passwd", "must use https."),
        ("https://user:pw@hooks.example.com/x", "no credentials"),
        ("https:///x", "host"),
        ("/relative", "must use https."),
        ("https://127.0.0.1/x", "PARLEY_OUTBOUND_ALLOW_PRIVATE_NETWORKS=true"),
        ("https://[::1]/x", "PARLEY_OUTBOUND_ALLOW_PRIVATE_NETWORKS=true"),
        ("https://169.254.169.254/latest", "public addresses only"),
        ("https://[::ffff:10.0.0.1]/x", "public addresses only"),
        ("https://127.1/x", "public addresses only"),
        ("https://0x7f.1/x", "public addresses only"),
    ],
    ids=[
        "http",
        "ftp",
        "file",
        "userinfo",
        "no-host",
        "relative",
        "loopback",
        "ipv6-loopback",
        "metadata",
        "mapped",
        "short-ipv4",
        "hex-ipv4",
    ],
)
def test_static_refusal_names_reason_and_switch(url: str, reason: str) -> None:
    refusal = STRICT.static_refusal(url)
    assert refusal is not None
    assert reason in refusal
    assert "pw" not in refusal


@pytest.mark.parametrize(
    "url",
    ["https://hooks.example.com/x/{id}?a=1", "https://93.184.216.34/x", "https://[2606:4700::1]/"],
)
def test_static_refusal_public_https_accepted(url: str) -> None:
    assert STRICT.static_refusal(url) is None


def test_static_refusal_switches_allow_http_and_private_literals() -> None:
    assert RELAXED.static_refusal("http://127.0.0.1:8080/hook") is None
    assert RELAXED.static_refusal("ftp://127.0.0.1/") == "The URL must use https or http."
    assert RELAXED.static_refusal("http://u:p@127.0.0.1/") is not None


def test_static_refusal_names_the_callers_switches() -> None:
    jwks = AddressPolicy(subject="The JWKS URL", switches="PARLEY_JWKS_ALLOW")
    refusal = jwks.static_refusal("http://keys.example.com/")
    assert refusal == (
        "The JWKS URL must use https "
        "(set PARLEY_JWKS_ALLOW_HTTP=true to allow http, e.g. for local testing)."
    )


def test_address_refusal_any_private_address_refuses_all() -> None:
    assert STRICT.address_refusal(["93.184.216.34", "10.0.0.7"]) is not None
    assert STRICT.address_refusal(["93.184.216.34", "2606:4700::1"]) is None
    assert RELAXED.address_refusal(["127.0.0.1"]) is None


@pytest.mark.parametrize(
    ("host", "address"),
    [("127.0.0.1", "127.0.0.1"), ("127.1", "127.0.0.1"), ("[::1]", "::1"),
     ("hooks.example.com", None), ("cafe.example", None), ("1e100.net", None)],
)  # fmt: skip
def test_literal_address_reads_legacy_forms(host: str, address: str | None) -> None:
    assert literal_address(host) == address


@pytest.mark.parametrize(
    "address",
    ["127.0.0.1", "10.1.2.3", "100.64.0.1", "169.254.169.254", "::1", "fe80::1", "fc00::1",
     "::ffff:10.0.0.1", "64:ff9b::a00:1", "2002:a00:1::", "0.0.0.0", "not-an-ip"],  # noqa: S104
)  # fmt: skip
def test_is_public_address_internal_refused(address: str) -> None:
    assert not is_public_address(address)


@pytest.mark.parametrize(
    "url",
    ["https://localhost/hook", "https://LOCALHOST:8443/hook", "https://localhost./hook",
     "https://api.localhost/hook", "https://a.b.Localhost/hook"],
)  # fmt: skip
def test_static_refusal_localhost_names_refused_as_loopback(url: str) -> None:
    assert STRICT.static_refusal(url) == STRICT.private_refusal
    assert RELAXED.static_refusal(url) is None


@pytest.mark.parametrize(
    "url",
    ["https://localhost.example.com/hook", "https://mylocalhost/hook", "https://notlocalhost.io/"],
)
def test_static_refusal_names_merely_containing_localhost_accepted(url: str) -> None:
    assert STRICT.static_refusal(url) is None
