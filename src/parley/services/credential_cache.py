"""API keys and session tokens already seen, remembered in process so that a request needs
no database read to know who is calling.

Revocation stays instant on every instance: every hit asks the shared Revocations store
whether the credential was revoked (revoking an API key or a session token publishes its ID
there: services/revocations.py), and when that store does not answer, the database decides
as if nothing were cached. An entry lives `CACHE_SECONDS` at most, and never past a session
token's expiry; the cache holds at most `MAX_ENTRIES`, oldest dropped first. Keys are the
SHA-256 of the secrets, as in the database: the secrets themselves are never kept.

A rotated API key keeps its ID, so its replaced secret cannot be revoked by ID: the rotation
`retire`s the secret's hash instead, which forgets it and, for `CACHE_SECONDS`, refuses to
remember it again (a request that read the database before the rotation committed would
otherwise put it back). That is exact here because the cache lives in embedded mode only,
one process, and a fleet reads the database, where the replaced hash is gone.

The composition root enables it in embedded mode only (`max_entries` 0 disables it): there
the Revocations store is in process and never down. In a fleet, a Redis outage or restart
could hide a revocation committed meanwhile from another instance's cache, so every
request reads the database, which decides revocation at once.
"""

from __future__ import annotations

from collections import OrderedDict

from parley.records import Principal

CACHE_SECONDS = 30.0
MAX_ENTRIES = 10_000


class CredentialCache:
    """Principals by the hash of their secret, each until a Unix time."""

    def __init__(self, max_entries: int = MAX_ENTRIES) -> None:
        self._entries: OrderedDict[str, tuple[Principal, float]] = OrderedDict()
        self._max_entries = max_entries
        self._retired: dict[str, float] = {}

    def get(self, secret_hash: str, *, now: float) -> Principal | None:
        """Return the principal remembered for this hash, unless its time has passed."""
        entry = self._entries.get(secret_hash)
        if entry is None:
            return None
        if entry[1] <= now:
            del self._entries[secret_hash]
            return None
        return entry[0]

    def put(self, secret_hash: str, principal: Principal, *, now: float) -> None:
        """Remember a principal the database just vouched for."""
        if self._max_entries == 0:
            return
        if self._retired and self._retired.get(secret_hash, 0.0) > now:
            return
        until = now + CACHE_SECONDS
        if principal.expires_at is not None:
            until = min(until, principal.expires_at)
        self._entries[secret_hash] = (principal, until)
        self._entries.move_to_end(secret_hash)
        while len(self._entries) > self._max_entries:
            self._entries.popitem(last=False)

    def forget(self, secret_hash: str) -> None:
        self._entries.pop(secret_hash, None)

    def retire(self, secret_hash: str, *, now: float) -> None:
        """Forget a secret that no longer works and refuse to remember it for a while."""
        self._entries.pop(secret_hash, None)
        if self._max_entries == 0:
            return
        self._retired = {h: until for h, until in self._retired.items() if until > now}
        self._retired[secret_hash] = now + CACHE_SECONDS
