"""The login throttle (ircd/logins.py) through the socket-free harness: attempts are counted before
they are checked, per source first, and an account's own sources are never locked out."""

from __future__ import annotations

import asyncio
import base64

import pytest

from ircd import passwords
from ircd.logins import source_of
from ircd.store.accounts import add_certfp
from ircd.tokens import WRONG_SECRET_FACTOR, TokenIdentity, TokenThrottled
from tests.harness import Harness, config

RIGHT = "sesame123"
INVALID = "SASL authentication failed: Invalid account name or password"
THROTTLED = "SASL authentication failed: Too many failed attempts; try again in 60 seconds"
CFG = {"storage": {"durability": "off"}, "flood": {"enabled": False},
       "accounts": {"argon2_time_cost": 1, "argon2_memory_kib": 8192}}


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


@pytest.fixture
def db(tmp_path):
    return str(tmp_path / "t.db")


@pytest.fixture
def th(db):
    harness = Harness(config(**CFG), db=db)
    harness.run(harness.server.accounts.create("alice", RIGHT))
    yield harness
    harness.close()


def plain(h: Harness, name: str, password: str, account: str = "alice") -> str:
    """One SASL PLAIN exchange of a registered client; the text of its 903 or 904."""
    h.send(name, "AUTHENTICATE PLAIN")
    h.send(name, "AUTHENTICATE " + b64(f"\0{account}\0{password}"))
    return h.messages(name)[-1].params[-1]


def guesses(h: Harness, ip: str, count: int, account: str = "alice") -> list[str]:
    name = "guesser-" + ip.replace(":", "-")
    if name not in h.clients:
        h.register(name, "g" + str(len(h.clients)), ip=ip)
    return [plain(h, name, f"guess{i}", account) for i in range(count)]


def at_once(h: Harness, lines: dict[str, str]) -> None:
    """Hand each client its line before any of the checks they start has finished."""
    pending = []
    for name, line in lines.items():
        result = h.server.handle_line(h.clients[name], line.encode())
        assert result is not None and not isinstance(result, float)
        pending.append(result)

    async def together() -> None:
        await asyncio.gather(*pending)

    h.run(together())
    h.server.flush_all()


def test_simultaneous_guesses_are_counted_before_they_are_checked(th):
    """Eight connections from one address each send one guess at the same moment (the last one the
    right password): accounts.login_attempts (5) of them are checked, the others refused unchecked,
    the right one among them."""
    names = [f"c{i}" for i in range(8)]
    for name in names:
        th.register(name, ip="192.0.2.66")
        th.send(name, "AUTHENTICATE PLAIN")
        th.take(name)
    payloads = {name: f"\0alice\0{'guess' if name != 'c7' else RIGHT}" for name in names}
    at_once(th, {name: "AUTHENTICATE " + b64(payload) for name, payload in payloads.items()})
    answers = [th.messages(name)[-1].params[-1] for name in names]
    assert answers == [INVALID] * 5 + [THROTTLED] * 3
    assert th.clients["c7"].account is None


def test_a_guessers_failures_slow_the_guesser_not_the_owner(th):
    """issue 23.4: five wrong guesses a minute from one address must not keep the owner out."""
    assert guesses(th, "192.0.2.66", 6) == [INVALID] * 5 + [THROTTLED]
    assert plain(th, "guesser-192.0.2.66", RIGHT) == THROTTLED
    th.register("owner", ip="198.51.100.7")  # never logged in before
    assert plain(th, "owner", RIGHT) == "SASL authentication successful"


def test_a_distributed_guesser_is_held_to_the_account_limit_but_known_sources_get_in(db):
    """Failures from sources that never logged in to the account count together
    (accounts.login_account_attempts, 10): past them a new source is refused, while a source the
    owner logged in from before is not, also after a restart."""
    th = Harness(config(**CFG), db=db)
    th.run(th.server.accounts.create("alice", RIGHT))
    th.register("owner", ip="10.0.0.1")
    assert plain(th, "owner", RIGHT) == "SASL authentication successful"
    th.settle()
    assert guesses(th, "192.0.2.1", 5) == [INVALID] * 5
    assert guesses(th, "192.0.2.2", 5) == [INVALID] * 5
    th.register("newcomer", ip="203.0.113.9")
    assert plain(th, "newcomer", RIGHT) == THROTTLED
    th.register("again", ip="10.0.0.1")
    assert plain(th, "again", RIGHT) == "SASL authentication successful"
    th.settle()
    th.close()

    restarted = Harness(config(**CFG), db=db)
    try:
        assert guesses(restarted, "192.0.2.3", 5) == [INVALID] * 5
        assert guesses(restarted, "192.0.2.4", 5) == [INVALID] * 5
        restarted.register("back", ip="10.0.0.1")
        assert plain(restarted, "back", RIGHT) == "SASL authentication successful"
        restarted.register("stranger", ip="203.0.113.10")
        assert plain(restarted, "stranger", RIGHT) == THROTTLED
    finally:
        restarted.close()


