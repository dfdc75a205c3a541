"""Every agent operation on every agent transport: the table below pairs each PIRCAN verb (and
subcommand) of IRC with the MCP tool that runs the same service function. A verb without its tool,
or a tool without its verb, fails here: the MCP server's tool list must be exactly the table's
tools, PIRCAN's registered verbs exactly the table's verbs, and every subcommand must be one the
server knows and HELP documents. (A2A covers messages, tasks and agreements; its skills are walked
through in test_a2a_journey.py and test_message_reading.py.)"""

from __future__ import annotations

import asyncio
import re

from ext.pircan.irc import help as help_text
from tests.test_mcp import mcp, srv, token_for  # noqa: F401 - fixtures
from tests.test_pircan import p  # noqa: F401 - fixture

# IRC form -> the MCP tools that do the same (one rule set, two transports)
PIRCAN = {
    "CONTACT REQUEST": ["request_contact"],
    "CONTACT ACCEPT": ["respond_to_contact"],
    "CONTACT DECLINE": ["respond_to_contact"],
    "CONTACT REVOKE": ["revoke_agreement"],
    "CONTACT LIST": ["list_requests", "list_agreements", "list_contacts"],
    "CONTACT POLICY": ["set_contact_policy", "get_profile"],
    "SEND": ["send_direct_message"],
    "SEND *": ["broadcast_message"],
    "INBOX": ["get_inbox"],
    "INBOX READ": ["get_message"],
    "INBOX ACK": ["mark_messages_read"],
    "INBOX TAKE": ["take_message"],
    "INBOX WAIT": ["wait_for_messages"],
    "INBOX HISTORY": ["get_conversation"],
    "INBOX SEARCH": ["search_messages"],
    "AGENTS": ["list_agents"],
    "AGENTS CREATE": ["create_agent"],
    "AUDIT": ["get_audit_trail"],
    "TASK CREATE": ["create_task"],
    "TASK UPDATE": ["update_task"],
    "TASK INPUT": ["provide_task_input"],
    "TASK CANCEL": ["cancel_task"],
    "TASK GET": ["get_task"],
    "TASK LIST": ["list_tasks"],
    "TASK SNAPSHOT": ["task_snapshot"],
    "PROFILE": ["get_profile"],
    "PROFILE NAME": ["set_profile"],
    "PROFILE SKILL": ["set_profile"],
    "PROFILE UNSKILL": ["set_profile"],
    "PROFILE ENDPOINT": ["set_profile"],
    "RESOURCE LIST": [],  # MCP's own resources/list and resources/read (pircan://<agent>/resources/<name>)
    "RESOURCE GET": [],
    "RESOURCE PUT": ["publish_resource"],
    "RESOURCE DEL": ["delete_resource"],
    "INTRO": ["request_intro_token"],
    "UNINVITE": ["uninvite_from_channel"],
    "WEBHOOK SET": ["set_webhook"],
    "WEBHOOK SHOW": ["get_webhook"],
    "WEBHOOK CLEAR": ["clear_webhook"],
    "WEBHOOK ROTATE": ["rotate_webhook_secret"],
    "WEBHOOK TEST": ["test_webhook"],
    "WEBHOOK DEAD": ["list_dead_letters"],
    "WEBHOOK REPLAY": ["replay_dead_letters"],
    "HOST LIST": ["list_hosted_agents"],
    "HOST STATUS": ["list_hosted_agents"],
    "HOST START": ["control_hosted_agent"],
    "HOST STOP": ["control_hosted_agent"],
    "HOST RESTART": ["control_hosted_agent"],
    "HOST LOGS": ["read_hosted_agent_logs"],
    "HOST STDIN": ["write_hosted_agent_stdin"],
    "HOST SIGNAL": ["signal_hosted_agent"],
}

# the core's channel verbs, which an account member uses over MCP through PIRCAN's channel tools
CHANNELS = {
    "JOIN": ["join_channel"],
    "PART": ["leave_channel"],
    "INVITE": ["invite_to_channel"],
    "TOPIC": ["set_channel_topic"],
    "PRIVMSG": ["send_channel_message"],
    "CHATHISTORY": ["get_channel_history"],
    "LIST": ["list_channels"],
}


def test_the_mcp_tools_are_exactly_the_irc_verbs_tools(srv):  # noqa: F811
    async def tools() -> set[str]:
        async with mcp(srv, token_for(srv, "alice")) as alice:
            return {t.name for t in (await alice.list_tools()).tools}

    paired = {tool for table in (PIRCAN, CHANNELS) for tools in table.values() for tool in tools}
    listed = asyncio.run(tools())
    assert sorted(listed - paired) == []  # a tool without its verb
    assert sorted(paired - listed) == []  # a verb without its tool
    specs = srv.server.commands.specs
    assert sorted(verb for verb, spec in specs.items() if spec.extension == "pircan") == sorted(
        {form.split(" ")[0] for form in PIRCAN})
    assert all(verb in specs for verb in CHANNELS)


def test_every_subcommand_of_the_table_is_served_and_in_help(p):  # noqa: F811
    p.login("alice")
    for form in PIRCAN:
        verb, _, sub = form.partition(" ")
        if not sub or sub == "*":
            continue
        assert re.search(rf"\b{sub}\b", getattr(help_text, verb)), form
        replies = p.cmd("alice", form)
        assert not any(" UNKNOWN_SUBCOMMAND " in line for line in replies), (form, replies)
