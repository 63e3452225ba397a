"""Standard Webhooks signatures: the published vector, and headers that the real
`standardwebhooks` and `svix` receiver libraries verify."""

from __future__ import annotations

import base64
import time

import pytest
import standardwebhooks
import svix.webhooks

from parley.outbound import new_signing_secret, sign, signature_headers

VECTOR_SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
VECTOR_ID = "msg_p5jXN8AQM9LWM0D4loKWxJek"
VECTOR_TIMESTAMP = 1614265330
VECTOR_BODY = b'{"test": 2432232314}'
VECTOR_SIGNATURE = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="


def test_sign_published_vector() -> None:
    signature = sign(VECTOR_SECRET, msg_id=VECTOR_ID, timestamp=VECTOR_TIMESTAMP, body=VECTOR_BODY)
    assert signature == VECTOR_SIGNATURE


def test_new_signing_secret_is_32_random_bytes() -> None:
    secret = new_signing_secret()
    assert secret.startswith("whsec_")
    assert len(base64.b64decode(secret.removeprefix("whsec_"), validate=True)) == 32
    assert new_signing_secret() != secret


def test_signature_headers_verify_with_both_libraries() -> None:
    secret, body, now = new_signing_secret(), b'{"event": "x", "n": 1}', int(time.time())
    headers = signature_headers([secret], msg_id="msg_1", timestamp=now, body=body, svix=True)
    assert headers["webhook-id"] == headers["svix-id"] == "msg_1"
    assert headers["webhook-timestamp"] == headers["svix-timestamp"] == str(now)
    assert standardwebhooks.Webhook(secret).verify(body, dict(headers)) == {"event": "x", "n": 1}
    svix_only = {k: v for k, v in headers.items() if k.startswith("svix-")}
    svix.webhooks.Webhook(secret).verify(body, svix_only)  # raises when it does not verify
    with pytest.raises(svix.webhooks.WebhookVerificationError):
        svix.webhooks.Webhook(new_signing_secret()).verify(body, svix_only)


def test_signature_headers_two_secrets_one_entry_each() -> None:
    old, new, now = new_signing_secret(), new_signing_secret(), int(time.time())
    headers = signature_headers([new, old], msg_id="msg_2", timestamp=now, body=b"{}")
    assert len(headers["webhook-signature"].split(" ")) == 2
    assert "svix-id" not in headers
    for secret in (old, new):
        standardwebhooks.Webhook(secret).verify(b"{}", dict(headers))


def test_signature_headers_tampered_body_fails_verification() -> None:
    secret, now = new_signing_secret(), int(time.time())
    headers = signature_headers([secret], msg_id="msg_3", timestamp=now, body=b'{"a": 1}')
    with pytest.raises(standardwebhooks.WebhookVerificationError):
        standardwebhooks.Webhook(secret).verify(b'{"a": 2}', dict(headers))


def test_sign_empty_body_for_get() -> None:
    secret, now = new_signing_secret(), int(time.time())
    headers = signature_headers([secret], msg_id="call_1", timestamp=now, body=b"")
    standardwebhooks.Webhook(secret).verify(b"", dict(headers), json_parse=False)


def test_sign_refuses_a_secret_without_prefix() -> None:
    with pytest.raises(ValueError, match="whsec_"):
        sign("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", msg_id="m", timestamp=1, body=b"")
    with pytest.raises(ValueError, match="at least one"):
        signature_headers([], msg_id="m", timestamp=1, body=b"")
