"""What one caller may cost the HTTP transports: MCP sessions per account and in all, call rates
per account and per address, and token failures per client address behind a trusted proxy.

Real HTTP on port 0: raw Streamable-HTTP requests where the exact status and body are the point,
the MCP SDK's and the A2A SDK's clients where the point is what their callers see. Limits are set
low (a few sessions, a few calls, a refill of one call per 100 s) so that nothing waits for time.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Any

import httpx
import pytest
from a2a.utils.errors import InvalidRequestError
from mcp.shared.exceptions import MCPError

from tests.live import whole_seconds_left
from tests.portal import csrf_of
from tests.test_a2a import a2a, answers, live, refusal, request
from tests.test_mcp import PASSWORD, call, mcp, run, token_for
from tests.test_pircan_waits import MCP_HEADERS, raw_session
from tests.test_portal import state_of

SLOW_REFILL = 0.01  # one call per 100 s: a bucket once empty stays empty for the test


INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}}


def tool_call(name: str = "get_profile", **arguments: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": name, "arguments": arguments}}


def rate_limited(text: str, retry: int) -> dict[str, Any]:
    """MCP's JSON-RPC error for a refusal of the gate."""
    return {"jsonrpc": "2.0", "id": None, "error": {
        "code": -32000, "message": f"RATE_LIMITED: {text}. Retry in {retry} s",
        "data": {"code": "RATE_LIMITED", "context": [], "message": text, "retry_after_s": retry}}}


# MCP sessions --------------------------------------------------------------------------------------

def sessions_of(srv: Any) -> Any:
    """MCP's session manager (made with the first request to /mcp; made here if none came yet)."""
    state = state_of(srv)
    run(srv, state.http_apps["mcp"].build())
    return state.mcp_sessions



def test_an_account_past_its_session_cap_ends_its_own_session_idle_longest(tmp_path):
    """pircan.mcp_sessions_per_account (3 here): a fourth initialize ends the account's session idle
    the longest, whose id then answers 404 (the SDK's 'Session not found'); its other sessions and
    another account's sessions go on, and while all of its sessions are busy a new one gets 429."""
    with live(tmp_path, mcp_sessions_per_account=3) as srv:
        url = srv.http_url + "/mcp"
        alice_token, bob_token = token_for(srv, "alice"), token_for(srv, "bob")
        table = sessions_of(srv).table

        async def scenario() -> None:
            alice = httpx.AsyncClient(headers={"Authorization": f"Bearer {alice_token}"}, timeout=30)
            bob = httpx.AsyncClient(headers={"Authorization": f"Bearer {bob_token}"}, timeout=30)
            async with alice, bob, contextlib.AsyncExitStack() as waits:
                bobs = await raw_session(bob, url)
                oldest, second, third = [await raw_session(alice, url) for _ in range(3)]
                assert (await alice.post(url, json=tool_call(), headers=second)).status_code == 200
                fourth = await raw_session(alice, url)
                gone = await alice.post(url, json=tool_call(), headers=oldest)
                assert (gone.status_code, gone.json()) == (404, {
                    "jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": "Session not found"}})
                for headers in (second, third, fourth):
                    assert (await alice.post(url, json=tool_call(), headers=headers)).status_code == 200
                assert (table.held("alice"), table.held("bob")) == (3, 1)
                assert (await bob.post(url, json=tool_call(), headers=bobs)).status_code == 200
                # all three busy (a wait in flight on each): a new one is refused, none is ended
                for headers in (second, third, fourth):
                    wait = alice.stream("POST", url, headers=headers, json=tool_call("wait_for_messages"))
                    assert (await waits.enter_async_context(wait)).status_code == 200
                busy = await alice.post(url, json=INITIALIZE, headers=MCP_HEADERS)
                assert (busy.status_code, busy.headers["retry-after"]) == (429, "5")
                assert busy.json()["error"]["data"] == {
                    "code": "SESSION_LIMIT", "context": [], "retry_after_s": 5,
                    "message": "Your account has 3 MCP sessions, each with a request in flight: end one "
                               "(DELETE) or wait for one to finish"}
                again = await raw_session(bob, url)  # another account still opens sessions and calls
                assert (await bob.post(url, json=tool_call(), headers=again)).status_code == 200
                assert (table.held("alice"), table.held("bob")) == (3, 2)
            async with mcp(srv, bob_token) as sdk:  # the SDK's own client (sessionless 2026 protocol)
                assert (await call(sdk, "get_profile"))["account"] == "bob"

        asyncio.run(scenario())


