"""Every error a client can see is in one tree under `ParleyError`, each with its own code
(issue #11: cleaner layers). A subclass may keep its parent's code only as a variant: the
same answer with its own message (listed in VARIANTS, so adding one is a decision)."""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Iterator

import parley
from parley.errors import ParleyError

VARIANTS = {
    "AgentNotAllowed",  # forbidden: a conversation token's config names another agent
    "ConversationNotStarted",  # conversation_not_found: a JWT's conversation starts on the socket
    "InvalidSampleSignature",  # invalid_signature: a voice sample's signed URL (API.md 17)
    "NoSynthesizer",  # service_unavailable: no speech synthesizer to ask (API.md 17)
    "JwksFetchError",  # jwks_unreachable, saying why the fetch failed
    "SignInRefused",  # unauthorized, on the dashboard's sign-in form
    "SignInThrottled",  # rate_limited, on the dashboard's sign-in form
}
"""Subclasses that keep their parent's code on purpose."""

SHARED_CODES = {
    # The spec's label for a bad signature, on three credentials: a JWT's (401, API.md 7
    # step 3), a carrier webhook's `X-Twilio-Signature` (403, API.md 13) and a recording's
    # signed URL (403, API.md 16).
    "invalid_signature": {"InvalidSignature", "InvalidCarrierSignature", "InvalidAudioSignature"},
    # No carrier account: reading it is 404 (API.md 13), placing a call with none is 409 (15).
    "telephony_not_configured": {"TelephonyNotConfigured", "CallsNotConfigured"},
    # The SDK's features Parley does not have: a member it cannot honour (400) and a call
    # that needs a SIP trunk (501), both `not_supported` as API.md 17 names them.
    "not_supported": {"NotSupported", "SipTrunkRequired"},
}
"""Codes that two kinds of error share on purpose (each listed with its classes)."""

OUTSIDE_THE_TREE = {
    "parley.jwt._codec.MalformedError": "caught inside the JWT codec, never escapes it",
    "parley.services.token_check._Stop": "the token checker's control flow, never escapes it",
    "parley.db.probe.DatabaseProbeFailed": "start-up: printed by the CLI, no client sees it",
    "parley.db.migrate.MigrationFailed": "start-up: printed by the CLI, no client sees it",
    "parley.engine.tool_checks.ToolCallRefused": (
        "a model's bad tool call: becomes the call's error output, never escapes the engine"
    ),
    "parley.stores.probe.RedisProbeFailed": "start-up: printed by the CLI, no client sees it",
    "parley.services.webhook_tools.UnsendableCall": (
        "a webhook tool call its arguments make unsendable: becomes the call's error output"
    ),
    "parley.web.session.CsrfRejected": "dashboard: answered with a page, not the envelope",
    "parley.web.session.SignInRequired": "dashboard: answered with a redirect to sign-in",
}


def parley_exceptions() -> Iterator[type[BaseException]]:
    for module in pkgutil.walk_packages(parley.__path__, "parley."):
        if ".migrations" not in module.name and not module.name.endswith("__main__"):
            importlib.import_module(module.name)
    pending: list[type[BaseException]] = [BaseException]
    seen: set[type[BaseException]] = set()
    while pending:
        for subclass in pending.pop().__subclasses__():
            if subclass not in seen:
                seen.add(subclass)
                pending.append(subclass)
                if subclass.__module__.startswith("parley."):
                    yield subclass


def test_error_tree_every_exception_is_a_parley_error_or_listed() -> None:
    outside = {
        f"{cls.__module__}.{cls.__qualname__}"
        for cls in parley_exceptions()
        if not issubclass(cls, ParleyError)
    }
    assert outside == set(OUTSIDE_THE_TREE)


def test_error_tree_codes_unique_except_variants() -> None:
    owners: dict[str, list[str]] = {}
    for cls in {*parley_exceptions(), ParleyError}:
        if issubclass(cls, ParleyError) and cls.__name__ not in VARIANTS:
            owners.setdefault(cls.code, []).append(cls.__name__)
    shared = {
        code: names
        for code, names in owners.items()
        if len(names) > 1 and set(names) != SHARED_CODES.get(code)
    }
    assert shared == {}


def test_error_tree_variants_keep_their_parents_code() -> None:
    variants = [cls for cls in parley_exceptions() if cls.__name__ in VARIANTS]
    assert {cls.__name__ for cls in variants} == VARIANTS
    for cls in variants:
        assert issubclass(cls, ParleyError)
        parent = cls.__mro__[1]
        assert issubclass(parent, ParleyError)
        assert cls.code == parent.code, cls