def test_known_sources_are_stored_per_account(th):
    th.register("owner", ip="10.0.0.1")
    assert plain(th, "owner", RIGHT) == "SASL authentication successful"
    guesses(th, "192.0.2.1", 1)
    th.settle()
    stored = th.run(th.server.store.load_login_sources())
    assert stored == [("alice", "10.0.0.1")]


def test_per_source_limit_covers_every_account(th):
    """accounts.login_ip_attempts (20) per source, whatever the accounts guessed at."""
    assert guesses(th, "192.0.2.66", 5, "a1") + guesses(th, "192.0.2.66", 5, "a2") == [INVALID] * 10
    assert guesses(th, "192.0.2.66", 5, "a3") + guesses(th, "192.0.2.66", 5, "a4") == [INVALID] * 10
    assert guesses(th, "192.0.2.66", 1, "a5") == [THROTTLED]
    th.register("neighbour", ip="192.0.2.67")
    assert plain(th, "neighbour", RIGHT) == "SASL authentication successful"


def test_an_ipv6_source_is_its_64():
    assert source_of("2001:db8:1:2:a:b:c:d") == "2001:db8:1:2::/64"
    assert source_of("::ffff:192.0.2.1") == "192.0.2.1"
    assert source_of("192.0.2.1") == "192.0.2.1"
    assert source_of("unix") == "unix"


def test_addresses_of_one_ipv6_64_share_a_limit(th):
    assert guesses(th, "2001:db8::1", 3) + guesses(th, "2001:db8::2", 3) == [INVALID] * 5 + [THROTTLED]
    assert guesses(th, "2001:db8:0:1::1", 1) == [INVALID]


def test_an_unfinished_scram_exchange_counts_as_a_failure(th):
    """A SCRAM attempt is counted when the client names the account (the proof comes later)."""
    th.register("s", ip="192.0.2.9")
    for _ in range(5):
        th.send("s", "AUTHENTICATE SCRAM-SHA-256")
        th.send("s", "AUTHENTICATE " + b64("n,,n=alice,r=abcdefghijklmnop"))
        th.send("s", "AUTHENTICATE *")
    th.take("s")
    assert plain(th, "s", RIGHT) == THROTTLED


def test_certificate_logins_are_never_throttled(th):
    """issue 23.4: certificate (EXTERNAL) logins are never locked out."""
    fp = "ab" * 32
    th.run(th.server.store.write(add_certfp, "alice", fp))
    for ip in ("192.0.2.1", "192.0.2.2"):
        guesses(th, ip, 5)
    client = th.connect("cert", ip="192.0.2.1", tls=True)
    assert client is not None
    client.certfp = fp
    th.send("cert", "CAP REQ :sasl")
    th.send("cert", "NICK certuser")
    th.send("cert", "USER c 0 * :c")
    th.send("cert", "AUTHENTICATE EXTERNAL")
    th.send("cert", "AUTHENTICATE +")
    assert th.numerics("cert")[-2:] == ["900", "903"]


def test_an_unknown_account_costs_a_password_check(th, monkeypatch):
    """Answering an unknown name without the argon2 work would tell names apart by time."""
    checked: list[str] = []
    real = passwords.verify

    async def counting(hashed: str, password: str) -> bool:
        checked.append(hashed)
        return await real(hashed, password)

    monkeypatch.setattr(passwords, "verify", counting)
    th.register("x", ip="192.0.2.5")
    assert plain(th, "x", "whatever", account="nosuchaccount") == INVALID
    assert len(checked) == 1 and checked[0].startswith("$argon2id$v=19$m=8192,t=1,")


def test_login_account_attempts_is_at_least_login_attempts():
    from ircd.config import ConfigError, from_dict

    with pytest.raises(ConfigError) as caught:
        from_dict({"accounts": {"login_attempts": 5, "login_account_attempts": 4}})
    assert caught.value.problems == [
        ("accounts", "Value error, login_account_attempts must be at least login_attempts")
    ]


def tokens_of(h: Harness, count: int, account: str = "alice") -> list[str]:
    return [h.run(h.server.tokens.create(None, account, f"t{i}"))[1] for i in range(count)]


def verify_all(h: Harness, texts: list[str], ip: str) -> list:
    """Every check at once (none has finished when the others start)."""
    async def together() -> list:
        return await asyncio.gather(*(h.server.tokens.verify(text, ip) for text in texts))

    return h.run(together())


def wrong_secret(token: str) -> str:
    return token[:-4] + ("AAAA" if not token.endswith("AAAA") else "BBBB")


