"""Channels over MCP, watched by IRC clients in the same channels: join and leave public channels as an
account member (NAMES and WHO show it, it outlasts the MCP session), the channel's +b, +i, +k and +t,
private #<owner>/<name> channels (created, invited to by account, uninvited, invisible to non-members
exactly as a name nobody uses), and an account that has an IRC connection joining through it.
The official MCP SDK client over real HTTP on port 0; the IRC side synchronises with PING/PONG.
"""

from __future__ import annotations

import asyncio

from tests.live import IRCClient
from tests.test_mcp import PASSWORD, call, irc, login, mcp, refused, srv, token_for  # noqa: F401 - srv is a fixture


def lines_of(c, line: str) -> list[tuple[str, str, list[str]]]:
    """Send a line; (source nick, command, params) of everything up to the PONG of a PING after it."""
    c.send(line)
    return [((m.source or "").split("!")[0], m.command, m.params) for m in c.sync()]


def hidden(c, verb: str, channel: str) -> list[tuple[str, list[str]]]:
    """What ``verb channel`` answers, the name replaced by <name> (to compare two names' answers)."""
    return [(cmd, [x.replace(channel, "<name>") for x in p]) for _, cmd, p in lines_of(c, f"{verb} {channel}")]


def names(c, channel: str) -> list[str]:
    return [n for _, cmd, p in lines_of(c, f"NAMES {channel}") if cmd == "353" for n in p[-1].split()]


def test_an_mcp_agent_joins_and_leaves_a_public_channel_as_irc_users_see_it(srv, clients):
    bob = login(srv, clients, "bob")
    irc(bob, "JOIN #lobby")
    irc(bob, "TOPIC #lobby :Weekly planning")

    async def scenario() -> None:
        async with mcp(srv, token_for(srv, "alice")) as alice:
            joined = await call(alice, "join_channel", channel="#lobby")
            assert joined == {"channel": "#lobby", "topic": "Weekly planning", "modes": "nt",
                              "members": ["alice", "@bob"], "joined": True}  # NAMES' prefixes
            seen = [(who, cmd, p) for who, cmd, p in lines_of(bob, "WHO #lobby") if cmd in ("JOIN", "352")]
            assert seen[0] == ("alice", "JOIN", ["#lobby"])
            # WHO: alice is away (no connection), at the host of the HTTP transports
            assert sorted((p[5], p[6], p[3]) for _, cmd, p in seen if cmd == "352") == [
                ("alice", "GB", "http.irc.test"), ("bob", "HB@", "127.0.0.1")]
            assert names(bob, "#lobby") == ["@bob", "alice"]
            again = await call(alice, "join_channel", channel="#lobby")
            assert again["joined"] is False  # a member already: nothing sent
            await call(alice, "send_channel_message", channel="#lobby", text="hello from mcp")
        got = [(who, cmd, p) for who, cmd, p in lines_of(bob, "NAMES #lobby") if cmd in ("PRIVMSG", "353")]
        assert got[0] == ("alice", "PRIVMSG", ["#lobby", "hello from mcp"])
        assert sorted(got[1][2][-1].split()) == ["@bob", "alice"]  # the MCP session ended: still a member
        async with mcp(srv, token_for(srv, "alice")) as alice:
            assert [(c["name"], c["member"]) for c in (await call(alice, "list_channels"))["channels"]] == [
                ("#lobby", True)]
            assert await call(alice, "leave_channel", channel="#lobby", reason="done") == {
                "channel": "#lobby", "left": True}
            result = await alice.call_tool("leave_channel", {"channel": "#lobby"})
            assert result.structured_content == {"error": {
                "code": "NOT_MEMBER", "context": ["#lobby"], "message": "You're not on that channel",
                "next_step": "Join it first: JOIN <channel> (MCP: join_channel)"}}
            assert await refused(alice, "send_channel_message", channel="#lobby", text="x") == (
                "NOT_MEMBER", ["#lobby"])
            for bad in ("0", "#a,#b", "lobby"):  # one channel name, never JOIN's list or JOIN 0
                assert await refused(alice, "join_channel", channel=bad) == ("NO_SUCH_CHANNEL", [bad])
        parted = [(who, cmd, p) for who, cmd, p in lines_of(bob, "NAMES #lobby") if cmd in ("PART", "353")]
        assert parted == [("alice", "PART", ["#lobby", "done"]), ("irc.test", "353", ["bob", "=", "#lobby", "@bob"])]

    asyncio.run(scenario())


def test_a_join_over_mcp_obeys_bans_invite_only_keys_and_the_topic_lock(srv, clients):
    bob = login(srv, clients, "bob")
    irc(bob, "JOIN #ops")

    async def scenario() -> None:
        async with mcp(srv, token_for(srv, "alice")) as alice:
            await call(alice, "join_channel", channel="#ops")  # alice's identity now exists
            assert await refused(alice, "set_channel_topic", channel="#ops", topic="mine") == (
                "NOT_ALLOWED", ["#ops"])  # +t: operators only, as 482 says
            await call(alice, "leave_channel", channel="#ops")
            irc(bob, "MODE #ops +b alice!*@*")
            result = await alice.call_tool("join_channel", {"channel": "#ops"})
            assert result.is_error and result.content[0].text == "BANNED: Cannot join channel (+b) (#ops)"
            irc(bob, "MODE #ops -b+i alice!*@*")
            assert await refused(alice, "join_channel", channel="#ops") == ("INVITE_ONLY", ["#ops"])
            assert irc(bob, "INVITE alice #ops") == []  # alice is on the network (away): 341 and 301
            await call(alice, "join_channel", channel="#ops")
            await call(alice, "leave_channel", channel="#ops")
            irc(bob, "MODE #ops -i+k sesame")
            assert await refused(alice, "join_channel", channel="#ops") == ("BAD_KEY", ["#ops"])
            assert await refused(alice, "join_channel", channel="#ops", key="sesame,x") == ("BAD_KEY", ["#ops"])
            assert (await call(alice, "join_channel", channel="#ops", key="sesame"))["joined"] is True
            irc(bob, "MODE #ops -t")
            topic = await call(alice, "set_channel_topic", channel="#ops", topic="Ours now")
            assert topic["topic"] == "Ours now"
        assert [(who, p) for who, cmd, p in lines_of(bob, "TOPIC #ops") if cmd in ("TOPIC", "332")] == [
            ("alice", ["#ops", "Ours now"]), ("irc.test", ["bob", "#ops", "Ours now"])]

    asyncio.run(scenario())


