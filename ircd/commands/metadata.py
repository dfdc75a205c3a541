"""METADATA: IRCv3 draft/metadata-2 and draft/metadata-3 (key/value data on users and channels).

    METADATA <target> GET <key>...      METADATA <target> LIST     METADATA <target> SYNC
    METADATA <target> SET <key> [:<value>]                         METADATA <target> CLEAR
    METADATA * SUB <key>...             METADATA * UNSUB <key>...  METADATA * SUBS

State lives in memory: a user's keys on its connection (gone when it quits), a
channel's on the channel (renames keep them), each connection's subscriptions
with it. Clients set keys on themselves and channel operators on their
channels (IRC operators on anything); keys that ``metadata_providers`` give
(extensions, through ``api.metadata_keys``: PIRCAN's roster) are read-only.

Changes reach the subscribers that share a channel with the user (or watch it
with MONITOR), or are in the channel, never the client that made them: as
761/766 numerics for draft/metadata-3 clients, as ``METADATA`` lines for
draft/metadata-2 ones. A joining subscriber gets the channel's and its
members' values; a client that negotiated the capability gets its own values
in the registration burst (both in a ``metadata`` batch). Standard replies
use the names the metadata-3 draft and Ergo use (``INVALID_KEY``,
``INVALID_VALUE``, ``INVALID_TARGET``, ``KEY_NO_PERMISSION``, ``KEY_NOT_SET``,
``LIMIT_REACHED``, ``TOO_MANY_SUBS``, ``SUBCOMMAND_INVALID``).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable
from typing import TYPE_CHECKING

from ircd import caps as C
from ircd.dispatch import CommandContext, command
from ircd.proto.lines import Message
from ircd.delivery.replies import ReplyBuffer

if TYPE_CHECKING:
    from ircd.state.channel import Channel
    from ircd.state.client import Client
    from ircd.server import Server

__all__ = ["MAX_KEY", "install", "provided_keys", "user_values", "valid_key"]

RPL_WHOISKEYVALUE = "760"
RPL_KEYVALUE = "761"
RPL_KEYNOTSET = "766"
RPL_METADATASUBOK = "770"
RPL_METADATAUNSUBOK = "771"
RPL_METADATASUBS = "772"
RPL_METADATASYNCLATER = "774"

MAX_KEY = 64  # bytes of a key name (the spec sets none; a key and its value fit one line)
_KEY = re.compile(r"[a-z0-9_./-]{1,64}")  # MAX_KEY
_STATE = "metadata"
_CHUNK = 300  # bytes of key names per 770/771/772 line


class _UserState:
    __slots__ = ("prereg", "subs", "values")

    def __init__(self) -> None:
        self.values: dict[str, str] = {}
        self.subs: set[str] = set()
        self.prereg: dict[str, str] = {}  # set before registration (before-connect)


def valid_key(key: str) -> bool:
    """"Key names are restricted to the ranges a-z, 0-9, and _./-"."""
    return _KEY.fullmatch(key) is not None


def _state(client: Client, create: bool = False) -> _UserState | None:
    state = client.ext_state(_STATE)
    if state is None and create:
        state = _UserState()
        client.set_ext_state(_STATE, state)
    return state


def _channel_values(channel: Channel, create: bool = False) -> dict[str, str] | None:
    ext = channel.ext
    if ext is None:
        if not create:
            return None
        ext = channel.ext = {}
    values = ext.get(_STATE)
    if values is None and create:
        values = ext[_STATE] = {}
    return values  # type: ignore[return-value]


def provided_keys(server: Server, client: Client) -> dict[str, str]:
    """The read-only keys extensions give for ``client`` (PIRCAN's roster)."""
    found: dict[str, str] = {}
    for provider in server.metadata_providers:
        found.update(provider(client))
    return found


def user_values(server: Server, client: Client) -> dict[str, str]:
    """Every key of a user: what it set, then the read-only ones (which win)."""
    state = _state(client)
    values = dict(state.values) if state is not None else {}
    values.update(provided_keys(server, client))
    return values


def _subs(client: Client) -> set[str]:
    state = _state(client)
    return state.subs if state is not None else set()


# the command ---------------------------------------------------------------


@command(
    "METADATA", min_params=2, pre_registration=True, requires_cap=C.METADATA,
    doc="""METADATA <target> <GET|LIST|SET|CLEAR|SUB|UNSUB|SUBS|SYNC> [<key>...] [:<value>]
    Reads and sets key/value data on users and channels, and chooses which keys you hear about
    (IRCv3 draft/metadata-2 and draft/metadata-3). Your own target is *.""",
)
def handle_metadata(ctx: CommandContext, msg: Message) -> None:
    sub = msg.params[1].upper()
    params = msg.params[2:]
    if sub in ("SUB", "UNSUB", "SET", "GET") and not params:
        ctx.reply.numeric("461", "METADATA", "Not enough parameters")
        return
    if sub in ("SUB", "UNSUB", "SUBS"):
        _subscriptions(ctx, sub, params)
    elif sub not in ("GET", "LIST", "SET", "CLEAR", "SYNC"):
        ctx.reply.fail("METADATA", "SUBCOMMAND_INVALID", msg.params[1], "Invalid subcommand")
    elif not ctx.client.registered:
        _before_connect(ctx, sub, msg.params[0], params)
    else:
        _registered(ctx, sub, msg.params[0], params)


def _registered(ctx: CommandContext, sub: str, target_name: str, params: list[str]) -> None:
    server, client, reply = ctx.server, ctx.client, ctx.reply
    user: Client | None = None
    channel: Channel | None = None
    if target_name == "*":
        user = client
    elif target_name[:1] == "#":
        channel = server.find_channel(target_name, client)
    else:
        found = server.state.find_nick(target_name)
        user = found if found is not None and found.registered else None
    if user is None and channel is None:
        reply.fail("METADATA", "INVALID_TARGET", target_name, "Invalid metadata target")
        return
    target = user.nick if user is not None else channel.name  # type: ignore[union-attr]
    if sub in ("SET", "CLEAR"):
        if not _may_edit(client, user, channel):
            reply.fail("METADATA", "KEY_NO_PERMISSION", target, params[0] if sub == "SET" else "*",
                       "You do not have permission to do that")
            return
        if sub == "SET":
            _set(ctx, user, channel, target, params)
        else:
            _clear(ctx, user, channel, target)
        return
    if channel is not None and client not in channel.members and not client.is_oper:
        reply.fail("METADATA", "KEY_NO_PERMISSION", target, params[0] if sub == "GET" else "*",
                   "You do not have permission to do that")
        return
    values = user_values(server, user) if user is not None else dict(_channel_values(channel) or {})  # type: ignore[arg-type]
    if sub == "GET":
        ref = reply.start_batch("metadata", target)
        for key in params:
            if not valid_key(key):
                reply.fail("METADATA", "INVALID_KEY", key, "Invalid key name")
            elif key in values:
                reply.numeric(RPL_KEYVALUE, target, key, "*", values[key])
            else:
                reply.numeric(RPL_KEYNOTSET, target, key, "Key is not set")
        reply.end_batch(ref)
    elif sub == "LIST":
        ref = reply.start_batch("metadata", target)
        for key, value in values.items():
            reply.numeric(RPL_KEYVALUE, target, key, "*", value)
        reply.end_batch(ref)
    else:  # SYNC
        ref = reply.start_batch("metadata", target)
        if channel is not None:
            _sync_channel(server, client, reply, channel, include_self=True)
        else:
            subs = _subs(client)
            for key, value in values.items():
                if key in subs:
                    _notify_line(server, client, reply, target, key, value)
        reply.end_batch(ref)


def _may_edit(client: Client, user: Client | None, channel: Channel | None) -> bool:
    if client.is_oper:
        return True
    if user is not None:
        return user is client
    assert channel is not None
    return client in channel.members and channel.is_op(client)


def _set(ctx: CommandContext, user: Client | None, channel: Channel | None, target: str,
         params: list[str]) -> None:
    server, client, reply = ctx.server, ctx.client, ctx.reply
    key = params[0]
    value = params[1] if len(params) > 1 else ""
    if not valid_key(key):
        reply.fail("METADATA", "INVALID_KEY", key, "Invalid key name")
        return
    if user is not None and key in provided_keys(server, user):
        reply.fail("METADATA", "KEY_NO_PERMISSION", target, key, "This key is set by the server")
        return
    if user is not None:
        values = _state(user, create=True).values  # type: ignore[union-attr]
    else:
        values = _channel_values(channel, create=True)  # type: ignore[arg-type,assignment]
    assert values is not None
    if not value:
        if key not in values:
            reply.fail("METADATA", "KEY_NOT_SET", target, key, "Key is not set")
            return
        del values[key]
        reply.numeric(RPL_KEYNOTSET, target, key, "Key deleted")
        _broadcast(server, client, user, channel, target, key, None)
        return
    problem = _bad_value(server, key, value)
    if problem is not None:
        reply.fail("METADATA", "INVALID_VALUE", key, problem)
        return
    if key not in values and len(values) >= server.config.metadata.max_keys:
        reply.fail("METADATA", "LIMIT_REACHED", target, "Too many metadata keys")
        return
    changed = values.get(key) != value
    values[key] = value
    reply.numeric(RPL_KEYVALUE, target, key, "*", value)
    if changed:
        _broadcast(server, client, user, channel, target, key, value)


def _bad_value(server: Server, key: str, value: str) -> str | None:
    if len(value.encode()) > server.config.metadata.max_value_bytes:
        return f"Value is too long (at most {server.config.metadata.max_value_bytes} bytes)"
    if any(c in value for c in "\r\n\0"):
        return "Value may not contain CR, LF or NUL"
    return None


def _clear(ctx: CommandContext, user: Client | None, channel: Channel | None, target: str) -> None:
    server, client, reply = ctx.server, ctx.client, ctx.reply
    if user is not None:
        state = _state(user)
        values = state.values if state is not None else {}
    else:
        values = _channel_values(channel) or {}  # type: ignore[arg-type]
    cleared = list(values)
    values.clear()
    ref = reply.start_batch("metadata", target)
    for key in cleared:
        reply.numeric(RPL_KEYNOTSET, target, key, "Key deleted")
    reply.end_batch(ref)
    for key in cleared:
        _broadcast(server, client, user, channel, target, key, None)


# before registration (before-connect) --------------------------------------


def _before_connect(ctx: CommandContext, sub: str, target: str, params: list[str]) -> None:
    server, client, reply = ctx.server, ctx.client, ctx.reply
    if target != "*":
        reply.fail("METADATA", "KEY_NO_PERMISSION", target, "*",
                   "Only your own metadata (*) before registration")
        return
    state = _state(client, create=True)
    assert state is not None
    values = state.prereg
    if sub == "SET":
        key, value = params[0], params[1] if len(params) > 1 else ""
        if not valid_key(key):
            reply.fail("METADATA", "INVALID_KEY", key, "Invalid key name")
        elif not value:
            if key not in values:
                reply.fail("METADATA", "KEY_NOT_SET", "*", key, "Key is not set")
            else:
                del values[key]
                reply.numeric(RPL_KEYNOTSET, "*", key, "Key deleted")
        elif (problem := _bad_value(server, key, value)) is not None:
            reply.fail("METADATA", "INVALID_VALUE", key, problem)
        elif key not in values and len(values) >= server.config.metadata.max_keys:
            reply.fail("METADATA", "LIMIT_REACHED", "*", "Too many metadata keys")
        else:
            values[key] = value
            reply.numeric(RPL_KEYVALUE, "*", key, "*", value)
    elif sub in ("GET", "LIST"):
        ref = reply.start_batch("metadata", "*")
        keys = params if sub == "GET" else list(values)
        for key in keys:
            if not valid_key(key):
                reply.fail("METADATA", "INVALID_KEY", key, "Invalid key name")
            elif key in values:
                reply.numeric(RPL_KEYVALUE, "*", key, "*", values[key])
            else:
                reply.numeric(RPL_KEYNOTSET, "*", key, "Key is not set")
        reply.end_batch(ref)
    elif sub == "CLEAR":
        ref = reply.start_batch("metadata", "*")
        for key in values:
            reply.numeric(RPL_KEYNOTSET, "*", key, "Key deleted")
        reply.end_batch(ref)
        values.clear()
    else:  # SYNC: nothing to sync with yet
        reply.numeric(RPL_METADATASYNCLATER, "*", "60")


# subscriptions ----------------------------------------------------------------


def _subscriptions(ctx: CommandContext, sub: str, keys: list[str]) -> None:
    reply = ctx.reply
    state = _state(ctx.client, create=True)
    assert state is not None
    if sub == "SUBS":
        ref = reply.start_batch("metadata-subs")
        for chunk in _chunks(sorted(state.subs)):
            reply.numeric(RPL_METADATASUBS, *chunk)
        reply.end_batch(ref)
        return
    done: list[str] = []
    limit = ctx.server.config.metadata.max_subs
    for key in keys:
        if not valid_key(key):
            reply.fail("METADATA", "INVALID_KEY", key, "Invalid key name")
        elif sub == "UNSUB":
            state.subs.discard(key)
            done.append(key)
        elif key in state.subs:
            done.append(key)
        elif len(state.subs) >= limit:
            # "the server does not process any further keys in the subcommand"
            reply.fail("METADATA", "TOO_MANY_SUBS", key, f"Too many subscriptions (at most {limit})")
            break
        else:
            state.subs.add(key)
            done.append(key)
    code = RPL_METADATASUBOK if sub == "SUB" else RPL_METADATAUNSUBOK
    for chunk in _chunks(done):
        reply.numeric(code, *chunk)


def _chunks(keys: list[str]) -> Iterable[list[str]]:
    chunk: list[str] = []
    size = 0
    for key in keys:
        if chunk and size + len(key) + 1 > _CHUNK:
            yield chunk
            chunk, size = [], 0
        chunk.append(key)
        size += len(key) + 1
    if chunk:
        yield chunk


# notifications ----------------------------------------------------------------


def _notify_line(
    server: Server, viewer: Client, reply: ReplyBuffer, target: str, key: str, value: str | None,
    source: str | None = None,
) -> None:
    """One change as ``viewer`` hears it: 761/766 (metadata-3) or a METADATA line (metadata-2)."""
    if viewer.caps & C.METADATA_3:
        if value is None:
            reply.numeric(RPL_KEYNOTSET, target, key, "Key deleted")
        else:
            reply.numeric(RPL_KEYVALUE, target, key, "*", value)
    elif value is None:
        reply.send("METADATA", target, key, "*", source=source)
    else:
        reply.send("METADATA", target, key, "*", value, source=source)


def _broadcast(server: Server, origin: Client, user: Client | None, channel: Channel | None,
               target: str, key: str, value: str | None) -> None:
    """A change to the subscribers who receive updates for the target (not to ``origin``)."""
    if channel is not None:
        audience: Iterable[Client] = channel.members
    else:
        assert user is not None
        peers = server.state.common_peers(user)
        peers.add(user)
        peers.update(server.state.watchers(user.nick_folded))
        audience = peers
    for viewer in audience:
        if viewer is origin or not viewer.caps & C.METADATA or viewer.closing:
            continue
        state = _state(viewer)
        if state is None or key not in state.subs:
            continue
        out = ReplyBuffer(server, viewer)
        _notify_line(server, viewer, out, target, key, value, source=origin.prefix)
        out.flush()


def _sync_channel(server: Server, client: Client, reply: ReplyBuffer, channel: Channel, *,
                  include_self: bool) -> None:
    """The subscribed keys of a channel and of its members (the caller opens the batch)."""
    subs = _subs(client)
    if not subs:
        return
    for key, value in (_channel_values(channel) or {}).items():
        if key in subs:
            _notify_line(server, client, reply, channel.name, key, value)
    for member in channel.members:
        if member is client and not include_self:
            continue
        for key, value in user_values(server, member).items():
            if key in subs:
                _notify_line(server, client, reply, member.nick, key, value)


# hooks ------------------------------------------------------------------------


def _joined(server: Server, client: Client, channel: Channel, reply: ReplyBuffer) -> None:
    """"On joining a channel, users will get the channel's current metadata sent to them ... and
    get the same information for all users who are in the channel" (for their subscribed keys)."""
    if not client.caps & C.METADATA or not _subs(client):
        return
    probe = ReplyBuffer(server, client)
    _sync_channel(server, client, probe, channel, include_self=False)
    if not probe.lines:
        return
    ref = reply.start_batch("metadata", channel.name)
    _sync_channel(server, client, reply, channel, include_self=False)
    reply.end_batch(ref)


def _welcome(server: Server, client: Client, reply: ReplyBuffer) -> None:
    """At registration: keys set before it take effect, and a client with the capability gets its
    own metadata in a ``metadata`` batch ("If none exists, the server MUST send an empty batch")."""
    state = _state(client)
    if state is not None and state.prereg:
        limit = server.config.metadata.max_keys
        for key, value in state.prereg.items():
            if key in state.values or len(state.values) < limit:
                state.values[key] = value
        state.prereg = {}
    if not client.caps & C.METADATA:
        return
    ref = reply.start_batch("metadata", client.nick)
    for key, value in user_values(server, client).items():
        _notify_line(server, client, reply, client.nick, key, value)
    reply.end_batch(ref)


def _whois(server: Server, viewer: Client, target: Client, reply: ReplyBuffer) -> None:
    if not viewer.caps & C.METADATA:
        return
    for key, value in user_values(server, target).items():
        reply.numeric(RPL_WHOISKEYVALUE, target.nick, key, "*", value)


def install(server: Server) -> None:
    """Wire the metadata hooks into a server (JOIN, registration, WHOIS)."""
    if not any(getattr(hook, "func", None) is _joined for hook in server.join_hooks):
        server.join_hooks.append(functools.partial(_joined, server))
        server.welcome_hooks.append(functools.partial(_welcome, server))
        server.whois_hooks.append(functools.partial(_whois, server))
