"""Transfers as the model sees and calls them (API.md section 15): the two transfer tools'
definitions, and a call's arguments turned into the hand-off the session carries out.

- `built_in_transfer_to_phone_number`: the model gives `phone_number` when the tool has
  none, and `dtmf` with `dynamic_dtmf`. Off the phone the output is `{"error": "transfers
  need a phone call"}`; on a call the hand-off is a PhoneTransfer (services/transfers.py
  dials it once the agent has finished speaking).
- `built_in_transfer_to_agent`: the model picks `agent` among `agents_to_transfer_to`; a
  disabled or deleted agent, or one of another project, is `{"error": "agent
  unavailable"}`; otherwise the hand-off is an AgentTransfer (the session goes on with it).

The model hears `{"status": "transferring", …}` for a hand-off (engine.HandOff: its reply
ends after its words); the transfer itself happens after them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final

from parley import engine
from parley.errors import AgentNotFound, Forbidden
from parley.records import Tool
from parley.services import agents
from parley.services.context import Context
from parley.services.tools import AGENT_TRANSFER, PHONE_TRANSFER
from parley.services.transfers import AgentTransfer, HandOffRequest, PhoneTransfer

__all__ = ["AgentTransfer", "HandOffRequest", "PhoneTransfer", "definition", "requested"]

NO_CALL: Final[Mapping[str, str]] = {"error": "transfers need a phone call"}
UNAVAILABLE: Final[Mapping[str, str]] = {"error": "agent unavailable"}
E164: Final = re.compile(r"\+[1-9][0-9]{1,14}")
DTMF: Final = re.compile(r"[0-9*#wW]{1,32}")

PHONE_DESCRIPTION: Final = (
    "Transfer the caller to a person by phone. Tell the caller first, in a short sentence; "
    "the transfer happens once you have finished speaking."
)
AGENT_DESCRIPTION: Final = (
    "Hand the conversation to another agent better suited to the caller's request. Tell the "
    "caller first, in a short sentence."
)


def is_transfer(tool: Tool) -> bool:
    return tool.type in (PHONE_TRANSFER, AGENT_TRANSFER)


def definition(tool: Tool) -> engine.ToolDefinition:
    """A transfer tool as the model sees it: its parameters are the service's."""
    properties: dict[str, Any] = {}
    required: list[str] = []
    if tool.type == AGENT_TRANSFER:
        names = list(tool.agents_to_transfer_to or ())
        properties["agent"] = {
            "type": "string",
            "enum": names,
            "description": "The agent to hand the conversation to.",
        }
        required.append("agent")
        description = tool.description or AGENT_DESCRIPTION
    else:
        if tool.phone_number is None:
            properties["phone_number"] = {
                "type": "string",
                "pattern": E164.pattern,
                "description": "The number to transfer to, E.164 (e.g. +14155550123).",
            }
            required.append("phone_number")
        if tool.dynamic_dtmf:
            properties["dtmf"] = {
                "type": "string",
                "pattern": DTMF.pattern,
                "description": "Keys to press once the number answers (an extension), if any.",
            }
        description = tool.description or PHONE_DESCRIPTION
    schema = {
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": False,
    }
    return engine.ToolDefinition(name=tool.name, description=description, parameters=schema)


async def requested(
    ctx: Context, tool: Tool, arguments: Mapping[str, Any], *, org_id: str, on_call: bool
) -> HandOffRequest | Mapping[str, Any]:
    """The hand-off a call asks for, or the error output the model gets instead."""
    if tool.type == AGENT_TRANSFER:
        return await _agent(ctx, tool, arguments, org_id=org_id)
    if not on_call:
        return NO_CALL
    number = tool.phone_number or str(arguments.get("phone_number", ""))
    if not E164.fullmatch(number):
        return {"error": "phone_number must be an E.164 number such as +14155550123"}
    dtmf = tool.dtmf
    if tool.dynamic_dtmf:
        given = arguments.get("dtmf")
        dtmf = str(given) if given else None
        if dtmf is not None and not DTMF.fullmatch(dtmf):
            return {"error": "dtmf must be 1-32 of 0-9, * and #"}
    return PhoneTransfer(tool=tool, phone_number=number, dtmf=dtmf)


async def _agent(
    ctx: Context, tool: Tool, arguments: Mapping[str, Any], *, org_id: str
) -> AgentTransfer | Mapping[str, Any]:
    name = str(arguments.get("agent", ""))
    if name not in (tool.agents_to_transfer_to or ()):
        return UNAVAILABLE
    try:
        found = await agents.get_agent(ctx, org_id=org_id, ref=name, project=tool.project.id)
    except (AgentNotFound, Forbidden):
        return UNAVAILABLE
    if found.is_disabled:
        return UNAVAILABLE
    return AgentTransfer(tool=tool, agent=found)


def output_of(request: HandOffRequest) -> Mapping[str, Any]:
    """What the model hears for a hand-off."""
    if isinstance(request, AgentTransfer):
        return {"status": "transferring", "agent": request.agent.name}
    return {"status": "transferring", "phone_number": request.phone_number}