def test_bad_tokens_from_an_address_do_not_lock_out_valid_tokens_or_logins_from_it(th):
    """Tokens that name no token (malformed, or an id no token has) count against their address
    (accounts.login_ip_attempts, 20); past it they are refused without a check, while a real token
    and a password login from the same address still work: one bad client behind a shared address
    does not lock out the others."""
    good, = tokens_of(th, 1)
    garbage = [f"pircd_1_wrong{i}" for i in range(12)] + [f"pircd_{i + 1:016x}_nosuchtoken" for i in range(13)]
    results = verify_all(th, garbage, "192.0.2.7")
    assert results[:12] == [None] * 12  # the malformed ones fail at once, before any database read
    # the unknown ids fail as their reads finish, in any order where reads run in parallel (PostgreSQL)
    assert sorted(results[12:], key=repr) == [None] * 8 + [TokenThrottled(60.0, "address")] * 5
    identity = th.run(th.server.tokens.verify(good, "192.0.2.7"))
    assert isinstance(identity, TokenIdentity) and identity.account == "alice"
    th.register("same", ip="192.0.2.7")
    assert plain(th, "same", RIGHT) == "SASL authentication successful"


def test_simultaneous_valid_checks_are_never_refused(th):
    """Only failures count: a hundred agents with valid tokens behind one address, checked at the
    same moment, all get in."""
    texts = tokens_of(th, 100)
    assert [r.name for r in verify_all(th, texts, "192.0.2.8")] == [f"t{i}" for i in range(100)]


def test_guessing_one_tokens_secret_locks_that_token(th):
    """Wrong secrets of a real token id count against that id: from the guessing address
    (accounts.login_attempts, 5) and from addresses that never used it (login_account_attempts, 10).
    The guessed token is refused without a check where it is guessed; other tokens, and the
    guessed one from an address that used it before, still work."""
    target, other = tokens_of(th, 2)
    assert isinstance(th.run(th.server.tokens.verify(target, "10.0.0.1")), TokenIdentity)  # its owner's host
    assert verify_all(th, [wrong_secret(target)] * 6, "192.0.2.1") == [None] * 6  # checked at once: all ran
    assert th.run(th.server.tokens.verify(target, "192.0.2.1")) == TokenThrottled(60.0, "credential")
    assert isinstance(th.run(th.server.tokens.verify(other, "192.0.2.1")), TokenIdentity)
    assert isinstance(th.run(th.server.tokens.verify(target, "198.51.100.1")), TokenIdentity)  # 6 < 10
    assert verify_all(th, [wrong_secret(target)] * 4, "192.0.2.2") == [None] * 4
    assert th.run(th.server.tokens.verify(target, "203.0.113.5")) == TokenThrottled(60.0, "credential")
    assert isinstance(th.run(th.server.tokens.verify(target, "10.0.0.1")), TokenIdentity)
    assert isinstance(th.run(th.server.tokens.verify(target, "198.51.100.1")), TokenIdentity)


def test_wrong_secrets_of_many_tokens_hold_the_address_to_the_tokens_it_used(th):
    """Wrong secrets of real ids also count against the address, at WRONG_SECRET_FACTOR times
    login_ip_attempts (100): past it the address may only present ids it used successfully."""
    texts = tokens_of(th, 27)
    used, fresh, guessed = texts[0], texts[1], texts[2:]
    assert isinstance(th.run(th.server.tokens.verify(used, "192.0.2.9")), TokenIdentity)
    for text in guessed:  # 25 ids x 4 = 100 wrong secrets, under each id's own limit of 5
        assert verify_all(th, [wrong_secret(text)] * 4, "192.0.2.9") == [None] * 4
    assert WRONG_SECRET_FACTOR * 20 == 100
    assert th.run(th.server.tokens.verify(fresh, "192.0.2.9")) == TokenThrottled(60.0, "credential")
    assert isinstance(th.run(th.server.tokens.verify(used, "192.0.2.9")), TokenIdentity)
    assert isinstance(th.run(th.server.tokens.verify(fresh, "192.0.2.10")), TokenIdentity)


def test_a_source_the_account_logged_in_from_is_held_only_by_its_own_failures(th):
    """Behind a shared address, others' wrong passwords (accounts.login_ip_attempts, 20) hold back
    new accounts from it, not an account that logged in from it before."""
    th.run(th.server.accounts.create("bob", RIGHT))
    th.register("alice-host", ip="192.0.2.20")
    assert plain(th, "alice-host", RIGHT) == "SASL authentication successful"
    for account in ("a1", "a2", "a3", "a4"):
        assert guesses(th, "192.0.2.20", 5, account) == [INVALID] * 5
    th.register("bob-host", ip="192.0.2.20")
    assert plain(th, "bob-host", RIGHT, account="bob") == THROTTLED
    th.register("alice-again", ip="192.0.2.20")
    assert plain(th, "alice-again", RIGHT) == "SASL authentication successful"
    assert guesses(th, "192.0.2.20", 6) == [INVALID] * 5 + [THROTTLED]  # its own failures still count