def test_a_full_server_ends_the_session_idle_longest_of_any_account(tmp_path):
    """pircan.mcp_max_sessions (4 here): a new session past it ends the session idle the longest,
    whichever account holds it, instead of refusing everyone as the SDK's own limit did."""
    with live(tmp_path, mcp_sessions_per_account=3, mcp_max_sessions=4) as srv:
        url = srv.http_url + "/mcp"
        tokens = {name: token_for(srv, name) for name in ("alice", "bob", "carol")}
        manager = sessions_of(srv)
        assert manager.session_idle_timeout == 600.0  # pircan.mcp_session_idle_minutes, 10

        async def scenario() -> None:
            clients = {name: httpx.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=30)
                       for name, token in tokens.items()}
            try:
                alice = [await raw_session(clients["alice"], url) for _ in range(3)]
                bob = await raw_session(clients["bob"], url)
                carol = await raw_session(clients["carol"], url)
                assert (await clients["alice"].post(url, json=tool_call(), headers=alice[0])).status_code == 404
                assert (await clients["bob"].post(url, json=tool_call(), headers=bob)).status_code == 200
                assert (await clients["carol"].post(url, json=tool_call(), headers=carol)).status_code == 200
                assert len(manager._server_instances) == 4
            finally:
                for client in clients.values():
                    await client.aclose()

        asyncio.run(scenario())


# call rates ----------------------------------------------------------------------------------------


def test_an_account_past_its_call_rate_gets_429_with_retry_after(tmp_path):
    """pircan.http_calls_burst calls, then http_calls_per_second: past them a request is refused
    before it runs, as a JSON-RPC error with the code and the seconds to wait; the SDK's client
    raises it from the call. Another account is not held back."""
    with live(tmp_path, http_calls_burst=4, http_calls_per_second=SLOW_REFILL) as srv:
        url = srv.http_url + "/mcp"
        alice_token, bob_token, carol_token = (token_for(srv, n) for n in ("alice", "bob", "carol"))

        async def scenario() -> None:
            async with httpx.AsyncClient(headers={"Authorization": f"Bearer {alice_token}"}, timeout=30) as http:
                started = time.time()  # the bucket refills from its first call: one in 100 s
                session = await raw_session(http, url)  # initialize and initialized: 2 calls
                for _ in range(2):
                    assert (await http.post(url, json=tool_call(), headers=session)).status_code == 200
                refused = await http.post(url, json=tool_call(), headers=session)
                retry = int(refused.headers["retry-after"])
                assert refused.status_code == 429 and retry in whole_seconds_left(100, started)
                assert refused.json() == rate_limited(
                    "Too many calls from your account: 4 at once, then 0.01 a second", retry)
            started = time.time()
            async with mcp(srv, bob_token) as bob:
                with pytest.raises(MCPError) as caught:
                    for _ in range(4):
                        await bob.call_tool("get_profile", {})
                assert caught.value.data["code"] == "RATE_LIMITED"
                assert caught.value.data["retry_after_s"] in whole_seconds_left(100, started)
            async with httpx.AsyncClient(headers={"Authorization": f"Bearer {carol_token}"}, timeout=30) as http:
                session = await raw_session(http, url)
                assert (await http.post(url, json=tool_call(), headers=session)).status_code == 200

        asyncio.run(scenario())


