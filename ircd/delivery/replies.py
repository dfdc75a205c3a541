"""Replies to the client that sent a command, and lines relayed to many clients.

``ReplyBuffer`` collects every line a command produces for its sender and
flushes them at the end, applying the sender's capabilities in one place:
``server-time`` stamps, ``batch`` tags (or no batches without the cap) and
``labeled-response`` (``ACK`` for no lines, the label on a single line, a
``labeled-response`` batch around several).

``Relay`` is a line for many recipients: it is formatted once per distinct
tag profile (server-time, message-tags, account-tag) and the same bytes are
appended to every recipient's outbox.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Final, Protocol

from ircd import caps as C
from ircd.proto.lines import format_line, format_tags, safe_param
from ircd.proto.msgid import server_time

if TYPE_CHECKING:
    from ircd.state.client import Client

__all__ = ["ReplyBuffer", "Relay", "ReplyHost"]


class ReplyHost(Protocol):
    """What a reply needs from the server: its name (the source of numerics) and the
    current server-time."""

    name: str

    def server_time(self) -> str: ...

# the capabilities that change how a reply's lines go out (tags, batches)
_TAGGING: Final = C.LABELED_RESPONSE | C.SERVER_TIME | C.BATCH


class Relay:
    """One line for many clients; tags depend on each client's capabilities.

    ``stamp`` (``Server.message_stamp``, bound once as ``Server.stamp``) in place of
    ``msgid`` and ``time`` makes both when first asked for. A direct message to a
    client without message-tags or server-time, with no echo and not kept in
    history, then never costs an id. Everything that asks (tagged delivery, the
    echo, the history listener) asks while the message is handled, so ids keep the
    order in which messages were handled.
    """

    __slots__ = ("source", "command", "params", "_msgid", "_time", "_stamp", "account", "client_tags", "body", "cache")

    def __init__(
        self,
        source: str,
        command: str,
        params: list[str],
        *,
        msgid: str | None = None,
        time: str | None = None,
        account: str | None = None,
        client_tags: dict[str, str] | None = None,
        stamp: Callable[[], tuple[str, str]] | None = None,
    ) -> None:
        self.source = source
        self.command = command
        self.params = params
        self._msgid = msgid
        self._stamp = stamp
        self._time = time if time is not None else "" if stamp is not None else server_time()
        self.account = account
        self.client_tags = client_tags
        self.body = format_line(command, params, source)
        self.cache: dict[int, bytes] | None = None  # tagged lines by tag profile, made when first needed

    @property
    def msgid(self) -> str | None:
        if self._stamp is not None:
            self._take_stamp()
        return self._msgid

    @property
    def time(self) -> str:
        if self._stamp is not None:
            self._take_stamp()
        return self._time

    def _take_stamp(self) -> None:
        stamp = self._stamp
        self._stamp = None
        if stamp is not None:
            self._msgid, self._time = stamp()

    def tags_for(self, profile: int) -> dict[str, str]:
        tags: dict[str, str] = {}
        if profile & C.MESSAGE_TAGS:
            if self.client_tags:
                tags.update(self.client_tags)
            if self.msgid:
                tags["msgid"] = self.msgid
        if profile & C.SERVER_TIME:
            tags["time"] = self.time
        if profile & C.ACCOUNT_TAG and self.account:
            tags["account"] = self.account
        return tags

    def for_client(self, client: "Client") -> bytes:
        profile = client.tag_profile
        cache = self.cache
        if cache is None:
            cache = self.cache = {}
        data = cache.get(profile)
        if data is None:
            tags = self.tags_for(profile)
            data = b"@" + format_tags(tags).encode() + b" " + self.body if tags else self.body
            cache[profile] = data
        return data


class _Line:
    """One line of a reply, formatted at flush time; or, with ``raw``, ``count`` lines formatted
    already (without tags: the flush adds them to each line)."""

    __slots__ = ("tags", "source", "command", "params", "batch", "raw", "count")

    def __init__(self, tags, source, command, params, batch, raw: bytes | None = None, count: int = 1) -> None:
        self.tags = tags
        self.source = source
        self.command = command
        self.params = params
        self.batch = batch
        self.raw = raw
        self.count = count


def _tagged(raw: bytes, tags: dict[str, str]) -> bytes:
    """``raw`` (whole lines, each ending in CR LF) with ``tags`` on every line: the bytes
    ``format_line`` makes of each line with these tags."""
    head = b"@" + format_tags(tags).encode("utf-8", "replace") + b" "
    return head + raw[:-2].replace(b"\r\n", b"\r\n" + head) + b"\r\n"


class ReplyBuffer:
    """Lines for the client that sent the current command."""

    __slots__ = ("server", "client", "label", "lines", "_open", "batched")

    def __init__(self, server: ReplyHost, client: "Client", label: str | None = None) -> None:
        self.server = server
        self.client = client
        self.label = label
        self.lines: list[_Line] = []
        self._open: list[str] = []  # stack of open batch refs
        self.batched = False  # a batch was started (lines to drop for a client without the cap)

    # building -----------------------------------------------------------

    def numeric(self, code: str, *params: str) -> None:
        """A numeric from the server: ``:server CODE <nick> params...``."""
        open_batches = self._open
        self.lines.append(
            _Line(None, self.server.name, code, [self.client.nick, *params], open_batches[-1] if open_batches else None)
        )

    def send(
        self,
        command: str,
        *params: str,
        source: str | None = None,
        tags: dict[str, str] | None = None,
    ) -> None:
        """Any line; the source defaults to the server."""
        open_batches = self._open
        self.lines.append(
            _Line(tags, source or self.server.name, command, list(params), open_batches[-1] if open_batches else None)
        )

    def preformatted(self, data: bytes, count: int) -> None:
        """``count`` lines formatted already (each ``format_line(...)`` of a line without tags: a
        template of the welcome burst); the flush tags them like any other line."""
        self.lines.append(_Line(None, "", "", [], self._current(), data, count))

    def relay(self, relay: Relay) -> None:
        """A relayed line (echo-message), tagged for this client's profile."""
        tags = relay.tags_for(self.client.caps & C.TAG_PROFILE)
        # the relay's line as formatted once for all, its tags added at the flush
        self.lines.append(_Line(tags or None, relay.source, relay.command, relay.params, self._current(), relay.body))

    def fail(self, command: str, code: str, *context: str) -> None:
        """``FAIL <command> <code> [<context>...] :<description>``; the last arg is the description."""
        self._standard("FAIL", command, code, context)

    def warn(self, command: str, code: str, *context: str) -> None:
        self._standard("WARN", command, code, context)

    def note(self, command: str, code: str, *context: str) -> None:
        self._standard("NOTE", command, code, context)

    def _standard(self, kind: str, command: str, code: str, args: tuple[str, ...]) -> None:
        """A standard reply. Its context parameters are middle parameters, made safe as such
        (``safe_param``): a client's text quoted in them (an unknown subcommand, a name with a
        space) cannot add parameters or become the description."""
        params = [command, code]
        if args:
            params.extend([safe_param(arg) for arg in args[:-1]])
            params.append(args[-1])
        self.send(kind, *params)

    def start_batch(
        self, kind: str, *params: str, source: str | None = None, tags: dict[str, str] | None = None
    ) -> str:
        """Open a batch (nested in the current one, if any); ``source`` and ``tags`` are for
        batches that stand for a relayed message (a draft/multiline batch in history)."""
        ref = self.client.next_batch_id()
        self.batched = True
        self.lines.append(
            _Line(tags or None, source or self.server.name, "BATCH", ["+" + ref, kind, *params], self._current())
        )
        self._open.append(ref)
        return ref

    def end_batch(self, ref: str, source: str | None = None) -> None:
        self._open.remove(ref)
        self.lines.append(_Line(None, source or self.server.name, "BATCH", ["-" + ref], self._current()))

    def _current(self) -> str | None:
        return self._open[-1] if self._open else None

    def __len__(self) -> int:
        return len(self.lines)

    # output -------------------------------------------------------------

    def flush(self) -> None:
        client = self.client
        lines = self.lines
        caps = client.caps
        if not caps & _TAGGING:  # no label, no server-time, no batches: the lines as they are
            if not lines:
                return
            self.lines = []
            batched = self.batched  # BATCH lines are left out for a client without the capability
            out: list[bytes] = []
            count = 0
            for line in lines:
                raw = line.raw
                if raw is None:
                    if batched and line.command == "BATCH":
                        continue
                    out.append(format_line(line.command, line.params, line.source, line.tags))
                    count += 1
                else:
                    out.append(_tagged(raw, line.tags) if line.tags else raw)
                    count += line.count
            if out:
                client.send_lines(b"".join(out), count)
            return
        label = self.label if caps & C.LABELED_RESPONSE else None
        if not lines and label is None:
            return
        self.lines = []
        has_batch = caps & C.BATCH
        stamp = self.server.server_time() if caps & C.SERVER_TIME else None
        if not has_batch and self.batched:
            lines = [ln for ln in lines if ln.command != "BATCH"]
        send = client.send
        if label is not None:
            if not lines:
                tags = {"label": label}
                if stamp:
                    tags["time"] = stamp
                send(format_line("ACK", (), self.server.name, tags))
                return
            if len(lines) == 1 and lines[0].count == 1:
                line = lines[0]
                line.tags = dict(line.tags or ())
                line.tags["label"] = label
                line.batch = None
            elif has_batch:
                outer = client.next_batch_id()
                tags = {"label": label}
                if stamp:
                    tags["time"] = stamp
                send(format_line("BATCH", ("+" + outer, "labeled-response"), self.server.name, tags))
                for line in lines:
                    if line.batch is None:
                        line.batch = outer
                lines.append(_Line(None, self.server.name, "BATCH", ["-" + outer], None))
        out = []
        count = 0
        for line in lines:
            line_tags: dict[str, str] | None = line.tags
            if stamp or (line.batch and has_batch):
                line_tags = dict(line_tags or ())
                if stamp and "time" not in line_tags:
                    line_tags["time"] = stamp
                if line.batch and has_batch:
                    line_tags["batch"] = line.batch
            raw = line.raw
            if raw is None:
                out.append(format_line(line.command, line.params, line.source, line_tags))
            else:
                out.append(_tagged(raw, line_tags) if line_tags else raw)
            count += line.count
        if out:
            client.send_lines(b"".join(out), count)  # one outbox entry for a whole reply (a burst: ~20)
