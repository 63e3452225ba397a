"""The `data` of events (API.md section 14): agents and conversations as the API shows them.

The services may not import the HTTP layer, so the wire shapes of `Agent` (API.md section 4)
and `Conversation` (section 5) are built here as plain JSON values; a test checks that they
equal api/schemas.py's `AgentOut` and api/convert.py's `conversation_out`, member for member.
"""

from __future__ import annotations

from typing import Any

from parley.clock import isoformat, isoformat_or_none
from parley.records import (
    Agent,
    AgentRef,
    CallInfo,
    ConfigurationEndpoint,
    Conversation,
    ConversationItem,
    Evaluation,
    Extraction,
    ScenarioRun,
    ToolCall,
)

JsonObject = dict[str, Any]
HEADER_MASK = "********"
"""How an agent's configuration endpoint shows a header's value (its values are secrets:
services/configuration_endpoints.py rule 3)."""


def agent_json(agent: Agent) -> JsonObject:
    """An agent as `GET /v1/agents/{id}` shows it."""
    return {
        "id": agent.id,
        "name": agent.name,
        "project": {"id": agent.project.id, "name": agent.project.name},
        "is_disabled": agent.is_disabled,
        "disabled_at": isoformat(agent.disabled_at) if agent.disabled_at else None,
        "phone_numbers": list(agent.phone_numbers),
        "voice_id": agent.voice_id,
        "system_prompt": agent.system_prompt,
        "welcome_message": agent.welcome_message,
        "language": agent.language,
        "audio_format": agent.audio_format,
        "tools": list(agent.tools),
        "template_variables": {
            name: {"default_value": variable.default_value}
            for name, variable in agent.template_variables.items()
        },
        "boosted_keywords": list(agent.boosted_keywords),
        "no_input_poke_sec": agent.no_input_poke_sec,
        "no_input_poke_text": agent.no_input_poke_text,
        "no_input_end_conversation_sec": agent.no_input_end_conversation_sec,
        "voicemail_message": agent.voicemail_message,
        "data_retention_policy": agent.data_retention_policy.to_json(),
        "external_storage_policy": agent.external_storage_policy,
        "extraction_schemas": list(agent.extraction_schemas),
        "eval_prompts": list(agent.eval_prompts),
        "enable_redaction": agent.enable_redaction,
        "configuration_endpoint": configuration_endpoint_json(agent.configuration_endpoint),
        "created_at": isoformat(agent.created_at),
        "updated_at": isoformat(agent.updated_at),
        **agent_delivery_json(agent),
    }


def agent_delivery_json(agent: Agent) -> JsonObject:
    """The Agent shape's delivery members (API.md section 17), then the members the official
    SDK's Agent requires of features Parley does not have, with the values that say so (a
    request that sets one is refused: api/agent_sdk_schemas.py)."""
    return {
        **agent.delivery.to_json(),
        "additional_voice_ids": [],
        "background_noise_level": 0.0,
        "background_noise": None,
        "listen_only_inbound_enabled": False,
        "tasks": [],
        "generate_no_input_poke_text": False,
        "push_to_talk": False,
        "built_in_tool_configs": {},
        "default_language": agent.language,  # section 4's `language` (API.md section 18)
        "additional_languages": list(agent.additional_languages),
        "multilingual_mode": agent.multilingual_mode or "auto",  # null stored: `auto`
        # Any speech interrupts a reply, until issue #42:
        "min_words_to_interrupt": 1,
        "intelligence_level": None,  # the model is the one Parley was started with
    }


def configuration_endpoint_json(endpoint: ConfigurationEndpoint | None) -> JsonObject | None:
    """An agent's configuration endpoint as the Agent shape shows it: the header names, each
    value masked; never the secret (API.md section 17)."""
    if endpoint is None:
        return None
    return {
        "url": endpoint.url,
        "headers": dict.fromkeys(endpoint.headers, HEADER_MASK),
        "timeout_ms": endpoint.timeout_ms,
    }


def conversation_json(conversation: Conversation) -> JsonObject:
    """A conversation, with its items, as `GET /v1/conversations/{id}` shows it: API.md
    section 5's members and the official SDK's `Conversation` (section 17; `sdk_members`)."""
    agent, project = conversation.agent, conversation.project
    return {
        "id": conversation.id,
        "agent": {"id": agent.id, "name": agent.name, "is_deleted": False} if agent else None,
        "project": {"id": project.id, "name": project.name} if project else None,
        "status": conversation.status,
        "end_user": conversation.end_user,
        "external_id": conversation.external_id,
        "started_at": isoformat_or_none(conversation.started_at),
        "ended_at": isoformat_or_none(conversation.ended_at),
        "ended_by": conversation.ended_by,
        "duration_ms": conversation.duration_ms,
        "call_info": call_info_json(conversation.call_info),
        "template_variables": dict(conversation.template_variables),
        "analysis": {
            "id": conversation.id,
            "latencies_ms": list(conversation.latencies_ms),
            "interruptions_count": conversation.interruptions_count,
            "turns": [turn.to_json() for turn in conversation.turns],
        },
        "audio_url": conversation.audio_url,
        "deletion_info": {
            "transcripts_deleted_at": isoformat_or_none(conversation.transcripts_deleted_at),
            "audio_recordings_deleted_at": isoformat_or_none(conversation.audio_deleted_at),
        },
        "summary": conversation.summary,
        "is_redacted": conversation.is_redacted,
        "heard_languages": list(conversation.heard_languages),
        "created_at": isoformat(conversation.created_at),
        **sdk_members(conversation),
        "items": [item_json(index, item) for index, item in enumerate(conversation.items)],
    }


