"""A2A Agent Cards: the network's (the gateway itself) and one per agent.

An agent's public card shows what the roster shows everyone (its name, display name, kind and
skills) and how to reach it through the gateway; nothing else. An agent that does not allow
contact (policy ``deny``) and a person account have no card. The extended card
(``GetExtendedAgentCard``, authenticated) adds, for a caller who may act for the agent or holds an
agreement with it, the scopes it holds and the agent's own endpoint for direct A2A; for anyone
else it is the public card.
"""

from __future__ import annotations

from typing import Any

from a2a.types import a2a_pb2 as pb

from ext.pircan.a2a import PATHS
from ext.pircan.a2a.skills import SKILLS
from ext.pircan.ids import hexid
from ext.pircan.service import profile
from ext.pircan.service.contact import acts_for
from ext.pircan.service.intro import JWKS_PATH, agreement_for, usable_scopes
from ext.pircan.state import Pircan

__all__ = [
    "DIRECT_EXTENSION",
    "GATEWAY_PATH",
    "MESSAGE_SKILL",
    "agent_card",
    "agent_path",
    "extended_card",
    "network_card",
]

GATEWAY_PATH = PATHS.gateway
MESSAGE_SKILL = "pircan:message"  # not a task skill: those never contain ':'
DIRECT_EXTENSION = "https://pircan.dev/a2a/direct"
VERSION = "0.1"
_SCHEME = "pircan"


def agent_path(account: str) -> str:
    return f"{GATEWAY_PATH}/agents/{account}"


def _interfaces(url: str) -> list[pb.AgentInterface]:
    return [pb.AgentInterface(url=url, protocol_binding=binding, protocol_version="1.0")
            for binding in ("JSONRPC", "HTTP+JSON")]


def _card(state: Pircan, name: str, description: str, url: str, skills: list[pb.AgentSkill],
          extended: bool) -> pb.AgentCard:
    base = state.api.http_base_url
    bearer = pb.HTTPAuthSecurityScheme(
        scheme="Bearer", description="A token of your account on this network (pircd token add, or TOKEN ADD "
                                     "over IRC): you act as that account.")
    return pb.AgentCard(
        name=name, description=description, supported_interfaces=_interfaces(url),
        provider=pb.AgentProvider(organization=state.api.server_name, url=base), version=VERSION,
        capabilities=pb.AgentCapabilities(streaming=True, push_notifications=False, extended_agent_card=extended),
        security_schemes={_SCHEME: pb.SecurityScheme(http_auth_security_scheme=bearer)},
        security_requirements=[pb.SecurityRequirement(schemes={_SCHEME: pb.StringList()})],
        default_input_modes=["text/plain"], default_output_modes=["text/plain"], skills=skills,
    )


def network_card(state: Pircan) -> pb.AgentCard:
    base = state.api.http_base_url
    skills = [
        pb.AgentSkill(
            id="relay", name="Messages and tasks to agents", tags=["gateway"],
            description="Send a direct message (metadata 'to': the agent) or a task (also 'skill') to an agent "
                        "you hold an agreement with; each agent also has its own card and endpoint at "
                        f"{GATEWAY_PATH}/agents/<name>. GetTask, ListTasks, CancelTask and SubscribeToTask take any "
                        "task of yours here; a message naming a task given to you, with metadata 'state', moves it on. "
                        "A message's metadata names only to, skill, in_reply_to, intro and state."),
        pb.AgentSkill(
            id="intro", name="Intro tokens for direct A2A", tags=["direct-a2a"],
            description="A message with metadata 'intro': '<agent>' gets a token, signed by the network, for "
                        f"talking to that agent at its own endpoint; the keys are at {base}{JWKS_PATH}."),
        *(pb.AgentSkill(id=s.id, name=s.name, description=s.description + " Call it with metadata 'skill': "
                        f"'{s.id}' and the arguments in a data part; the answer's data part holds the result.",
                        tags=["network"])
          for s in SKILLS.values()),
    ]
    return _card(state, state.api.server_name,
                 f"The A2A gateway of the PIRCAN agent network at {base}: the network's agents, their "
                 "agreements, their tasks and its channels, for A2A clients that hold a token of an "
                 "account of the network.",
                 base + GATEWAY_PATH, skills, extended=True)


async def agent_card(state: Pircan, account: str) -> pb.AgentCard | None:
    """The public card of an agent; None when it has none (no such agent, a person, policy deny)."""
    if state.api.account_kind(account) != "agent" or state.policies.get(account) == "deny":
        return None
    shown = (await profile.profiles(state, [account]))[account]
    skills = [pb.AgentSkill(id=MESSAGE_SKILL, name="Direct messages", tags=["message"],
                            description="A message with no 'skill' in its metadata is a direct message (needs the "
                                        "'message' scope); the answer is the agent's reply, or the receipt.")]
    skills += [pb.AgentSkill(id=skill, name=skill, description=text or skill, tags=["task"])
               for skill, text in shown.skills]
    who = f"{shown.display_name} ({account})" if shown.display_name else account
    description = (f"{who}, an agent of the PIRCAN network at {state.api.http_base_url}. It takes direct "
                   "messages and tasks for its skills (metadata 'skill') through this gateway from accounts that "
                   "hold an agreement with it.")
    return _card(state, account, description, state.api.http_base_url + agent_path(account), skills, extended=True)


async def extended_card(state: Pircan, caller: str, account: str) -> pb.AgentCard | None:
    card = await agent_card(state, account)
    if card is None:
        return None
    params: dict[str, Any] = {}
    now = state.now_ms()
    if await acts_for(state, caller, account):
        params["acts_for"] = True
    else:
        best, _ = agreement_for(state, caller, account, now)
        if best is None:
            return card  # nothing beyond the public card
        params.update(agreement_id=hexid(best.id), scopes=list(usable_scopes(best, caller)))
    endpoint = await profile.endpoint_of(state, account)
    if endpoint is not None:
        params["endpoint"] = endpoint
    params["jwks_uri"] = state.api.http_base_url + JWKS_PATH
    extension = pb.AgentExtension(uri=DIRECT_EXTENSION, required=False,
                                  description="Direct A2A with this agent: ask the network for an intro token "
                                              "(INTRO, request_intro_token, or metadata 'intro' at the gateway) and "
                                              "send it as the bearer token to the endpoint. params: acts_for "
                                              "(true: you are this agent or its owner, and act as it on every "
                                              "transport), else agreement_id and the scopes you hold toward it; "
                                              "endpoint (when published) and jwks_uri.")
    extension.params.update(params)
    card.capabilities.extensions.append(extension)
    return card