def test_a2a_calls_share_the_account_s_rate_and_are_refused_as_a2a_errors(tmp_path, caplog):
    """The A2A gateway counts in the same buckets: a JSON-RPC send past the limit is an A2A error
    (InvalidRequestError) with the code and retry_after_s; an HTTP+JSON one the REST error at 429.
    Four refusals make one log line."""
    with live(tmp_path, http_calls_burst=2, http_calls_per_second=SLOW_REFILL) as srv:
        token = token_for(srv, "alice")

        started = time.time()  # alice's bucket refills from her first call: one in 100 s

        async def expect_rate_limited(client: Any) -> None:
            try:
                await answers(client, request("hi", to="bob"))
            except InvalidRequestError as exc:
                retry = exc.data["retry_after_s"]
                assert exc.data == {"code": "RATE_LIMITED", "context": "", "retry_after_s": retry}
                assert retry in whole_seconds_left(100, started)
                assert str(exc) == f"Too many calls from your account: 2 at once, then 0.01 a second. Retry in {retry} s"
            else:
                raise AssertionError("not refused")

        async def scenario() -> None:
            async with a2a(srv, token, agent="bob") as to_bob:  # its card: 1 call
                assert (await refusal(answers(to_bob, request("hi"))))[1] == "NO_AGREEMENT"  # counted: 2
                await expect_rate_limited(to_bob)
            async with a2a(srv, token) as network:  # the network's card is not behind the gate
                await expect_rate_limited(network)
            async with httpx.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=30) as http:
                r = await http.post(srv.http_url + "/a2a/message:send", json={"message": {}})
                error = r.json()["error"]
                assert (r.status_code, error["code"], error["status"]) == (429, 429, "RESOURCE_EXHAUSTED")
                metadata = error["details"][0]["metadata"]
                assert (metadata["code"], metadata["context"]) == ("RATE_LIMITED", "")
                # the bucket refills meanwhile (these refusals are held: the caller ignores its Retry-After)
                assert metadata["retry_after_s"] == int(r.headers["retry-after"])
                assert metadata["retry_after_s"] in whole_seconds_left(100, started)
                card = await http.get(srv.http_url + "/a2a/agents/bob/.well-known/agent-card.json")
                assert (card.status_code, card.json()["error"]) == (429, "RATE_LIMITED")
            assert [r.getMessage() for r in caplog.records if "http calls refused" in r.getMessage()] == [
                ("http calls refused account=alice ip=127.0.0.1 reason='too many calls from the account' "
                 "(limit 2, then 0.01 a second) (1 time(s) since the last such line)")]

        asyncio.run(scenario())


# behind a trusted proxy ----------------------------------------------------------------------------


def _as(address: str, token: str = "pircd_0_x") -> dict[str, str]:
    return {"X-Forwarded-For": address, "Authorization": f"Bearer {token}"}


def test_behind_a_trusted_proxy_each_client_address_has_its_own_limits(tmp_path):
    """http.trusted_proxies: requests from the proxy count against the address it names, for the
    token throttle (20 failures per address; a valid token from there still works) and the
    per-address call rate (23 calls here); loopback itself stays exempt from the call rate."""
    with live(tmp_path, http={"trusted_proxies": ["127.0.0.1"]}, http_address_calls_burst=23,
              http_address_calls_per_second=SLOW_REFILL) as srv:
        url = srv.http_url + "/mcp"

        async def scenario() -> None:
            async with httpx.AsyncClient(timeout=30) as http:
                started = time.time()  # the token throttle's window (60 s) and the address's bucket begin
                for _ in range(20):
                    assert (await http.post(url, json={}, headers=_as("192.0.2.1"))).status_code == 401
                throttled = await http.post(url, json={}, headers=_as("192.0.2.1"))
                retry = int(throttled.headers["retry-after"])
                assert retry in whole_seconds_left(60, started)
                assert throttled.json() == rate_limited("Too many failed token checks from your address", retry)
                assert (await http.post(url, json={}, headers=_as("192.0.2.2"))).status_code == 401
                async with httpx.AsyncClient(headers=_as("192.0.2.1", token_for(srv, "alice")), timeout=30) as agent:
                    await raw_session(agent, url)  # a valid token from the throttled address: 2 calls more
                r = await http.post(url, json={}, headers=_as("192.0.2.1"))
                retry = int(r.headers["retry-after"])
                assert retry in whole_seconds_left(100, started)
                assert r.json() == rate_limited("Too many calls from your address: 23 at once, then 0.01 a second",
                                                retry)
                assert (await http.post(url, json={}, headers=_as("192.0.2.3"))).status_code == 401
                assert (await http.post(url, json={}, headers={"Authorization": "Bearer x"})).status_code == 401

        asyncio.run(scenario())


