"""Email addresses, written ("jane.doe@example.com") or said ("jane dot doe at example dot
com").

A written address is a local part of at most 64 characters (RFC 5321, section 4.5.3.1.1),
`@`, and a domain whose last label is 2 to 24 letters.

A said address is words joined by "dot", "underscore", "dash" or "hyphen" (or by `.`, `_`,
`-`), each maybe followed by a number ("doe forty two", read as "doe 42"), then "at", then
a domain said the same way that ends in a common top-level domain (`TLDS`). "at" is also
an ordinary word ("I work at acme dot com"), so a local part of one plain word counts only
when the domain is a mail provider's (`MAIL_PROVIDERS`) or when "email", "mail" or
"address" is said in the twelve words before; a local part of several words, or one with a
digit, always counts.

Every repetition is bounded, so a long text without an address is read in linear time.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from parley.redaction.context import words_before
from parley.redaction.spans import Span, Tag

TLDS = frozenset(
    "com org net edu gov mil int io co us uk ca au nz ie de fr es it nl be ch at se no dk fi "
    "pl pt jp cn in br mx za eu info biz me ai app dev tv xyz online site tech".split()
)
MAIL_PROVIDERS = frozenset(
    "gmail googlemail yahoo hotmail outlook live msn icloud me mac aol proton protonmail "
    "gmx zoho yandex mail fastmail hey".split()
)
EMAIL_CONTEXT = frozenset({"email", "emails", "mail", "address"})

_LABEL = r"[A-Za-z0-9-]{1,63}"
_WRITTEN = re.compile(
    rf"(?<![A-Za-z0-9._%+-])[A-Za-z0-9._%+-]{{1,64}}@{_LABEL}(?:\.{_LABEL}){{0,8}}"
    r"\.[A-Za-z]{2,24}(?![A-Za-z0-9-])"
)
_SAID_WORD = r"[A-Za-z0-9]{1,64}(?:\s+[0-9]{1,16})?"  # "doe 42": "doe forty two", rewritten
_SAID_SEPARATOR = r"(?:\s+(?:dot|underscore|dash|hyphen)\s+|[._-])"
_SAID_DOT = r"(?:\s+dot\s+|\.)"
_SAID = re.compile(
    rf"(?<![A-Za-z0-9._-])(?P<local>{_SAID_WORD}(?:{_SAID_SEPARATOR}{_SAID_WORD}){{0,6}})"
    rf"\s+at\s+(?P<domain>[A-Za-z0-9]{{1,63}}(?:{_SAID_DOT}[A-Za-z0-9]{{1,63}}){{0,4}})"
    rf"{_SAID_DOT}(?P<tld>[A-Za-z]{{2,7}})(?![A-Za-z0-9])",
    re.IGNORECASE,
)
_SAID_DOMAIN_LABELS = re.compile(_SAID_DOT, re.IGNORECASE)


def emails(text: str) -> Iterator[Span]:
    """Yield the email addresses of `text`, written or said."""
    for match in _WRITTEN.finditer(text):
        yield Span(match.start(), match.end(), Tag.EMAIL)
    for match in _SAID.finditer(text):
        if match["tld"].lower() in TLDS and _is_address(text, match):
            yield Span(match.start(), match.end(), Tag.EMAIL)


def _is_address(text: str, match: re.Match[str]) -> bool:
    local = match["local"]
    if not local.isalpha():
        return True  # several words, or a digit: no ordinary word before "at"
    provider = _SAID_DOMAIN_LABELS.split(match["domain"])[0].lower()
    if provider in MAIL_PROVIDERS:
        return True
    return not EMAIL_CONTEXT.isdisjoint(words_before(text, match.start()))
