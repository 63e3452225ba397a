"""The silence timer of a live conversation (API.md section 15, "Silence").

The count runs while no one speaks: it starts when the conversation is ready, and again at
the end of each speech, the agent's (on a wire that acknowledges playback, once the last
audio was played) or the user's. The user speaking (or typing, or pressing keys) starts a
new silence: its poke may be spoken again. After `poke_sec` the agent speaks the poke, once
per silence; the poke is the agent's speech, so the end's count holds from the moment it is
queued and starts again at its end (a poke that never starts speaking, `POKE_START_LIMIT_S`
after it was queued, counts as said then). After `end_sec` the conversation ends (the
session ends it: `endings.SILENCE_LIMIT`).

`SilenceTimer` is a state machine fed events and read against a monotonic time, so its
rules are tested without waiting; `run` is its one task, which sleeps until the next
deadline or the next event (no polling).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Literal, TypeVar

from parley import engine
from parley.clock import Clock
from parley.records import Agent, Unset
from parley.services.live.codec import Configure
from parley.services.silence import SilenceSettings, check_silence

Due = Literal["poke", "end"]
T = TypeVar("T")

POKE_START_LIMIT_S = 10.0
"""How long a queued poke may take to start speaking before the count goes on without it
(its synthesis failed, or the engine dropped it): a conversation never waits forever."""


class SilenceTimer:
    """Counts the silence of one conversation (see the module doc)."""

    def __init__(
        self,
        settings: SilenceSettings,
        clock: Clock,
        *,
        playback_pending: Callable[[], bool] = lambda: False,
    ) -> None:
        self.settings = settings
        self._clock = clock
        self._playback_pending = playback_pending
        self._since: float | None = None
        """When the current count started; None while someone speaks (or nothing started)."""
        self._assistant_speaking = False
        self._user_speaking = False
        self._awaiting_playback = False
        self._poked = False
        self._poke_queued_at: float | None = None
        """When the poke was queued, until it starts speaking (the count holds meanwhile)."""
        self._changed = asyncio.Event()

    def start(self) -> None:
        """The conversation is ready: the first silence counts from now."""
        self._quiet()

    def observe(self, event: engine.EngineEvent) -> None:
        """Follow who speaks from an engine event."""
        match event:
            case engine.AssistantStartedSpeaking():
                self._assistant_speaking, self._awaiting_playback = True, False
                self._poke_queued_at = None
                self._hold()
            case engine.AssistantFinishedSpeaking() | engine.InterruptedResponse():
                self._assistant_speaking = False
                if self._playback_pending():
                    self._awaiting_playback = True  # counted from when the wire played it
                    self._hold()
                else:
                    self._quiet()
            case engine.UserStartedSpeaking():
                self._user_speaking, self._poked, self._poke_queued_at = True, False, None
                self._hold()
            case engine.UserFinishedSpeaking():
                self._user_speaking = False
                self._quiet()

    def played(self) -> None:
        """The wire acknowledged audio as played: the agent's speech ended if none is left."""
        if self._awaiting_playback and not self._playback_pending():
            self._awaiting_playback = False
            self._quiet()

    def reconfigure(self, settings: SilenceSettings) -> None:
        """Count with new settings from now on (a `reset`): the silence under way keeps its
        start, and the poke may be spoken again."""
        self.settings, self._poked = settings, False
        self._changed.set()

    def user_acted(self) -> None:
        """The user typed or pressed keys: a new silence, counted from now."""
        self._poked, self._poke_queued_at = False, None
        self._quiet()

    def due(self, now: float) -> Due | None:
        """What is due at `now`: the end first (it ends everything), else the poke."""
        self._lapse_poke(now)
        if self._since is None:
            return None
        end_sec, poke_sec = self.settings.end_sec, self.settings.poke_sec
        if end_sec is not None and now >= self._since + end_sec:
            return "end"
        if poke_sec is not None and not self._poked and now >= self._since + poke_sec:
            return "poke"
        return None

    def next_at(self) -> float | None:
        """The monotonic time of the next deadline; None while nothing counts."""
        if self._poke_queued_at is not None:
            return self._poke_queued_at + POKE_START_LIMIT_S
        if self._since is None:
            return None
        deadlines = [
            self._since + seconds
            for seconds, pending in (
                (self.settings.end_sec, True),
                (self.settings.poke_sec, not self._poked),
            )
            if seconds is not None and pending
        ]
        return min(deadlines, default=None)

    def poking(self) -> None:
        """The poke is being spoken: once per silence, and the count restarts (its end
        restarts it, when it was played)."""
        self._poked = True
        self._poke_queued_at = self._clock.monotonic()
        self._hold()

    def poke_refused(self) -> None:
        """The engine could not queue the poke: the count goes on from now."""
        self._poke_queued_at = None
        self._quiet()

    def _lapse_poke(self, now: float) -> None:
        if self._poke_queued_at is not None and now >= self._poke_queued_at + POKE_START_LIMIT_S:
            self._poke_queued_at = None
            self._quiet()

    async def run(self, poke: Callable[[str], Awaitable[bool]]) -> None:
        """Speak the poke when due (`poke` says whether it was queued); return once the
        silence limit is reached."""
        while not self.settings.active:  # nothing to count: wait for a reset, or cancellation
            self._changed.clear()
            await self._changed.wait()
        while True:
            self._changed.clear()
            now = self._clock.monotonic()
            match self.due(now):
                case "end":
                    return
                case "poke":
                    self.poking()
                    if not await poke(self.settings.poke_text):
                        self.poke_refused()
                    continue
            at = self.next_at()
            try:
                await asyncio.wait_for(self._changed.wait(), None if at is None else at - now)
            except TimeoutError:
                pass

    def _quiet(self) -> None:
        busy = self._assistant_speaking or self._user_speaking or self._awaiting_playback
        if not (busy or self._poke_queued_at is not None):
            self._since = self._clock.monotonic()
            self._changed.set()

    def _hold(self) -> None:
        self._since = None
        self._changed.set()


def settings_for(agent: Agent, frame: Configure) -> SilenceSettings:
    """The agent's silence settings with the `config`'s overrides (None: off); raise
    ValidationFailed naming an option out of range."""
    poke_sec = _given(frame.no_input_poke_sec, agent.no_input_poke_sec)
    poke_text = _given(frame.no_input_poke_text, agent.no_input_poke_text)
    end_sec = _given(frame.no_input_end_conversation_sec, agent.no_input_end_conversation_sec)
    check_silence(poke_sec=poke_sec, poke_text=poke_text, end_sec=end_sec)
    return SilenceSettings(poke_sec=poke_sec, poke_text=poke_text, end_sec=end_sec)


def _given(value: T | Unset, default: T) -> T:
    return default if isinstance(value, Unset) else value
