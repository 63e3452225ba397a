"""Cutting streamed reply text into sentences, each synthesized and sent as one unit."""

from __future__ import annotations

import re

_CLOSERS = "\"')]\u201d\u2019"  # quotes and brackets that may follow the end of a sentence
_OPENERS = "(\"'\u201c\u2018"
_SENTENCE_END = re.compile(rf"[.!?\u2026]+[{re.escape(_CLOSERS)}]*(?=\s)")
_NOT_AN_END = frozenset({"mr", "mrs", "ms", "dr", "st", "jr", "sr", "prof", "vs", "e.g", "i.e"})


class SentenceSplitter:
    """Cuts streamed text into sentences, each synthesized and sent as one unit.

    A sentence ends at . ! ? or … followed by whitespace, except after a title ("Dr.") or a
    single initial. Text with no end in `max_chars` is cut at its last space, so a reply
    without punctuation still streams.
    """

    def __init__(self, max_chars: int = 300) -> None:
        self._max = max_chars
        self._buffer = ""

    def feed(self, text: str) -> list[str]:
        """Add text; return the sentences it completes."""
        self._buffer += text
        out: list[str] = []
        cut = 0
        for match in _SENTENCE_END.finditer(self._buffer):
            word = self._buffer[cut : match.start()].rsplit(maxsplit=1)[-1:] or [""]
            bare = word[0].lstrip(_OPENERS).lower()
            if bare in _NOT_AN_END or (len(bare) == 1 and bare.isalpha()):
                continue
            out.append(self._buffer[cut : match.end()])
            cut = match.end()
        self._buffer = self._buffer[cut:]
        while len(self._buffer) > self._max:
            space = self._buffer.rfind(" ", 0, self._max)
            split = space if space > 0 else self._max
            out.append(self._buffer[:split])
            self._buffer = self._buffer[split:]
        return [sentence.strip() for sentence in out if sentence.strip()]

    @property
    def pending(self) -> bool:
        """Tell whether text waits for the end of its sentence."""
        return bool(self._buffer.strip())

    def flush(self) -> list[str]:
        """Return what is left as a last sentence (none if only whitespace)."""
        rest, self._buffer = self._buffer.strip(), ""
        return [rest] if rest else []
