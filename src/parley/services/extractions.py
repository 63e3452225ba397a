"""Extractions (API.md section 16): the language model reads a conversation and fills an
extraction schema's fields.

Rules:
1. The model gets the schema's prompt and fields and the transcript (services/transcripts.py:
   a live conversation's words so far too; none kept: 409 `no_transcript`), and answers
   one JSON object constrained by a JSON Schema `response_format`: every field present
   (`required`), nothing else (`additionalProperties: false`), each typed and nullable.
2. The answer is checked against the fields: `string` a string, `int` an integer (never a
   bool), `float` a finite number (an integer is one; stored as a float), `bool` a bool,
   and any of them null: a field the conversation does not give. One retry on a bad
   answer, then 502 `extraction_failed` (services/model_answers.py rule 2).
3. The schema is named by ID, or by name in the conversation's project; one of another
   organization is 403.
4. The result is stored with the schema's ID and name as they were; it is part of the
   transcript (deleted with it: API.md section 16), so a transcript deleted while the model
   was reading leaves nothing stored (409 `no_transcript`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from parley.clock import utcnow
from parley.db.repos import conversations as conversation_repo
from parley.db.repos import extractions as extraction_repo
from parley.errors import ConversationNotFound, ExtractionFailed
from parley.ids import new_id
from parley.records import Conversation, Extraction, ExtractionField, ExtractionSchema, Page
from parley.services.context import Context
from parley.services.extraction_schemas import find_schema
from parley.services.model_answers import ask_json, is_finite_number, model_of
from parley.services.orgs import MAIN_PROJECT
from parley.services.paging import page_of
from parley.services.transcripts import check_kept, readable_conversation, transcript_text
from parley.text import is_text

__all__ = [
    "answer_schema",
    "check_answer",
    "extract",
    "extract_with",
    "extraction_messages",
    "list_extractions",
]

MAX_ANSWER_TOKENS: Final = 1_000
JSON_TYPES: Final = {"string": "string", "int": "integer", "float": "number", "bool": "boolean"}


async def extract(
    ctx: Context, *, org_id: str, conversation_id: str, schema_ref: str
) -> Extraction:
    """Extract a schema's fields from a conversation and store the result (rules 1-4)."""
    model_of(ctx)  # 409 before anything is read
    conversation = await readable_conversation(ctx, org_id=org_id, conversation_id=conversation_id)
    project = conversation.project.id if conversation.project else MAIN_PROJECT
    async with ctx.db.read() as session:
        schema = await find_schema(session, org_id, schema_ref, project)
    return await extract_with(ctx, conversation, schema)


async def extract_with(
    ctx: Context, conversation: Conversation, schema: ExtractionSchema
) -> Extraction:
    """Ask the model for one schema's fields of a conversation already read; store them."""
    result = await ask_json(
        model_of(ctx),
        extraction_messages(schema, transcript_text(conversation)),
        name=schema.name,
        schema=answer_schema(schema.fields),
        check=lambda answer: check_answer(schema.fields, answer),
        max_tokens=MAX_ANSWER_TOKENS,
    )
    if result is None:
        raise ExtractionFailed()
    async with ctx.db.transaction() as session:
        # The conversation's row is locked, so a deletion of its transcript either came
        # first (nothing is stored) or waits for this extraction and deletes it too.
        state = await conversation_repo.find(
            session, conversation.org_id, conversation.id, for_update=True
        )
        if state is None:
            raise ConversationNotFound()
        check_kept(state)
        return await extraction_repo.insert(
            session,
            extraction_id=new_id("extr"),
            org_id=conversation.org_id,
            conversation_id=conversation.id,
            schema_id=schema.id,
            schema_name=schema.name,
            result=result,
            now=utcnow(ctx.clock),
        )


async def list_extractions(
    ctx: Context, *, org_id: str, conversation_id: str, cursor: str | None, limit: int
) -> Page[Extraction]:
    """A conversation's extractions, oldest first; 404 when there is no such conversation."""
    async with ctx.db.read() as session:
        if await conversation_repo.find(session, org_id, conversation_id) is None:
            raise ConversationNotFound()
        found = await extraction_repo.list_page(
            session, org_id, conversation_id, cursor=cursor, limit=limit
        )
    return page_of(found, limit=limit)


def extraction_messages(schema: ExtractionSchema, transcript: str) -> list[dict[str, str]]:
    """The chat messages of an extraction: the instructions, then the transcript."""
    described = "\n".join(
        f"- {field.name!r} ({field.type})" + (f": {field.description}" if field.description else "")
        for field in schema.fields
    )
    instructions = (
        "You read the transcript of a conversation between a user and an AI agent and "
        "extract data from it.\n\n"
        + (f"Instructions: {schema.prompt}\n\n" if schema.prompt else "")
        + f"Fields:\n{described}\n\n"
        "Answer with one JSON object holding exactly these fields. A field the conversation "
        "does not give is null: never guess."
    )
    return [
        {"role": "system", "content": instructions},
        {"role": "user", "content": f"Transcript:\n\n{transcript}"},
    ]


def answer_schema(fields: Sequence[ExtractionField]) -> dict[str, Any]:
    """The JSON Schema of an answer (rule 1): every field required, typed and nullable."""
    properties: dict[str, Any] = {}
    for field in fields:
        typed: dict[str, Any] = {"type": [JSON_TYPES[field.type], "null"]}
        if field.description:
            typed["description"] = field.description
        properties[field.name] = typed
    return {
        "type": "object",
        "properties": properties,
        "required": [field.name for field in fields],
        "additionalProperties": False,
    }


def check_answer(fields: Sequence[ExtractionField], answer: Any) -> dict[str, Any]:
    """Return the answer's values by field (rule 2); ValueError saying what does not fit."""
    if not isinstance(answer, Mapping):
        raise ValueError("the answer is not a JSON object")
    names = [field.name for field in fields]
    missing = [name for name in names if name not in answer]
    if missing:
        raise ValueError(f"the field {missing[0]!r} is missing (null when not given)")
    extra = sorted(set(answer) - set(names))
    if extra:
        raise ValueError(f"{extra[0]!r} is not a field of the schema")
    return {field.name: _value(field, answer[field.name]) for field in fields}


def _value(field: ExtractionField, value: Any) -> Any:
    if value is None:
        return None
    if field.type == "string" and isinstance(value, str) and is_text(value):
        return value
    if field.type == "int" and isinstance(value, int) and not isinstance(value, bool):
        return value
    if field.type == "float" and is_finite_number(value):
        return float(value)
    if field.type == "bool" and isinstance(value, bool):
        return value
    raise ValueError(f"the field {field.name!r} must be {_A[field.type]} or null")


_A: Final = {"string": "a string", "int": "an integer", "float": "a number", "bool": "a boolean"}