def origin_of(conversation: Conversation) -> str:
    """The SDK's `origin`: `test` (a test run's caller, API.md section 19), `replay`
    (`conversations.replay`), `inbound` or `outbound` (a phone call), else `direct` (the
    WebSocket)."""
    if conversation.test_run_id is not None:
        return "test"
    if conversation.replay_of is not None:
        return "replay"
    if conversation.call_info is not None:
        return conversation.call_info.direction
    return "direct"


def sdk_members(conversation: Conversation) -> JsonObject:
    """The members the official SDK's `Conversation` requires beyond section 5's, each
    with the value that says what Parley does (API.md section 17)."""
    audio_format = "mulaw_8000" if conversation.call_info else conversation.audio_format
    return {
        "workspace": conversation.workspace,
        "origin": origin_of(conversation),
        "model": "parley",
        "generate_welcome_message": False,
        "is_welcome_message_interruptible": True,
        "listen_only": False,
        "input_format": audio_format or "pcm_16000",
        "output_format": audio_format or "pcm_16000",
        "background_noise_level": 0.0,
        "pronunciation_dictionary": [],
        "min_words_to_interrupt": 1,
        "default_language": conversation.language or "en",
        "additional_languages": list(conversation.additional_languages),
        "multilingual_mode": conversation.multilingual_mode or "auto",
        "push_to_talk": False,
        "task_results": {},
        "replay_of": conversation.replay_of,
    }


def item_json(index: int, item: ConversationItem) -> JsonObject:
    """One item: section 5's members and the SDK's `ConversationItem` (section 17)."""
    at = isoformat(item.created_at)
    return {
        "id": item.id,
        "item_idx": index,
        "role": item.role,
        "text": item.text,
        "live_transcript": item.text,
        "post_call_transcript": None,
        "duration_ms": 0,
        "started_at": at,
        "created_at": at,
        "tool_calls": [_tool_call_json(call) for call in item.tool_calls],
    }


def call_info_json(info: CallInfo | None) -> JsonObject | None:
    """A phone call's `call_info` (API.md section 5); None for other conversations."""
    if info is None:
        return None
    return {
        "from_phone_number": info.from_phone_number,
        "to_phone_number": info.to_phone_number,
        "twilio_call_sid": info.twilio_call_sid,
        "direction": info.direction,
    }


def conversation_event_data(conversation: Conversation) -> JsonObject:
    """`data` of conversation.started and conversation.ended."""
    shown = conversation_json(conversation)
    return {"conversation": shown, "call_info": shown["call_info"]}


def transferred_event_data(
    conversation: Conversation, *, phone_number: str | None = None, agent: AgentRef | None = None
) -> JsonObject:
    """`data` of conversation.transferred (API.md section 15): the conversation, and where
    it went: `{"phone_number"}` or `{"agent": {"id", "name"}}`."""
    to: JsonObject = (
        {"phone_number": phone_number}
        if agent is None
        else {"agent": {"id": agent.id, "name": agent.name}}
    )
    return {"conversation": conversation_json(conversation), "transferred_to": to}


def extraction_json(extraction: Extraction) -> JsonObject:
    """An extraction as `GET /v1/conversations/{id}/extractions` lists it (the official SDK's
    `ConversationExtraction`: the schema with its `isDeleted`)."""
    return {
        "id": extraction.id,
        "schema": {
            "id": extraction.schema_id,
            "name": extraction.schema_name,
            "isDeleted": extraction.schema_deleted,
        },
        "result": dict(extraction.result),
        "created_at": isoformat(extraction.created_at),
    }


def evaluation_json(evaluation: Evaluation) -> JsonObject:
    """An evaluation as `GET /v1/conversations/{id}/evals` lists it (the official SDK's
    `ConversationEvaluationResult`, with `ConversationEval`'s `conversation_id`)."""
    return {
        "id": evaluation.id,
        "conversation_id": evaluation.conversation_id,
        "result": evaluation.result,
        "prompt": {"id": evaluation.prompt_id, "name": evaluation.prompt_name},
        "created_at": isoformat(evaluation.created_at),
    }


def analysis_event_data(
    conversation: Conversation,
    extractions: list[JsonObject] | tuple[JsonObject, ...],
    evaluations: list[JsonObject] | tuple[JsonObject, ...],
) -> JsonObject:
    """`data` of conversation.analysis (API.md section 16): the conversation (its `summary`
    and `audio_url` as they stand), and what the work after the call extracted and judged."""
    return {
        "conversation": conversation_json(conversation),
        "extractions": list(extractions),
        "evaluations": list(evaluations),
    }


def _tool_call_json(call: ToolCall) -> JsonObject:
    return {
        "id": call.id,
        "tool": {"id": call.tool_id, "name": call.tool_name},
        "parameters": call.parameters,
        "output": call.output,
        "endpoint_url": call.endpoint_url,
        "response_status_code": call.response_status_code,
        "duration_ms": call.duration_ms,
        "timed_out": call.timed_out,
        "error_message": call.error_message,
    }


def test_run_data(run: ScenarioRun) -> JsonObject:
    """`test_run.completed`'s `data`: `{"test_run"}`, as `GET /v1/test_runs/{id}` shows it."""
    return {
        "test_run": {
            "id": run.id,
            "status": run.status.value,
            "scenarios": [str(spec["name"]) for spec in run.scenarios],
            "results": [
                {
                    "scenario": result.scenario,
                    "passed": result.passed,
                    "failures": list(result.failures),
                    "conversation_id": result.conversation_id,
                    "latencies_ms": list(result.latencies_ms),
                }
                for result in run.results
            ],
            "created_at": isoformat(run.created_at),
            "started_at": isoformat_or_none(run.started_at),
            "ended_at": isoformat_or_none(run.ended_at),
        }
    }
