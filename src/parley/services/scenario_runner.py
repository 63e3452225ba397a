"""The server's test runner (API.md section 19): claims queued runs and plays their
scenarios, at most `MAX_AT_ONCE` at a time per instance.

Each instance runs one run at a time (services/scenario_runs.py rule 2) and plays up to
`MAX_AT_ONCE` of its scenarios at once: each a conversation with the scenario's agent, made
`pending` here with the run's mark (its `origin` is `test`) and the scenario's tool
overrides, and held by the caller (services/scenario_caller.py) through a `Dialer` over the
server's own socket, with a session token of its own restricted to that one conversation.
When the socket is closed and the conversation has ended, its expectations are checked
(services/scenario_checks.py); evaluations and extractions are asked of the model.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any, Final
from urllib.parse import urlencode

from parley import engine
from parley.errors import ParleyError
from parley.records import (
    SYSTEM,
    Agent,
    Conversation,
    ExtractionField,
    ExtractionSchema,
    ProjectRef,
    ScenarioResult,
    ScenarioRun,
    Status,
)
from parley.services import (
    agents,
    conversations,
    evaluations,
    extraction_schemas,
    extractions,
    scenario_runs,
    session_tokens,
    telephony,
)
from parley.services.context import Context
from parley.services.eval_prompts import find_eval_prompt
from parley.services.scenario_caller import (
    Call,
    Caller,
    Dialer,
    Speech,
    caller_of,
    caller_voice,
    may_greet,
)
from parley.services.scenario_checks import (
    check_conversation,
    check_evaluations,
    check_extraction,
)
from parley.services.scenarios import INLINE_PROMPT

__all__ = ["MAX_AT_ONCE", "Runner", "scenario_runner"]

log = logging.getLogger(__name__)

MAX_AT_ONCE: Final = 4
"""Scenarios of one run played at once, per instance (API.md section 19)."""
POLL_SECONDS: Final = 5.0
"""How often an idle runner looks for a run queued elsewhere (another instance, before a
restart); one queued here rings `ctx.run_bell` and is looked for at once."""
ENDED_WAIT_SECONDS: Final = 10.0
"""How long after its socket closed a test conversation may take to be ended."""
TOKEN_SECONDS: Final = 300
SOCKET_FORMAT: Final = engine.AudioFormat.PCM_16000
PHONE_FORMAT: Final = engine.AudioFormat.MULAW_8000


class _Transcribed:
    """A caller that hears the agent through the stored conversation (the phone wire
    carries audio only): what the agent said, as its items say."""

    def __init__(self, ctx: Context, org_id: str, conversation_id: str, inner: Caller) -> None:
        self._ctx, self._org_id, self._id, self._inner = ctx, org_id, conversation_id, inner

    async def next_line(self, heard: Sequence[tuple[str, str]]) -> str | None:
        del heard  # the wire's account has no words; the stored one has
        found = await conversations.get_conversation(
            self._ctx, org_id=self._org_id, conversation_id=self._id
        )
        roles = {"user": "caller", "assistant": "agent"}
        said = [(roles[i.role], i.text) for i in found.items if i.role in roles and i.text]
        return await self._inner.next_line(said)


class Runner:
    """Claims and plays test runs on this instance (see module doc)."""

    def __init__(self, ctx: Context, *, dialer: Dialer, synthesizer: engine.Synthesizer) -> None:
        self._ctx = ctx
        self._dialer = dialer
        self._synthesizer = synthesizer

    async def run_forever(self, stopping: asyncio.Event) -> None:
        """Claim and play runs until `stopping` is set."""
        while not stopping.is_set():
            try:
                run = await scenario_runs.claim_next(self._ctx)
            except ParleyError as error:
                log.warning("could not look for queued test runs: %s", error.code)
                run = None
            if run is not None:
                await self.play_run(run)
                continue
            await _first_of(stopping, self._ctx.run_bell, POLL_SECONDS)
            self._ctx.run_bell.clear()

    async def play_run(self, run: ScenarioRun) -> None:
        """Play every scenario of a claimed run, `MAX_AT_ONCE` at a time, then end it."""
        limit = asyncio.Semaphore(MAX_AT_ONCE)

        async def one(spec: Mapping[str, Any]) -> None:
            async with limit:
                result = await self.play(run, spec)
            await scenario_runs.add_result(self._ctx, run.id, result)

        async with asyncio.TaskGroup() as group:
            for spec in run.scenarios:
                group.create_task(one(spec))
        finished = await scenario_runs.finish_run(self._ctx, run.id)
        if finished is not None:
            log.info("test run %s %s", run.id, finished.status.value)

    async def play(self, run: ScenarioRun, spec: Mapping[str, Any]) -> ScenarioResult:
        """Play one scenario; its result (never raises for the scenario's own failure)."""
        name = str(spec["name"])
        conversation_id: str | None = None
        try:
            caller = caller_of(spec["caller"], self._ctx.language_model)
            agent = await agents.get_agent(
                self._ctx, org_id=run.org_id, ref=str(spec["agent"]), project=str(spec["project"])
            )
            if spec.get("transport", "websocket") == "phone":
                call = await self._phone_call(run, spec, agent, caller)
            else:
                call = await self._socket_call(run, spec, agent, caller)
            conversation_id = call.conversation_id
            await self._dialer.dial(call)
            ended = await self._ended(run.org_id, call.conversation_id)
            if ended is None:
                return _failed(
                    name, conversation_id, "call: the conversation did not end after the call"
                )
            failures = check_conversation(spec.get("expect") or {}, ended)
            failures += await self._model_checks(run, spec, ended)
            return ScenarioResult(
                scenario=name,
                passed=not failures,
                failures=tuple(failures),
                conversation_id=conversation_id,
                latencies_ms=ended.latencies_ms,
            )
        except ParleyError as error:
            return _failed(name, conversation_id, f"call: {error.message}")
        except Exception as error:  # a scenario's bug must not stop the run
            log.exception("test scenario %s failed to run", name)
            return _failed(name, conversation_id, f"call: {type(error).__name__}: {error}")

    async def _socket_call(
        self, run: ScenarioRun, spec: Mapping[str, Any], agent: Agent, caller: Caller
    ) -> Call:
        """A call over `/v1/sts/ws`: a `pending` conversation and a session token of its own,
        restricted to it."""
        made = await conversations.create_conversation(
            self._ctx,
            org_id=run.org_id,
            agent=agent.id,
            project=None,
            conversation_id=None,
            test_run_id=run.id,
            tool_overrides=spec.get("tool_overrides"),
        )
        token = await session_tokens.create_session_token(
            self._ctx,
            org_id=run.org_id,
            ttl_seconds=TOKEN_SECONDS,
            conversation_ids=[made.id],
            actor=SYSTEM,
        )
        query = urlencode({"session_token": token.secret, "conversation_id": made.id})
        opening: dict[str, Any] = {
            "type": "config",
            "agent": agent.id,
            "input_format": SOCKET_FORMAT.value,
            "output_format": SOCKET_FORMAT.value,
        }
        if spec.get("template_variables"):
            opening["template_variables"] = dict(spec["template_variables"])
        return Call(
            url=f"{run.server_url}/v1/sts/ws?{query}",
            transport="websocket",
            opening=opening,
            caller=caller,
            speak=self._speech(agent, SOCKET_FORMAT).render,
            conversation_id=made.id,
            welcome_expected=may_greet(agent),
        )

    async def _phone_call(
        self, run: ScenarioRun, spec: Mapping[str, Any], agent: Agent, caller: Caller
    ) -> Call:
        """A call over the Twilio media socket, as a carrier would open it, with a stream
        token of its own; the agent's words are read from the conversation (the wire does
        not carry them)."""
        conversation_id, token = await telephony.open_test_call(
            self._ctx,
            org_id=run.org_id,
            agent_id=agent.id,
            test_run_id=run.id,
            tool_overrides=spec.get("tool_overrides"),
        )
        if spec.get("template_variables"):
            await conversations.set_template_variables(
                self._ctx,
                org_id=run.org_id,
                conversation_id=conversation_id,
                values=dict(spec["template_variables"]),
            )
        return Call(
            url=f"{run.server_url}/v1/telephony/twilio/media",
            transport="phone",
            opening={"conversation_id": conversation_id, "stream_token": token},
            caller=_Transcribed(self._ctx, run.org_id, conversation_id, caller),
            speak=self._speech(agent, PHONE_FORMAT).render,
            conversation_id=conversation_id,
            welcome_expected=may_greet(agent),
        )

    def _speech(self, agent: Agent, output_format: engine.AudioFormat) -> Speech:
        voice = caller_voice(self._synthesizer, agent.voice_id, language=agent.language)
        return Speech(self._synthesizer, voice=voice, output_format=output_format)

    async def _ended(self, org_id: str, conversation_id: str) -> Conversation | None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + ENDED_WAIT_SECONDS
        while True:
            found = await conversations.get_conversation(
                self._ctx, org_id=org_id, conversation_id=conversation_id
            )
            if found.status == Status.ENDED:
                return found
            if loop.time() > deadline:
                return None
            await asyncio.sleep(0.1)

    async def _model_checks(
        self, run: ScenarioRun, spec: Mapping[str, Any], conversation: Conversation
    ) -> list[str]:
        """`eval_prompts` and `extraction`, asked of the language model."""
        expect = spec.get("expect") or {}
        failures: list[str] = []
        verdicts: dict[str, str] = {}
        for prompt_name in expect.get("eval_prompts") or ():
            async with self._ctx.db.read() as session:
                prompt = await find_eval_prompt(
                    session, run.org_id, prompt_name, str(spec["project"])
                )
            verdicts[prompt_name] = str(
                (await evaluations.evaluate_with(self._ctx, conversation, prompt)).result
            )
        failures += check_evaluations(verdicts)
        wanted = expect.get("extraction")
        if wanted is not None:
            schema = await self._schema(run, spec, wanted["schema"])
            made = await extractions.extract_with(self._ctx, conversation, schema)
            failures += check_extraction(wanted["result"], made.result)
        return failures

    async def _schema(
        self, run: ScenarioRun, spec: Mapping[str, Any], given: Any
    ) -> ExtractionSchema:
        if isinstance(given, str):
            async with self._ctx.db.read() as session:
                return await extraction_schemas.find_schema(
                    session, run.org_id, given, str(spec["project"])
                )
        return ExtractionSchema(
            id=str(spec["id"]),  # an inline schema is known by its scenario
            org_id=run.org_id,
            project=ProjectRef(id=run.project_id, name=str(spec["project"])),
            name=str(spec["name"]),
            prompt=str(given.get("prompt") or INLINE_PROMPT),
            fields=tuple(ExtractionField(**field) for field in given["fields"]),
            created_at=run.created_at,
            updated_at=run.created_at,
        )


async def _first_of(first: asyncio.Event, second: asyncio.Event, seconds: float) -> None:
    """Wait until either event is set, `seconds` at most."""
    waits = {asyncio.ensure_future(first.wait()), asyncio.ensure_future(second.wait())}
    _done, pending = await asyncio.wait(waits, timeout=seconds, return_when=asyncio.FIRST_COMPLETED)
    for waiting in pending:
        waiting.cancel()


def _failed(name: str, conversation_id: str | None, failure: str) -> ScenarioResult:
    return ScenarioResult(
        scenario=name,
        passed=False,
        failures=(failure,),
        conversation_id=conversation_id,
        latencies_ms=(),
    )


@contextlib.asynccontextmanager
async def scenario_runner(
    ctx: Context, *, dialer: Dialer, synthesizer: engine.Synthesizer | None
) -> AsyncIterator[Runner | None]:
    """Run this instance's test runner for the duration of the block (the server's
    lifespan); none without a synthesizer (a test's engine factory): runs stay queued. Its
    previous life's runs were ended by the housekeeping's start (services/housekeeping.py)."""
    if synthesizer is None:
        yield None
        return
    runner = Runner(ctx, dialer=dialer, synthesizer=synthesizer)
    stopping = asyncio.Event()
    task = asyncio.create_task(runner.run_forever(stopping), name="parley-test-runner")
    try:
        yield runner
    finally:
        stopping.set()
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
