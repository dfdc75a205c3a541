"""Direct A2A with intro tokens, end to end: two SDK agents talk directly after the network introduced
them. The target is the example agent of docs/a2a.md, run as written (only its NETWORK and ME are set
for the test) on its own port 0; it checks each token with the network's published keys and asks the
network whether the agreement is still active. After a revoke the check says so and no token is issued;
forged, expired, wrong-audience and wrong-agreement tokens are refused by the target and the network.
The tokens are asked for over A2A, IRC and MCP; key rotation keeps tokens in use valid.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import re
import socket
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import jwt
import pytest
import uvicorn
from a2a.client import A2AClientError, ClientConfig, ClientFactory, minimal_agent_card
from a2a.utils.errors import InvalidRequestError
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, NoEncryption, PrivateFormat
from google.protobuf.json_format import MessageToDict

from ext.pircan.a2a import keys
from ext.pircan.a2a import store as astore
from tests import dbs
from tests.live import LiveServer, whole_seconds_left
from tests.proc import cli
from tests.test_a2a import a2a, agree, answers, db_rows, live, refusal, request
from tests.test_mcp import call, irc, login, mcp, refused, srv, token_for  # noqa: F401

DOC = Path(__file__).resolve().parent.parent / "docs" / "a2a.md"


def example(network: str, me: str) -> dict[str, Any]:
    """The namespace of docs/a2a.md's example agent, for the network at ``network`` as ``me``."""
    text = DOC.read_text(encoding="utf-8")
    section = text[text.index("## An agent that accepts intro tokens"):]
    code = section.split("```python\n", 1)[1].split("```", 1)[0]
    code = re.sub(r'^NETWORK = "[^"]*"', f"NETWORK = {network!r}", code, count=1, flags=re.MULTILINE)
    code = re.sub(r'^ME = "[^"]*"', f"ME = {me!r}", code, count=1, flags=re.MULTILINE)
    namespace: dict[str, Any] = {"__name__": "a2a_example"}
    exec(compile(code, str(DOC), "exec"), namespace)  # noqa: S102 - the documentation's own example
    return namespace


