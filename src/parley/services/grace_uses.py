"""Uses of API key secrets that a rotation replaced, during their grace (API.md section 17),
counted in process and written to the audit trail in batches.

A request made with a replaced secret costs one dictionary update here, not an audit
append: each append locks the organization's chain, and a client that has not switched
yet may send many requests a second. The instance's timer (services/housekeeping.py)
flushes the counts, one `api_key.grace_use` event per key with `{"uses": n}`, and so does
a clean stop; a crash loses at most the uses since the last flush. Each instance counts its
own: the trail's total over a key's events is the fleet's.
"""

from __future__ import annotations

from collections import Counter


class GraceUses:
    """Counts of uses of replaced secrets, by (organization, key ID), since the last take."""

    def __init__(self) -> None:
        self._counts: Counter[tuple[str, str]] = Counter()

    def count(self, org_id: str, key_id: str) -> None:
        """Note one request authenticated by a replaced secret of this key."""
        self._counts[(org_id, key_id)] += 1

    def take(self) -> dict[tuple[str, str], int]:
        """Return the counts so far and start again from zero."""
        taken, self._counts = dict(self._counts), Counter()
        return taken

    def give_back(self, counts: dict[tuple[str, str], int]) -> None:
        """Add counts that could not be written back, to be written with the next ones."""
        self._counts.update(counts)