def test_behind_a_trusted_proxy_the_portal_s_sign_in_throttle_sees_the_client(tmp_path):
    """Every HTTP handler gets the forwarded address as its client: the portal's password checks
    (accounts.login_attempts, 5, per source and account) hold back the guessing client only."""
    with live(tmp_path, http={"trusted_proxies": ["127.0.0.1"]}) as srv:
        portal = httpx.Client(base_url=srv.http_url, follow_redirects=False, timeout=30)

        def sign_in(client: str, password: str) -> httpx.Response:
            page = portal.get("/portal/signin", headers={"X-Forwarded-For": client})
            return portal.post("/portal/signin", headers={"X-Forwarded-For": client},
                               data={"csrf": csrf_of(page.text), "name": "olive", "password": password})

        with portal:
            assert [sign_in("192.0.2.1", "wrong").status_code for _ in range(5)] == [401] * 5
            assert "Too many failed attempts" in sign_in("192.0.2.1", PASSWORD).text
            assert sign_in("192.0.2.2", PASSWORD).headers["location"] == "/portal/"


def test_an_untrusted_peer_s_forwarded_for_is_ignored(tmp_path):
    """From an address not in http.trusted_proxies, X-Forwarded-For names nothing: every request
    counts against the peer's own address, whatever client it claims to forward."""
    with live(tmp_path, http={"trusted_proxies": ["10.0.0.0/8"]}) as srv:
        url = srv.http_url + "/mcp"

        async def scenario() -> None:
            async with httpx.AsyncClient(timeout=30) as http:
                for i in range(20):
                    assert (await http.post(url, json={}, headers=_as(f"192.0.2.{i + 1}"))).status_code == 401
                throttled = await http.post(url, json={}, headers=_as("198.51.100.1"))
                assert throttled.json() == rate_limited("Too many failed token checks from your address", 60)

        asyncio.run(scenario())


# the pieces ----------------------------------------------------------------------------------------


def test_a_bucket_gives_its_burst_then_its_rate_and_forgets_full_buckets():
    from ext.pircan.mcp.limits import Buckets

    buckets = Buckets()
    assert [buckets.take("a", 3, 2.0, 100.0) for _ in range(4)] == [0.0, 0.0, 0.0, 0.5]
    assert buckets.take("a", 3, 2.0, 100.25) == 0.25  # half a call refilled: nothing taken
    assert buckets.take("a", 3, 2.0, 100.5) == 0.0
    assert buckets.take("b", 3, 2.0, 100.5) == 0.0  # another key has its own
    assert buckets.prune(3, 2.0, 102.0) == 2 and len(buckets) == 0


def test_refusals_are_logged_once_an_interval_with_their_count(caplog):
    import logging

    from ircd.log import CountedLog

    now = [0.0]
    counted = CountedLog(logging.getLogger("pircd.test"), every=60.0, clock=lambda: now[0])
    for second in range(120):
        now[0] = float(second)
        counted.hit("calls", "refused ip=%s", "192.0.2.1")
    counted.hit("other", "refused differently")
    assert [r.getMessage() for r in caplog.records] == [
        "refused ip=192.0.2.1 (1 time(s) since the last such line)",
        "refused ip=192.0.2.1 (60 time(s) since the last such line)",
        "refused differently (1 time(s) since the last such line)"]


def test_a_refusal_is_held_only_for_a_caller_back_before_its_retry_time():
    from ext.pircan.mcp.limits import HOLD_MAX, Holds

    holds = Holds()
    assert holds.hold("account alice", 30.0, 0.0) == 0.0  # the first refusal: answered at once
    assert holds.hold("account alice", 30.0, 5.0) == HOLD_MAX  # back too early: held
    assert holds.hold("account bob", 30.0, 5.0) == 0.0
    assert holds.hold("account alice", 0.5, 100.0) == 0.0  # back after its retry time
    assert holds.hold("account alice", 0.5, 100.2) == pytest.approx(0.3)  # held until then only
