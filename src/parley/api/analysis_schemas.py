"""Wire models of the work after a call (API.md section 16), beside api/schemas.py:
extraction schemas, extractions, evaluation prompts, evaluations and a conversation's
analysis, in the official SDK's shapes.

Types and sizes are checked here; the rules (names, 1-50 distinct fields) are
services/extraction_schemas.py's. Outputs equal services/event_payloads.py's JSON, member
for member (a test says so).
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal

from pydantic import BaseModel, Field, StringConstraints

from parley.api.schemas import Input, ProjectRefOut, Timestamp, TurnTimingOut
from parley.clock import isoformat
from parley.records import (
    Conversation,
    EvalPrompt,
    Evaluation,
    Extraction,
    ExtractionField,
    ExtractionSchema,
    ExtractionSchemaPatch,
    ExtractionSchemaSpec,
)
from parley.text import Label, Text

FieldType = Literal["string", "int", "float", "bool"]
EvaluationResultOut = Literal["successful", "unsuccessful", "undecided", "error"]
SchemaName = Annotated[Label, StringConstraints(min_length=1, max_length=100)]
FieldName = Annotated[Label, StringConstraints(min_length=1, max_length=64)]
Prompt = Annotated[Text, StringConstraints(max_length=20_000)]
Reference = Annotated[Label, StringConstraints(min_length=1, max_length=100)]


class ExtractionFieldIn(Input):
    name: FieldName
    type: FieldType
    description: Annotated[Text, StringConstraints(max_length=1_000)] | None = None

    def record(self) -> ExtractionField:
        return ExtractionField(name=self.name, type=self.type, description=self.description)


Fields = Annotated[list[ExtractionFieldIn], Field(min_length=1, max_length=50)]


class ExtractionSchemaCreate(Input):
    name: SchemaName = Field(description="1-100 characters, unique in the project.")
    prompt: Prompt = Field(description="How to extract the data.")
    fields: Fields = Field(description="1-50 fields with distinct names.")

    def spec(self) -> ExtractionSchemaSpec:
        return ExtractionSchemaSpec(
            name=self.name, prompt=self.prompt, fields=tuple(f.record() for f in self.fields)
        )


class ExtractionSchemaUpdate(Input):
    """A partial update: only the fields present change; none may be null."""

    name: SchemaName | None = None
    prompt: Prompt | None = None
    fields: Fields | None = None

    FIELDS: ClassVar[tuple[str, ...]] = ("name", "prompt", "fields")

    def null_fields(self) -> list[str]:
        """Return the fields sent as null."""
        return sorted(n for n in self.model_fields_set if getattr(self, n) is None)

    def patch(self) -> ExtractionSchemaPatch:
        sent: dict[str, Any] = {n: getattr(self, n) for n in self.model_fields_set}
        if "fields" in sent:
            sent["fields"] = tuple(f.record() for f in sent["fields"])
        return ExtractionSchemaPatch(**sent)


class ExtractionSchemaCreated(BaseModel):
    id: str
    name: str


class ExtractionFieldOut(BaseModel):
    name: str
    type: FieldType
    description: str | None


class ExtractionSchemaOut(BaseModel):
    id: str
    name: str
    project: ProjectRefOut
    prompt: str
    fields: list[ExtractionFieldOut]
    created_at: Timestamp
    updated_at: Timestamp

    @classmethod
    def of(cls, schema: ExtractionSchema) -> ExtractionSchemaOut:
        return cls.model_validate(
            {
                "id": schema.id,
                "name": schema.name,
                "project": ProjectRefOut.of(schema.project),
                "prompt": schema.prompt,
                "fields": [
                    {"name": f.name, "type": f.type, "description": f.description}
                    for f in schema.fields
                ],
                "created_at": isoformat(schema.created_at),
                "updated_at": isoformat(schema.updated_at),
            }
        )


class ExtractionSchemaEnvelope(BaseModel):
    extraction_schema: ExtractionSchemaOut


class ExtractionSchemaList(BaseModel):
    extraction_schemas: list[ExtractionSchemaOut]
    next_cursor: str | None


class ExtractionCreate(Input):
    schema_id: Reference = Field(
        description="The extraction schema: its ID, or its name in the conversation's project."
    )


class ExtractionSchemaRefOut(BaseModel):
    """The schema an extraction was made with (the official SDK's `isDeleted` included)."""

    id: str
    name: str
    is_deleted: bool = Field(alias="isDeleted")


class ExtractionOut(BaseModel):
    id: str
    schema_: ExtractionSchemaRefOut = Field(alias="schema")
    result: dict[str, Any]
    created_at: Timestamp

    @classmethod
    def of(cls, extraction: Extraction) -> ExtractionOut:
        return cls.model_validate(
            {
                "id": extraction.id,
                "schema": {
                    "id": extraction.schema_id,
                    "name": extraction.schema_name,
                    "isDeleted": extraction.schema_deleted,
                },
                "result": dict(extraction.result),
                "created_at": isoformat(extraction.created_at),
            }
        )


class ExtractionMade(BaseModel):
    """`{"result", "extraction"}`: the official SDK reads `result`."""

    result: dict[str, Any]
    extraction: ExtractionOut


class ExtractionList(BaseModel):
    extractions: list[ExtractionOut]
    next_cursor: str | None


class EvalPromptCreate(Input):
    name: SchemaName = Field(description="1-100 characters, unique in the project.")
    prompt: Annotated[Text, StringConstraints(min_length=1, max_length=20_000)] = Field(
        description="What a conversation is judged against."
    )


class EvalPromptOut(BaseModel):
    id: str
    name: str
    prompt: str

    @classmethod
    def of(cls, prompt: EvalPrompt) -> EvalPromptOut:
        return cls(id=prompt.id, name=prompt.name, prompt=prompt.prompt)


class EvalPromptList(BaseModel):
    conversation_eval_prompts: list[EvalPromptOut]
    next_cursor: str | None


class EvaluationCreate(Input):
    prompt_id: Reference = Field(
        description="The evaluation prompt: its ID, or its name in the conversation's project."
    )


class EvalPromptRefOut(BaseModel):
    id: str
    name: str


class EvaluationOut(BaseModel):
    id: str
    conversation_id: str
    result: EvaluationResultOut
    prompt: EvalPromptRefOut
    created_at: Timestamp

    @classmethod
    def of(cls, evaluation: Evaluation) -> EvaluationOut:
        return cls.model_validate(
            {
                "id": evaluation.id,
                "conversation_id": evaluation.conversation_id,
                "result": evaluation.result,
                "prompt": {"id": evaluation.prompt_id, "name": evaluation.prompt_name},
                "created_at": isoformat(evaluation.created_at),
            }
        )


class EvaluationEnvelope(BaseModel):
    evaluation: EvaluationOut


class EvaluationList(BaseModel):
    evals: list[EvaluationOut]
    next_cursor: str | None


class ConversationAnalysisOut(BaseModel):
    """The official SDK's `ConversationAnalysis`, with API.md section 18's `turns`."""

    id: str = Field(description="The conversation's ID: one analysis per conversation.")
    latencies_ms: list[int]
    interruptions_count: int
    turns: list[TurnTimingOut] = Field(
        description="Per reply to a spoken user turn, its stages' timings (API.md section 18)."
    )

    @classmethod
    def of(cls, conversation: Conversation) -> ConversationAnalysisOut:
        return cls(
            id=conversation.id,
            latencies_ms=list(conversation.latencies_ms),
            interruptions_count=conversation.interruptions_count,
            turns=[TurnTimingOut.model_validate(turn.to_json()) for turn in conversation.turns],
        )


class ConversationAnalysisEnvelope(BaseModel):
    analysis: ConversationAnalysisOut
