"""Template variables of prompts and welcome messages (API.md section 12).

Syntax: a placeholder is `{{`, optional spaces, a name, optional spaces, `}}`; a name is
`[A-Za-z_][A-Za-z0-9_]*`. So `{{name}}` and `{{ name }}` are the same placeholder, while
`{{ two words }}`, `{{1x}}` or a lone `{{` are plain text, left as written. Only the ASCII
space counts as a space (no tabs or newlines inside a placeholder).

Values are plain text: a value that itself contains `{{other}}` is inserted as written, never
substituted again (one pass over the template, none over the values).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from parley.errors import MissingTemplateVariable

PLACEHOLDER = re.compile(r"\{\{ *([A-Za-z_][A-Za-z0-9_]*) *\}\}")
NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
NAME_RULE = "must be a letter or _ followed by letters, digits or _ (at most 64)"
MAX_NAME_LENGTH = 64


def is_variable_name(name: str) -> bool:
    """Tell whether `name` may be a template variable's name."""
    return len(name) <= MAX_NAME_LENGTH and NAME.fullmatch(name) is not None


def placeholders(text: str) -> set[str]:
    """Return the names of the placeholders `text` uses."""
    return set(PLACEHOLDER.findall(text))


def render(text: str, *, values: Mapping[str, str], defaults: Mapping[str, str]) -> str:
    """Replace each placeholder by its value, else its default.

    Raises MissingTemplateVariable (naming the first such placeholder) when one has neither.
    """
    missing = sorted(n for n in placeholders(text) if n not in values and n not in defaults)
    if missing:
        raise MissingTemplateVariable(
            f"The template variable {missing[0]!r} has neither a value nor a default."
        )

    def substitute(match: re.Match[str]) -> str:
        name = match.group(1)
        return values[name] if name in values else defaults[name]

    return PLACEHOLDER.sub(substitute, text)
