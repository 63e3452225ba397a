"""The error tree: stable unique codes, and every kind maps to an HTTP status."""

from __future__ import annotations

from parley import errors
from parley.api.errors import STATUS_BY_KIND, status_for


def test_error_codes_are_unique() -> None:
    classes = errors.all_error_classes()
    codes = [cls.code for cls in classes]
    assert len(codes) == len(set(codes)), sorted(codes)


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
    assert status_for(errors.ParleyError()) == 500


def test_every_error_has_a_message() -> None:
    for cls in errors.all_error_classes():
        assert cls.message and cls.code
