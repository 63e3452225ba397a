"""What a conversation's `config` decides beyond its agent (API.md sections 8, 12, 15, 16):
the prompts with their template variables rendered, the tools resolved, a placed call's
voicemail message, what it keeps and where its recording goes. The session checks it
before the conversation goes live, and again for the next agent of a transfer."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeVar

from parley import engine
from parley.records import (
    DEFAULT_DELIVERY,
    KEEP_EVERYTHING,
    Agent,
    Delivery,
    RetentionPolicy,
    Unset,
)
from parley.services import templates
from parley.services.context import Context
from parley.services.delivery import check_delivery
from parley.services.languages import ENGLISH_ONLY, Languages, configured
from parley.services.live import codec
from parley.services.live.tools import ConversationTool, resolve_tools
from parley.services.storage_policies import policy_id_named
from parley.services.voices import SpeechCatalog

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Setup:
    """What a `config` decides beyond the agent: prompts with their variables, and tools."""

    system_prompt: str
    welcome_message: str | None
    template_values: dict[str, str]
    tools: list[ConversationTool]
    built_ins: list[str]
    voicemail_message: str | None = None
    retention: RetentionPolicy = KEEP_EVERYTHING
    """What the conversation keeps (API.md section 16): the config's policy, else the
    agent's."""
    storage_policy_id: str | None = None
    """The external storage policy its recording goes to (API.md section 16): the one the
    config names, else the agent's; None: the server's recordings directory. Its settings,
    credentials unsealed, come from `services.storage_policies.policy_store_settings`."""
    redact: bool = False
    """Personal data kept only as tags (API.md section 16): the config's
    `enable_redaction`, else the agent's."""
    delivery: Delivery = DEFAULT_DELIVERY
    """How the agent greets, speaks and listens (API.md section 17): the agent's, with the
    members the config sets."""
    languages: Languages = ENGLISH_ONLY
    """Its languages (API.md section 18): the config's, else the agent's."""

    @classmethod
    async def check(
        cls,
        ctx: Context,
        frame: codec.Configure,
        agent: Agent,
        speech: SpeechCatalog | None = None,
    ) -> Setup:
        """Resolve the config against the agent; raise the request error it deserves.
        `speech` checks the languages the config gives (None: no engine to ask)."""
        values = dict(frame.template_variables or {})
        defaults = {name: spec.default_value for name, spec in agent.template_variables.items()}
        prompt = _given(frame.system_prompt, agent.system_prompt)
        welcome = _given(frame.welcome_message, agent.welcome_message)
        voicemail = _given(frame.voicemail_message, agent.voicemail_message)
        used = templates.placeholders(prompt) | templates.placeholders(welcome or "")
        rendered_prompt = templates.render(prompt, values=values, defaults=defaults)
        rendered_welcome = (
            templates.render(welcome, values=values, defaults=defaults) if welcome else welcome
        )
        if voicemail and frame.wait_for_callee:
            used |= templates.placeholders(voicemail)
            voicemail = templates.render(voicemail, values=values, defaults=defaults)
        delivery = frame.delivery.applied_to(agent.delivery)
        check_delivery(delivery)  # a config's values: 400 naming the member
        languages = configured(
            agent,
            language=frame.language,
            default_language=frame.default_language,
            additional=frame.additional_languages,
            mode=frame.multilingual_mode,
            speech=speech,
        )
        items = frame.tools if frame.tools is not None else tuple(agent.tools)
        found, built_ins = await resolve_tools(
            ctx, org_id=agent.org_id, project_id=agent.project.id, items=items
        )
        return cls(
            system_prompt=rendered_prompt,
            welcome_message=rendered_welcome,
            template_values={name: values.get(name, defaults.get(name, "")) for name in used},
            tools=found,
            built_ins=built_ins,
            voicemail_message=voicemail if frame.wait_for_callee else None,
            retention=_given(frame.data_retention_policy, agent.data_retention_policy),
            storage_policy_id=await _storage_policy_id(ctx, frame, agent),
            redact=_given(frame.enable_redaction, agent.enable_redaction),
            delivery=delivery,
            languages=languages,
        )

    def tuning(self) -> engine.AgentTuning:
        """The engine's tuning of this delivery."""
        delivery = self.delivery
        return engine.AgentTuning(
            generate_welcome=delivery.generate_welcome_message,
            welcome_interruptible=delivery.is_welcome_message_interruptible,
            speed=delivery.audio_speed,
            timezone=delivery.timezone,
            pronunciations=tuple(
                (entry.word, entry.pronunciation) for entry in delivery.pronunciation_dictionary
            ),
            vad_threshold=delivery.vad_threshold,
            end_silence_ms=delivery.vad_min_silence_duration_ms,
        )


async def _storage_policy_id(ctx: Context, frame: codec.Configure, agent: Agent) -> str | None:
    """The config's policy (an unknown name: 400 naming `external_storage_policy`), else
    the agent's."""
    named = frame.external_storage_policy
    if isinstance(named, Unset):
        return agent.external_storage_policy_id
    if named is None:
        return None
    return await policy_id_named(ctx, project_id=agent.project.id, name=named)


def _given(value: T | None, default: T) -> T:
    return value if value is not None else default
