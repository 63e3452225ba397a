"""Where recordings are kept (API.md section 16): a small interface and its stores.

`RecordingStore` (store.py) is all the services know; the composition root picks the
implementation: a directory (directory.py, the default); a policy's S3-compatible bucket
(bucket.py) is opened by the recordings service per policy.
"""

from parley.recordings.store import ObjectStore, RecordingStore, StoredObject

__all__ = ["ObjectStore", "RecordingStore", "StoredObject"]
