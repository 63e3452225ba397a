"""The rule-based replier's few sentences in the languages other than English it answers in
(API.md section 18): an agent without a language model replies in German, Spanish, French,
Italian or Portuguese with these; in any other language it answers in English.

The role line drawn from the system prompt is left out: the prompt is the agent's own words,
in whatever language it was written.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Phrases:
    """One language's sentences of rules.py's replies."""

    you_said: str
    """Before the quoted words: "You said"."""
    offer: str
    """"How can I help you?"."""
    unclear: str
    """Speech heard, but no words made out."""
    farewell: str
    goodbye: re.Pattern[str]
    """Words that end the conversation in that language."""


PHRASEBOOK: dict[str, Phrases] = {
    "de": Phrases(
        "Sie sagten",
        "Wie kann ich Ihnen helfen?",
        "Ich habe Sie gehört, kann aber noch keine Worte verstehen.",
        "Auf Wiedersehen, und danke für Ihren Anruf.",
        re.compile(r"\b(?:auf\s+wiedersehen|tschüss|tschüs)\b", re.IGNORECASE),
    ),
    "es": Phrases(
        "Usted dijo",
        "¿En qué puedo ayudarle?",
        "Le he oído, pero todavía no entiendo las palabras.",
        "Adiós, y gracias por su llamada.",
        re.compile(r"\b(?:adiós|adios|hasta\s+luego)\b", re.IGNORECASE),
    ),
    "fr": Phrases(
        "Vous avez dit",
        "Comment puis-je vous aider ?",
        "Je vous ai entendu, mais je ne distingue pas encore les mots.",
        "Au revoir, et merci de votre appel.",
        re.compile(r"\bau\s+revoir\b", re.IGNORECASE),
    ),
    "it": Phrases(
        "Ha detto",
        "Come posso aiutarla?",
        "L'ho sentita, ma non distinguo ancora le parole.",
        "Arrivederci, e grazie per la chiamata.",
        re.compile(r"\b(?:arrivederci|ciao)\b", re.IGNORECASE),
    ),
    "pt": Phrases(
        "Você disse",
        "Como posso ajudar?",
        "Ouvi você, mas ainda não distingo as palavras.",
        "Adeus, e obrigado pela sua chamada.",
        re.compile(r"\b(?:adeus|tchau)\b", re.IGNORECASE),
    ),
}
"""Per primary language tag; English is rules.py's own."""
