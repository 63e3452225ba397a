"""A request goes to the address checked for it (issue #38, item 6): a kept-alive connection
is reused only by requests of the same address policy whose checked address is its peer.

Each test runs in a network namespace of its own (tests/outbound/netns.py) where a host
name first resolves to a loopback service, then, its hosts file rewritten, to a public
address; which service answers the second call tells whether a pooled connection to the
first address carried it.
"""

from __future__ import annotations

from pathlib import Path

from tests.outbound.netns import run_isolated

PUBLIC = "93.184.216.34"
PROBE = "tests.outbound.rebinding_probe"


def probe(scenario: str, tmp_path: Path) -> dict[str, object]:
    hosts = tmp_path / "hosts"
    found: dict[str, object] = run_isolated(
        PROBE, scenario, str(hosts), PUBLIC, hosts=hosts, public=[PUBLIC]
    )
    return found


def test_pooled_connection_of_jwks_policy_never_carries_tool_call(tmp_path: Path) -> None:
    found = probe("two-policies", tmp_path)

    assert found["second_answered_by"] == "public"
    assert found["internal_paths"] == ["/jwks"]
    assert found["public_paths"] == ["/tool"]


def test_pooled_connection_reused_only_to_its_checked_address(tmp_path: Path) -> None:
    found = probe("one-policy", tmp_path)

    assert found["second_answered_by"] == "public"
    assert found["internal_paths"] == ["/first"]
    assert found["public_paths"] == ["/tool"]
