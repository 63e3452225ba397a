"""Reading the extraction schema form (API.md section 16) into a spec, and its fields editor.

Rules (the limits of the REST API's ExtractionSchemaCreate, api/analysis_schemas.py; the
rules between fields are services/extraction_schemas.py's):
1. The fields are rows of a name (`field_name`), a type (`field_type`: string, int, float
   or bool) and a description (`field_description`); a row with neither a name nor a
   description is skipped, so the blank rows under the filled ones cost nothing. A name or
   description has its ends' blanks dropped; an empty description is none.
2. Every problem of the fields, the service's too (`fields[2].name`), is reported on
   `field_name`, saying which field ("field 3"): the editor is one control.
3. `prompt` is free text of at most 20,000 characters; it may be empty.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from itertools import zip_longest
from typing import Final, NoReturn

from starlette.datastructures import FormData

from parley.errors import ParleyError, ValidationFailed
from parley.records import ExtractionField, ExtractionSchema, ExtractionSchemaSpec
from parley.services.extraction_schemas import FIELD_TYPES, MAX_FIELDS
from parley.text import TEXT_RULE, is_text
from parley.web import forms
from parley.web.form_state import FormState

BLANK_ROWS: Final = 3
"""Empty rows under the filled ones, for new fields (save, and the page draws 3 more)."""
MAX_ROWS: Final = MAX_FIELDS + 50
"""More rows than any page draws: refused before any is read."""
MAX_PROMPT: Final = 20_000
MAX_DESCRIPTION: Final = 1_000
FIELDS_CONTROL: Final = "field_name"
_SERVICE_FIELD: Final = re.compile(r"fields\[(\d+)\]\.\w+")


def schema_spec(form: FormData) -> ExtractionSchemaSpec:
    """Read a whole schema from the form (rules 1 and 3)."""
    prompt = forms.text(form, "prompt", max_length=MAX_PROMPT)
    if not is_text(prompt):
        raise ValidationFailed(param_errors={"prompt": TEXT_RULE})
    return ExtractionSchemaSpec(
        name=forms.text(form, "name", max_length=100, required=True),
        prompt=prompt,
        fields=field_rows(form),
    )


def field_rows(form: FormData) -> tuple[ExtractionField, ...]:
    """Read the fields editor's rows (rule 1); the service checks names, count and types."""
    names = _strings(form, "field_name")
    types = _strings(form, "field_type")
    descriptions = _strings(form, "field_description")
    if max(len(names), len(types), len(descriptions)) > MAX_ROWS:
        _refuse(f"at most {MAX_FIELDS} fields")
    found: list[ExtractionField] = []
    for name, kind, description in zip_longest(names, types, descriptions, fillvalue=""):
        name, description = name.strip(), description.strip()
        if not name and not description:
            continue
        where = f"field {len(found) + 1}"
        if kind not in FIELD_TYPES:
            _refuse(f"{where}: the type must be one of " + ", ".join(FIELD_TYPES))
        if len(description) > MAX_DESCRIPTION or not is_text(description):
            _refuse(f"{where}: the description must be at most {MAX_DESCRIPTION} characters")
        found.append(ExtractionField(name=name, type=kind, description=description or None))
    return tuple(found)


def on_fields_control(error: ParleyError) -> ParleyError:
    """The service's refusal with its field problems moved onto the editor (rule 2)."""
    if not isinstance(error, ValidationFailed) or not error.param_errors:
        return error
    moved: dict[str, str] = {}
    for name, problem in error.param_errors.items():
        row = _SERVICE_FIELD.fullmatch(name)
        if row is not None:
            moved[FIELDS_CONTROL] = f"field {int(row.group(1)) + 1}: {problem}"
        elif name == "fields":
            moved[FIELDS_CONTROL] = f"the schema {problem}"
        else:
            moved[name] = problem
    return ValidationFailed(error.message, param_errors=moved)


def schema_field_rows(
    state: FormState, schema: ExtractionSchema | None
) -> list[tuple[str, str, str]]:
    """The rows the editor draws, (name, type, description): as typed when the form was
    refused, else the schema's fields; then blank rows for new ones."""
    if state.failed is not None:
        typed = zip_longest(
            state.values("field_name"),
            state.values("field_type"),
            state.values("field_description"),
            fillvalue="",
        )
        rows = [(n, t, d) for n, t, d in typed if n.strip() or d.strip()]
    else:
        fields: Sequence[ExtractionField] = schema.fields if schema is not None else ()
        rows = [(f.name, f.type, f.description or "") for f in fields]
    return rows + [("", FIELD_TYPES[0], "")] * BLANK_ROWS


def _strings(form: FormData, name: str) -> list[str]:
    return [value if isinstance(value, str) else "" for value in form.getlist(name)]


def _refuse(message: str) -> NoReturn:
    raise ValidationFailed(param_errors={FIELDS_CONTROL: message})
