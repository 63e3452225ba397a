"""Recordings as files in a directory (`PARLEY_RECORDINGS_DIR`), one per conversation.

A write goes to a temporary file in the same directory, is flushed to disk, then renamed
over the key's name: a reader (or a crash) sees the whole file or none. File work runs in a
worker thread, never in the event loop.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Sequence
from pathlib import Path, PurePosixPath

import anyio.to_thread

from parley.recordings.store import StoredObject


class DirectoryStore:
    """A `RecordingStore` over a local (or shared) directory."""

    def __init__(self, root: Path) -> None:
        self.root = root

    async def put(self, key: str, data: bytes) -> None:
        await anyio.to_thread.run_sync(self._put, self._path(key), data)

    async def find(self, key: str) -> StoredObject | None:
        path = self._path(key)
        try:
            size = (await anyio.to_thread.run_sync(path.stat)).st_size
        except FileNotFoundError:
            return None
        return StoredObject(path=path, size=size)

    async def delete(self, key: str) -> None:
        await self.delete_many([key])

    async def delete_many(self, keys: Sequence[str]) -> None:
        paths = [self._path(key) for key in keys]  # every key checked before any is removed

        def remove() -> None:
            for path in paths:
                path.unlink(missing_ok=True)

        if paths:
            await anyio.to_thread.run_sync(remove)

    def _path(self, key: str) -> Path:
        """The key's file; a key that would leave the directory is refused (ValueError)."""
        parts = PurePosixPath(key).parts
        if not parts or key.startswith("/") or any(part in ("", ".", "..") for part in parts):
            raise ValueError(f"not a recording key: {key!r}")
        return self.root.joinpath(*parts)

    @staticmethod
    def _put(path: Path, data: bytes) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=".", suffix=".part")
        try:
            with os.fdopen(handle, "wb") as file:
                file.write(data)
                file.flush()
                os.fsync(file.fileno())
            os.replace(temporary, path)
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise
