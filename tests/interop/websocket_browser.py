#!/usr/bin/env python3
"""A real browser IRC client over WebSocket: irc-framework (Kiwi IRC's IRC library) in headless Chromium.

Not a pytest test (it needs Chromium, Playwright for Python and an npm package); run it by hand:

    apt-get install -y chromium
    pip install playwright                       # its own browser download is not needed
    npm install --prefix /tmp/ircfw irc-framework
    python tests/interop/websocket_browser.py /tmp/ircfw/node_modules/irc-framework/dist/browser/static/browser.js

What it does:

1. Starts ``pircd serve`` on free loopback ports (IRC and HTTP; IRC over WebSocket is on by
   default at ``/``), with the page's origin in ``http.allowed_origins``.
2. Serves a page and irc-framework's browser bundle from a second local HTTP server (another
   origin, as a web client usually is).
3. Headless Chromium opens the page; the page's script connects with irc-framework's WebSocket
   transport (which asks for the ``text.ircv3.net`` subprotocol), registers as ``webuser``, joins
   ``#web`` and says hello.
4. A raw TCP observer in ``#web`` checks the JOIN and the PRIVMSG, and answers; the page must show
   the answer (irc-framework's ``message`` event), which the script reads from the page.
5. Both stop; pircd gets SIGTERM and must exit 0. Exit 0 means every check passed.
"""

from __future__ import annotations

import functools
import http.server
import shutil
import sys
import tempfile
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tests.live import IRCClient
from tests.proc import ServerProcess, write_config

PAGE = """<!doctype html>
<html><head><meta charset="utf-8">
<script>/* the bundle reads a few Node globals */
window.process = {env: {}, nextTick: (f, ...a) => setTimeout(() => f(...a), 0)};</script>
<script src="irc-framework.js"></script></head>
<body><pre id="log"></pre><script>
const log = (t) => { document.getElementById("log").textContent += t + "\\n"; };
const IRC = window["irc-framework"];
const client = new IRC.Client();
client.on("registered", () => { log("registered"); client.join("#web"); });
client.on("join", (e) => { if (e.nick === "webuser") { log("joined " + e.channel);
    client.say("#web", "hello from a browser"); } });
client.on("message", (e) => { log("message " + e.nick + " " + e.message); });
client.on("socket close", () => log("closed"));
client.on("raw", (e) => console.log((e.from_server ? "S: " : "C: ") + e.line));
client.connect({host: "127.0.0.1", port: %(port)d, path: "/", nick: "webuser",
                username: "web", gecos: "Browser", transport: undefined, auto_reconnect: false});
window.ircClient = client;
</script></body></html>
"""


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


def main() -> int:
    bundle = Path(sys.argv[1]) if len(sys.argv) > 1 else None
    if bundle is None or not bundle.is_file():
        print(__doc__)
        return 2
    from playwright.sync_api import sync_playwright

    workdir = Path(tempfile.mkdtemp())
    site = workdir / "site"
    site.mkdir()
    shutil.copy(bundle, site / "irc-framework.js")
    handler = functools.partial(_QuietHandler, directory=str(site))
    web = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=web.serve_forever, daemon=True).start()
    origin = f"http://127.0.0.1:{web.server_address[1]}"
    config = write_config(workdir, server={"motd": ""}, http={"allowed_origins": [origin]},
                          pircan={"guests_may_join": True})
    server = ServerProcess(config)
    ok = False
    try:
        (site / "index.html").write_text(PAGE % {"port": server.http_port})
        observer = IRCClient(server.port)
        observer.register("observer")
        observer.send("JOIN #web")
        observer.sync()
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path="/usr/bin/chromium", args=["--no-sandbox"])
            page = browser.new_page()
            page.on("console", lambda msg: print("browser console:", msg.text))
            page.on("pageerror", lambda err: print("page error:", err))
            page.goto(origin + "/index.html")
            join = observer.read_until(lambda m: m.command == "JOIN" and m.source.startswith("webuser!"))
            print("observer saw:", join[-1].command, join[-1].params, "from", join[-1].source)
            said = observer.read_until(lambda m: m.command == "PRIVMSG")
            print("observer saw:", said[-1].command, said[-1].params)
            assert said[-1].params == ["#web", "hello from a browser"], said[-1]
            observer.send("PRIVMSG #web :hello back from TCP")
            page.wait_for_function(
                "document.getElementById('log').textContent.includes('message observer hello back')",
                timeout=15000,
            )
            print("the page's log:\n" + page.inner_text("#log"))
            browser.close()
        observer.send("QUIT")
        ok = True
    finally:
        code = server.terminate()
        web.shutdown()
        print("pircd exited with", code)
        shutil.rmtree(workdir, ignore_errors=True)
    if ok and code == 0:
        print("ALL CHECKS PASSED")
        return 0
    return 1


if __name__ == "__main__":
    sys.exit(main())
