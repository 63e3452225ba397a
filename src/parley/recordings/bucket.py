"""Recordings as objects in an S3-compatible bucket (an external storage policy).

boto3 in a worker thread, not aiobotocore or obstore: boto3 is the reference client of the
S3 protocol (AWS Signature V4, path and virtual addressing, presigned URLs, multi-object
delete), kept in step with the protocol by AWS itself; aiobotocore pins exact botocore
releases (so it and boto3 cannot be upgraded apart), and obstore's errors name less of what
the endpoint said. An upload is one `PutObject` of a whole WAV (a few MB), so a thread per
call costs nothing the turn notices: uploads run after the conversation has ended.

Every method raises OSError when the bucket cannot be used (the `RecordingStore` contract),
naming what the endpoint said. The client is built once per store and reused (boto3 clients
are thread-safe); each call is bounded (`CONNECT_SECONDS`, `READ_SECONDS`, one retry).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Final, Literal

import anyio.to_thread

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

CONNECT_SECONDS: Final = 5.0
READ_SECONDS: Final = 30.0
DELETE_BATCH: Final = 1000
"""Keys per `DeleteObjects` request (the protocol's limit)."""
DEFAULT_REGION: Final = "us-east-1"
"""The region signed for when the policy names none (what S3-compatible servers expect)."""


@dataclass(frozen=True)
class BucketSettings:
    """Where and as whom to store: an external storage policy, its credentials unsealed."""

    endpoint_url: str
    bucket: str
    region: str | None
    addressing_style: Literal["path", "virtual"]
    access_key_id: str
    secret_access_key: str

    def __repr__(self) -> str:  # never the credentials, in a log line or a traceback
        return f"BucketSettings(endpoint_url={self.endpoint_url!r}, bucket={self.bucket!r})"


class BucketStore:
    """A `RecordingStore` over one bucket; `presigned_get` gives a reader's URL."""

    def __init__(self, settings: BucketSettings) -> None:
        self.settings = settings

    async def put(self, key: str, data: bytes) -> None:
        def put() -> None:
            self._client.put_object(
                Bucket=self.settings.bucket, Key=key, Body=data, ContentType="audio/wav"
            )

        await self._call(put)

    async def delete(self, key: str) -> None:
        await self.delete_many([key])

    async def delete_many(self, keys: Sequence[str]) -> None:
        def delete() -> None:
            for start in range(0, len(keys), DELETE_BATCH):
                batch = keys[start : start + DELETE_BATCH]
                answer = self._client.delete_objects(
                    Bucket=self.settings.bucket,
                    Delete={"Objects": [{"Key": key} for key in batch], "Quiet": True},
                )
                if errors := answer.get("Errors"):
                    first = errors[0]
                    raise OSError(
                        f"{len(errors)} objects not deleted: "
                        f"{first.get('Code')}: {first.get('Message')}"
                    )

        if keys:
            await self._call(delete)

    def presigned_get(self, key: str, seconds: int) -> str:
        """A URL that reads the object for `seconds` (computed here: no request is sent)."""
        url: str = self._client.generate_presigned_url(
            "get_object",
            Params={"Bucket": self.settings.bucket, "Key": key},
            ExpiresIn=seconds,
        )
        return url

    async def _call(self, work: Callable[[], None]) -> None:
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            await anyio.to_thread.run_sync(work)
        except ClientError as error:
            details = error.response.get("Error", {})
            raise OSError(
                f"the bucket refused: {details.get('Code', '?')}: {details.get('Message', '')}"
            ) from None
        except BotoCoreError as error:
            raise OSError(f"the bucket could not be reached: {error}") from None

    @cached_property
    def _client(self) -> S3Client:
        import boto3  # imported when a policy is first used: most servers never need it
        from botocore.config import Config

        config = Config(
            signature_version="s3v4",
            s3={"addressing_style": self.settings.addressing_style},
            connect_timeout=CONNECT_SECONDS,
            read_timeout=READ_SECONDS,
            retries={"mode": "standard", "total_max_attempts": 2},
            request_checksum_calculation="when_required",
            response_checksum_validation="when_required",
        )
        return boto3.session.Session().client(
            "s3",
            endpoint_url=self.settings.endpoint_url,
            region_name=self.settings.region or DEFAULT_REGION,
            aws_access_key_id=self.settings.access_key_id,
            aws_secret_access_key=self.settings.secret_access_key,
            config=config,
        )
