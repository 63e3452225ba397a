"""The head limits of `parley serve`'s HTTP protocol, as a table (issue #22 item 1; issue
#38 items 1 and 2: header lines of 16 KiB, and the body that came with the head never
counted)."""

from __future__ import annotations

import pytest

from parley.api.http_protocol import HEADERS_TOO_LARGE, LINE_TOO_LONG, check_head

LINE = b"GET /health HTTP/1.1\r\nHost: a\r\n"

ROWS = [
    ("complete-small", LINE + b"\r\n", None),
    ("partial-small", b"GET /hea", None),
    ("line-8192", b"GET /" + b"a" * 8178 + b" HTTP/1.1\r\n\r\n", None),
    ("line-8193", b"GET /" + b"a" * 8179 + b" HTTP/1.1\r\n\r\n", LINE_TOO_LONG),
    ("line-unfinished-over", b"GET /" + b"a" * 9000, LINE_TOO_LONG),
    ("header-line-16384", LINE + b"X: " + b"a" * 16381 + b"\r\n\r\n", None),
    ("header-line-16385", LINE + b"X: " + b"a" * 16382 + b"\r\n\r\n", HEADERS_TOO_LARGE),
    ("header-line-unfinished-over", LINE + b"X: " + b"a" * 16382, HEADERS_TOO_LARGE),
    ("header-lines-128", LINE + b"X: a\r\n" * 127 + b"\r\n", None),
    ("header-lines-129", LINE + b"X: a\r\n" * 128 + b"\r\n", HEADERS_TOO_LARGE),
    ("head-over-64k", LINE + (b"X: " + b"a" * 8000 + b"\r\n") * 9, HEADERS_TOO_LARGE),
    ("body-not-counted", LINE + b"Content-Length: 9000\r\n\r\n" + b"a" * 9000, None),
    ("body-over-64k-not-counted", LINE + b"Content-Length: 78000\r\n\r\n" + b"a" * 78000, None),
    ("body-lines-not-counted", LINE + b"Content-Length: 1\r\n\r\n" + b"a\n" * 200, None),
    ("head-64k-then-body", LINE + (b"X: " + b"a" * 16000 + b"\r\n") * 4 + b"\r\n" + b"a" * 9, None),
    ("bare-newlines", b"GET / HTTP/1.1\nHost: a\n\n" + b"a" * 9000, None),
]


@pytest.mark.parametrize(("head", "refusal"), [r[1:] for r in ROWS], ids=[r[0] for r in ROWS])
def test_request_head_limits(head: bytes, refusal: object) -> None:
    assert check_head(head) is refusal
