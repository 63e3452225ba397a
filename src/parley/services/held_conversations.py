"""The active conversations this instance holds leases for (services/active_conversations.py):
what its housekeeping timer renews. In process only: each instance renews its own, and a
killed instance's leases run out."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Held:
    """One conversation counted active: its organization and project (its groups)."""

    org_id: str
    conversation_id: str
    project_id: str


class HeldConversations:
    """The conversations whose leases this instance renews, by (organization, ID); those
    still `starting` (their start not committed yet) are renewed too, but not checked
    against the database, which does not show them yet."""

    def __init__(self) -> None:
        self._held: dict[tuple[str, str], Held] = {}
        self._starting: dict[tuple[str, str], int] = {}

    def add(self, held: Held, *, starting: bool = False) -> None:
        key = (held.org_id, held.conversation_id)
        self._held[key] = held
        if starting:
            self._starting[key] = self._starting.get(key, 0) + 1

    def started(self, org_id: str, conversation_id: str) -> None:
        """A start of this conversation committed (or gave up)."""
        key = (org_id, conversation_id)
        left = self._starting.get(key, 0) - 1
        if left > 0:
            self._starting[key] = left
        else:
            self._starting.pop(key, None)

    def is_starting(self, org_id: str, conversation_id: str) -> bool:
        return (org_id, conversation_id) in self._starting

    def forget(self, org_id: str, conversation_id: str) -> None:
        self._held.pop((org_id, conversation_id), None)

    def holds(self, org_id: str, conversation_id: str) -> bool:
        return (org_id, conversation_id) in self._held

    def snapshot(self) -> list[Held]:
        """Return what is held now (a copy: the set may change while it is used)."""
        return list(self._held.values())
