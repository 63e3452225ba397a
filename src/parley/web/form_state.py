"""A refused form shown again: what the visitor typed, and why it was refused.

Rules:
1. A post that fails on its input (`InvalidRequest` or `Conflict`: a bad field, a name
   taken, an agent disabled) answers its page again, with the refusal's status, the values
   as typed and the error beside the form (field errors beside their fields); nothing is
   lost and nothing changed. Other failures (not found, forbidden, unavailable) are pages
   of their own.
2. Secrets are never typed back into a page: the CSRF token is the page's own, and fields
   named in `secret_fields` (a pasted JWT) stay empty.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Final

from starlette.datastructures import FormData

from parley.errors import Conflict, InvalidRequest, ParleyError

FORM_ERRORS: Final = (InvalidRequest, Conflict)
"""The failures caused by what was typed: the form is shown again."""
NOT_KEPT: Final = frozenset({"csrf_token"})


@dataclass(frozen=True, slots=True)
class FailedForm:
    """A posted form the service refused, with the values as typed."""

    form: str
    """The `id` of the form element."""
    values: Mapping[str, tuple[str, ...]]
    fields: frozenset[str]
    """Every field posted, secrets included (whose values are not kept)."""
    code: str
    message: str
    param_errors: Mapping[str, str]

    @classmethod
    def of(
        cls,
        form_id: str,
        form: FormData,
        error: ParleyError,
        *,
        secret_fields: Iterable[str] = (),
    ) -> FailedForm:
        dropped = NOT_KEPT | set(secret_fields)
        values = {
            name: tuple(v for v in form.getlist(name) if isinstance(v, str))
            for name in form
            if name not in dropped
        }
        fields = frozenset(form) - NOT_KEPT
        problems = dict(error.param_errors or {})
        return cls(form_id, values, fields, error.code, error.message, problems)


class FormState:
    """What a template needs to draw one form: the values to show and the errors."""

    def __init__(self, failed: object, form_id: str) -> None:
        self.form = form_id
        self.failed = failed if isinstance(failed, FailedForm) and failed.form == form_id else None

    def value(self, field: str, default: object = "") -> str:
        """The value as typed when this form was refused, else `default`."""
        if self.failed is not None:
            return "\n".join(self.failed.values.get(field, ()))
        return "" if default is None else str(default)

    def values(self, field: str, default: Iterable[str] = ()) -> list[str]:
        """Every value of a repeated field (checkboxes) as posted, else `default`."""
        if self.failed is not None:
            return list(self.failed.values.get(field, ()))
        return list(default)

    def checked(self, field: str, default: bool) -> bool:
        """Whether a checkbox was ticked when the form was posted, else `default`."""
        if self.failed is not None:
            return field in self.failed.values
        return default

    def error(self, field: str) -> str | None:
        """The problems of one field (`public_keys.0` belongs to `public_keys`), if any."""
        if self.failed is None:
            return None
        found = []
        for name, problem in self.failed.param_errors.items():
            base, _, index = name.partition(".")
            if base == field:
                found.append(f"key {int(index) + 1}: {problem}" if index.isdigit() else problem)
        return "; ".join(found) or None

    @property
    def other_errors(self) -> list[tuple[str, str]]:
        """Field errors of fields the form did not post: shown with the form's message."""
        if self.failed is None:
            return []
        posted = self.failed.fields
        return [
            (name, problem)
            for name, problem in self.failed.param_errors.items()
            if name.partition(".")[0] not in posted
        ]


def form_state(failed: object, form_id: str) -> FormState:
    """The state of form `form_id` on a page that may carry a refused form."""
    return FormState(failed, form_id)
