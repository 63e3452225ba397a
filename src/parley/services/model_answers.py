"""Answers from the language model for the work after a call (API.md section 16).

Rules:
1. Without a language model (PARLEY_LLM_BASE_URL unset) nothing is asked: 409
   `no_language_model` where a client asked.
2. A structured answer is asked for with a JSON Schema `response_format` (`strict`), and
   checked here anyway: a server may ignore the schema. An answer that does not fit
   (not JSON, the wrong shape or types), or a request the model refused, gets one more
   try, told what was wrong; a second bad answer is no answer (the caller decides: 502
   `extraction_failed`, or an evaluation's `error`).
3. A model that cannot be reached or does not answer in time is not asked again: 503
   (`Unavailable`, raised by the model client) at once.
"""

from __future__ import annotations

import json
import logging
import math
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final, TypeVar

from parley.errors import NoLanguageModel, UpstreamError
from parley.services.context import Context, LanguageModel

__all__ = ["ask_json", "is_finite_number", "model_of", "parse_json", "response_format"]

log = logging.getLogger(__name__)

T = TypeVar("T")
ATTEMPTS: Final = 2
"""The first answer and one retry (rule 2)."""
_FENCE = re.compile(r"^```(?:json)?\s*(.*?)\s*```$", re.DOTALL)
_SCHEMA_NAME = re.compile(r"[^A-Za-z0-9_-]")


def model_of(ctx: Context) -> LanguageModel:
    """Return the configured language model; NoLanguageModel when there is none (rule 1)."""
    if ctx.language_model is None:
        raise NoLanguageModel()
    return ctx.language_model


def response_format(name: str, schema: Mapping[str, Any]) -> dict[str, Any]:
    """The `response_format` that constrains an answer to `schema` (OpenAI's strict JSON
    Schema mode); `name` is made to fit its pattern (`[A-Za-z0-9_-]{1,64}`)."""
    fitted = _SCHEMA_NAME.sub("_", name)[:64] or "answer"
    return {
        "type": "json_schema",
        "json_schema": {"name": fitted, "strict": True, "schema": schema},
    }


async def ask_json(
    model: LanguageModel,
    messages: Sequence[Mapping[str, str]],
    *,
    name: str,
    schema: Mapping[str, Any],
    check: Callable[[Any], T],
    max_tokens: int,
) -> T | None:
    """Ask for an answer that follows `schema`; return `check`'s value of the first answer
    it accepts (it raises ValueError, saying why, for one it does not), or None after two
    bad answers (rule 2). Unavailable (rule 3) passes through."""
    asked = list(messages)
    wanted = response_format(name, schema)
    for attempt in range(1, ATTEMPTS + 1):
        text = ""
        try:
            text = await model.complete(asked, response_format=wanted, max_tokens=max_tokens)
            return check(parse_json(text))
        except UpstreamError as refused:
            reason = refused.message
        except ValueError as bad:
            reason = str(bad)
        log.info("the language model's answer %d to %r is unusable: %s", attempt, name, reason)
        asked = [
            *messages,
            {"role": "assistant", "content": text},
            {
                "role": "user",
                "content": f"That answer is unusable: {reason}. Answer again with only the "
                "JSON object the schema describes.",
            },
        ]
    return None


def parse_json(text: str) -> Any:
    """Parse an answer's JSON (inside a Markdown code fence too); ValueError when it is
    not JSON, holds NaN or an infinity, or nests too deep."""
    stripped = text.strip()
    fenced = _FENCE.match(stripped)
    if fenced:
        stripped = fenced.group(1)
    try:
        return json.loads(stripped, parse_constant=_refuse_constant)
    except RecursionError:
        raise ValueError("the JSON nests too deep") from None
    except json.JSONDecodeError as error:
        raise ValueError(f"not JSON ({error.msg})") from None


def _refuse_constant(constant: str) -> Any:
    raise ValueError(f"{constant} is not a JSON number")


def is_finite_number(value: Any) -> bool:
    """True for an int or float (never a bool) that is finite."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    return math.isfinite(value)
