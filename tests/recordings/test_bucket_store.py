"""The S3-compatible recording store (recordings/bucket.py) against a real S3-protocol
server on loopback (moto's server mode, checking each request's AWS Signature V4)."""

from __future__ import annotations

from collections.abc import Iterator
from urllib.parse import parse_qs, urlsplit

import pytest

from parley.recordings.bucket import BucketSettings, BucketStore
from tests.s3_server import S3Server, read_presigned, running_s3

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def s3() -> Iterator[S3Server]:
    with running_s3() as server:
        yield server


def store(s3: S3Server, **overrides: str) -> BucketStore:
    settings = {
        "endpoint_url": s3.endpoint_url,
        "bucket": s3.bucket,
        "region": "eu-west-1",
        "addressing_style": "path",
        "access_key_id": s3.access_key_id,
        "secret_access_key": s3.secret_access_key,
    } | overrides
    return BucketStore(BucketSettings(**settings))  # type: ignore[arg-type]


async def test_bucket_store_put_signed_object_arrives_whole(s3: S3Server) -> None:
    await store(s3).put("calls/conv_a.wav", b"RIFF" + bytes(1000))
    assert s3.read("calls/conv_a.wav") == b"RIFF" + bytes(1000)
    head = s3.client().head_object(Bucket=s3.bucket, Key="calls/conv_a.wav")
    assert head["ContentType"] == "audio/wav"


async def test_bucket_store_wrong_secret_refused_as_oserror_naming_the_code(s3: S3Server) -> None:
    with pytest.raises(OSError, match="SignatureDoesNotMatch"):
        await store(s3, secret_access_key="not-the-secret").put("calls/x.wav", b"RIFF")
    with pytest.raises(OSError, match="InvalidAccessKeyId"):
        await store(s3, access_key_id="AKIANOBODY").put("calls/x.wav", b"RIFF")
    assert "calls/x.wav" not in s3.keys()


async def test_bucket_store_delete_many_removes_each_key(s3: S3Server) -> None:
    bucket = store(s3)
    for name in ("d1", "d2", "d3"):
        await bucket.put(f"del/{name}.wav", b"RIFF")
    await bucket.delete_many(["del/d1.wav", "del/d3.wav", "del/never.wav"])
    assert [key for key in s3.keys() if key.startswith("del/")] == ["del/d2.wav"]
    await bucket.delete("del/d2.wav")
    assert [key for key in s3.keys() if key.startswith("del/")] == []


async def test_bucket_store_presigned_get_reads_the_object_for_an_hour(s3: S3Server) -> None:
    bucket = store(s3)
    await bucket.put("calls/conv_p.wav", b"RIFF-presigned")
    url = bucket.presigned_get("calls/conv_p.wav", 3600)
    query = parse_qs(urlsplit(url).query)
    assert query["X-Amz-Algorithm"] == ["AWS4-HMAC-SHA256"]
    assert query["X-Amz-Expires"] == ["3600"]
    assert query["X-Amz-Credential"][0].startswith(s3.access_key_id + "/")
    assert s3.secret_access_key not in url
    got = read_presigned(url)
    assert got.status_code == 200
    assert got.content == b"RIFF-presigned"


async def test_bucket_store_endpoint_down_is_oserror_then_works_when_back(s3: S3Server) -> None:
    bucket = store(s3)
    s3.stop()
    try:
        with pytest.raises(OSError, match="could not be reached"):
            await bucket.put("calls/conv_down.wav", b"RIFF")
    finally:
        s3.start()
    await bucket.put("calls/conv_down.wav", b"RIFF")
    assert s3.read("calls/conv_down.wav") == b"RIFF"


def test_bucket_settings_repr_names_no_credential(s3: S3Server) -> None:
    shown = repr(store(s3).settings)
    assert s3.access_key_id not in shown
    assert s3.secret_access_key not in shown