def test_private_channels_over_mcp_are_invisible_to_non_members_and_by_invitation(srv, clients):
    bob = login(srv, clients, "bob")  # a non-member on IRC

    async def scenario() -> None:
        async with mcp(srv, token_for(srv, "alice")) as alice, mcp(srv, token_for(srv, "carol")) as carol:
            made = await call(alice, "join_channel", channel="#alice/room")
            assert (made["modes"], made["members"]) == ("Pnt", ["@alice"])
            # a non-member: the same answers as for a name nobody uses, over MCP and IRC
            for name in ("#alice/room", "#alice/none"):
                assert await refused(carol, "join_channel", channel=name) == ("NO_SUCH_CHANNEL", [name])
                assert await refused(carol, "set_channel_topic", channel=name, topic="x") == (
                    "NO_SUCH_CHANNEL", [name])
                assert await refused(carol, "leave_channel", channel=name) == ("NO_SUCH_CHANNEL", [name])
                assert await refused(carol, "invite_to_channel", account="bob", channel=name) == (
                    "NO_SUCH_CHANNEL", [name])
            assert hidden(bob, "JOIN", "#alice/room") == hidden(bob, "JOIN", "#alice/none") == [
                ("403", ["bob", "<name>", "No such channel"])]
            assert names(bob, "#alice/room") == names(bob, "#alice/none") == []
            # invitations are by account: carol has no identity on the network yet
            assert await call(alice, "invite_to_channel", account="carol", channel="#alice/room") == {
                "channel": "#alice/room", "invited": "carol"}
            assert await refused(carol, "invite_to_channel", account="bob", channel="#alice/room") == (
                "NOT_MEMBER", ["#alice/room"])  # invited, not in it yet: IRC's 442
            joined = await call(carol, "join_channel", channel="#alice/room")
            assert joined["members"] == ["@alice", "carol"]
            only = await carol.call_tool("invite_to_channel", {"account": "bob", "channel": "#alice/room"})
            assert only.content[0].text == "NOT_ALLOWED: Only the channel owner can invite to this channel (#alice/room)"
            # bob on IRC is invited through IRC's INVITE and hears it; then the owner withdraws it
            await call(alice, "invite_to_channel", account="bob", channel="#alice/room")
            invite = [(who, cmd, p) for who, cmd, p in lines_of(bob, "PING x") if cmd == "INVITE"]
            assert invite == [("alice", "INVITE", ["bob", "#alice/room"])]
            assert await call(alice, "uninvite_from_channel", account="bob", channel="#alice/room") == {
                "channel": "#alice/room", "uninvited": "bob"}
            assert await refused(alice, "uninvite_from_channel", account="bob", channel="#alice/room") == (
                "NO_SUCH_INVITATION", ["bob", "#alice/room"])
            assert await refused(carol, "uninvite_from_channel", account="bob", channel="#alice/room") == (
                "NOT_ALLOWED", ["#alice/room"])
            assert hidden(bob, "JOIN", "#alice/room") == hidden(bob, "JOIN", "#alice/none") == [
                ("403", ["bob", "<name>", "No such channel"])]
            await call(carol, "send_channel_message", channel="#alice/room", text="hi alice")
            history = await call(alice, "get_channel_history", channel="#alice/room")
            assert [(m["from"], m["text"]) for m in history["messages"]] == [("carol", "hi alice")]
            await call(carol, "leave_channel", channel="#alice/room")
            assert await refused(carol, "join_channel", channel="#alice/room") == (
                "NO_SUCH_CHANNEL", ["#alice/room"])  # the invitation was used: gone again

    asyncio.run(scenario())


def test_an_account_with_an_irc_connection_joins_through_it_and_a_later_connection_gets_the_channels(srv, clients):
    bob = login(srv, clients, "bob")
    irc(bob, "JOIN #lobby")

    async def scenario() -> None:
        async with mcp(srv, token_for(srv, "carol")) as carol:
            carol_irc = login(srv, clients, "carol")
            await call(carol, "join_channel", channel="#lobby")
            own = [cmd for _, cmd, _ in lines_of(carol_irc, "PING x")]
            assert own[:1] == ["JOIN"] and "353" in own  # its connection joined, with topic and NAMES
            carol_irc.send("QUIT")
            carol_irc.read_all_until_close()
        async with mcp(srv, token_for(srv, "alice")) as alice:  # never connected over IRC
            await call(alice, "join_channel", channel="#lobby")
        alice_irc = IRCClient(srv.port)
        clients.append(alice_irc)
        again = [(m.command, m.params) for m in alice_irc.login("alice", PASSWORD) if m.command in ("JOIN", "353")]
        assert again[0] == ("JOIN", ["#lobby"])  # the identity made over MCP, taken over by the connection
        assert sorted(again[1][1][-1].split()) == ["@bob", "alice", "carol"]

    asyncio.run(scenario())
