"""The work after a call (API.md section 16): the summary, then the agent's extraction
schemas and evaluation prompts, for the `conversation.analysis` event.

`analyse_after_call` is the one entry point; the post-call pipeline calls it once the
conversation has ended (it neither waits for the end nor sends the event: the pipeline
does both).

Rules:
1. Nothing is asked without a language model, or of a conversation that keeps no
   transcript (zero data retention, or deleted): the answer is empty.
2. The agent's lists are read when the work runs (the agent as it stands, in its project);
   a conversation whose agent is gone gets its summary only.
3. One after the other (a model server is often one GPU): the summary, each extraction
   schema in the agent's order, each evaluation prompt in the agent's order.
4. Each piece stands alone: one that fails (the model unreachable, a bad answer twice, a
   schema deleted meanwhile) is logged and left out, and the others still run; nothing
   raises but cancellation. An evaluation whose answers were bad is kept, as `error`.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Sequence
from dataclasses import dataclass, replace
from typing import Any, TypeVar

from parley.db.repos import agents as agent_repo
from parley.db.repos import eval_prompts as prompt_repo
from parley.db.repos import extraction_schemas as schema_repo
from parley.errors import AgentNotFound, NoTranscript, ParleyError
from parley.records import Conversation, EvalPrompt, ExtractionSchema
from parley.services.context import Context
from parley.services.evaluations import evaluate_with
from parley.services.event_payloads import analysis_event_data, evaluation_json, extraction_json
from parley.services.extractions import extract_with
from parley.services.summaries import summarize_conversation
from parley.services.transcripts import readable_conversation

__all__ = ["AfterCall", "analyse_after_call"]

log = logging.getLogger(__name__)

T = TypeVar("T")
JsonObject = dict[str, Any]


@dataclass(frozen=True, slots=True)
class AfterCall:
    """What the work after a call made: the summary (None: none written) and the
    extractions and evaluations as the API shows them (`extraction_json`,
    `evaluation_json`), in the agent's order."""

    summary: str | None = None
    extractions: tuple[JsonObject, ...] = ()
    evaluations: tuple[JsonObject, ...] = ()

    def event_data(self, conversation: Conversation) -> JsonObject:
        """`data` of conversation.analysis: `{"conversation", "extractions",
        "evaluations"}`, the conversation with this summary."""
        if self.summary is not None:
            conversation = replace(conversation, summary=self.summary)
        return analysis_event_data(conversation, self.extractions, self.evaluations)


async def analyse_after_call(ctx: Context, org_id: str, conversation_id: str) -> AfterCall:
    """Summarize a conversation and run its agent's extraction schemas and evaluation
    prompts (rules 1-4); never raises (but cancellation)."""
    if ctx.language_model is None:
        log.info("no language model (PARLEY_LLM_BASE_URL): no analysis after the call")
        return AfterCall()
    try:
        conversation = await readable_conversation(
            ctx, org_id=org_id, conversation_id=conversation_id
        )
    except NoTranscript:
        return AfterCall()
    except Exception as error:  # rule 4: never raises
        _log_failure("reading the conversation", conversation_id, error)
        return AfterCall()
    summary = await _isolated(
        "the summary", conversation_id, summarize_conversation(ctx, conversation)
    )
    schemas, prompts = await _isolated(
        "reading the agent", conversation_id, _agent_lists(ctx, conversation)
    ) or ((), ())
    extractions: list[JsonObject] = []
    for schema in schemas:
        made = await _isolated(
            f"the extraction {schema.name!r}",
            conversation_id,
            extract_with(ctx, conversation, schema),
        )
        if made is not None:
            extractions.append(extraction_json(made))
    evaluations: list[JsonObject] = []
    for prompt in prompts:
        judged = await _isolated(
            f"the evaluation {prompt.name!r}",
            conversation_id,
            evaluate_with(ctx, conversation, prompt),
        )
        if judged is not None:
            evaluations.append(evaluation_json(judged))
    return AfterCall(summary, tuple(extractions), tuple(evaluations))


async def _agent_lists(
    ctx: Context, conversation: Conversation
) -> tuple[Sequence[ExtractionSchema], Sequence[EvalPrompt]]:
    """The agent's schemas and prompts, in its order (rule 2); none when it is gone."""
    if conversation.agent is None:
        return (), ()
    async with ctx.db.read() as session:
        try:
            agent = await agent_repo.load(session, conversation.agent.id)
        except AgentNotFound:
            return (), ()
        project_id = agent.project.id
        schemas = await schema_repo.by_names(session, project_id, agent.extraction_schemas)
        prompts = await prompt_repo.by_names(session, project_id, agent.eval_prompts)
    schema_by_name = {schema.name: schema for schema in schemas}
    prompt_by_name = {prompt.name: prompt for prompt in prompts}
    return (
        [schema_by_name[n] for n in agent.extraction_schemas if n in schema_by_name],
        [prompt_by_name[n] for n in agent.eval_prompts if n in prompt_by_name],
    )


async def _isolated(what: str, conversation_id: str, work: Awaitable[T]) -> T | None:
    """Await one piece of the work; log its failure and give None (rule 4)."""
    try:
        return await work
    except Exception as error:  # rule 4: never raises
        _log_failure(what, conversation_id, error)
        return None


def _log_failure(what: str, conversation_id: str, error: Exception) -> None:
    if isinstance(error, ParleyError):
        log.warning(
            "after the call %s: %s failed: %s (%s)",
            conversation_id,
            what,
            error.message,
            error.code,
        )
    else:
        log.error("after the call %s: %s failed", conversation_id, what, exc_info=error)
