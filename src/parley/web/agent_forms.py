"""Reading an agent's tools, template variables and boosted keywords from the agent form.

Rules (the same limits as the REST API's AgentCreate, api/schemas.py):
1. `tools` is the ticked checkboxes: at most 64 names, none repeated; whether each names a
   tool of the agent's project or a built-in is the service's rule (400 `unknown_tool`).
2. Template variables are rows of a name (`variable_name`) and a default value
   (`variable_default`); a row with neither is skipped. At most 100, names unique and of the
   placeholder rule, defaults at most 2000 characters. Errors are reported on `variable_name`.
3. Boosted keywords are lines of text: at most 100, each at most 64 characters.
4. The voice is picked from the installed voices (`voice_choices`); whether it is one is the
   service's rule (400 `unknown_voice`).
5. The silence settings (API.md section 15): each number of seconds empty (off) or a whole
   number, whose range is the service's rule; an empty poke text is the default one.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import zip_longest
from typing import Final, NoReturn

from starlette.datastructures import FormData

from parley.errors import ValidationFailed
from parley.records import Agent, TemplateVariable
from parley.services.silence import DEFAULT_POKE_TEXT, MAX_POKE_TEXT, SilenceSettings
from parley.services.templates import NAME_RULE, is_variable_name
from parley.services.tools import BUILT_IN_TOOLS
from parley.services.voices import Voice
from parley.text import LABEL_RULE, TEXT_RULE, is_label, is_text
from parley.web import forms
from parley.web.form_state import FormState

MAX_TOOLS: Final = 64
MAX_VARIABLES: Final = 100
MAX_KEYWORDS: Final = 100
BLANK_ROWS: Final = 2
"""Empty template-variable rows under the filled ones, for new variables."""
BUILT_INS: Final = tuple(sorted(BUILT_IN_TOOLS))


def tool_names(form: FormData) -> tuple[str, ...]:
    """Read the ticked tools (rule 1)."""
    names = [name for name in form.getlist("tools") if isinstance(name, str)]
    if len(names) > MAX_TOOLS or len(set(names)) != len(names):
        raise ValidationFailed(param_errors={"tools": f"at most {MAX_TOOLS}, without repeats"})
    for name in names:
        if not 1 <= len(name) <= 64 or not is_label(name):
            raise ValidationFailed(param_errors={"tools": f"a tool's name {LABEL_RULE}"})
    return tuple(names)


def template_variables(form: FormData) -> dict[str, TemplateVariable]:
    """Read the template-variable rows (rule 2)."""
    names = [v.strip() if isinstance(v, str) else "" for v in form.getlist("variable_name")]
    defaults = [v if isinstance(v, str) else "" for v in form.getlist("variable_default")]
    if len(names) > MAX_VARIABLES + BLANK_ROWS + 50:  # more rows than any page drew
        _refuse(f"at most {MAX_VARIABLES} template variables")
    found: dict[str, TemplateVariable] = {}
    for name, default in zip_longest(names, defaults, fillvalue=""):
        if not name and not default:
            continue
        if not is_variable_name(name):
            _refuse(f"{name[:64]!r}: a template variable's name {NAME_RULE}")
        if name in found:
            _refuse(f"{name!r} is declared twice")
        if len(default) > 2000 or not is_text(default):
            _refuse(f"the default of {name!r} must be at most 2000 characters, {TEXT_RULE}")
        found[name] = TemplateVariable(default_value=default)
    if len(found) > MAX_VARIABLES:
        _refuse(f"at most {MAX_VARIABLES} template variables")
    return found


def boosted_keywords(form: FormData) -> tuple[str, ...]:
    """Read the boosted keywords, one per line (rule 3); a keyword may hold a comma."""
    raw = forms.text(form, "boosted_keywords", max_length=MAX_KEYWORDS * 66)
    words = [line.strip() for line in raw.splitlines() if line.strip()]
    if len(words) > MAX_KEYWORDS:
        raise ValidationFailed(param_errors={"boosted_keywords": f"at most {MAX_KEYWORDS}"})
    for word in words:
        if len(word) > 64 or not is_label(word):
            message = f"{word[:64]!r}: at most 64 characters, {LABEL_RULE}"
            raise ValidationFailed(param_errors={"boosted_keywords": message})
    return tuple(words)


def silence(form: FormData) -> SilenceSettings:
    """Read the silence settings (rule 5)."""
    seconds: dict[str, int | None] = {}
    for field in ("no_input_poke_sec", "no_input_end_conversation_sec"):
        raw = forms.text(form, field, max_length=8)
        if raw and not raw.isdigit():
            raise ValidationFailed(param_errors={field: "a whole number of seconds, or empty"})
        seconds[field] = int(raw) if raw else None
    text = forms.text(form, "no_input_poke_text", max_length=MAX_POKE_TEXT)
    return SilenceSettings(
        poke_sec=seconds["no_input_poke_sec"],
        poke_text=text or DEFAULT_POKE_TEXT,
        end_sec=seconds["no_input_end_conversation_sec"],
    )


def silence_fields(settings: SilenceSettings) -> dict[str, int | str | None]:
    """The settings as the agent's fields."""
    return {
        "no_input_poke_sec": settings.poke_sec,
        "no_input_poke_text": settings.poke_text,
        "no_input_end_conversation_sec": settings.end_sec,
    }


def variable_rows(state: FormState, agent: Agent | None) -> list[tuple[str, str]]:
    """The rows the form draws: as typed when it was refused, else the agent's variables;
    then blank rows for new ones."""
    if state.failed is not None:
        typed = zip_longest(state.values("variable_name"), state.values("variable_default"))
        rows = [(name or "", default or "") for name, default in typed if name or default]
    else:
        variables = agent.template_variables if agent is not None else {}
        rows = [(name, variable.default_value) for name, variable in variables.items()]
    return rows + [("", "")] * BLANK_ROWS


def _refuse(message: str) -> NoReturn:
    raise ValidationFailed(param_errors={"variable_name": message})


def voice_choices(voices: Sequence[Voice], current: str) -> list[tuple[str, str]]:
    """The voice picker's options as (value, label): the installed voices, and first the
    agent's current `voice_id` when it is an alias rather than a listed voice (the default
    `us_female`), so that saving the form unchanged keeps it."""
    choices = [(voice.id, f"{voice.name} ({voice.language})") for voice in voices]
    if current and current not in {voice.id for voice in voices}:
        choices.insert(0, (current, current))
    return choices