@contextlib.asynccontextmanager
async def serve(app: Any) -> AsyncIterator[str]:
    """``app`` served by uvicorn on a port-0 loopback socket in this loop; its URL."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen()
    settings = uvicorn.Config(app, log_config=None, lifespan="off")
    settings.load()
    server = uvicorn.Server(settings)
    server.lifespan = settings.lifespan_class(settings)
    await server.startup(sockets=[sock])
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}/"
    finally:
        server.should_exit = True
        await server.shutdown()


async def direct(url: str, token: str, text: str) -> str:
    """Send ``text`` to an agent's own endpoint with an intro token; its answer's text."""
    async with httpx.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=30) as http:
        client = ClientFactory(ClientConfig(httpx_client=http, streaming=False)).create(
            minimal_agent_card(url, ["JSONRPC"]))
        [event] = await answers(client, request(text))
        return str(event.message.parts[0].text)


async def intro_over_a2a(server: LiveServer, token: str, agent: str) -> dict[str, Any]:
    async with a2a(server, token) as network:
        [answer] = await answers(network, request("", intro=agent))
    assert answer.message.parts[0].text.startswith(f"An intro token for {agent}, valid until ")
    return MessageToDict(answer.message.parts[1].data)


async def check(server: LiveServer, agreement_id: str, token: str) -> httpx.Response:
    async with httpx.AsyncClient() as http:
        return await http.get(f"{server.http_url}/a2a/agreements/{agreement_id}",
                              headers={"Authorization": f"Bearer {token}"} if token else {})


def tampered(token: str, **changes: Any) -> str:
    """The token with other claims and its original signature."""
    head, body, signature = token.split(".")
    claims = json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
    body = base64.urlsafe_b64encode(json.dumps({**claims, **changes}).encode()).rstrip(b"=").decode()
    return f"{head}.{body}.{signature}"


async def jwks(server: LiveServer) -> dict[str, Any]:
    async with httpx.AsyncClient() as http:
        return (await http.get(server.http_url + "/.well-known/jwks.json")).json()  # type: ignore[no-any-return]


def signing_key(server: LiveServer) -> astore.SigningKey:
    conn = dbs.connect(server.server.store.path)
    try:
        key = astore.signing_key(conn)
    finally:
        conn.close()
    assert key is not None
    return key


def test_two_sdk_agents_talk_directly_until_the_agreement_is_revoked(srv, clients):  # noqa: F811
    aid = agree(srv, clients, "alice", "bob", "message,task:summarise")
    bob = login(srv, clients, "bob")
    alice_token = token_for(srv, "alice")

    async def scenario() -> None:
        target = example(srv.http_url, "bob")
        async with serve(target["app"]) as url:
            assert await refusal(intro_over_a2a(srv, alice_token, "bob")) == (InvalidRequestError, "NO_ENDPOINT", "bob")
            assert await asyncio.to_thread(irc, bob, f"PROFILE ENDPOINT * {url}") == [["bob", "ENDPOINT", "bob", url]]
            intro = await intro_over_a2a(srv, alice_token, "bob")
            assert (intro["agent"], intro["agreement_id"], intro["endpoint"], intro["scopes"]) == (
                "bob", aid, url, ["message", "task:summarise"])
            assert intro["jwks_uri"] == srv.http_url + "/.well-known/jwks.json" and intro["token_type"] == "Bearer"
            token = intro["token"]
            header, claims = jwt.get_unverified_header(token), jwt.decode(token, options={"verify_signature": False})
            assert header == {"alg": "EdDSA", "kid": signing_key(srv).kid, "typ": "pircan-intro+jwt"}
            assert sorted(claims) == ["agreement_id", "aud", "exp", "iat", "iss", "jti", "nbf", "scope", "sub"]
            assert (claims["iss"], claims["sub"], claims["aud"], claims["scope"]) == (
                srv.http_url, "alice", "bob", "message task:summarise")
            assert claims["exp"] - claims["iat"] == 300
            # alice talks to bob's own server; bob checked the token with the published keys alone
            assert await direct(url, token, "Hi bob") == "Hello alice (message task:summarise): Hi bob"
            checked = await check(srv, aid, token)
            assert (checked.status_code, checked.json()["state"], checked.json()["active"]) == (200, "active", True)
            # bob revokes: the check says so at once, bob's server refuses, no new token is issued
            assert (await asyncio.to_thread(irc, bob, f"CONTACT REVOKE {aid}"))[0][1] == "REVOKED"
            checked = await check(srv, aid, token)
            assert (checked.json()["state"], checked.json()["active"]) == ("revoked", False)
            with pytest.raises(A2AClientError, match="401"):
                await direct(url, token, "Still there?")
            assert await refusal(intro_over_a2a(srv, alice_token, "bob")) == (InvalidRequestError, "NO_AGREEMENT", "bob")
        audited = db_rows(srv, "SELECT actor, subject, action, detail FROM pircan_audit WHERE action LIKE 'intro%' "
                               "OR action = 'a2a.endpoint' OR (action = 'refused' AND detail LIKE 'INTRO%') ORDER BY id")
        assert [row[:3] for row in audited] == [("bob", "bob", "a2a.endpoint"), ("alice", "bob", "intro.issue"),
                                                ("alice", "bob", "refused")]
        assert audited[1][3] == (f"{claims['jti']} for bob agreement={aid} scopes=message,task:summarise "
                                 f"expires={intro['expires_at']} through A2A")
        assert audited[2][3] == "INTRO NO_AGREEMENT"

    asyncio.run(scenario())


def test_forged_expired_wrong_audience_and_wrong_agreement_tokens_are_refused(srv, clients):  # noqa: F811
    aid = agree(srv, clients, "alice", "bob", "message")
    other = agree(srv, clients, "alice", "carol", "message")
    olive = login(srv, clients, "olive")
    irc(olive, "PROFILE ENDPOINT bob https://bob.example/a2a")
    alice_token = token_for(srv, "alice")

    async def scenario() -> None:
        good = (await intro_over_a2a(srv, alice_token, "bob"))["token"]
        claims = jwt.decode(good, options={"verify_signature": False})
        key = signing_key(srv)
        bob, carol = example(srv.http_url, "bob"), example(srv.http_url, "carol")
        assert await bob["introduced"](good) == claims
        stranger = Ed25519PrivateKey.generate().private_bytes(Encoding.Raw, PrivateFormat.Raw, NoEncryption())
        now = claims["iat"]
        made = {
            "forged": keys.sign(astore.SigningKey(key.kid, stranger, 0, None, 0), claims),
            "tampered": tampered(good, sub="mallory"),
            "expired": keys.sign(key, {**claims, "iat": now - 600, "nbf": now - 600, "exp": now - 300}),
            "another issuer": keys.sign(key, {**claims, "iss": "https://elsewhere.example"}),
            # signed by the network, but naming the agreement of alice and carol: bob's check sees the parties
            "wrong agreement": keys.sign(key, {**claims, "agreement_id": other}),
        }
        for name, token in made.items():
            assert await bob["introduced"](token) is None, name
        assert await carol["introduced"](good) is None  # the wrong audience
        # the network's check: no token, a forged, tampered or expired one: 401; another agreement: 404
        for token in ("", made["forged"], made["tampered"], made["expired"]):
            assert (await check(srv, aid, token)).status_code == 401
        for wanted in (other, "0123456789abcdef", "nonsense"):
            refused_check = await check(srv, wanted, good)
            assert (refused_check.status_code, refused_check.json()["error"]["code"]) == (404, "NO_SUCH_AGREEMENT")
        # a party's own token reads its agreements; another account's does not
        assert (await check(srv, other, alice_token)).json()["target"] == "carol"
        assert (await check(srv, aid, token_for(srv, "carol"))).status_code == 404

    asyncio.run(scenario())


def test_failed_intro_tokens_at_the_check_are_throttled_like_bearer_tokens(srv, clients):  # noqa: F811
    """The agreement check verifies intro tokens (JWTs) itself: each failure counts against the
    address like a bearer token naming nothing (accounts.login_ip_attempts); past the limit a bad
    one gets 429, while a valid intro token and a valid bearer token from that address still work."""
    aid = agree(srv, clients, "alice", "bob", "message")
    irc(login(srv, clients, "olive"), "PROFILE ENDPOINT bob https://bob.example/a2a")
    alice_token = token_for(srv, "alice")

    async def scenario() -> None:
        good_intro = (await intro_over_a2a(srv, alice_token, "bob"))["token"]
        started = time.time()  # the window of accounts.login_window (60 s) opens with the first failure
        for _ in range(20):
            assert (await check(srv, aid, "e30.e30.c2ln")).status_code == 401
        refused_now = await check(srv, aid, "e30.e30.c2ln")
        retry = refused_now.json()["retry_after_s"]
        assert retry in whole_seconds_left(60, started)
        assert (refused_now.status_code, refused_now.headers["retry-after"]) == (429, str(retry))
        assert refused_now.json() == {"error": "RATE_LIMITED", "retry_after_s": retry,
                                      "message": f"Too many failed token checks from your address. Retry in {retry} s"}
        assert (await check(srv, aid, alice_token)).json()["active"] is True
        assert (await check(srv, aid, good_intro)).json()["active"] is True

    asyncio.run(scenario())


def test_intro_tokens_over_irc_and_mcp(srv, clients):  # noqa: F811
    aid = agree(srv, clients, "alice", "bob", "message")
    alice, olive = login(srv, clients, "alice"), login(srv, clients, "olive")
    assert irc(alice, "INTRO") == [["INTRO", "NEED_MORE_PARAMS", "INTRO", "Syntax: INTRO <agent>"]]
    assert irc(alice, "INTRO nobody")[0][:3] == ["INTRO", "NO_SUCH_ACCOUNT", "nobody"]
    assert irc(alice, "INTRO alice")[0][:3] == ["INTRO", "SELF_CONTACT", "alice"]
    assert irc(alice, "INTRO carol")[0][:3] == ["INTRO", "NO_AGREEMENT", "carol"]
    assert irc(alice, "INTRO bob") == [["INTRO", "NO_ENDPOINT", "bob", "This account has published no A2A endpoint"]]
    # the endpoint: validated, audited, shown to the agent and its owner only
    for bad in ("ftp://bob.example/", "https://user:pw@bob.example/", "https://bob.example/#x", "bob.example",
                "https://" + "b" * 300 + ".example/"):
        assert irc(olive, f"PROFILE ENDPOINT bob {bad}")[0][:2] == ["PROFILE", "INVALID_PARAMS"]
    assert irc(alice, "PROFILE ENDPOINT bob https://bob.example/a2a")[0][:3] == ["PROFILE", "NOT_ALLOWED", "bob"]
    assert irc(olive, "PROFILE ENDPOINT bob https://bob.example/a2a") == [
        ["olive", "ENDPOINT", "bob", "https://bob.example/a2a"]]
    assert ["olive", "ENDPOINT", "bob", "https://bob.example/a2a"] in irc(olive, "PROFILE bob")
    assert not [p for p in irc(alice, "PROFILE bob") if p[1] == "ENDPOINT"]
    # INTRO: the token in pieces, which join into a token the published keys verify
    lines = irc(alice, "INTRO bob")
    assert [p[1] for p in lines] == ["ISSUED", "ENDPOINT", "TOKEN", "TOKEN", "END"]
    assert lines[0][2:4] == ["bob", aid] and lines[0][5] == "message"
    assert lines[1] == ["alice", "ENDPOINT", "bob", "https://bob.example/a2a"] and lines[-1] == ["alice", "END", "bob"]
    assert all(len(p[3]) <= 400 for p in lines[2:4])
    token = "".join(p[3] for p in lines if p[1] == "TOKEN")
    published = jwt.PyJWKSet.from_dict(httpx.get(srv.http_url + "/.well-known/jwks.json").json())
    key = published[jwt.get_unverified_header(token)["kid"]]
    assert jwt.decode(token, key, algorithms=["EdDSA"], audience="bob", issuer=srv.http_url)["sub"] == "alice"
    # over MCP, the same operation
    alice_token = token_for(srv, "alice")

    async def scenario() -> None:
        async with mcp(srv, alice_token) as agent:
            issued = await call(agent, "request_intro_token", agent="bob")
            assert (issued["agent"], issued["agreement_id"], issued["endpoint"], issued["scopes"]) == (
                "bob", aid, "https://bob.example/a2a", ["message"])
            assert jwt.decode(issued["token"], key, algorithms=["EdDSA"], audience="bob")["sub"] == "alice"
            assert await refused(agent, "request_intro_token", agent="carol") == ("NO_AGREEMENT", ["carol"])
            shown = await call(agent, "set_profile", a2a_endpoint="https://alice.example/a2a")
            assert shown["a2a_endpoint"] == "https://alice.example/a2a"
            assert (await call(agent, "set_profile", a2a_endpoint=""))["a2a_endpoint"] is None
            assert await refused(agent, "set_profile", a2a_endpoint="mailto:alice@example.org") == (
                "INVALID_PARAMS", ["mailto:alice@example.org"])

    asyncio.run(scenario())
    details = [d for (d,) in db_rows(srv, "SELECT detail FROM pircan_audit WHERE action = 'intro.issue' ORDER BY id")]
    assert [re.sub(r"^[0-9a-f]{16} |expires=\S+", "", d) for d in details] == [
        f"for bob agreement={aid} scopes=message ", f"for bob agreement={aid} scopes=message  through MCP"]
    assert [d for (d,) in db_rows(srv, "SELECT detail FROM pircan_audit WHERE action = 'a2a.endpoint' "
                                       "ORDER BY id")] == ["https://bob.example/a2a by owner",
                                                           "https://alice.example/a2a through MCP",
                                                           "(none) through MCP"]


def test_intro_tokens_are_rate_limited(tmp_path, clients):
    with live(tmp_path, intro_tokens_per_hour=2) as server:
        agree(server, clients, "alice", "bob", "message")
        bob, alice = login(server, clients, "bob"), login(server, clients, "alice")
        irc(bob, "PROFILE ENDPOINT * http://127.0.0.1:1/")
        assert [irc(alice, "INTRO bob")[0][1] for _ in range(2)] == ["ISSUED", "ISSUED"]
        assert irc(alice, "INTRO bob") == [["INTRO", "RATE_LIMITED", "bob", "At most 2 intro tokens per hour"]]
        assert db_rows(server, "SELECT detail FROM pircan_audit WHERE action = 'refused'") == [("INTRO RATE_LIMITED",)]


def test_a_rotated_key_verifies_its_tokens_until_they_expire(srv, clients):  # noqa: F811
    aid = agree(srv, clients, "alice", "bob", "message")
    olive = login(srv, clients, "olive")
    irc(olive, "PROFILE ENDPOINT bob https://bob.example/a2a")
    alice_token = token_for(srv, "alice")
    db = srv.server.store.path

    async def scenario() -> None:
        bob = example(srv.http_url, "bob")
        first = (await intro_over_a2a(srv, alice_token, "bob"))["token"]
        old = jwt.get_unverified_header(first)["kid"]
        rotated = await asyncio.to_thread(cli, "a2a", "rotate-key", "--db", db)
        assert rotated.returncode == 0, rotated.stderr
        new = rotated.stdout.split()[3]
        assert rotated.stdout.splitlines()[0] == f"new signing key {new}"
        published = (await jwks(srv))["keys"]
        assert [k["kid"] for k in published] == [new, old]
        second = (await intro_over_a2a(srv, alice_token, "bob"))["token"]
        assert jwt.get_unverified_header(second)["kid"] == new
        # both verify: the old key stays published while the tokens it signed are valid
        assert (await bob["introduced"](first))["agreement_id"] == aid
        assert (await bob["introduced"](second))["agreement_id"] == aid
        assert (await check(srv, aid, first)).status_code == 200
        listed = await asyncio.to_thread(cli, "a2a", "keys", "--db", db)
        assert [line.split()[0] for line in listed.stdout.splitlines()] == [old, new]
        assert "published until" in listed.stdout.splitlines()[0] and listed.stdout.splitlines()[1].endswith("signing")
        # after a leak: the old keys go at once, and with them the tokens they signed
        dropped = await asyncio.to_thread(cli, "a2a", "rotate-key", "--drop-old", "--db", db)
        assert "2 old key(s) no longer published" in dropped.stdout.splitlines()[0]
        newest = dropped.stdout.split()[3].rstrip(";")
        assert [k["kid"] for k in (await jwks(srv))["keys"]] == [newest]
        assert (await check(srv, aid, second)).status_code == 401
        assert await example(srv.http_url, "bob")["introduced"](second) is None

    asyncio.run(scenario())
