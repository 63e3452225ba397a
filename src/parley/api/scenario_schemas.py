"""Wire models of agent test runs (API.md section 19): scenarios and runs.

Types, sizes and the shape of the caller are checked here (nested fields answer dotted
`param_errors`: `caller.max_turns`); the rules that need the project (its agent, evaluation
prompts, extraction schemas) are services/scenarios.py's.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field, StringConstraints, model_validator

from parley.api.analysis_schemas import Fields, Prompt
from parley.api.schemas import Input, ProjectRefOut, Timestamp
from parley.clock import isoformat
from parley.records import Scenario, ScenarioResult, ScenarioRun
from parley.text import Label, Text

Name = Annotated[Label, StringConstraints(min_length=1, max_length=100)]
Line = Annotated[Text, StringConstraints(min_length=1, max_length=500)]
Short = Annotated[Text, StringConstraints(min_length=1, max_length=500)]
ToolName = Annotated[str, StringConstraints(pattern=r"^[a-z0-9_]{1,64}$")]


class CallerIn(Input):
    """A scripted caller (`lines`) or a goal-driven one played by the model (`goal`)."""

    lines: Annotated[list[Line], Field(min_length=1, max_length=20)] | None = None
    goal: Annotated[Text, StringConstraints(min_length=1, max_length=2_000)] | None = None
    max_turns: Annotated[int, Field(ge=1, le=20)] | None = None

    @model_validator(mode="after")
    def _one_kind(self) -> CallerIn:
        if (self.lines is None) == (self.goal is None):
            raise ValueError("give either `lines` or `goal`")
        if self.lines is not None and self.max_turns is not None:
            raise ValueError("`max_turns` goes with `goal`")
        return self


class ExpectedToolCall(Input):
    name: ToolName
    parameters: dict[str, Any] | None = None


class InlineExtractionSchema(Input):
    prompt: Prompt | None = None
    fields: Fields


class ExpectedExtraction(Input):
    schema_: Annotated[Name, Field(description="An extraction schema's name.")] | (
        InlineExtractionSchema
    ) = Field(alias="schema")
    result: dict[str, Any]


class ExpectIn(Input):
    tool_calls: Annotated[list[ExpectedToolCall], Field(max_length=20)] | None = None
    transcript_contains: Annotated[list[Short], Field(max_length=50)] | None = None
    transcript_not_contains: Annotated[list[Short], Field(max_length=50)] | None = None
    ended_by: Annotated[list[Label], Field(min_length=1, max_length=10)] | None = None
    eval_prompts: Annotated[list[Name], Field(max_length=10)] | None = None
    extraction: ExpectedExtraction | None = None
    max_latency_ms: Annotated[int, Field(ge=1, le=600_000)] | None = None


TemplateVariables = Annotated[
    dict[str, Annotated[Text, StringConstraints(max_length=2_000)]], Field(max_length=50)
]


class ScenarioFields(Input):
    agent: Name | None = None
    caller: CallerIn | None = None
    template_variables: TemplateVariables | None = None
    transport: Literal["websocket", "phone"] | None = None
    expect: ExpectIn | None = None
    tool_overrides: Annotated[dict[ToolName, Any], Field(max_length=64)] | None = None

    def spec(self) -> dict[str, Any]:
        """The fields sent, as JSON (absent ones left out)."""
        sent = self.model_dump(by_alias=True, exclude_unset=True, exclude={"name"})
        return {key: value for key, value in sent.items() if value is not None}


class ScenarioCreate(ScenarioFields):
    name: Name
    agent: Name
    caller: CallerIn
    expect: ExpectIn = Field(default_factory=ExpectIn)


class ScenarioUpdate(ScenarioFields):
    """A partial update: the members sent replace the stored ones."""

    name: Name | None = None


class ScenarioOut(BaseModel):
    id: str
    name: str
    project: ProjectRefOut
    agent: str
    caller: dict[str, Any]
    template_variables: dict[str, str]
    transport: str
    expect: dict[str, Any]
    tool_overrides: dict[str, Any]
    created_at: Timestamp
    updated_at: Timestamp

    @classmethod
    def of(cls, scenario: Scenario) -> ScenarioOut:
        spec = scenario.spec
        return cls(
            id=scenario.id,
            name=scenario.name,
            project=ProjectRefOut(id=scenario.project.id, name=scenario.project.name),
            agent=spec["agent"],
            caller=dict(spec["caller"]),
            template_variables=dict(spec.get("template_variables", {})),
            transport=spec.get("transport", "websocket"),
            expect=dict(spec.get("expect", {})),
            tool_overrides=dict(spec.get("tool_overrides", {})),
            created_at=isoformat(scenario.created_at),
            updated_at=isoformat(scenario.updated_at),
        )


class ScenarioEnvelope(BaseModel):
    test_scenario: ScenarioOut


class ScenarioList(BaseModel):
    test_scenarios: list[ScenarioOut]
    next_cursor: str | None = None


class RunCreate(Input):
    scenarios: Annotated[list[Name], Field(min_length=1, max_length=100)] | None = None


class ResultOut(BaseModel):
    scenario: str
    passed: bool
    failures: list[str]
    conversation_id: str | None
    latencies_ms: list[int]

    @classmethod
    def of(cls, result: ScenarioResult) -> ResultOut:
        return cls(
            scenario=result.scenario,
            passed=result.passed,
            failures=list(result.failures),
            conversation_id=result.conversation_id,
            latencies_ms=list(result.latencies_ms),
        )


class RunOut(BaseModel):
    id: str
    status: Literal["queued", "running", "passed", "failed", "error"]
    scenarios: list[str]
    results: list[ResultOut]
    created_at: Timestamp
    started_at: Timestamp | None
    ended_at: Timestamp | None

    @classmethod
    def of(cls, run: ScenarioRun) -> RunOut:
        return cls(
            id=run.id,
            status=run.status.value,
            scenarios=[str(spec["name"]) for spec in run.scenarios],
            results=[ResultOut.of(result) for result in run.results],
            created_at=isoformat(run.created_at),
            started_at=isoformat(run.started_at) if run.started_at else None,
            ended_at=isoformat(run.ended_at) if run.ended_at else None,
        )


class RunEnvelope(BaseModel):
    test_run: RunOut
