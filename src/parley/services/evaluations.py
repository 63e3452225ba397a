"""Evaluations (API.md section 16): the language model judges a conversation against an
evaluation prompt.

Rules:
1. The model gets the prompt and the transcript (services/transcripts.py) and answers
   `{"result": "successful" | "unsuccessful" | "undecided"}`, constrained by a JSON Schema
   `response_format` with that enum, and checked.
2. A bad answer gets one retry; a second bad answer is stored as the result `error` (the
   evaluation happened; its verdict is unusable). A model that cannot be reached stores
   nothing (503).
3. The prompt is named by ID, or by name in the conversation's project; one of another
   organization is 403.
4. An evaluation keeps the prompt's ID and name; it is a verdict, not the conversation's
   words, so it stays when the transcript is deleted.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from parley.clock import utcnow
from parley.db.repos import conversations as conversation_repo
from parley.db.repos import evaluations as evaluation_repo
from parley.db.repos import projects as project_repo
from parley.errors import ConversationNotFound
from parley.ids import new_id
from parley.records import Conversation, EvalPrompt, Evaluation, EvaluationResult, Page
from parley.services.context import Context
from parley.services.eval_prompts import find_eval_prompt
from parley.services.model_answers import ask_json, model_of
from parley.services.orgs import MAIN_PROJECT
from parley.services.paging import page_of
from parley.services.transcripts import readable_conversation, transcript_text

__all__ = [
    "VERDICTS",
    "check_verdict",
    "evaluate",
    "evaluate_with",
    "evaluation_messages",
    "list_evaluations",
    "list_project_evaluations",
    "verdict_schema",
]

VERDICTS: Final = (
    EvaluationResult.SUCCESSFUL.value,
    EvaluationResult.UNSUCCESSFUL.value,
    EvaluationResult.UNDECIDED.value,
)
"""What the model may answer; `error` is the service's own."""
MAX_ANSWER_TOKENS: Final = 100


async def evaluate(
    ctx: Context, *, org_id: str, conversation_id: str, prompt_ref: str
) -> Evaluation:
    """Judge a conversation against an evaluation prompt and store the verdict (rules 1-3)."""
    model_of(ctx)  # 409 before anything is read
    conversation = await readable_conversation(ctx, org_id=org_id, conversation_id=conversation_id)
    project = conversation.project.id if conversation.project else MAIN_PROJECT
    async with ctx.db.read() as session:
        prompt = await find_eval_prompt(session, org_id, prompt_ref, project)
    return await evaluate_with(ctx, conversation, prompt)


async def evaluate_with(ctx: Context, conversation: Conversation, prompt: EvalPrompt) -> Evaluation:
    """Ask the model for one prompt's verdict on a conversation already read; store it."""
    verdict = await ask_json(
        model_of(ctx),
        evaluation_messages(prompt, transcript_text(conversation)),
        name="evaluation",
        schema=verdict_schema(),
        check=check_verdict,
        max_tokens=MAX_ANSWER_TOKENS,
    )
    async with ctx.db.transaction() as session:
        return await evaluation_repo.insert(
            session,
            evaluation_id=new_id("eval"),
            org_id=conversation.org_id,
            conversation_id=conversation.id,
            prompt_id=prompt.id,
            prompt_name=prompt.name,
            result=verdict or EvaluationResult.ERROR.value,
            now=utcnow(ctx.clock),
        )


async def list_evaluations(
    ctx: Context, *, org_id: str, conversation_id: str, cursor: str | None, limit: int
) -> Page[Evaluation]:
    """A conversation's evaluations, oldest first; 404 when there is no such conversation."""
    async with ctx.db.read() as session:
        if await conversation_repo.find(session, org_id, conversation_id) is None:
            raise ConversationNotFound()
        found = await evaluation_repo.of_conversation(
            session, org_id, conversation_id, cursor=cursor, limit=limit
        )
    return page_of(found, limit=limit)


async def list_project_evaluations(
    ctx: Context, *, org_id: str, project: str, cursor: str | None, limit: int
) -> Page[Evaluation]:
    """The evaluations made with a project's prompts, oldest first."""
    async with ctx.db.read() as session:
        project_id = (await project_repo.resolve(session, org_id, project)).id
        found = await evaluation_repo.of_project(
            session, org_id, project_id, cursor=cursor, limit=limit
        )
    return page_of(found, limit=limit)


def evaluation_messages(prompt: EvalPrompt, transcript: str) -> list[dict[str, str]]:
    """The chat messages of an evaluation: the criterion, then the transcript."""
    instructions = (
        "You judge a conversation between a user and an AI agent against a criterion.\n\n"
        f"Criterion: {prompt.prompt}\n\n"
        'Answer with one JSON object {"result": …}: "successful" when the conversation '
        'meets the criterion, "unsuccessful" when it does not, "undecided" when the '
        "transcript cannot tell."
    )
    return [
        {"role": "system", "content": instructions},
        {"role": "user", "content": f"Transcript:\n\n{transcript}"},
    ]


def verdict_schema() -> dict[str, Any]:
    """The JSON Schema of a verdict (rule 1)."""
    return {
        "type": "object",
        "properties": {"result": {"type": "string", "enum": list(VERDICTS)}},
        "required": ["result"],
        "additionalProperties": False,
    }


def check_verdict(answer: Any) -> str:
    """Return the verdict of an answer; ValueError saying what does not fit."""
    if not isinstance(answer, Mapping) or set(answer) != {"result"}:
        raise ValueError('the answer must be a JSON object with the one member "result"')
    result = answer["result"]
    if result not in VERDICTS:
        raise ValueError('"result" must be one of ' + ", ".join(VERDICTS))
    return str(result)
