"""Python IRC client libraries against a live pircd: ``irc`` (jaraco), ``pydle`` and ``bottom``.

Each library runs a small bot in a thread: it connects, registers, joins ``#lib`` and answers channel
messages with ``<lib> heard: <text>``. A raw test client in the channel sees the bot join, talks to it,
reads the answer, and sees the bot quit. Every wait is bounded by the raw client's socket timeout.
"""

from __future__ import annotations

import asyncio
import collections
import threading
import time
from typing import Callable

import pytest

CHANNEL = "#lib"


class AsyncBot:
    """Runs a coroutine-based bot on its own event loop in a daemon thread."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

    def run(self, coro, timeout: float = 10.0):
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        if not self.thread.is_alive():
            self.loop.close()


# one starter per library: start(port, nick) -> stop(quit_message) ---------------------


def start_jaraco(port: int, nick: str) -> Callable[[str], None]:
    import irc.client

    reactor = irc.client.Reactor()
    conn = reactor.server().connect("127.0.0.1", port, nick)

    def on_welcome(c, event) -> None:
        c.join(CHANNEL)

    def on_pubmsg(c, event) -> None:
        c.privmsg(event.target, f"{nick} heard: {event.arguments[0]}")

    reactor.add_global_handler("welcome", on_welcome)
    reactor.add_global_handler("pubmsg", on_pubmsg)
    stopping = threading.Event()

    def loop() -> None:
        while not stopping.is_set():
            reactor.process_once(0.05)

    thread = threading.Thread(target=loop, daemon=True)
    thread.start()

    def stop(message: str) -> None:
        conn.quit(message)
        stopping.set()
        thread.join(10)
        conn.close()

    return stop


def start_pydle(port: int, nick: str) -> Callable[[str], None]:
    import pydle

    class Bot(pydle.Client):
        async def on_connect(self) -> None:
            await super().on_connect()
            await self.join(CHANNEL)

        async def on_channel_message(self, target: str, by: str, message: str) -> None:
            await super().on_channel_message(target, by, message)
            if by != self.nickname:
                await self.message(target, f"{nick} heard: {message}")

    runner = AsyncBot()
    bot = Bot(nick, realname="pydle bot")
    runner.run(bot.connect("127.0.0.1", port, tls=False))

    def stop(message: str) -> None:
        runner.run(bot.quit(message))
        runner.close()

    return stop


def start_bottom(port: int, nick: str) -> Callable[[str], None]:
    import bottom

    runner = AsyncBot()

    async def make():
        client = bottom.Client(host="127.0.0.1", port=port, ssl=False, loop=runner.loop)
        # bottom 2.2 builds asyncio.Event(loop=...), which Python 3.10 removed; give it plain events
        client._events = collections.defaultdict(asyncio.Event)

        @client.on("CLIENT_CONNECT")
        async def connected(**kwargs) -> None:
            client.send("NICK", nick=nick)
            client.send("USER", user=nick, realname="bottom bot")

        @client.on("PING")
        async def keepalive(message, **kwargs) -> None:
            client.send("PONG", message=message)

        @client.on("RPL_WELCOME")
        async def welcome(**kwargs) -> None:
            client.send("JOIN", channel=CHANNEL)

        @client.on("PRIVMSG")
        async def message(nick: str, target: str, message: str, **kwargs) -> None:
            if target == CHANNEL and nick != client_nick:
                client.send("PRIVMSG", target=target, message=f"{client_nick} heard: {message}")

        client_nick = nick
        await client.connect()
        return client

    client = runner.run(make())

    def stop(message: str) -> None:
        async def quit_() -> None:
            client.send("QUIT", message=message)
            await asyncio.sleep(0)  # let the write go out before the loop stops
            await client.disconnect()

        runner.run(quit_())
        runner.close()

    return stop


@pytest.mark.parametrize(
    "nick, start",
    [("jaraco", start_jaraco), ("pydlebot", start_pydle), ("bottombot", start_bottom)],
)
def test_library_joins_and_talks(nick, start, live, client_factory):
    """The library registers, joins a channel, receives a channel message and answers it, and quits."""
    srv = live()
    observer = client_factory(srv.port)
    observer.register("observer")
    observer.send(f"JOIN {CHANNEL}")
    observer.sync()
    stop = start(srv.port, nick)
    stopped = False
    try:
        joined = observer.read_until(lambda m: m.command == "JOIN")[-1]
        assert joined.source.split("!")[0] == nick
        assert joined.params[0] == CHANNEL
        observer.send(f"PRIVMSG {CHANNEL} :hello {nick}")
        answer = observer.read_until(lambda m: m.command == "PRIVMSG")[-1]
        assert (answer.source.split("!")[0], answer.params) == (nick, [CHANNEL, f"{nick} heard: hello {nick}"])
        stop("see you")
        stopped = True
        quit_msg = observer.read_until(lambda m: m.command == "QUIT")[-1]
        assert (quit_msg.source.split("!")[0], quit_msg.params) == (nick, ["Quit: see you"])
    finally:
        if not stopped:
            stop("test failed")



def test_pydle_gets_its_capabilities(tmp_path, client_factory):
    """pydle 1.0 takes the ``*`` of a continued CAP LS 302 line for the list: it ends negotiation at the
    first line and requests what the last one offers. The default list (two lines with PIRCAN and both
    METADATA drafts) ends with the ratified capabilities, so pydle gets every one it supports."""
    import pydle

    from tests.live import pircan_server

    srv = pircan_server(tmp_path, pircan={"guests_may_join": True})
    runner = None
    try:
        observer = client_factory(srv.port)
        observer.register("observer")
        observer.send("CAP LS 302")
        assert [m.params[2] == "*" for m in observer.read_until(lambda m: m.params[2] != "*")] == [True, False]
        observer.send(f"JOIN {CHANNEL}")
        observer.sync()

        class Bot(pydle.Client):
            async def on_connect(self) -> None:
                await super().on_connect()
                await self.join(CHANNEL)

        runner = AsyncBot()
        bot = Bot("pydbot", realname="pydle bot")
        runner.run(bot.connect("127.0.0.1", srv.port, tls=False))
        joined = observer.read_until(lambda m: m.command == "JOIN")[-1]
        assert joined.source == "pydbot!pydbot@127.0.0.1"
        wanted = {"account-notify", "account-tag", "away-notify", "cap-notify", "chghost", "echo-message",
                  "extended-join", "invite-notify", "message-tags", "multi-prefix", "userhost-in-names"}
        # pydle sent its CAP REQ before its JOIN: the server has enabled them
        enabled = srv.call(lambda: {n for c in srv.server.clients if c.nick == "pydbot"
                                    for n in srv.server.caps.names(c.caps)})
        assert wanted <= enabled, wanted - enabled
        deadline = time.monotonic() + 10  # and pydle has read the ACK
        while not wanted <= {name for name, value in bot._capabilities.items() if value}:
            assert time.monotonic() < deadline, bot._capabilities
            time.sleep(0.01)
        runner.run(bot.quit("done"))
    finally:
        if runner is not None:
            runner.close()
        srv.stop()
