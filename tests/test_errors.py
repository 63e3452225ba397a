"""The error tree: stable unique codes, and every kind maps to an HTTP status."""

from __future__ import annotations

from parley import errors
from parley.error_status import STATUS_BY_KIND, status_for

SHARED_ON_PURPOSE = [
    {"InvalidSignature", "InvalidCarrierSignature"},
    {"InvalidSignature", "InvalidAudioSignature"},
    {"InvalidCarrierSignature", "InvalidAudioSignature"},
    {"TelephonyNotConfigured", "CallsNotConfigured"},
    {"NotSupported", "SipTrunkRequired"},
]
"""`invalid_signature`, the spec's label, of three credentials: a JWT's (401, API.md 7 step
3), a carrier webhook's `X-Twilio-Signature` (403, API.md 13) and a recording's signed URL
(403, API.md 16); `telephony_not_configured`
read (404, API.md 13) and when placing a call (409, API.md 15); `not_supported`, an SDK
member Parley cannot honour (400) and an SDK call that needs a SIP trunk (501, API.md 17)."""


def test_error_codes_are_unique() -> None:
    """Two classes share a code only when one refines the other (same meaning, finer type)."""
    import parley.engine
    import parley.jwt

    modules = {cls.__module__ for cls in errors.all_error_classes()}
    assert {f"{parley.engine.__name__}.errors", f"{parley.jwt.__name__}.errors"} <= modules
    by_code: dict[str, type[errors.ParleyError]] = {}
    for cls in errors.all_error_classes():
        seen = by_code.setdefault(cls.code, cls)
        if {seen.__name__, cls.__name__} in SHARED_ON_PURPOSE:
            continue
        assert seen is cls or issubclass(cls, seen) or issubclass(seen, cls), (seen, cls)


def test_every_error_descends_from_one_kind() -> None:
    for cls in errors.all_error_classes():
        if cls is errors.ParleyError:
            continue
        kinds = [kind for kind in errors.ERROR_KINDS if issubclass(cls, kind)]
        assert len(kinds) == 1, cls


def test_every_kind_maps_to_a_status() -> None:
    for kind in errors.ERROR_KINDS:
        assert kind in STATUS_BY_KIND
    assert status_for(errors.AgentDisabled()) == 409
    assert status_for(errors.AgentNotFound()) == 404
    assert status_for(errors.JwksUnavailable()) == 503
    assert status_for(errors.CarrierError()) == 502
    assert status_for(errors.SipTrunkRequired()) == 501
    assert status_for(errors.ParleyError()) == 500


def test_every_error_has_a_message() -> None:
    for cls in errors.all_error_classes():
        assert cls.message
        assert cls.code
