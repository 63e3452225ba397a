"""Opaque credential formats and hashing (API.md section 1)."""

from __future__ import annotations

import re

from parley import credentials


def test_new_api_key_format() -> None:
    key = credentials.new_api_key()
    assert re.fullmatch(r"parley_sk_[A-Za-z0-9_-]{43}", key)
    assert credentials.classify(key) == "api_key"


def test_new_session_token_format() -> None:
    token = credentials.new_session_token()
    assert re.fullmatch(r"parley_st_[A-Za-z0-9_-]{43}", token)
    assert credentials.classify(token) == "session_token"


def test_new_conversation_token_format() -> None:
    token = credentials.new_conversation_token()
    assert re.fullmatch(r"parley_ct_[A-Za-z0-9_-]{43}", token)
    assert credentials.classify(token) == "conversation_token"


def test_hash_secret_is_sha256_hex() -> None:
    assert credentials.hash_secret("abc") == (
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    )


def test_classify_three_segments_goes_to_the_jwt_verifier() -> None:
    assert credentials.classify("eyJhbGciOiJFZERTQSJ9.eyJzdWIiOiJ4In0.c2ln") == "jwt"
    assert credentials.classify("a.b.c") == "jwt"


def test_classify_rejects_other_shapes() -> None:
    assert credentials.classify("parley_sk_short") is None
    assert credentials.classify("parley_sk_" + "A" * 44) is None
    assert credentials.classify("hello") is None


def test_classify_any_dotted_string_is_a_jwt_candidate() -> None:
    # so that a malformed token gets step 1's invalid_token, not a bare unauthorized
    assert credentials.classify("a.b") == "jwt"
    assert credentials.classify("eyJhbGciOiJFZERTQSJ9.eyJzdWIiOiJ4In0") == "jwt"
    assert credentials.classify("a.b.c.d.e") == "jwt"
    assert credentials.classify("parley_sk_short.x") == "jwt"
