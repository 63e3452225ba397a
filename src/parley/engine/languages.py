"""One conversation's languages (API.md section 18): which the recognizer listens for, which
the reply is in, and the voice that speaks it.

An agent with no additional languages is as before: the recognizer decodes in its language
(and reports the one it hears), the reply is in that language. With additional languages:

- `auto` (the default): every user turn's language is detected among the agent's languages
  (the default and the additional ones); the turn is decoded in it and the reply is in it.
- `initial`: the first turn is detected so, and its language holds for the conversation.
- `request`: each turn is detected so (its words are then right), but the reply's language
  changes only when the user asks for another of the agent's languages ("can we speak
  Spanish", "¿podemos hablar en inglés?", "auf Deutsch, bitte": `requested_language`).

The reply generator is told the language (`ReplyRequest.language`) and, unless the
conversation is English alone, the system prompt ends with `instruction`. Each language
speaks with the voice `LanguageSettings.voices` names for it (the services chose it among
the installed voices of that language).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from typing import Final

from parley.engine.base import LanguageSettings, Recognizer, Transcript, Utterance

MULTILINGUAL_MODES: Final = ("auto", "initial", "request")
LANGUAGE_NAMES: Final = {
    "cs": ("Czech", "čeština", "cesky"),
    "da": ("Danish", "dansk"),
    "de": ("German", "Deutsch", "alemán", "allemand", "tedesco"),
    "el": ("Greek", "ελληνικά"),
    "en": ("English", "Englisch", "inglés", "anglais", "inglese", "inglês"),
    "es": ("Spanish", "Spanisch", "español", "espagnol", "spagnolo", "castellano"),
    "fi": ("Finnish", "suomi"),
    "fr": ("French", "Französisch", "francés", "français", "francese"),
    "hi": ("Hindi",),
    "hu": ("Hungarian", "magyar"),
    "it": ("Italian", "Italienisch", "italiano", "italien"),
    "nl": ("Dutch", "Niederländisch", "Nederlands"),
    "pl": ("Polish", "polski"),
    "pt": ("Portuguese", "Portugiesisch", "portugués", "português", "portugais"),
    "ro": ("Romanian", "română"),
    "ru": ("Russian", "русский"),
    "sv": ("Swedish", "svenska"),
    "tr": ("Turkish", "Türkçe"),
    "uk": ("Ukrainian", "українська"),
}
"""Per primary tag: its English name first (the instruction's), then names a user may say."""
_ASKING: Final = re.compile(
    r"\b(?:speak|talk|switch|change|continue|answer|reply|respond|in|auf|en|em|sprechen|"
    r"reden|hablar|hablamos|hablemos|parler|parlons|parlare|falar)\b"
)
"""A request to switch names the language near one of these words (any of the languages)."""


class LanguageChoice:
    """The languages of one conversation as it goes (see the module doc)."""

    def __init__(self, default: str, settings: LanguageSettings) -> None:
        self._settings = settings
        self._languages = (default, *(a for a in settings.additional if a != default))
        self._voices = dict(settings.voices)
        self._decided = False
        self.current = default
        """The language the next reply is in, and the recognizer's when it detects none."""

    @property
    def multilingual(self) -> bool:
        """Whether the agent has languages besides its default."""
        return len(self._languages) > 1

    def candidates(self) -> tuple[str, ...]:
        """The languages the next turn is detected among (none: decoded in `current`)."""
        if not self.multilingual or (self._settings.mode == "initial" and self._decided):
            return ()
        return self._languages

    def heard(self, transcript: Transcript) -> str | None:
        """Take a user turn's words; return the reply's new language when it changes."""
        if not self.multilingual:
            return None
        chosen = self.current
        if self._settings.mode == "request":
            chosen = requested_language(transcript.text, self._languages) or self.current
        elif not self._decided or self._settings.mode == "auto":
            if transcript.language in self._languages:
                chosen = transcript.language
        self._decided = True
        if chosen == self.current:
            return None
        self.current = chosen
        return chosen

    def voice(self, language: str) -> str | None:
        """The voice of `language` (None: the conversation's voice speaks it)."""
        return self._voices.get(language)

    def instruction(self) -> str | None:
        """The system prompt's last line naming the reply's language; None for a
        conversation in English alone (its prompt stays as the agent wrote it)."""
        if not self.multilingual and self.current == "en":
            return None
        names = LANGUAGE_NAMES.get(self.current)
        name = f"{names[0]} ({self.current})" if names else f"the language {self.current!r}"
        return f"Reply in {name}: the user hears your reply spoken in that language."

    def instructed(self, system_prompt: str) -> str:
        """`system_prompt`, ending with `instruction` when there is one."""
        line = self.instruction()
        return f"{system_prompt}\n\n{line}" if line else system_prompt

    def recognizer(self, inner: Recognizer) -> Recognizer:
        """`inner`, told the candidates of each final decode when the agent is
        multilingual (`inner` itself otherwise)."""
        return _Detecting(inner, self) if self.multilingual else inner


class _Detecting:
    """A Recognizer that decodes each final in `choice.current`, detected among
    `choice.candidates()` when there are any."""

    def __init__(self, inner: Recognizer, choice: LanguageChoice) -> None:
        self._inner = inner
        self._choice = choice
        self.sample_rate = inner.sample_rate
        self.incremental = inner.incremental

    async def warm_up(self) -> None:
        await self._inner.warm_up()

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def transcribe(
        self,
        utterance: Utterance,
        *,
        language: str,  # noqa: ARG002 (the conversation's, which the choice follows)
        prefix: str = "",
        partial: bool = False,
        prompt: str = "",
        words: bool = False,
        languages: Sequence[str] = (),  # noqa: ARG002 (the choice's candidates instead)
    ) -> Transcript | None:
        current = self._choice.current
        candidates = () if partial else self._choice.candidates()
        return await self._inner.transcribe(
            utterance,
            language=current,
            prefix=prefix,
            partial=partial,
            prompt=prompt,
            words=words,
            languages=candidates,
        )


def requested_language(text: str, languages: Sequence[str]) -> str | None:
    """The one of `languages` the user asks to speak in `text` ("can we speak Spanish"),
    else None: a language's name said next to a word of asking or switching."""
    said = _folded(text)
    if not _ASKING.search(said):
        return None
    for language in languages:
        for name in LANGUAGE_NAMES.get(language, ()):
            if re.search(rf"\b{re.escape(_folded(name))}\b", said):
                return language
    return None


def _folded(text: str) -> str:
    """Lower case without accents: "Español" and "espanol" match."""
    decomposed = unicodedata.normalize("NFKD", text.lower())
    return "".join(c for c in decomposed if not unicodedata.combining(c))
