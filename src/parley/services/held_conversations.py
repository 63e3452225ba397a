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
    """The conversations whose leases this instance renews, by (organization, ID)."""

    def __init__(self) -> None:
        self._held: dict[tuple[str, str], Held] = {}

    def add(self, held: Held) -> None:
        self._held[(held.org_id, held.conversation_id)] = held

    def forget(self, org_id: str, conversation_id: str) -> None:
        self._held.pop((org_id, conversation_id), None)

    def holds(self, org_id: str, conversation_id: str) -> bool:
        return (org_id, conversation_id) in self._held

    def snapshot(self) -> list[Held]:
        """Return what is held now (a copy: the set may change while it is used)."""
        return list(self._held.values())
