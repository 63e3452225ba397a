"""Where recordings are kept (API.md section 16): a small interface and its stores.

`RecordingStore` (store.py) is all the services know; the composition root picks the
implementation: a directory (directory.py, the default) or S3-compatible object storage.
"""

from parley.recordings.store import RecordingStore, StoredObject

__all__ = ["RecordingStore", "StoredObject"]
