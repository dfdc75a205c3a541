"""A small ircrobots bot, run by tests/test_client_ircrobots.py in its own virtualenv.

ircrobots pins anyio~=2.0 and pircd needs anyio>=4, so the two cannot share an
environment: the test builds a venv with ircrobots and runs this file there.

Usage: python ircrobots_bot.py PORT NICK CHANNEL [PLAIN|SCRAM ACCOUNT PASSWORD]
The bot joins CHANNEL, answers every channel message with "NICK heard: TEXT",
and on the message "quit" sends QUIT and exits 0. It gives up after 60 seconds.

With a mechanism it logs in with SASL during CAP negotiation through ircrobots'
own SASL code: SCRAM is ircrobots' ``SASLSCRAM`` (it picks SCRAM-SHA-256 from the
server's list); PLAIN is ircrobots' ``SASLContext.plain`` (its ``SASLUserPass``
would prefer SCRAM when the server offers it). It prints the mechanisms it named
in AUTHENTICATE and the SASL result before it joins.
"""

import asyncio
import sys

from ircrobots import Bot as BaseBot
from ircrobots import ConnectionParams
from ircrobots import Server as BaseServer
from ircrobots.ircv3 import CAP_SASL
from ircrobots.params import SASLSCRAM, SASLParams, SASLUserPass
from ircrobots.sasl import SASLContext, SASLResult
from irctokens import Line, build

PORT, NICK, CHANNEL = int(sys.argv[1]), sys.argv[2], sys.argv[3]
MECHANISM, ACCOUNT, PASSWORD = (sys.argv[4:7] + [None, None, None])[:3]
MECHANISMS = ("PLAIN", "SCRAM-SHA-512", "SCRAM-SHA-256", "SCRAM-SHA-1", "EXTERNAL")
NAMED: list[str] = []  # the mechanisms this bot named in AUTHENTICATE


class Server(BaseServer):
    async def sasl_auth(self, params: SASLParams) -> bool:
        if MECHANISM == "PLAIN" and self.sasl_state == SASLResult.NONE and self.cap_agreed(CAP_SASL):
            self.sasl_state = await SASLContext(self).plain(params.username, params.password)
            return True
        return await super().sasl_auth(params)

    async def line_send(self, line: Line) -> None:
        if line.command == "AUTHENTICATE" and line.params[0] in MECHANISMS:
            NAMED.append(line.params[0])

    async def line_read(self, line: Line) -> None:
        if line.command == "001":
            if MECHANISM is not None:
                print(f"sasl {','.join(NAMED)} {self.sasl_state.name}", flush=True)
            # ircrobots throttles to a polite rate after the welcome; a test need not wait
            self.set_throttle(100, 1)
            await self.send(build("JOIN", [CHANNEL]))
        elif (
            line.command == "PRIVMSG"
            and line.params[0] == CHANNEL
            and line.hostmask is not None
            and line.hostmask.nickname != self.nickname
        ):
            text = line.params[1]
            if text == "quit":
                await self.send(build("QUIT", ["robots out"]))
                self.bot.finished.set()
            else:
                await self.send(build("PRIVMSG", [CHANNEL, f"{NICK} heard: {text}"]))


class Bot(BaseBot):
    def __init__(self) -> None:
        super().__init__()
        self.finished = asyncio.Event()

    def create_server(self, name: str) -> Server:
        return Server(self, name)


async def main() -> None:
    bot = Bot()
    params = ConnectionParams(NICK, "127.0.0.1", PORT, tls=None, reconnect=3600)
    if MECHANISM == "SCRAM":
        params.sasl = SASLSCRAM(ACCOUNT, PASSWORD)
    elif MECHANISM == "PLAIN":
        params.sasl = SASLUserPass(ACCOUNT, PASSWORD)
    await bot.add_server("pircd", params)
    runner = asyncio.ensure_future(bot.run())
    await asyncio.wait_for(bot.finished.wait(), 60)
    server = bot.servers["pircd"]
    for _ in range(100):  # wait for the server to close the link after QUIT
        if server.disconnected:
            break
        await asyncio.sleep(0.05)
    runner.cancel()
    print("ircrobots bot done", flush=True)


if __name__ == "__main__":
    asyncio.run(main())
