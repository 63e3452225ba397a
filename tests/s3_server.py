"""A real S3-protocol server on loopback: moto's server mode, checking signatures.

`running_s3()` starts moto's threaded server on a free port, makes an IAM user with an
access key allowed every S3 action, and a bucket, then turns moto's authentication on
(`INITIAL_NO_AUTH_ACTION_COUNT = 0`): from then on every request must carry an AWS
Signature V4 made with that key, or moto answers 403 `SignatureDoesNotMatch` /
`InvalidAccessKeyId`. `S3Server.stop()` and `.start()` take the endpoint away and bring it
back on the same port with its objects (moto keeps them in this process's memory).

moto checks signatures sent in the `Authorization` header (every upload and delete);
a presigned URL carries its signature in the query, which moto does not check, so
`read_presigned` reads one with the check off for that one request.
"""

from __future__ import annotations

import json
import secrets
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import boto3
import httpx
from moto import settings as moto_settings
from moto.moto_server.threaded_moto_server import ThreadedMotoServer

from tests.ports import free_port

REGION = "eu-west-1"
ALLOW_S3 = {
    "Version": "2012-10-17",
    "Statement": [{"Effect": "Allow", "Action": "s3:*", "Resource": "*"}],
}
_auth_lock = threading.Lock()


@dataclass
class S3Server:
    """The server, its endpoint, a bucket and the only credentials it accepts."""

    server: ThreadedMotoServer
    endpoint_url: str
    bucket: str
    access_key_id: str
    secret_access_key: str

    def client(self) -> Any:
        """A boto3 client with the accepted credentials (the tests' own view of the bucket)."""
        return boto3.client(
            "s3",
            endpoint_url=self.endpoint_url,
            region_name=REGION,
            aws_access_key_id=self.access_key_id,
            aws_secret_access_key=self.secret_access_key,
        )

    def keys(self) -> list[str]:
        listed = self.client().list_objects_v2(Bucket=self.bucket)
        return sorted(item["Key"] for item in listed.get("Contents", []))

    def read(self, key: str) -> bytes:
        body: bytes = self.client().get_object(Bucket=self.bucket, Key=key)["Body"].read()
        return body

    def stop(self) -> None:
        """Take the endpoint away: connections are refused until `start`."""
        _stop(self.server)

    def start(self) -> None:
        self.server.start()

    def policy(self, **overrides: Any) -> dict[str, Any]:
        """An external storage policy's body naming this bucket."""
        return {
            "name": "archive",
            "endpoint_url": self.endpoint_url,
            "bucket": self.bucket,
            "region": REGION,
            "key_prefix": "calls/",
            "addressing_style": "path",
            "access_key_id": self.access_key_id,
            "secret_access_key": self.secret_access_key,
        } | overrides


def read_presigned(url: str) -> httpx.Response:
    """GET a presigned URL (moto checks no query signature: see the module doc)."""
    with _auth_lock:
        moto_settings.INITIAL_NO_AUTH_ACTION_COUNT = float("inf")
        try:
            return httpx.get(url, timeout=10)
        finally:
            moto_settings.INITIAL_NO_AUTH_ACTION_COUNT = 0


@contextmanager
def running_s3() -> Iterator[S3Server]:
    """A moto server with its own user and bucket (moto's state is per process: names are
    fresh each time)."""
    user, bucket = f"parley-{secrets.token_hex(4)}", f"recordings-{secrets.token_hex(4)}"
    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    endpoint = f"http://127.0.0.1:{port}"
    moto_settings.INITIAL_NO_AUTH_ACTION_COUNT = float("inf")
    try:
        setup = {"endpoint_url": endpoint, "region_name": REGION}
        setup |= {"aws_access_key_id": "setup", "aws_secret_access_key": "setup"}
        iam = boto3.client("iam", **setup)
        iam.create_user(UserName=user)
        iam.put_user_policy(UserName=user, PolicyName="s3", PolicyDocument=json.dumps(ALLOW_S3))
        key = iam.create_access_key(UserName=user)["AccessKey"]
        boto3.client("s3", **setup).create_bucket(
            Bucket=bucket, CreateBucketConfiguration={"LocationConstraint": REGION}
        )
        moto_settings.INITIAL_NO_AUTH_ACTION_COUNT = 0  # from now on, signatures are checked
        yield S3Server(
            server=server,
            endpoint_url=endpoint,
            bucket=bucket,
            access_key_id=key["AccessKeyId"],
            secret_access_key=key["SecretAccessKey"],
        )
    finally:
        moto_settings.INITIAL_NO_AUTH_ACTION_COUNT = float("inf")
        _stop(server)


def _stop(server: ThreadedMotoServer) -> None:
    """moto's `stop` leaves the listening socket open (connections then hang instead of
    being refused, and the port cannot be bound again): close it too."""
    inner = server._server
    if inner is None:
        return
    server.stop()
    inner.server_close()
    server._server = None
